"""Progress of a suite on the terminal."""

from __future__ import annotations

import sys
from typing import Any

from harness.outcome import RunOutcome, printable
from harness.run import wall


class Progress:
    """One line per event on a pipe; a live line on a terminal."""

    def __init__(self, total: int, stream: Any = None, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.violations = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0

    def _write(self, text: str) -> None:
        """A terminal that is closed or full (`2>/dev/full`) ends the progress display, not
        the suite: the verdict is the exit status."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def update(self, outcome: RunOutcome) -> None:
        self.done += 1
        bad = [r.checker for r in outcome.unexpected_violations]
        bad += [f"{name} (expected to fail, held)" for name in outcome.unmet_expectations]
        self.violations += len(bad)
        if not self.enabled:
            return
        expected = [r.checker for r in outcome.expected_violations]
        status = ("FAIL " + ",".join(bad) if bad else "unknown" if outcome.unknown else
                  "expected failure " + ",".join(expected) if expected else "ok")
        if outcome.skipped_steps:
            # "ok" alone would read as every step taken and survived.
            status += f" ({len(outcome.skipped_steps)} step(s) skipped)"
        line = printable(f"[{self.done}/{self.total}] {outcome.adapter} {outcome.name}: "
                         f"{status}  ({self.violations} violation(s) so far)")
        now = wall()
        if self.tty:
            self._write("\r\x1b[2K" + line[:160] + ("\n" if bad else ""))
        elif bad or outcome.source == "scenario" or now - self._last > 2.0:
            self._write(line + "\n")
            self._last = now

    def message(self, text: str) -> None:
        if self.enabled:
            self._write(("\r\x1b[2K" if self.tty else "") + printable(text) + "\n")

    def close(self) -> None:
        if self.enabled and self.tty:
            self._write("\n")
