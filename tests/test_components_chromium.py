"""Headless Chromium: console errors are detected, clean pages report none, screenshots work."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NoReturn

import pytest

from harness.components.chromium import (
    BIN_ENV,
    ChromiumUnavailable,
    console_errors,
    find_chromium,
    load_page,
    screenshot,
)

pytestmark = pytest.mark.real

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

ERROR_PAGE = """<!doctype html><html><body><h1>broken</h1>
<script>console.log("fine so far"); console.error("deliberate failure", 42);</script>
</body></html>"""

CLEAN_PAGE = """<!doctype html><html><body style="background:#0a0"><h1>clean</h1>
<script>console.log("all good"); console.info("still good");</script>
</body></html>"""

LATE_FAILURES_PAGE = """<!doctype html><html><body>
<img src="missing-image.png">
<script>setTimeout(() => { undefinedFunction(); }, 0);</script>
</body></html>"""


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: real components must be installed)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Path:
    try:
        return find_chromium()
    except ChromiumUnavailable as exc:
        _missing(str(exc))


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return int(width), int(height)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def test_console_error_is_detected(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "error.html"
    page.write_text(ERROR_PAGE)
    png, log = tmp_path / "error.png", tmp_path / "console.log"
    errors = screenshot(page, png, console_log_path=log)
    assert len(errors) == 1 and "deliberate failure 42" in errors[0]
    assert "[log] fine so far" in log.read_text()
    assert "[error] deliberate failure 42" in log.read_text()
    width, height = _png_size(png)
    assert width == 1280 and height >= 800


def test_clean_page_has_no_errors(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "clean.html"
    page.write_text(CLEAN_PAGE)
    png = tmp_path / "clean.png"
    result = load_page(page, screenshot_path=png, width=640, height=480)
    assert result.errors == []
    assert [m.level for m in result.console] == ["log", "info"]
    assert _png_size(png) == (640, 480)
    assert result.browser_pgid is not None and _group_members(result.browser_pgid) == []


def test_exceptions_and_failed_loads_after_load_count(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "late.html"
    page.write_text(LATE_FAILURES_PAGE)
    errors = console_errors(page)
    assert any("undefinedFunction" in e for e in errors), errors
    assert any("missing-image.png" in e for e in errors), errors


def test_missing_page_and_missing_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_page(tmp_path / "nope.html")
    monkeypatch.setenv(BIN_ENV, "/nonexistent/chromium")
    with pytest.raises(ChromiumUnavailable, match=BIN_ENV):
        find_chromium()
