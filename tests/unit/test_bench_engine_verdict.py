"""scripts/bench_engine.py's verdict on the harness's tokens/s against a wall clock: a bias every pair of
runs shows fails; a median beyond the band that a single pair's spread explains is noise."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def engine():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_engine

        yield bench_engine
    finally:
        sys.path.remove(str(SCRIPTS))


def test_a_bias_every_pair_shows_fails_and_a_spread_that_one_pair_explains_is_noise(engine):
    assert engine.verdict(1.031, [0.968, 1.120, 1.031]) == "ok"
    # 2026-12-02, make bench at 08:58 UTC, nothing changed: one pair 11 % off, one within the band.
    assert engine.verdict(1.052, [1.110, 1.021, 1.052]) == "noise"
    assert engine.verdict(1.10, [1.08, 1.10, 1.12]) == "outside 1.00 +/- 0.05"
    assert engine.verdict(0.93, [0.92, 0.93, 0.94]) == "outside 1.00 +/- 0.05"
    assert engine.verdict(0.93, [0.92, 0.93, 1.06]) == "noise"  # the pairs disagree on the side
