"""What the report draws, computed from a history: swimlanes, faults, the time axis, and the
"deployments alive over time" series.

Pure data, no markup: `html.py` renders it. A run's timeline is built from its saved history
(`build_timeline`), or read back from `RunOutcome.timeline` (`Timeline.from_dict`) when the
runner kept only the summary.

Lanes, top to bottom:
- hosts: up from their deployment's registration until it drains; GC pauses and crashes on it;
- deployments: *live* (receives new invocations) until superseded, then *superseded* for as
  long as something is still pinned to it, until `deployment.drained`;
- sessions: turns (stacked in rows when they overlap, which the busy rule forbids), the in-call
  wait (`tool.awaiting`, pinned) and the wait handed off as state (`turn.waiting` ->
  `turn.resumed`, nothing pinned);
- invocations: queued, running, suspended (pinning its deployment), stuck.

The time axis is piecewise linear: an idle stretch that takes most of the run (the eight-day
wait) is drawn as a short break labelled with its length, so the first five minutes stay
readable next to it. Times on the axis adapt their unit from milliseconds to days.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from contract import records as vocabulary
from harness.checkers.model import model_of
from harness.history import History, Record, fmt_duration

# Span kinds, in drawing order (a later kind is drawn over an earlier one on the same row).
SPAN_KINDS: Final = (
    "up", "live", "superseded", "queued", "running", "suspended", "stuck", "turn",
    "awaiting", "waiting", "paused", "crashed",
)
SPAN_TITLES: Final[dict[str, str]] = {
    "up": "host up",
    "live": "live: receives new invocations",
    "superseded": "superseded, still alive: something is pinned to it",
    "queued": "queued behind the object's exclusive handler",
    "running": "running",
    "suspended": "suspended: pins its deployment",
    "stuck": "paused by the engine (needs an operator)",
    "turn": "turn in progress",
    "awaiting": "tool waits in-call for a person (pinned)",
    "waiting": "wait handed off: the turn waits as state, nothing pinned",
    "paused": "host paused (GC pause)",
    "crashed": "host crashed",
}
GROUPS: Final = ("host", "deployment", "session", "invocation")
GROUP_TITLES: Final[dict[str, str]] = {
    "host": "Hosts",
    "deployment": "Deployments",
    "session": "Sessions",
    "invocation": "Invocations",
}

# Records shown as marks of their own, with their labels: from the vocabulary.
_INVOCATION_MARKS: Final[dict[str, str]] = vocabulary.marks("engine")
_SESSION_MARKS: Final[dict[str, str]] = vocabulary.marks("runtime")
_MAX_MARKS_PER_LANE: Final = 200
# Fault data fields that hold a time or a duration: labelled `at 2.00d`, not `at=172800.0`.
_TIME_KEYS: Final = frozenset({"at", "after", "until", "delay", "for", "by"})


@dataclass(frozen=True, slots=True)
class Span:
    start: float
    end: float
    kind: str
    label: str = ""
    row: int = 0
    open: bool = False  # still open when the history ends


@dataclass(frozen=True, slots=True)
class Mark:
    time: float
    kind: str  # "info" | "ok" | "fail" | "cited"
    label: str
    record: int | None = None
    row: int = 0


@dataclass(frozen=True, slots=True)
class Lane:
    group: str  # one of GROUPS
    id: str
    label: str
    spans: tuple[Span, ...] = ()
    marks: tuple[Mark, ...] = ()

    @property
    def rows(self) -> int:
        return 1 + max([s.row for s in self.spans] + [m.row for m in self.marks] + [0])


@dataclass(frozen=True, slots=True)
class Fault:
    start: float
    end: float | None  # None: an instant (a crash without restart, a redeploy, a heal)
    kind: str  # the record kind without "fault.": gc-pause, crash, redeploy, provider, heal
    label: str
    record: int
    host: str | None = None


@dataclass(frozen=True, slots=True)
class Timeline:
    start: float
    end: float
    lanes: tuple[Lane, ...] = ()
    faults: tuple[Fault, ...] = ()
    hidden: dict[str, int] = field(default_factory=dict)  # group -> lanes left out

    @property
    def empty(self) -> bool:
        return not self.lanes and not self.faults

    def times(self) -> list[float]:
        """Every time something starts, ends or happens: where the axis must not break."""
        out = [self.start, self.end]
        for lane in self.lanes:
            for s in lane.spans:
                out.append(s.start)
                if not s.open:
                    out.append(s.end)
            out.extend(m.time for m in lane.marks)
        for f in self.faults:
            out.append(f.start)
            if f.end is not None:
                out.append(f.end)
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, for `RunOutcome.timeline`."""
        return {
            "start": self.start,
            "end": self.end,
            "lanes": [
                {
                    "group": lane.group, "id": lane.id, "label": lane.label,
                    "spans": [[s.start, s.end, s.kind, s.label, s.row, s.open]
                              for s in lane.spans],
                    "marks": [[m.time, m.kind, m.label, m.record, m.row] for m in lane.marks],
                }
                for lane in self.lanes
            ],
            "faults": [[f.start, f.end, f.kind, f.label, f.record, f.host] for f in self.faults],
            "hidden": dict(self.hidden),
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Timeline:
        """Read `to_dict` back; raises ValueError (or KeyError/TypeError) on a malformed dict."""
        lanes = tuple(
            Lane(
                str(lane["group"]), str(lane["id"]), str(lane["label"]),
                tuple(Span(float(s[0]), float(s[1]), str(s[2]), str(s[3]), int(s[4]),
                           bool(s[5])) for s in lane.get("spans", ())),
                tuple(Mark(float(m[0]), str(m[1]), str(m[2]),
                           None if m[3] is None else int(m[3]), int(m[4]))
                      for m in lane.get("marks", ())),
            )
            for lane in obj.get("lanes", ())
        )
        faults = tuple(
            Fault(float(f[0]), None if f[1] is None else float(f[1]), str(f[2]), str(f[3]),
                  int(f[4]), None if f[5] is None else str(f[5]))
            for f in obj.get("faults", ())
        )
        hidden = {str(k): int(v) for k, v in dict(obj.get("hidden", {})).items()}
        return cls(float(obj["start"]), float(obj["end"]), lanes, faults, hidden)


# --------------------------------------------------------------------------- building


class _LaneBuilder:
    __slots__ = ("first", "group", "id", "label", "marks", "open", "priority", "spans")

    def __init__(self, group: str, lane_id: str, label: str, first: int) -> None:
        self.group = group
        self.id = lane_id
        self.label = label
        self.first = first  # index of the first record on the lane: display order
        self.spans: list[Span] = []
        self.marks: list[Mark] = []
        # key -> (start, kind, label, row) of an interval not closed yet
        self.open: dict[str, tuple[float, str, str, int]] = {}
        self.priority = 0.0

    def begin(self, key: str, start: float, kind: str, label: str = "", row: int = 0) -> None:
        self.end(key, start)
        self.open[key] = (start, kind, label, row)

    def end(self, key: str, time: float) -> Span | None:
        entry = self.open.pop(key, None)
        if entry is None:
            return None
        start, kind, label, row = entry
        span = Span(start, max(time, start), kind, label, row)
        self.spans.append(span)
        return span

    def mark(self, time: float, kind: str, label: str, record: int | None, row: int = 0) -> None:
        self.marks.append(Mark(time, kind, label, record, row))

    def finish(self, end: float) -> Lane:
        for key in list(self.open):
            start, kind, label, row = self.open.pop(key)
            self.spans.append(Span(start, max(end, start), kind, label, row, open=True))
        order = {k: i for i, k in enumerate(SPAN_KINDS)}
        spans = sorted(self.spans, key=lambda s: (order.get(s.kind, len(order)), s.start, s.row))
        marks = self.marks
        if len(marks) > _MAX_MARKS_PER_LANE:
            cited = [m for m in marks if m.kind == "cited"]
            rest = [m for m in marks if m.kind != "cited"]
            marks = sorted(cited + rest[: _MAX_MARKS_PER_LANE - len(cited)],
                           key=lambda m: (m.time, m.record or 0))
        return Lane(self.group, self.id, self.label, tuple(spans), tuple(marks))


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fault_label(record: Record) -> str:
    kind = record.kind.removeprefix("fault.")
    parts = [kind]
    if record.host:
        parts.append(record.host)
    for name, value in sorted(record.data.items()):
        if name == "duration" and isinstance(value, int | float):
            parts.append(fmt_duration(float(value)))
        elif name in _TIME_KEYS and isinstance(value, int | float) and not isinstance(value,
                                                                                       bool):
            parts.append(f"{name} {fmt_duration(float(value))}")
        elif isinstance(value, str | int | float | bool):
            parts.append(f"{name}={_short(value, 30)}")
    return " ".join(parts)


def _faults(history: History, end: float) -> list[Fault]:
    """The run's fault windows (the run model's: each ends as its fault kind says), drawn
    from their start to their end, clipped to the axis; one that never ended, open until
    `end` if its kind stays open (a pause), else an instant."""
    out = []
    for window in model_of(history).fault_windows:
        r = window.record
        stop = window.end
        if stop is None and window.open_until_end:
            stop = end
        out.append(Fault(r.time, None if stop is None else min(max(stop, r.time), max(end, r.time)),
                         window.kind, fault_label(r), r.index, r.host))
    return out


def build_timeline(
    history: History | Iterable[Record],
    *,
    focus: Iterable[int] = (),
    end: float | None = None,
    max_invocations: int = 30,
    max_sessions: int = 12,
    max_lanes_per_group: int = 24,
) -> Timeline:
    """Swimlanes of one run. `focus`: record indexes a violation cites; their lanes are kept
    when lanes must be left out, and they are marked on the timeline."""
    records = list(history)
    cited = set(focus)
    if not records:
        return Timeline(0.0, end or 0.0)
    start = min(0.0, records[0].time)
    stop = max([r.time for r in records] + [end or 0.0])

    lanes: dict[tuple[str, str], _LaneBuilder] = {}

    def lane(group: str, lane_id: str, label: str, index: int) -> _LaneBuilder:
        key = (group, lane_id)
        found = lanes.get(key)
        if found is None:
            found = lanes[key] = _LaneBuilder(group, lane_id, label, index)
        return found

    turn_rows: dict[tuple[str, str], int] = {}  # (session, turn) -> row
    busy_rows: dict[str, set[int]] = {}  # session -> rows holding a turn now
    dep_hosts: dict[str, list[str]] = {}
    inv_labels: dict[str, str] = {}

    for r in records:
        t = r.time
        k = r.kind
        # ---- deployments and their hosts
        if k == "deployment.registered" and r.deployment:
            version = r.data.get("version")
            d = lane("deployment", r.deployment,
                     f"{r.deployment} ({version})" if version else r.deployment, r.index)
            d.begin("life", t, "live", "live")
            hosts = [str(h) for h in r.data.get("hosts") or ()]
            dep_hosts[r.deployment] = hosts
            for h in hosts:
                lane("host", h, h, r.index).begin("up", t, "up")
        elif k == "deployment.superseded" and r.deployment:
            d = lane("deployment", r.deployment, r.deployment, r.index)
            pinned = r.data.get("pinned")
            by = r.data.get("by")
            d.end("life", t)
            d.begin("life", t, "superseded",
                    f"superseded by {by}" if by else "superseded")
            d.mark(t, "info", f"superseded by {by}, {pinned} pinned" if pinned is not None
                   else "superseded", r.index)
        elif k == "deployment.drained" and r.deployment:
            d = lane("deployment", r.deployment, r.deployment, r.index)
            d.end("life", t)
            after = r.data.get("after")
            d.mark(t, "ok", f"drained after {fmt_duration(float(after))}"
                   if isinstance(after, int | float) else "drained", r.index)
            for h in dep_hosts.get(r.deployment, ()):
                lane("host", h, h, r.index).end("up", t)
        # ---- hosts
        elif k == "host.paused" and r.host:
            lane("host", r.host, r.host, r.index).begin("paused", t, "paused", "paused")
        elif k == "host.resumed" and r.host:
            lane("host", r.host, r.host, r.index).end("paused", t)
        elif k == "host.crashed" and r.host:
            host_lane = lane("host", r.host, r.host, r.index)
            host_lane.end("paused", t)
            host_lane.begin("crashed", t, "crashed", "crashed")
        elif k == "host.restarted" and r.host:
            lane("host", r.host, r.host, r.index).end("crashed", t)
        elif k == "faultpoint.reached" and r.host:
            lane("host", r.host, r.host, r.index).mark(
                t, "info", f"fault point {r.data.get('point')}", r.index)
        # ---- invocations
        elif k == "invocation.created" and r.invocation:
            target = r.data.get("target") or ""
            key = r.data.get("key")
            label = f"{r.invocation} {target}" + (f" [{key}]" if key is not None else "")
            inv_labels[r.invocation] = label.strip()
            lane("invocation", r.invocation, inv_labels[r.invocation], r.index).begin(
                "state", t, "queued", "queued")
        elif k in ("invocation.started", "invocation.resumed") and r.invocation:
            inv = lane("invocation", r.invocation, inv_labels.get(r.invocation, r.invocation),
                       r.index)
            inv.begin("state", t, "running", f"running on {r.deployment}" if r.deployment
                      else "running")
        elif k == "invocation.suspended" and r.invocation:
            inv = lane("invocation", r.invocation, inv_labels.get(r.invocation, r.invocation),
                       r.index)
            on = r.data.get("on")
            inv.begin("state", t, "suspended",
                      f"suspended on {on}, pins {r.deployment}" if on
                      else f"suspended, pins {r.deployment}")
        elif k == "invocation.paused" and r.invocation:
            inv = lane("invocation", r.invocation, inv_labels.get(r.invocation, r.invocation),
                       r.index)
            inv.begin("state", t, "stuck", f"paused: {r.data.get('reason', '')}".strip(": "))
        elif k == "invocation.completed" and r.invocation:
            inv = lane("invocation", r.invocation, inv_labels.get(r.invocation, r.invocation),
                       r.index)
            inv.end("state", t)
            error = r.data.get("error")
            inv.mark(t, "fail" if r.type == "fail" else "ok",
                     f"failed: {_short(error)}" if error else "completed", r.index)
        elif k in _INVOCATION_MARKS and r.invocation:
            inv = lane("invocation", r.invocation, inv_labels.get(r.invocation, r.invocation),
                       r.index)
            bad = k in ("attempt.failed", "journal.mismatch", "attempt.fenced")
            inv.mark(t, "fail" if bad else "info", _INVOCATION_MARKS[k], r.index)
        # ---- sessions: turns and waits
        elif r.session is not None and (k.startswith(("turn.", "tool.", "message.",
                                                      "threadlog."))):
            s = lane("session", r.session, f"session {r.session}", r.index)
            turn_key = (r.session, r.turn or "")
            if k == "turn.started" and r.turn:
                rows = busy_rows.setdefault(r.session, set())
                row = next(i for i in range(len(rows) + 1) if i not in rows)
                rows.add(row)
                turn_rows[turn_key] = row
                s.begin(f"turn:{r.turn}", t, "turn", f"turn {r.turn}", row)
            elif k == "turn.ended":
                row = turn_rows.get(turn_key, 0)
                for key in [x for x in s.open if x.endswith(f":{r.turn}")]:
                    s.end(key, t)
                busy_rows.get(r.session, set()).discard(row)
                reason = r.data.get("reason")
                s.mark(t, "ok" if reason in (None, "completed") else "info",
                       f"turn {r.turn} ended: {reason}" if reason else f"turn {r.turn} ended",
                       r.index, row)
            elif k == "tool.awaiting":
                tool = r.data.get("tool")
                s.begin(f"await:{r.tool_call}:{r.turn}", t, "awaiting",
                        f"{tool} waits in-call" if tool else "waits in-call",
                        turn_rows.get(turn_key, 0))
            elif k in ("tool.handoff", "tool.result") and r.tool_call:
                s.end(f"await:{r.tool_call}:{r.turn}", t)
                if k == "tool.handoff":
                    s.mark(t, "info", "hand-off", r.index, turn_rows.get(turn_key, 0))
            elif k == "turn.waiting":
                s.end(f"await:{r.tool_call}:{r.turn}", t)
                s.begin(f"wait:{r.turn}", t, "waiting",
                        f"waits as state for {r.tool_call}", turn_rows.get(turn_key, 0))
            elif k == "turn.resumed":
                s.end(f"wait:{r.turn}", t)
                outcome = r.data.get("outcome")
                s.mark(t, "info", f"resumed: {outcome}" if outcome else "resumed", r.index,
                       turn_rows.get(turn_key, 0))
            elif k in _SESSION_MARKS:
                bad = k == "threadlog.rejected" or (
                    k == "tool.rerun" and r.data.get("access") == "denied")
                label = _SESSION_MARKS[k]
                if k == "tool.rerun":
                    label = f"re-run, access {r.data.get('access')}"
                s.mark(t, "fail" if bad else "info", label, r.index, turn_rows.get(turn_key, 0))

        if r.index in cited:
            target_lane = _lane_of(r, lanes)
            if target_lane is not None:
                target_lane.mark(t, "cited", f"#{r.index} {r.kind}", r.index,
                                 turn_rows.get((r.session or "", r.turn or ""), 0)
                                 if target_lane.group == "session" else 0)
                target_lane.priority += 1e12

    # Invocations: what made them interesting decides which are shown.
    built = {key: b.finish(stop) for key, b in lanes.items()}
    for key, b in lanes.items():
        b.priority += sum(s.end - s.start for s in built[key].spans
                          if s.kind in ("suspended", "waiting", "superseded", "stuck"))

    chosen: list[_LaneBuilder] = []
    hidden: dict[str, int] = {}
    limits = {"invocation": max_invocations, "session": max_sessions}
    for group in GROUPS:
        members = [b for (g, _), b in lanes.items() if g == group]
        limit = limits.get(group, max_lanes_per_group)
        if len(members) > limit:
            keep = sorted(members, key=lambda b: (-b.priority, b.first))[:limit]
            hidden[group] = len(members) - limit
            members = keep
        chosen.extend(sorted(members, key=lambda b: (b.first, b.id)))

    faults = _faults(history if isinstance(history, History) else
                     History.from_records(records), stop)
    return Timeline(start, stop, tuple(built[(b.group, b.id)] for b in chosen),
                    tuple(faults), hidden)


def _lane_of(r: Record, lanes: Mapping[tuple[str, str], _LaneBuilder]) -> _LaneBuilder | None:
    for group, value in (("invocation", r.invocation), ("session", r.session),
                         ("deployment", r.deployment), ("host", r.host)):
        if value is not None and (group, value) in lanes:
            return lanes[(group, value)]
    return None


# --------------------------------------------------------------------------- alive series


def alive_series(history: History | Iterable[Record]) -> tuple[tuple[float, int], ...]:
    """(virtual time, deployments alive) after each change.

    A deployment is alive from `deployment.registered` until `deployment.drained`; the latest
    never drains. Changes at the same instant collapse into one point (a release that drains
    its predecessor at once leaves the count unchanged)."""
    alive: set[str] = set()
    out: list[tuple[float, int]] = []
    for r in history:
        if r.deployment is None:
            continue
        if r.kind == "deployment.registered":
            alive.add(r.deployment)
        elif r.kind == "deployment.drained":
            alive.discard(r.deployment)
        else:
            continue
        if out and out[-1][0] == r.time:
            out[-1] = (r.time, len(alive))
        else:
            out.append((r.time, len(alive)))
    return tuple(out)


def releases(history: History | Iterable[Record]) -> tuple[tuple[float, str], ...]:
    """(virtual time, deployment) of each `deployment.registered`."""
    return tuple((r.time, r.deployment) for r in history
                 if r.kind == "deployment.registered" and r.deployment is not None)


# --------------------------------------------------------------------------- time axis

_NICE_STEPS: Final = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200,
    86400, 172800, 345600, 604800, 1209600, 2592000, 7776000, 31536000,
)


def nice_step(duration: float, max_ticks: int) -> float:
    """The smallest round step (1 s, 5 min, 6 h, 1 d, ...) giving at most `max_ticks` ticks."""
    max_ticks = max(1, max_ticks)
    for step in _NICE_STEPS:
        if duration / step <= max_ticks:
            return float(step)
    return float(_NICE_STEPS[-1] * math.ceil(duration / _NICE_STEPS[-1] / max_ticks))


def fmt_tick(t: float, step: float) -> str:
    """A tick label whose precision follows the step: `30s`, `4m30s`, `2h15m`, `3d 06h`,
    `8d 00:05:02`."""
    if abs(t) < 1e-9:
        return "0"
    sign = "-" if t < 0 else ""
    t = abs(t)
    if step >= 86400:
        days = t / 86400
        return f"{sign}{days:g}d" if days == round(days, 3) else f"{sign}{days:.1f}d"
    if step >= 60:
        total = round(t / 60) * 60
        d, rem = divmod(total, 86400)
        h, rem = divmod(rem, 3600)
        m = rem // 60
        if step >= 3600:
            return f"{sign}{d}d {h:02d}h" if d else f"{sign}{h}h"
        if d:
            return f"{sign}{d}d {h:02d}:{m:02d}"
        return f"{sign}{h}h{m:02d}m" if h else f"{sign}{m}m"
    decimals = 0 if step >= 1 else min(3, max(0, -math.floor(math.log10(step) + 1e-9)))
    t = round(t, decimals)
    if t < 60:
        return f"{sign}{t:.{decimals}f}s"
    whole = int(t // 60) * 60
    seconds = t - whole
    sec = f"{seconds:0{3 + decimals if decimals else 2}.{decimals}f}"
    d, rem = divmod(whole, 86400)
    h, rem = divmod(rem, 3600)
    m = rem // 60
    if d:
        return f"{sign}{d}d {h:02d}:{m:02d}:{sec}"
    if h:
        return f"{sign}{h}:{m:02d}:{sec}"
    return f"{sign}{m}m{sec}s"


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str
    anchor: str = "middle"  # SVG text-anchor: middle, start (after a break) or end


@dataclass(frozen=True, slots=True)
class Segment:
    t0: float
    t1: float
    x0: float
    x1: float
    compressed: bool  # an idle stretch drawn short: the axis breaks here


@dataclass(frozen=True, slots=True)
class TimeAxis:
    """Maps virtual time to x in [0, width]; idle stretches may be compressed into breaks."""

    start: float
    end: float
    width: float
    segments: tuple[Segment, ...]
    ticks: tuple[Tick, ...]

    @property
    def breaks(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.compressed)

    def x(self, t: float) -> float:
        if not self.segments:
            return 0.0
        t = min(max(t, self.start), self.end)
        i = max(0, bisect.bisect_right([s.t0 for s in self.segments], t) - 1)
        s = self.segments[i]
        if s.t1 <= s.t0:
            return s.x0
        return s.x0 + (t - s.t0) / (s.t1 - s.t0) * (s.x1 - s.x0)

    @classmethod
    def linear(cls, start: float, end: float, width: float, *, tick_px: float = 90) -> TimeAxis:
        if end <= start:
            end = start + 1.0
        seg = Segment(start, end, 0.0, width, False)
        return cls(start, end, width, (seg,), tuple(_ticks([seg], tick_px)))

    @classmethod
    def fit(
        cls,
        times: Iterable[float],
        start: float,
        end: float,
        width: float,
        *,
        idle_share: float = 0.15,
        break_px: float = 56.0,
        max_breaks: int = 4,
        tick_px: float = 90,
    ) -> TimeAxis:
        """An axis over [start, end]; gaps without events longer than `idle_share` of the run
        become breaks `break_px` wide, when that leaves the events at least half the width."""
        if end <= start:
            return cls.linear(start, end, width, tick_px=tick_px)
        total = end - start
        points = sorted({min(max(t, start), end) for t in times} | {start, end})
        gaps = sorted(
            ((b - a, a, b) for a, b in itertools.pairwise(points)
             if b - a > idle_share * total),
            reverse=True,
        )[:max_breaks]
        idle = sum(g for g, _, _ in gaps)
        busy = total - idle
        if not gaps or busy <= 0 or busy >= 0.5 * total or width - len(gaps) * break_px < width / 2:
            return cls.linear(start, end, width, tick_px=tick_px)
        cuts = sorted((a, b) for _, a, b in gaps)
        pieces: list[tuple[float, float, bool]] = []
        cursor = start
        for a, b in cuts:
            pieces.append((cursor, a, False))
            pieces.append((a, b, True))
            cursor = b
        pieces.append((cursor, end, False))
        linear_px = width - len(cuts) * break_px
        # Every busy piece keeps room for a label or two, even an instant (a burst at one
        # time); the rest of the width follows durations.
        busy_pieces = [(a, b) for a, b, c in pieces if not c]
        base = min(90.0, linear_px / len(busy_pieces) / 2)
        spare = linear_px - base * len(busy_pieces)
        widths = [base + spare * (b - a) / busy for a, b in busy_pieces]
        segments = []
        x = 0.0
        wi = 0
        for a, b, compressed in pieces:
            if compressed:
                w = break_px
            else:
                w = widths[wi]
                wi += 1
            segments.append(Segment(a, b, x, x + w, compressed))
            x += w
        return cls(start, end, width, tuple(segments), tuple(_ticks(segments, tick_px)))


def _ticks(segments: Sequence[Segment], tick_px: float,
           char_px: float = 6.0) -> list[Tick]:
    """Round times per linear segment; a label never overlaps another label or a break, and
    the axis names the time where it resumes after a break."""
    out: list[Tick] = []
    occupied = -1e9  # right edge of the last label placed
    wall = -1e9  # right edge of the last break
    width = segments[-1].x1 if segments else 0.0
    for i, seg in enumerate(segments):
        if seg.compressed:
            wall = seg.x1
            continue
        after_break = i > 0 and segments[i - 1].compressed
        limit = (segments[i + 1].x0 - 2 if i + 1 < len(segments) and segments[i + 1].compressed
                 else width + tick_px / 2)
        duration = seg.t1 - seg.t0
        px = seg.x1 - seg.x0
        candidates: list[tuple[float, float, float, bool]] = []  # (x, t, step, forced start)
        if duration <= 0 or px <= 0:
            step = 1.0
            candidates.append((seg.x0, seg.t0, step, after_break))
        else:
            step = nice_step(duration, max(1, int(px / tick_px)))
            if after_break:
                # Precise enough to tell where the axis resumes.
                precise = min(step, 1.0)
                if abs(seg.t0 - round(seg.t0)) > 1e-6:
                    precise = min(step, nice_step(duration, max(1, int(px / tick_px) * 10)))
                candidates.append((seg.x0, seg.t0, precise, True))
            first = math.ceil(seg.t0 / step - 1e-9) * step
            n = 0
            while first + n * step <= seg.t1 + 1e-9 and n < 1000:
                t = first + n * step
                candidates.append((seg.x0 + (t - seg.t0) / duration * px, t, step, False))
                n += 1
        for x, t, st, forced in candidates:
            label = fmt_tick(t, st)
            w = len(label) * char_px
            if forced:
                anchor, left, right = "start", x + 2, x + 2 + w
            else:
                anchor, left, right = "middle", x - w / 2, x + w / 2
                if left < 0:
                    anchor, left, right = "start", x, x + w
                elif right > limit:
                    anchor, left, right = "end", x - w, x
            if left < max(occupied + char_px * 1.5, wall) or right > limit:
                continue
            out.append(Tick(x + 2 if forced else x, label, anchor))
            occupied = right
    return out
