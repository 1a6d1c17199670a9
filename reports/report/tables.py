"""The report's tables as plain text cells, shared by the HTML page and summary.md.

Each builder takes the aggregated DataFrames and returns a `Table` of formatted strings;
escaping is left to the renderer (Jinja2 autoescape for HTML, reports/report/summary_md.py for
Markdown), so no table cell ever carries markup.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.analysis.report.contention import CONTENTION
from bench.analysis.report.diagnosis import likely_cause, measured_evidence
from bench.analysis.stats import CONFIDENCE_PCT
from bench.schema.metrics import Metric, shown_in
from reports.report import formatting as fmt
from reports.report.labels import CONFIG_COLUMNS, config_label, config_labels, series_labels
from reports.report.reproduce import RUN_COLUMNS, run_command
from reports.report.table import Table

BELOW_PREDICTION = "below prediction"
# The catalogue's metrics with a column in the point tables (view "report"), after the fixed columns.
REPORT_METRICS = shown_in("report")


def metric_cell(metric: Metric, value, measured) -> str:
    """A catalogue metric's cell: its number, or what it says where a measured point has none
    (`Metric.missing`, e.g. "no price"); a dash where the point measured nothing."""
    if fmt.is_missing(value):
        return (metric.missing or fmt.MISSING) if not fmt.is_missing(measured) else fmt.MISSING
    return metric.display.text(value)


def headline_table(scaling: pd.DataFrame) -> Table:
    """The best configuration per model and node count, and how its series scales to its largest N."""
    table = Table(
        [
            "model",
            "nodes",
            "best configuration",
            "tokens/s",
            "tokens/s per device",
            "MFU",
            "efficiency here",
            "efficiency at largest N",
            *(metric.heading for metric in REPORT_METRICS),
        ]
    )
    primary = scaling.drop_duplicates("cell", keep="first")
    largest = primary.sort_values("nodes").groupby("series").tail(1).set_index("series")
    best = primary.sort_values("tokens_per_s", ascending=False).drop_duplicates(["model", "nodes"])
    for _, row in best.sort_values(["model", "nodes"]).iterrows():
        last = largest.loc[row["series"]]
        at_largest = _marked(f"{fmt.percent(last['scaling_efficiency'])} at {int(last['nodes'])}", last["contention"])
        if row["mode"] == "single":
            at_largest = fmt.MISSING
        table.add(
            [
                str(row["model"]),
                str(int(row["nodes"])),
                config_label(row),
                fmt.number(row["tokens_per_s"]),
                fmt.number(row["tokens_per_s_per_device"]),
                fmt.percent(row["mfu"]),
                _marked(fmt.percent(row["scaling_efficiency"]), row["contention"]),
                at_largest,
                *(metric_cell(metric, row.get(metric.key), row["tokens_per_s"]) for metric in REPORT_METRICS),
            ],
            "flag" if _suspect(row["contention"]) or _suspect(last["contention"]) else "",
        )
    return table


def _suspect(contention) -> bool:
    """Whether bench.analysis.report.contention flagged the row (its text, or None/NaN)."""
    return isinstance(contention, str) and bool(contention)


def _marked(text: str, contention) -> str:
    """A headline efficiency with the contention mark (the reason is in the other tables)."""
    return f"{text} ({CONTENTION})" if _suspect(contention) else text


def _with_contention(text: str, contention) -> str:
    """An efficiency cell with the contention rule's reason after it."""
    return f"{text}; {contention}" if _suspect(contention) else text


SCALING_COLUMNS = [
    "model",
    "series",
    "scaling",
    "baseline nodes",
    "largest nodes",
    "tokens/s at baseline",
    "tokens/s at largest",
    "speedup",
    f"efficiency [{CONFIDENCE_PCT} % CI]",
]


def scaling_table(scaling: pd.DataFrame) -> Table:
    """One row per scaling series: baseline, largest node count, speedup and efficiency (its CONFIDENCE interval)."""
    scaled = scaling[(scaling["mode"] != "single") & scaling["series"].notna()]
    predicted = bool(scaled["pred_scaling_efficiency"].notna().any())
    table = Table(SCALING_COLUMNS + ["predicted efficiency"] * predicted)
    labels = series_labels(scaled)
    by_series = scaled.iloc[np.argsort(scaled["series"].to_numpy(), kind="stable")]
    series = by_series["series"].to_numpy()
    if not len(series):
        return table
    starts = np.flatnonzero(np.r_[True, series[1:] != series[:-1]])  # each series' rows, in frame order
    ends = np.r_[starts[1:], len(series)] - 1
    for base, last in zip(by_series.iloc[starts].to_dict("records"), by_series.iloc[ends].to_dict("records")):
        cells = [
            str(base["model"]),
            labels[int(base["series"])],
            str(base["mode"]),
            str(int(base["nodes"])),
            str(int(last["nodes"])),
            fmt.number(base["tokens_per_s"]),
            fmt.number(last["tokens_per_s"]),
            f"{fmt.significant(last['speedup'])}x",
            _with_contention(
                fmt.percent_ci(last["scaling_efficiency"], last["eff_ci_low"], last["eff_ci_high"]), last["contention"]
            ),
        ]
        cells += [fmt.percent(last["pred_scaling_efficiency"])] * predicted
        table.add(cells, "flag" if bool(last["below_prediction"]) or _suspect(last["contention"]) else "")
    return table


RESULT_HEADERS = ["sweep", "point", "status", "model", "configuration", "nodes", "world size", "tokens/s",
                  "tokens/s per device", "step time median (s)", "MFU", "peak mem/device (GiB)", "efficiency"]  # fmt: skip
PREDICTED_HEADERS = ["predicted tokens/s per device", "predicted step time (s)", "predicted mem/device (GiB)",
                     "predicted efficiency", "check"]  # fmt: skip


def results_table(points: pd.DataFrame) -> Table:
    """Every point; predicted values beside measured ones when any record carries a prediction.

    Built a column at a time (each formatter mapped over a column's values, the configuration label
    once per distinct configuration): the same cells as formatting row by row, at 10,000 points a
    fraction of the cost."""
    predicted = has_prediction(points)
    table = Table(RESULT_HEADERS + [metric.heading for metric in REPORT_METRICS] + PREDICTED_HEADERS * predicted)
    data = points[[c for c in _RESULT_COLUMNS if c in points.columns]]
    # What the cells read, a list per column (Series.tolist: the Python values to_dict("list") gives,
    # without boxing each of them in Python).
    values = {c: data[c].tolist() for c in _VALUE_COLUMNS if c in data.columns}
    flagged = [bool(v) for v in values["below_prediction"]]
    contention = values.get("contention", [None] * len(data))
    columns = [
        *(_each(str, values[c]) for c in ("sweep", "point_id", "status", "model")),
        config_labels(data),
        _each(str, values["nodes"]),
        _each(str, values["world_size"]),
        _each(fmt.number, values["tokens_per_s"]),
        _each(fmt.number, values["tokens_per_s_per_device"]),
        _each(fmt.significant, values["step_time_median_s"]),
        _each(fmt.percent, values["mfu"]),
        _each(fmt.gib, values["peak_mem_bytes"]),
        [
            _efficiency_cell(efficiency, mode, baseline, why)
            for efficiency, mode, baseline, why in zip(
                values["scaling_efficiency"], values["scaling_mode"], values["baseline_nodes"], contention
            )
        ],
        *(
            [metric_cell(metric, v, t) for v, t in zip(values[metric.key], values["tokens_per_s"])]
            for metric in REPORT_METRICS
        ),
    ]
    if predicted:
        rows = iter(data[flagged].to_dict("records"))  # the flagged rows only: a few of 10,000
        columns += [
            _each(fmt.number, values["pred_tokens_per_s_per_device"]),
            _each(fmt.significant, values["pred_step_time_s"]),
            _each(fmt.gib, values["pred_memory_bytes"]),
            _each(fmt.percent, values["pred_scaling_efficiency"]),
            [flag_text(next(rows)) if flag else "" for flag in flagged],
        ]
    table.rows = [list(cells) for cells in zip(*columns)]
    table.row_classes = ["flag" if flag or _suspect(why) else "" for flag, why in zip(flagged, contention)]
    return table


def _each(format_value, values: list) -> list[str]:
    return [format_value(v) for v in values]


def _predicted_cells(row: dict, flagged: bool) -> list[str]:
    return [fmt.number(row["pred_tokens_per_s_per_device"]), fmt.significant(row["pred_step_time_s"]),
            fmt.gib(row["pred_memory_bytes"]), fmt.percent(row["pred_scaling_efficiency"]),
            flag_text(row) if flagged else ""]  # fmt: skip


def flag_text(row: dict) -> str:
    """ "below prediction", with the likely cause where the prediction says where the time goes,
    and what the point's preflight measured where it has one."""
    cause = likely_cause(row.get("pred_step_time_s"), _predicted_comm(row), row.get("exposed_comm_share"))
    text = f"{BELOW_PREDICTION}; likely cause: {cause}" if cause else BELOW_PREDICTION
    evidence = measured_evidence(
        nodes=int(row["nodes"]),
        link_gbps=row.get("preflight_link_gbps"),
        nominal_link_gbps=row.get("nominal_link_gbps"),
        matmul_tflops=row.get("preflight_matmul_tflops"),
        peak_tflops=row.get("peak_tflops"),
        exposed_s=row.get("pred_comm_exposed_s"),
        step_time_s=row.get("pred_step_time_s"),
        stragglers=row.get("preflight_stragglers") if isinstance(row.get("preflight_stragglers"), str) else None,
    )
    return f"{text}; measured: {evidence}" if evidence else text


def _predicted_comm(row: dict) -> float | None:
    exposed, overlapped = row.get("pred_comm_exposed_s"), row.get("pred_comm_overlapped_s")
    return None if fmt.is_missing(exposed) or fmt.is_missing(overlapped) else exposed + overlapped


CONTENTION_HEADERS = ["sweep", "point", "model", "configuration", "nodes", "efficiency", "why"]


def contention_table(points: pd.DataFrame) -> Table:
    """Points whose scaling efficiency the contention rule (bench/analysis/report/contention.py)
    calls suspect: beyond 100 % by more than noise explains, or measured on a loaded or shared host."""
    table = Table(CONTENTION_HEADERS)
    suspect = points["contention"].map(_suspect) if "contention" in points.columns else pd.Series(False, points.index)
    for row in points[suspect.astype(bool)].to_dict("records"):
        table.add([str(row["sweep"]), str(row["point_id"]), str(row["model"]), config_label(row), str(row["nodes"]),
                   _efficiency_text(row, with_contention=False), row["contention"]], "flag")  # fmt: skip
    return table


def flagged_table(points: pd.DataFrame) -> Table:
    """Points measured more than 10 points below the predicted efficiency, with the likely cause."""
    table = Table(["sweep", "point", "model", "configuration", "nodes", "efficiency", "predicted efficiency",
                   "check"])  # fmt: skip
    for row in points[points["below_prediction"].astype(bool)].to_dict("records"):
        table.add([str(row["sweep"]), str(row["point_id"]), str(row["model"]), config_label(row),
                   str(row["nodes"]), fmt.percent(row["scaling_efficiency"]),
                   fmt.percent(row["pred_scaling_efficiency"]), flag_text(row)], "flag")  # fmt: skip
    return table


# The frame columns the results table reads (to_dict of only these, not of the frame's hundred).
_RESULT_COLUMNS = [
    "sweep", "point_id", "status", "model", "strategy", "precision", "micro_batch", "grad_accum", "seq_len",
    "activation_checkpointing", "compile", "cpu_offload", "variant", "nodes", "world_size", "tokens_per_s",
    "tokens_per_s_per_device", "step_time_median_s", "mfu", "peak_mem_bytes", "scaling_efficiency",
    "scaling_mode", "baseline_nodes", "below_prediction", "pred_tokens_per_s_per_device", "pred_step_time_s",
    "pred_memory_bytes", "pred_scaling_efficiency", "pred_comm_exposed_s", "pred_comm_overlapped_s",
    "preflight_link_gbps", "nominal_link_gbps", "preflight_matmul_tflops", "peak_tflops", "preflight_stragglers",
    "contention", *(metric.key for metric in REPORT_METRICS),
]  # fmt: skip


# The columns the results table's cells read one by one (the rest: configuration labels and flag texts).
_VALUE_COLUMNS = [
    "sweep", "point_id", "status", "model", "nodes", "world_size", "tokens_per_s", "tokens_per_s_per_device",
    "step_time_median_s", "mfu", "peak_mem_bytes", "scaling_efficiency", "scaling_mode", "baseline_nodes",
    "below_prediction", "contention", "pred_tokens_per_s_per_device", "pred_step_time_s", "pred_memory_bytes",
    "pred_scaling_efficiency", *(metric.key for metric in REPORT_METRICS),
]  # fmt: skip


def _efficiency_text(row: dict, with_contention: bool = True) -> str:
    contention = row.get("contention") if with_contention else None
    return _efficiency_cell(row["scaling_efficiency"], row["scaling_mode"], row["baseline_nodes"], contention)


def _efficiency_cell(efficiency, mode, baseline_nodes, contention) -> str:
    """ "95.0 % (weak, vs 1)", with the contention rule's reason after it where it has one."""
    if fmt.is_missing(efficiency):
        return fmt.MISSING
    return _with_contention(f"{fmt.percent(efficiency)} ({mode}, vs {int(baseline_nodes)})", contention)


def has_prediction(points: pd.DataFrame) -> bool:
    columns = [c for c in points.columns if c.startswith("pred_")]
    return bool(points[columns].notna().any().any()) if columns else False


def failed_table(points: pd.DataFrame) -> Table:
    """Points that are not ok: status, reason and the command that reruns the point alone."""
    table = Table(["sweep", "point", "model", "configuration", "nodes", "status", "reason", "rerun"])
    read = [c for c in dict.fromkeys(["point_id", "status", "error", *CONFIG_COLUMNS, *RUN_COLUMNS]) if c in points]
    for row in points.loc[points["status"] != "ok", read].to_dict("records"):  # the columns read, not a hundred
        table.add(
            [
                row["sweep"],
                row["point_id"],
                row["model"],
                config_label(row),
                str(row["nodes"]),
                row["status"],
                row["error"] or "(no reason recorded)",
                run_command(row),
            ]
        )
    return table


def problems_table(problems: list[tuple[str, str]]) -> Table:
    """Record files that could not be read (truncated JSON, unknown schema version, invalid fields)."""
    table = Table(["file", "problem"])
    for path, reason in problems:
        table.add([str(path), reason])
    return table
