"""The report a person reads after a chaos run: `index.html` (self-contained) and `junit.xml`.

    from harness.report import write_report
    page = write_report(suite, "reports/")   # -> reports/index.html, reports/junit.xml
"""

from __future__ import annotations

from pathlib import Path

from harness.outcome import SuiteOutcome
from harness.report import html, junit
from harness.report.summary import Summary
from harness.report.timeline import Timeline, alive_series, build_timeline

__all__ = ["Timeline", "alive_series", "build_timeline", "write_report"]


def write_report(suite: SuiteOutcome, out_dir: str | Path) -> Path:
    """Write `index.html` and `junit.xml` into `out_dir` (created if missing); returns the
    path of `index.html`. Works for an incomplete suite and for runs whose adapter crashed."""
    if not isinstance(suite, SuiteOutcome):
        raise TypeError(f"Expected SuiteOutcome but got suite={suite!r} "
                        f"(type={type(suite).__name__})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = Summary.of(suite)  # computed once, read by both
    junit.write(suite, out / "junit.xml", summary)
    return html.write(suite, out / "index.html", summary)
