"""Schedules: what happens when. Steps at virtual times: messages, answers, faults, deploys.

A schedule is plain frozen data, written by hand (`scenarios/*.toml`) or generated, and
printed back as a scenario file that replays it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

from contract.thresholds import MAX_WAIT
from harness.faults import FAULTS

# action -> (required params, optional params with defaults): a person's and the directory's
# actions here, every fault kind's from its one home (`harness.faults.FAULTS`).
ACTIONS: Final[dict[str, tuple[tuple[str, ...], dict[str, Any]]]] = {
    "message": (("session",), {"text": "hello", "tools": [], "user": "alice"}),
    "answer": (("session",), {"decision": "approve", "user": "alice"}),
    "background": (("session",), {}),
    "cancel": (("session",), {}),
    "revoke": ((), {"user": "alice", "tool": "*"}),
    "grant": ((), {"user": "alice", "tool": "*"}),
    **{kind.name: (kind.required, dict(kind.optional)) for kind in FAULTS.values()},
}

# `do = "provider"` (a scenario file's older step) reads as a service fault on "provider".
LEGACY_ACTIONS: Final = {"provider": "service-fault"}

FAULT_ACTIONS: Final = frozenset(FAULTS)

# The kinds of step a schedule can hold, as the report counts them (`Schedule.step_kinds`):
# the actions, answers split by what they do to a card (a denial, a second answer right after
# the first, one after the card's `max_wait`), a message that steers a session whose turn may
# be waiting, a malformed request of each kind, and each fault kind's own (a service fault
# per service and fault).
STEP_KINDS: Final = (
    "message", "message (steer)", "answer (approve)", "answer (deny)", "answer (duplicate)",
    "answer (late)", "background", "cancel", "revoke", "grant", "message (malformed)",
    "answer (malformed)", "background (malformed)",
    *(kind for fault in FAULTS.values() for kind in fault.kinds()),
)
APPROVAL_TOOLS: Final = ("send_email", "charge_card")
# A second answer this soon after one of the same session is a duplicate (a double click,
# two devices); one this long after the session's last message, a late one (the default
# `max_wait`, 8 days).
DUPLICATE_WITHIN: Final = 60.0
LATE_AFTER: Final = MAX_WAIT

MAX_DURATION: Final = 3650 * 86400.0  # ten years of scenario time
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: Any) -> float:
    """'90s', '5m', '2h30m', '8d', or a number of seconds. Raises ValueError with the fix."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like '5m' or '8d', got {value!r}")
    if isinstance(value, int | float):
        if value != value or value in (math.inf, -math.inf):  # TOML has nan, inf, 1e400
            raise ValueError(f"expected a finite duration like '5m' or '8d', got {value!r}")
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value!r}")
        return _bounded(float(value), value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        pos, total = 0, 0.0
        for match in _DURATION.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if text and pos == len(text):
            return _bounded(total, value)
    raise ValueError(
        f"expected a duration like '90s', '5m', '2h30m' or '8d' (or seconds), got {value!r}"
    )


def _bounded(seconds: float, value: Any) -> float:
    # Virtual time becomes datetimes (the frozen wall clock) and report axes; a duration past
    # MAX_DURATION is a typo, and one past the datetime range would crash a run mid-way.
    if seconds > MAX_DURATION:
        raise ValueError(f"at most {int(MAX_DURATION // 86400)}d, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    if seconds == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size and (seconds / size) == int(seconds / size):
            return f"{int(seconds / size)}{unit}"
    if seconds >= 1:
        return f"{seconds:g}s"
    return f"{round(seconds * 1000)}ms"


@dataclass(frozen=True, slots=True)
class Step:
    at: float
    action: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.params:
            if key == name:
                return value
        return default

    @property
    def is_fault(self) -> bool:
        return self.action in FAULT_ACTIONS

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{format_duration(self.at)}: {self.action}({args})"


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str
    steps: tuple[Step, ...]
    seed: int = 0
    description: str = ""
    hosts: int = 2
    horizon: float | None = None  # run until; default: last step + max_wait + margin
    # invariant (or "all") -> "pass" | "fail" (notes), or "fails" (listed in [expect] fails)
    expect: tuple[tuple[str, str], ...] = ()
    source: str = "scenario"
    path: str | None = None

    def expected(self, invariant: str) -> str | None:
        for name, outcome in self.expect:
            if name in (invariant, "all"):
                return outcome
        return None

    def faults(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.is_fault:
                counts[step.action] = counts.get(step.action, 0) + 1
        return counts

    def step_kinds(self) -> frozenset[str]:
        """The kinds of step (`STEP_KINDS`) this schedule holds, read from its steps."""
        kinds: set[str] = set()
        approval: set[str] = set()  # sessions sent a message with an approval tool so far
        last_message: dict[str, float] = {}
        last_answer: dict[str, float] = {}
        for step in self.steps:
            action = step.action
            session = step.get("session")
            if step.get("malformed"):
                kinds.add(f"{action} (malformed)")  # a broken client's: no card, no turn
            elif action == "message":
                kinds.add("message (steer)" if session in approval else "message")
                if any(t in APPROVAL_TOOLS for t in step.get("tools") or ()):
                    approval.add(session)
                last_message[session] = step.at
            elif action == "answer":
                kinds.add(f"answer ({'deny' if step.get('decision') == 'deny' else 'approve'})")
                if step.at - last_answer.get(session, -math.inf) <= DUPLICATE_WITHIN:
                    kinds.add("answer (duplicate)")
                if step.at - last_message.get(session, math.inf) > LATE_AFTER:
                    kinds.add("answer (late)")
                last_answer[session] = step.at
            elif action in FAULTS:
                kinds.add(FAULTS[action].step_kind(step))
            else:
                kinds.add(action)
        return frozenset(kinds)

    def to_toml(self) -> str:
        """The schedule as a scenario file that replays it."""
        lines = [f"name = {_toml(self.name)}"]
        if self.description:
            lines.append(f"description = {_toml(self.description)}")
        lines.append(f"seed = {self.seed}")
        lines.append(f"hosts = {self.hosts}")
        if self.horizon is not None:
            lines.append(f"horizon = {_toml(format_duration(self.horizon))}")
        if self.expect:
            lines.append("")
            lines.append("[expect]")
            fails = [k for k, v in self.expect if v == "fails"]  # [expect] fails = [...]
            if fails:
                lines.append(f"fails = {_toml(fails)}")
            lines.extend(f"{_key(k)} = {_toml(v)}" for k, v in self.expect if v != "fails")
        for step in self.steps:
            lines.append("")
            lines.append("[[step]]")
            lines.append(f"at = {_toml(format_duration(step.at))}")
            lines.append(f"do = {_toml(step.action)}")
            for key, value in step.params:
                if key in ("duration",) and isinstance(value, int | float):
                    value = format_duration(float(value))
                lines.append(f"{_key(key)} = {_toml(value)}")
        return "\n".join(lines) + "\n"


# Every run's outcome carries its schedule as TOML, so this is on the path of every
# generated schedule: keys are a handful of names (looked up once each), and a string is
# written by json's own encoder without going through json.dumps.
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")
_json_string: Final = json.encoder.encode_basestring_ascii  # what json.dumps(str) writes


@functools.lru_cache(maxsize=256)
def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")
