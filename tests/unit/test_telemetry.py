"""Telemetry (fsdp_core/telemetry.py): NVML parsing and summaries from recorded readings, the real
host sampler, sysfs readers over real files, a reader that fails mid-run, and the sidecar."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.schema.telemetry import Telemetry
from fsdp_core import telemetry as tm
from fsdp_core import telemetry_readers as rd
from fsdp_core import telemetry_summary as ts

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "telemetry" / "nvml_readings.json"


def _nvml_payloads() -> list[dict]:
    """The recorded NVML readings of two ranks, parsed as the sampler parses them."""
    payloads = []
    for rank in json.loads(FIXTURE.read_text())["ranks"]:
        rows = [
            {"t_s": r["t_s"], **rd.parse_nvml({k: v for k, v in r.items() if k != "t_s"})} for r in rank["readings"]
        ]
        payloads.append(
            {"rank": rank["rank"], "host": rank["host"], "device": rank["device"], "interval_ms": 100,
             "columns": tm.rows_to_columns(rows), "missing": {}}
        )  # fmt: skip
    return payloads


def test_nvml_readings_parse_into_signals_in_their_units():
    parsed = rd.parse_nvml(
        {"power_mw": 612_345, "total_energy_mj": 5_000_000_123, "nvlink_data_tx_kib": 3, "pcie_rx_bytes": None}
    )
    assert parsed == {
        "gpu_power_w": pytest.approx(612.345),
        "gpu_energy_j": pytest.approx(5_000_000.123),
        "nvlink_tx_bytes": 3072.0,
        "pcie_rx_bytes": None,
    }


def test_nvml_field_values_are_read_by_their_value_type():
    pynvml = pytest.importorskip("pynvml")

    def field(value_type: int, attribute: str, number, status: int = 0):
        value = pynvml.c_nvmlFieldValue_t()
        value.fieldId, value.scopeId = rd.NVML_FI_NVLINK_DATA_TX, rd.NVML_ALL_LINKS
        value.valueType, value.nvmlReturn = value_type, status
        setattr(value.value, attribute, number)
        return value

    assert rd.field_value(field(pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", 2**40 + 5)) == 2**40 + 5
    assert rd.field_value(field(pynvml.NVML_VALUE_TYPE_DOUBLE, "dVal", 1.5)) == 1.5
    assert rd.field_value(field(pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", 7)) == 7
    assert (
        rd.field_value(field(pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", 9, pynvml.NVML_ERROR_NOT_SUPPORTED))
        is None
    )


def test_recorded_nvml_readings_summarise_to_energy_per_token_power_and_throttling():
    record = ts.summarize(_nvml_payloads(), tokens=1000, window_s=0.5, device_type="cuda", sidecar="telemetry.parquet")
    assert isinstance(record, Telemetry)  # the record's type
    # Energy counters: rank 0 +300 J and rank 1 +350 J over 0.5 s -> 600 W + 700 W; over the 0.5 s window.
    assert record.energy_source == "gpu"
    assert [r.avg_power_w for r in record.per_rank] == [pytest.approx(600.0), pytest.approx(700.0)]
    assert record.energy_j == pytest.approx(650.0)
    assert record.energy_per_token_j == pytest.approx(0.65)
    assert record.avg_power_w_per_device == pytest.approx(650.0)
    # Throttling: rank 1 power-capped in 2 of 6 samples (one also thermal); sync boost (rank 0) is not throttling.
    assert [r.throttle_fraction for r in record.per_rank] == [0.0, pytest.approx(2 / 6)]
    assert record.throttle_fraction == pytest.approx(2 / 12)
    assert record.throttle_reasons["sw_power_cap"] == pytest.approx(2 / 12)
    assert record.throttle_reasons["sw_thermal"] == pytest.approx(1 / 12)
    # Utilization: rank 1 below 10 % in every sample -> one mostly idle device.
    assert record.util_pct == pytest.approx((585 + 19) / 12)
    assert [r.idle_fraction for r in record.per_rank] == [0.0, 1.0] and record.idle_devices == 1
    # Gauges: mean, p10, p90, max of the samples; counters: their rate and the total.
    power = record.per_rank[0].signals["gpu_power_w"]
    assert (power.unit, power.mean, power.max, power.samples) == ("W", pytest.approx(610.0), 620.0, 6)
    assert power.p10 == pytest.approx(600.0) and power.p90 == pytest.approx(620.0)
    assert "total" not in power.model_fields_set  # a gauge's summary has no `total` key in the record
    nvlink = record.signals["nvlink_tx_bytes"]
    assert nvlink.unit == "B/s" and nvlink.mean == pytest.approx(1.024e10) and nvlink.total == pytest.approx(1.024e10)
    # A missing PCIe reading leaves a gap: the rate spans it, the total is still the difference.
    pcie = record.per_rank[0].signals["pcie_tx_bytes"]
    assert pcie.samples == 4 and pcie.mean == pytest.approx(1e7) and pcie.total == pytest.approx(5e6)
    assert "gpu_throttle_reasons" not in record.signals
    assert "energy_per_token_j" not in record.missing and record.sidecar == "telemetry.parquet"


def test_a_rank_without_the_energy_counter_leaves_energy_per_token_null_with_the_reason():
    payloads = _nvml_payloads()
    del payloads[1]["columns"]["gpu_energy_j"]
    payloads[1]["missing"] = {"nvml.energy": "NVMLError_NotSupported: Not Supported"}
    summary = ts.summarize(payloads, tokens=1000, window_s=0.5, device_type="cuda")
    assert summary.energy_per_token_j is None and summary.energy_source is None
    assert summary.missing["energy_per_token_j"] == "GPU energy counter unavailable on rank(s) 1"
    assert summary.missing["nvml.energy"] == "rank 1: NVMLError_NotSupported: Not Supported"
    # The sampled power still gives the rank's average power; the counter-less rank is not summed into energy.
    assert summary.per_rank[1].avg_power_w == pytest.approx(710.0)


def test_an_energy_counter_that_did_not_advance_is_no_reading_not_zero_watts():
    # A timed window shorter than NVML's update period: the counter is there but reads the same
    # value throughout. That is not 0 J / 0 W, and not "counter unavailable" either.
    payloads = _nvml_payloads()
    columns = payloads[0]["columns"]
    columns["t_s"] = [0.05 * i for i in range(6)]
    columns["gpu_energy_j"] = [5000.0] * 6
    summary = ts.summarize(payloads, tokens=1000, window_s=0.3, device_type="cuda")
    flat = summary.per_rank[0]
    assert flat.energy_j is None and flat.avg_power_w == pytest.approx(610.0)  # the sampled power's mean
    assert flat.missing["gpu_energy_j"] == (
        "the GPU energy counter did not advance over 0.25 s of samples (NVML updates it every ~100 ms or "
        "slower): the timed window is too short to measure energy"
    )
    assert summary.missing["gpu_energy_j"] == f"rank 0: {flat.missing['gpu_energy_j']}"
    assert summary.energy_per_token_j is None and summary.energy_j is None and summary.energy_source is None
    assert summary.missing["energy_per_token_j"] == (
        "GPU energy counter did not advance on rank(s) 0 (window 0.25 s; NVML updates it every ~100 ms or "
        "slower: a longer timed window is needed)"
    )
    assert "unavailable" not in summary.missing["energy_per_token_j"]
    assert summary.avg_power_w_per_device == pytest.approx((610.0 + 700.0) / 2)  # rank 1's counter: 700 W
    # A counter-less rank beside a flat one: both reasons, each for its rank.
    del payloads[1]["columns"]["gpu_energy_j"]
    payloads[1]["missing"] = {"nvml.energy": "NVMLError_NotSupported: Not Supported"}
    both = ts.summarize(payloads, tokens=1000, window_s=0.3, device_type="cuda")
    assert both.missing["energy_per_token_j"].startswith(
        "GPU energy counter unavailable on rank(s) 1; GPU energy counter did not advance on rank(s) 0 (window 0.25 s;"
    )


def test_the_update_period_of_a_counter_is_the_median_gap_between_its_changes():
    # A clock in milliseconds (one tick per reading) and a counter that changes every 20 of them.
    ticks = iter(range(10_000))
    now = [0]

    def clock() -> int:
        now[0] = next(ticks)
        return now[0]

    period, changes = rd.update_period(lambda: now[0] // 20, 500, clock=clock)
    assert (period, changes) == (20, 24)  # changes at 20, 40, ... 480 ms
    assert rd.update_period(lambda: 7.0, 500, clock=iter(range(1000)).__next__) == (None, 0)  # never moved


def _sysfs(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_rapl_energy_is_summed_over_packages_and_survives_a_wrap_around(tmp_path):
    root = _sysfs(
        tmp_path,
        {
            "intel-rapl:0/energy_uj": "999000000", "intel-rapl:0/max_energy_range_uj": "1000000000",
            "intel-rapl:1/energy_uj": "5000000", "intel-rapl:1/max_energy_range_uj": "1000000000",
            "intel-rapl:0:0/energy_uj": "1", "intel-rapl:0:0/max_energy_range_uj": "2",  # a subzone: not a package
        },
    )  # fmt: skip
    readers = rd.rapl_readers(root)
    (reader,) = readers.readers
    assert reader.read() == {"cpu_energy_j": 0.0}
    (root / "intel-rapl:0/energy_uj").write_text("3000000")  # wrapped: +1 J +3 J
    (root / "intel-rapl:1/energy_uj").write_text("7000000")  # +2 J
    assert reader.read() == {"cpu_energy_j": pytest.approx(6.0)}


def test_rapl_absent_or_unreadable_is_a_reason_not_an_error(tmp_path):
    assert "no RAPL package zones" in rd.rapl_readers(tmp_path / "none").missing["cpu_energy_j"]
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir(parents=True)  # unreadable as a number
    (tmp_path / "intel-rapl:0" / "max_energy_range_uj").write_text("10")
    assert rd.rapl_readers(tmp_path).missing["cpu_energy_j"].startswith("RAPL unreadable: IsADirectoryError")


def test_infiniband_and_efa_port_counters(tmp_path):
    root = _sysfs(
        tmp_path,
        {
            "mlx5_0/ports/1/counters/port_xmit_data": "100", "mlx5_0/ports/1/counters/port_rcv_data": "50",
            "rdmap0s6/ports/1/hw_counters/tx_bytes": "4096", "rdmap0s6/ports/1/hw_counters/rx_bytes": "8192",
        },
    )  # fmt: skip
    (reader,) = rd.infiniband_readers(root).readers
    # InfiniBand's data counters count 4-byte words; EFA's hw_counters count bytes.
    assert reader.read() == {
        "ib_mlx5-0_1_tx_bytes": 400.0, "ib_mlx5-0_1_rx_bytes": 200.0,
        "ib_rdmap0s6_1_tx_bytes": 4096.0, "ib_rdmap0s6_1_rx_bytes": 8192.0,
    }  # fmt: skip
    assert rd.infiniband_readers(tmp_path / "none").missing == {
        "infiniband": f"no InfiniBand or EFA ports under {tmp_path / 'none'}"
    }


def test_the_host_sampler_samples_this_process_and_the_host_on_cpu():
    sampler = tm.Sampler(10, rd.build_readers("cpu", cpu_threads=1), {"rank": 0, "host": "here", "device": "cpu"})
    sampler.start()
    # Keep a core busy (the process's CPU shows it) for 50 intervals: the >= 3 samples asserted below
    # still arrive when other work on a 2-core machine delays the sampler's thread (0.15 s did not).
    deadline = time.perf_counter() + 0.5
    while time.perf_counter() < deadline:
        sum(range(1000))
    series = sampler.stop()
    columns = series["columns"]
    assert len(columns["t_s"]) >= 3 and columns["t_s"] == sorted(columns["t_s"])
    assert columns["proc_cpu_pct"][0] is None  # a rate needs two readings: none carried over from set-up
    assert all(v > 0 for v in columns["proc_rss_bytes"])
    assert any(v and v > 0 for v in columns["util_pct"]) and all(
        v is None or 0 <= v <= 100 for v in columns["util_pct"]
    )
    assert any(name.startswith("net_") for name in columns)
    assert series["missing"]["nvml"] == "CPU device: no GPU signals"
    assert series["interval_ms"] == 10 and series["start_unix"] > 0
    assert series["sampler_cpu_s"] > 0  # the thread's own CPU time: its cost


def test_a_reader_that_fails_mid_run_keeps_earlier_samples_and_says_why(tmp_path):
    counter = _sysfs(tmp_path, {"mlx5_0/ports/1/counters/port_xmit_data": "1"})
    readers = rd.infiniband_readers(counter)
    sampler = tm.Sampler(10, readers, {"rank": 0, "host": "here"})
    sampler.start()
    time.sleep(0.05)
    (counter / "mlx5_0/ports/1/counters/port_xmit_data").unlink()  # the counter vanishes
    time.sleep(0.05)
    series = sampler.stop()
    values = series["columns"]["ib_mlx5-0_1_tx_bytes"]
    assert values[0] == 4.0 and values[-1] is None
    reason = series["missing"]["infiniband"]
    assert reason.startswith("failed after ") and "earlier samples kept" in reason and "FileNotFoundError" in reason


@pytest.mark.parametrize("parquet", [True, False])
def test_the_sidecar_holds_every_ranks_rows(tmp_path, parquet):
    payloads = _nvml_payloads()
    payloads[1]["columns"]["extra_only_here"] = [1.0] * 6
    name = tm.write_sidecar(tmp_path, payloads, parquet=parquet)
    assert name == ("telemetry.parquet" if parquet else "telemetry.csv")
    frame = pd.read_parquet(tmp_path / name) if parquet else pd.read_csv(tmp_path / name)
    assert list(frame.columns[:3]) == ["rank", "host", "t_s"]
    assert frame["rank"].tolist() == [0] * 6 + [1] * 6
    assert frame["gpu_energy_j"].iloc[5] - frame["gpu_energy_j"].iloc[0] == pytest.approx(300.0)
    assert frame["extra_only_here"].isna().sum() == 6  # rank 0 never had it
    assert frame["pcie_tx_bytes"].isna().tolist() == [i % 6 == 3 for i in range(12)]
    assert [p.name for p in tmp_path.iterdir()] == [name]  # written through a temporary file


def test_cpu_summary_without_rapl_says_why_energy_is_missing():
    columns = {"t_s": [0.0, 0.1, 0.2], "util_pct": [None, 50.0, 70.0], "sys_cpu_pct": [None, 40.0, 60.0],
               "net_lo_tx_bytes": [0.0, 100.0, 300.0], "net_eth0_tx_bytes": [5.0, 5.0, 5.0]}  # fmt: skip
    payloads = [{"rank": r, "host": "h", "columns": columns, "missing": {"cpu_energy_j": "no RAPL"}} for r in range(2)]
    summary = ts.summarize(payloads, tokens=64, window_s=0.2, device_type="cpu")
    assert summary.energy_per_token_j is None and summary.avg_power_w_per_device is None
    assert summary.missing["energy_per_token_j"].startswith("CPU: no RAPL package energy on h")
    assert summary.util_pct == pytest.approx(60.0)
    (host,) = summary.per_host  # host signals once per host, idle interfaces left out
    assert host.ranks == 2 and set(host.signals) == {"sys_cpu_pct", "net_lo_tx_bytes"}
    assert summary.signals["net_lo_tx_bytes"].total == 300.0  # not doubled by the host's second rank
    assert "sys_cpu_pct" not in summary.per_rank[0].signals
