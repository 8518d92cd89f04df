"""The options the CLI and the pytest plugin share, parsed once, the same way.

`durable-chaos run --run-timeout 90` and `pytest --chaos-run-timeout 90` (or the ini key
`chaos_run_timeout`) mean one thing; so do the invariants to judge, the report directory and
the number of worker processes. Each parser takes the raw value and `where` it came from
("--run-timeout", "--chaos-run-timeout on the command line", "chaos_run_timeout in the ini
file pytest.ini") and raises a `UsageError` that starts with `where` and says the fix; the
plugin turns it into pytest's own usage error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.errors import UsageError

__all__ = ["duration", "invariant_names", "report_directory", "run_timeout", "workers"]


def duration(raw: str, where: str) -> float:
    """A positive, finite duration in seconds: '90', '1.5', '5m', '2h30m'."""
    from harness.schedules.model import parse_duration

    text = str(raw).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError as exc:  # it says which forms a duration takes
            raise UsageError(f"{where}: {exc}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{where}: expected a positive duration such as 60 or 5m, got "
                         f"{raw!r}")
    return seconds


def run_timeout(raw: str | None, where: str) -> float | None:
    """The wall-clock limit of one run: None, the engine's default; math.inf, none."""
    if raw is None:
        return None
    if str(raw).strip().lower() == "none":
        return math.inf
    return duration(raw, where)


def invariant_names(raw: str | Iterable[str] | None, where: str) -> tuple[str, ...] | None:
    """`a,b` (or several such items), each a known invariant (else the nearest is named);
    None: the adapters' own claims."""
    if raw is None:
        return None
    from harness.adapters.base import check_invariant_names
    from harness.checkers import ALL

    items = [raw] if isinstance(raw, str) else list(raw)
    names = tuple(dict.fromkeys(n.strip() for item in items for n in str(item).split(",")
                                if n.strip()))
    known = [c.name for c in ALL]
    if not names:
        raise UsageError(f"{where}: expected a comma list of invariant names such as "
                         f"{known[0]},{known[1]}")
    check_invariant_names(names, known, where)
    return names


def report_directory(path: Path, where: str) -> Path:
    """The report directory, created and written to now (found only at the end, a report
    that cannot be written would cost the whole run)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"is under the file {existing}"
        raise UsageError(f"{where}: {path} {what}, not a directory; give a directory")
    try:
        # Written to, not asked (os.access): root may write anywhere the kernel refuses.
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".durable-chaos-write-check"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{where}: cannot write there ({exc.strerror or exc}); give a "
                         "directory you can write to") from None
    return path


def workers(number: int, where: str, warn: Callable[[str], None]) -> int:
    """`number` worker processes, at most one per core (said through `warn`)."""
    cores = os.cpu_count() or 1
    if number > cores:
        # More processes than cores only adds switching and memory (each holds a runtime).
        warn(f"{where}: {number} is more than the {cores} core(s) here; using {cores}")
        return cores
    return number
