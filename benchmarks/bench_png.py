"""Benchmark: encoding the report's figures as PNG, bench/present/png.py against Pillow (as savefig does).

Draws the figures of a synthetic sweep (benchmarks/bench_report.py's records, default 10,000), then
encodes each figure's pixels both ways, best of `--rounds` encodings each (CPU time of this
process), and prints the milliseconds and bytes of each; checks that both decode to the same pixels.
Not a budget of `make bench`: the encoders' comparison that docs/reports.md quotes.

    .venv/bin/python benchmarks/bench_png.py
    .venv/bin/python benchmarks/bench_png.py --records 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import io
import sys
import time

import numpy as np
from bench_report import synthetic_analysis
from PIL import Image

from bench.present.png import LEVEL, encode_png
from bench.present.report.html import DPI
from bench.present.report.plots import all_figures


def _best_ms(encode, rounds: int) -> tuple[float, bytes]:
    best, data = float("inf"), b""
    for _ in range(rounds):
        start = time.process_time()
        data = encode()
        best = min(best, time.process_time() - start)
    return best * 1000, data


def _pillow(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="png", compress_level=LEVEL, dpi=(DPI, DPI))
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    analysis = synthetic_analysis(args.records)
    totals = {"png.py": [0.0, 0], "Pillow": [0.0, 0]}
    for name, (_, fig) in all_figures(analysis.points, analysis.scaling).items():
        fig.set_dpi(DPI)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        rgba = np.asarray(canvas.buffer_rgba())
        rgb = np.ascontiguousarray(rgba[..., :3])
        ours_ms, ours = _best_ms(lambda rgba=rgba: encode_png(rgba, DPI), args.rounds)
        pillow_ms, pillow = _best_ms(lambda rgb=rgb: _pillow(rgb), args.rounds)
        for data in (ours, pillow):
            assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), rgb), name
        totals["png.py"][0] += ours_ms
        totals["png.py"][1] += len(ours)
        totals["Pillow"][0] += pillow_ms
        totals["Pillow"][1] += len(pillow)
        print(f"{name}: png.py {ours_ms:.1f} ms {len(ours):,} B; Pillow {pillow_ms:.1f} ms {len(pillow):,} B")
    for encoder, (ms, size) in totals.items():
        print(f"bench_png: {encoder}: {ms:.0f} ms, {size:,} B in all ({args.records} records, best of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
