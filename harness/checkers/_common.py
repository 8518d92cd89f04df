"""What several checkers need: reading a field, deduplicating observations, fault windows.

Observations from the runtime are at-least-once (an emit inside a retried step repeats), so
every checker skips a record whose (kind, event_id) it has already seen. Harness and simulator
events carry no event_id and are never skipped.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, Final

from harness.checkers.base import CheckConfig, Result
from harness.history import History, Record, fmt_duration

_FIELDS: Final = frozenset(
    {"process", "host", "deployment", "invocation", "session", "turn", "tool_call", "epoch",
     "key"}
)


def attr(record: Record, name: str) -> Any:
    """A field of the record, else the same name in its data (adapters may put it either way)."""
    if name in _FIELDS:
        value = getattr(record, name)
        if value is not None:
            return value
    return record.data.get(name)


def at(time: float) -> str:
    return f"t={fmt_duration(time)}"


class Dedup:
    """Remembers (kind, event_id) of observations already seen."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[tuple[str, Any]] = set()

    def fresh(self, record: Record) -> bool:
        event_id = record.data.get("event_id")
        if event_id is None:
            return True
        key = (record.kind, event_id)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


# The two decisions a person's answer may carry; an answer with any other is malformed.
DECISIONS: Final = frozenset({"approve", "deny"})


def malformed_request(request: Record) -> bool:
    """Whether a request's `invoke` (`op.message`, `op.answer`, `op.background`) is
    malformed on purpose: it says so (`malformed`), or it is an answer whose decision is
    neither approve nor deny (an answer that names none reads as an approval)."""
    if request.data.get("malformed") is True:
        return True
    return (request.kind == "op.answer"
            and str(request.data.get("decision", "approve")) not in DECISIONS)


def run_end(history: History) -> float:
    """The time of `run.end`, else of the last record (the run ended when its history did)."""
    end = 0.0
    for record in reversed(history.records):
        if record.kind == "run.end":
            return record.time
        end = max(end, record.time)
    return end


Interval = tuple[float, float]


def merge(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def overlap(merged: list[Interval], start: float, end: float) -> float:
    """Seconds of [start, end] covered by the (merged) intervals."""
    total = 0.0
    for a, b in merged:
        if b <= start:
            continue
        if a >= end:
            break
        total += min(b, end) - max(a, start)
    return total


FAULT_KINDS: Final = frozenset(
    {"host.paused", "host.resumed", "host.crashed", "host.restarted", "fault.gc-pause",
     "fault.crash", "fault.service-fault", "service.fault", "fault.clock-jump", "fault.heal"}
)


class Faults:
    """Windows during which a fault was active: hosts paused or crashed, a world service
    failing (a `service-fault` step: the provider, email, payments, identity or cards) or
    holding a call, the clock jumping.

    Fed the records of `FAULT_KINDS` in order; `finish(end)` closes what is still open. The
    simulator's host events and the harness's fault records describe the same pauses; merging
    the intervals makes counting both harmless.
    """

    __slots__ = ("_down", "_down_open", "_held", "_provider", "_provider_open",
                 "host_deployment", "last_end")

    def __init__(self) -> None:
        self._down: list[tuple[str, float, float]] = []
        self._down_open: dict[str, float] = {}
        self._provider: list[Interval] = []
        self._provider_open: float | None = None
        # Calls a world service held (a slow answer, a timeout) and clock jumps: time the
        # runtime was blocked by a fault or never had, like a host's downtime.
        self._held: list[Interval] = []
        self.host_deployment: dict[str, str] = {}
        # When the last fault ended (a heal, a resume, a restart, the end of a timed pause).
        self.last_end: float | None = None

    def _ended(self, time: float) -> None:
        if self.last_end is None or time > self.last_end:
            self.last_end = time

    def feed(self, r: Record) -> None:
        kind = r.kind
        host = r.host
        if host is not None and r.deployment is not None:
            self.host_deployment[host] = r.deployment
        duration = r.data.get("duration")
        if kind in ("host.paused", "fault.gc-pause", "host.crashed", "fault.crash"):
            if host is None:
                return
            if duration is not None:
                self._down.append((host, r.time, r.time + float(duration)))
                self._ended(r.time + float(duration))
            else:
                self._down_open.setdefault(host, r.time)
                self._ended(r.time)
        elif kind in ("host.resumed", "host.restarted"):
            if host is not None and host in self._down_open:
                self._down.append((host, self._down_open.pop(host), r.time))
            self._ended(r.time)
        elif kind == "fault.service-fault":
            if duration is not None:
                self._provider.append((r.time, r.time + float(duration)))
                self._ended(r.time + float(duration))
            else:
                if self._provider_open is None:
                    self._provider_open = r.time
                self._ended(r.time)
        elif kind in ("service.fault", "fault.clock-jump"):
            # A call the world held (a slow answer, a timeout), or time the clock skipped
            # (recorded where the jump starts): time the runtime did not have. A service
            # fault waits for its service's next call, so it may strike after the schedule's
            # heal: the faults end no sooner than it did.
            if duration is not None:
                self._held.append((r.time, r.time + float(duration)))
                self._provider.append((r.time, r.time + float(duration)))
            self._ended(r.time + float(duration or 0.0))
        elif kind == "fault.heal":
            healed = float(r.data.get("at", r.time))
            for h, since in self._down_open.items():
                self._down.append((h, since, healed))
            self._down_open.clear()
            if self._provider_open is not None:
                self._provider.append((self._provider_open, healed))
                self._provider_open = None
            self._ended(healed)

    @property
    def unhealed(self) -> bool:
        """Whether some fault is still open (a host paused or down, the provider failing)."""
        return bool(self._down_open) or self._provider_open is not None

    def finish(self, end: float) -> tuple[list[Interval], list[Interval]]:
        """(host downtime, provider faults), each merged; open windows last until `end`."""
        for h, since in self._down_open.items():
            self._down.append((h, since, end))
        self._down_open.clear()
        if self._provider_open is not None:
            self._provider.append((self._provider_open, end))
            self._provider_open = None
        return merge([(a, b) for _, a, b in self._down]), merge(self._provider)

    def held(self) -> list[Interval]:
        """Merged windows during which a world service held a call (slow, timed out) or the
        clock jumped."""
        return merge(self._held)

    def down(self) -> tuple[tuple[str, float, float], ...]:
        """(host, from, to) of every host's downtime (call after `finish`)."""
        return tuple(self._down)

    def downtime_of(self, hosts: set[str]) -> list[Interval]:
        """Merged downtime of the given hosts (call after `finish`)."""
        return merge([(a, b) for h, a, b in self._down if h in hosts])


def guarded(
    name: str, body: Callable[[History, CheckConfig], Result], history: History,
    config: CheckConfig,
) -> Result:
    """Run a checker body; a crash becomes an unknown result, never an exception."""
    try:
        return body(history, config)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Result(
            name, None, reached=False,
            note=f"checker crashed: {type(exc).__name__}: {exc} "
                 f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
        )
