"""The report in a real browser: headless Chromium through harness/components/chromium.py.

The page of a naive-looking suite (the naive adapter breaks pinning-bound, the reference does
not) must load with no console error: no script exception, and no Content-Security-Policy
refusal, which also proves the inlined stylesheet and script match the hashes the page pins.
The DOM must show the violation, and a full-page screenshot is saved next to the report.

The DOM is read by a probe script added to a copy of the page (its hash added to the copy's
policy), which logs what it finds to the console; the unmodified page is what the console and
screenshot checks load.

Without chromium these tests skip (run `make chromium`), except under CI=true, where they fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, NoReturn

import pytest
from test_report import naive_vs_reference, run_outcome

from harness.checkers.base import Result, Violation
from harness.components.chromium import ChromiumUnavailable, find_chromium, load_page
from harness.outcome import SuiteOutcome
from harness.report import write_report

pytestmark = pytest.mark.real

_PROBE = """
(function () {
  var article = document.querySelector("article.failing");
  var cell = document.querySelector(
    'td[data-invariant="pinning-bound"][data-adapter="naive"] .badge');
  var svg = document.querySelector("svg.tl");
  var box = svg ? svg.getBoundingClientRect() : null;
  var found = {
    articles: document.querySelectorAll("article.failing").length,
    title: article ? article.querySelector("h3").textContent : null,
    invariant: article ? article.querySelector(".inv-fail").getAttribute("data-invariant")
                       : null,
    witness: article ? article.querySelector(".witness").textContent : null,
    records: article ? article.querySelectorAll("ol.records li").length : 0,
    replay: article ? article.querySelector(".codeblock.replay pre").textContent : null,
    cell: cell ? cell.textContent : null,
    failBackground: cell ? getComputedStyle(cell).backgroundColor : null,
    timelineWidth: box ? Math.round(box.width) : 0,
    timelineHeight: box ? Math.round(box.height) : 0,
    charts: document.querySelectorAll("svg.alive path.series").length,
    copyButtons: document.querySelectorAll("button.copy-btn").length,
    codeBlocks: document.querySelectorAll("pre.copy").length,
    scripts: document.querySelectorAll("script").length,
    images: document.querySelectorAll("img").length
  };
  console.log("PROBE " + JSON.stringify(found));
})();
""".strip()


def _unavailable(reason: str) -> NoReturn:
    if "make chromium" not in reason:
        reason += "; run `make chromium`"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and Chromium is required: {reason}", pytrace=False)
    pytest.skip(reason)


def _chromium() -> Path:
    """The browser, or a skip (a failure under CI=true) that says how to install it."""
    try:
        return find_chromium()
    except ChromiumUnavailable as exc:
        _unavailable(f"chromium is missing: {exc}")


def _probe(page: Path, out: Path) -> dict[str, Any]:
    """Load a copy of `page` with the probe script allowed in, and return what it logged."""
    digest = base64.b64encode(hashlib.sha256(_PROBE.encode()).digest()).decode()
    text = page.read_text(encoding="utf-8")
    assert text.count("script-src ") == 1
    text = text.replace("script-src ", f"script-src 'sha256-{digest}' ", 1)
    text = text.replace("</body>", f"<script>{_PROBE}</script></body>", 1)
    out.write_text(text, encoding="utf-8")
    result = load_page(out, binary=_chromium())
    assert result.errors == [], result.error_texts
    logged = [m.text for m in result.console if m.text.startswith("PROBE ")]
    assert len(logged) == 1, [m.format() for m in result.console]
    found: dict[str, Any] = json.loads(logged[0].removeprefix("PROBE "))
    return found


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_naive_report_loads_cleanly_shows_the_violation_and_screenshots(tmp_path: Path) -> None:
    chromium = _chromium()
    suite = naive_vs_reference(tmp_path / "suite")
    report_dir = tmp_path / "report"
    page = write_report(suite, report_dir)
    shot = report_dir / "screenshot.png"

    result = load_page(page, screenshot_path=shot, full_page=True, width=1280, height=900,
                       binary=chromium)
    assert result.errors == [], result.error_texts  # no exception, no CSP refusal

    # A real picture of a long page, not a blank frame: a blank 1280 x 4000 PNG is a few KB.
    assert shot.is_file()
    width, height = _png_size(shot)
    assert width >= 1200 and height > 2000
    assert shot.stat().st_size > 60_000

    found = _probe(page, report_dir / "probe.html")
    assert found["articles"] == 1
    assert "eight-releases" in found["title"]
    assert found["invariant"] == "pinning-bound"
    assert found["witness"].startswith("inv2 held dep1 suspended for 7.5d")
    assert found["records"] == 2
    assert found["replay"] == ("durable-chaos replay --adapter naive --seed 7 "
                               "reports/shrunk/eight-releases.toml")
    assert found["cell"] == "fail"
    assert found["failBackground"] == "rgb(255, 235, 233)"  # the stylesheet applied
    assert found["timelineWidth"] > 900 and found["timelineHeight"] > 300
    assert found["charts"] == 2  # naive and reference on one chart
    # replay, minimal schedule, original replay, original schedule (folded): all copyable,
    # which proves the page's own script ran under its policy.
    assert found["copyButtons"] == found["codeBlocks"] == 4
    assert found["images"] == 0


def test_markup_from_the_runtime_stays_text_in_the_browser(tmp_path: Path) -> None:
    chromium = _chromium()
    evil = '<script>console.error("injected")</script><img src=x onerror=console.error(1)>'
    run = run_outcome("pinning", "naive",
                      (Result("pinning-bound", False, (Violation(evil),)),),
                      schedule_toml=evil, replay_command=evil)
    page = write_report(SuiteOutcome(("naive",), 1, (run,), 1.0), tmp_path / "report")
    result = load_page(page, binary=chromium)
    assert result.errors == [], result.error_texts
    found = _probe(page, tmp_path / "report" / "probe.html")
    assert found["witness"] == evil  # shown as text
    assert found["replay"] == evil
    assert found["scripts"] == 2  # the page's own and the probe: nothing injected
    assert found["images"] == 0
