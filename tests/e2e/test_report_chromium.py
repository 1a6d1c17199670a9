"""The report opens in headless Chromium: no console errors, every image decoded (naturalWidth > 0).

Drives Debian's `chromium` through `chromedriver` with a few W3C WebDriver HTTP calls (no
Selenium, no Playwright browser download). Where Chromium is missing the test tries
scripts/deps/chromium.sh (root + apt only) and otherwise skips, printing why.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "records"))
from record_factory import REAL_DIR, nights, sample_sweep  # noqa: E402

TELEMETRY_DIR = ROOT / "tests" / "fixtures" / "records" / "telemetry"  # real records with their sidecars
SPLIT_DIR = ROOT / "tests" / "fixtures" / "records" / "v4_split"  # a profiled, planned 1-2 node series

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(600)]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGE_STATE = """return {
  images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth, id: i.parentElement.id})),
  scripts: document.scripts.length,
  fetched: performance.getEntriesByType('resource').map(e => e.name),
  title: document.title,
};"""


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _ensure_chromium() -> tuple[str, str]:
    found = _binaries()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["bash", str(ROOT / "scripts" / "deps" / "chromium.sh")], timeout=540, check=False)
        found = _binaries()
    if found is None:
        reason = "chromium/chromedriver not installed and cannot install (needs root and apt-get)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    return found


class WebDriver:
    """The four WebDriver endpoints this test needs, over plain HTTP."""

    def __init__(self, driver: str, browser: str, profile: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()
        options = {"binary": browser, "args": [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]}
        caps = {"browserName": "chrome", "goog:chromeOptions": options, "goog:loggingPrefs": {"browser": "ALL"}}
        self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self._call("GET", "/status")
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("chromedriver did not start within 30 s")

    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["value"]

    def open(self, page: Path) -> dict:
        """Load a page; return its image/script/resource state and the browser console log."""
        self._call("POST", f"/session/{self.session}/url", {"url": page.resolve().as_uri()})
        state = self._call("POST", f"/session/{self.session}/execute/sync", {"script": PAGE_STATE, "args": []})
        state["console"] = self._call("POST", f"/session/{self.session}/se/log", {"type": "browser"})
        return state

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, chromedriver = _ensure_chromium()
    driver = WebDriver(chromedriver, chromium, tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.close()


def _records():
    """Hand-made and real records, a profiled series, and the real telemetry sweep's records with their folders."""
    from bench.analysis.records import load_located_records, load_records

    real, _ = load_records(REAL_DIR) if REAL_DIR.is_dir() else ([], [])
    split, _ = load_records(SPLIT_DIR)
    located, _ = load_located_records(TELEMETRY_DIR)
    dirs = {(r.sweep, r.point_id): path.parent for r, path in located}
    return sample_sweep() + real + split + [r for r, _ in located], dirs


def test_report_opens_without_console_errors_and_every_image_loads(browser, tmp_path):
    from reports.report.build import write_report

    records, dirs = _records()
    page = write_report(records, tmp_path / "report", title="chromium check", point_dirs=dirs)
    state = browser.open(page)
    assert state["title"] == "chromium check"
    assert len(state["images"]) >= 6
    assert "fig-telemetry" in [image["id"] for image in state["images"]]  # the timelines, decoded below
    assert "fig-where_efficiency_went" in [image["id"] for image in state["images"]]  # the profiled series
    assert all(image["complete"] and image["width"] > 0 for image in state["images"]), state["images"]
    assert state["scripts"] == 0  # the failed point's "<script>" error text stayed text
    assert state["fetched"] == []  # nothing loaded from anywhere: images are data URIs
    errors = [entry for entry in state["console"] if entry.get("level") == "SEVERE"]
    assert errors == []


def test_history_page_opens_without_console_errors_and_every_image_loads(browser, tmp_path):
    """history.html of a series with a step (and an environment change): the same checks as the report."""
    from bench.analysis.history.analyse import analyse
    from bench.analysis.history.series import build_series
    from reports.history.page import write_history

    records = nights(20, step_at=12, torch="2.13.0", env_vars={"NCCL_ALGO": "<script>alert(1)</script>"})
    history = analyse(build_series(records, "tokens_per_s"), metric="tokens_per_s", window=8, detector="apache-otava")
    history.links = [
        ["2026-05-01T02:00:00", "night-0", "p5.48xlarge", "2x8", "ok", "600", "2880", "<b>2506</b>", "none"]
    ]
    page = write_history(history, tmp_path / "history", store="s.sqlite", command="fsdp-bench history")
    state = browser.open(page)
    assert state["title"] == "fsdp-bench history: tokens_per_s"
    assert len(state["images"]) == 1
    assert all(image["complete"] and image["width"] > 0 for image in state["images"]), state["images"]
    assert state["scripts"] == 0  # the variable's "<script>" value stayed text
    assert state["fetched"] == []
    assert [entry for entry in state["console"] if entry.get("level") == "SEVERE"] == []


def test_the_checks_catch_a_broken_page(browser, tmp_path):
    """Negative control: the same checks see a missing image and a console error."""
    broken = tmp_path / "broken.html"
    broken.write_text('<!DOCTYPE html><title>b</title><img src="missing.png"><script>console.error("boom")</script>')
    state = browser.open(broken)
    assert [image["width"] for image in state["images"]] == [0]
    assert any("boom" in entry.get("message", "") for entry in state["console"] if entry.get("level") == "SEVERE")
