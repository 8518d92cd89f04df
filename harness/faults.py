"""The fault kinds, each in one place: its parameters, the capability a runtime needs to take
it, how the runner applies it, when it heals, how it is generated and shrunk, and how the
timeline draws it.

`FAULTS` is the only list of fault kinds: the scenario file's actions
(`harness.schedules.model.ACTIONS`), the capabilities (`harness.adapters.base.lacking`), the
runner (`harness.run`), the generator and the shrinker (`harness.schedules`) and the timeline
(`harness.report.timeline`) all read it. A new fault kind is one `FaultKind` here
(tests/test_faults.py pins that no other module spells the names as a list).

What is not a fault lives elsewhere: a person's steps (message, answer, background, cancel)
and the directory's (revoke, grant) are the schedule's own actions; `answer-burst` is a
generator pattern (two answers in quick succession), drawn alongside the faults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from contract.faultpoints import POINTS
from contract.network import LINKS, TOXICS
from contract.services import FAULT_ALIASES, FAULT_NAMES, SERVICES
from harness.capabilities import (
    ClockEffects,
    Crashable,
    FaultPoints,
    NetworkFaults,
    Pausable,
    Redeployable,
)
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.history import History
    from harness.schedules.generate import Draw
    from harness.schedules.model import Step

Params = tuple[tuple[str, Any], ...]
Problem = tuple[str, str, str]  # (parameter, what is wrong, how to fix it)

# A crashed host restarts this many scenario seconds after its crash (the simulator's and the
# real engines' supervisors): the crash has healed by then.
RESTART_AFTER: Final = 5.0
# A shrunk step's duration: long enough to matter, short enough to read.
SHRUNK_DURATION: Final = 30.0


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One kind of fault a schedule can hold (`do = "<name>"` in a scenario file)."""

    name: str
    description: str
    # Scenario-file parameters: the required ones, and the optional ones with their defaults.
    required: tuple[str, ...]
    optional: Mapping[str, Any]
    # The protocol a runtime implements to take it (`harness.adapters.base`), or None when
    # the world applies it (a service fault needs the service's world endpoint instead).
    capability: type | None
    # Applies a step of this kind to a runtime, recording it in the history.
    apply: Callable[[Any, Step, History], None]
    # The scenario seconds a step of this kind lasts after its `at` (None: its own
    # `duration`; a redeploy or a service fault is over when it happened, as far as the
    # schedule can tell: a service fault waits for its service's next call).
    lasts: float | None = 0.0
    # Draws the parameters of a generated step (`host` drawn for every fault, first).
    draw: Callable[[Draw, str], Params] | None = None
    # The record kind the runner writes for it, and the one that ends its window on the
    # timeline when it has no duration (None: an instant).
    record: str = ""
    ends_on: str | None = None
    # Without a duration and without the record that ends it, a window open until the run's
    # end (a pause) rather than an instant (a crash no host restart followed).
    open_until_end: bool = False
    # The parameters whose value a shrinker may make simpler, simplest first.
    shrinks: Callable[[Params], Iterator[tuple[str, Any]]] = field(default=lambda _: iter(()))
    # The kinds of step it counts as in the report (`harness.schedules.model.STEP_KINDS`),
    # and which of them a step's parameters make it (None: its name, the only one).
    step_kinds: tuple[str, ...] = ()
    step_kind_of: Callable[[Params], str] | None = None
    # Checks a scenario file's parameters (already with their defaults), normalising them in
    # place (an older fault name): None, or the (parameter, problem, fix) of the first wrong.
    check: Callable[[dict[str, Any]], Problem | None] = field(default=lambda _: None)

    def heals_at(self, step: Step) -> float:
        """When a step of this kind has healed, in scenario seconds."""
        if self.lasts is None:
            return step.at + float(step.get("duration") or 0.0)
        return step.at + self.lasts

    def kinds(self) -> tuple[str, ...]:
        """Every kind of step it can be, as the report counts them."""
        return self.step_kinds or (self.name,)

    def step_kind(self, step: Step) -> str:
        """The kind of step `step` is, as the report counts it."""
        return self.name if self.step_kind_of is None else self.step_kind_of(step.params)

    def simpler(self, step: Step) -> Iterator[tuple[str, Any]]:
        """(parameter, simpler value) pairs for `step`, simplest first."""
        return self.shrinks(step.params)


# -- how the runner applies each kind (harness.run calls `apply`)


def _gc_pause(runtime: Any, step: Step, history: History) -> None:
    host = runtime.pause_host(step.get("host"), step.get("duration"))
    history.add("fault.gc-pause", "info", host=host, data={"duration": step.get("duration")})


def _crash(runtime: Any, step: Step, history: History) -> None:
    host = runtime.crash_host(step.get("host"))
    history.add("fault.crash", "info", host=host)


def _deploy(runtime: Any, step: Step, history: History) -> None:
    dep = runtime.deploy(step.get("version"))
    history.add("fault.redeploy", "info", deployment=dep)


def _service_fault(runtime: Any, step: Step, history: History) -> None:
    runtime.world.services.inject(step.get("service"), step.get("fault"), step.get("times"))
    history.add("fault.service-fault", "info", data={"service": step.get("service"),
                                                     "fault": step.get("fault"),
                                                     "times": step.get("times")})


def _arm(runtime: Any, step: Step, history: History) -> None:
    runtime.arm(step.get("point"), step.get("action"), step.get("duration"), step.get("times"))
    history.add("fault.arm", "info", data={"point": step.get("point"),
                                           "action": step.get("action")})


def _network(runtime: Any, step: Step, history: History) -> None:
    runtime.toxic(step.get("link"), step.get("kind"), step.get("duration"))
    history.add("fault.network", "info", data={"link": step.get("link"),
                                               "kind": step.get("kind"),
                                               "duration": step.get("duration")})


def _clock_jump(runtime: Any, step: Step, history: History) -> None:
    # Recorded where the jump starts: the checkers read [time, time + duration] as time the
    # runtime never had.
    history.add("fault.clock-jump", "info", data={"duration": step.get("duration")})
    runtime.clock_jump(step.get("duration"))


# -- how each kind is generated (harness.schedules.generate calls `draw`); the order of the
# draws is part of every generated schedule: changing it changes them all.

_POINTS: Final = tuple(sorted(POINTS))


def _draw_gc_pause(d: Draw, host: str) -> Params:
    return (("host", host), ("duration", float(d.pick((5, 30, 90, 300, 900)))))


def _draw_crash(d: Draw, host: str) -> Params:
    return (("host", host),)


def _draw_deploy(d: Draw, host: str) -> Params:
    return (("version", ""),)


def _draw_service_fault(d: Draw, host: str) -> Params:
    return (("service", d.pick(SERVICES)), ("fault", d.pick(FAULT_NAMES)), ("times", 1))


def _draw_arm(d: Draw, host: str) -> Params:
    action = d.pick(("crash", "pause"))
    duration = float(d.pick((30, 120, 600)))
    return (("point", d.pick(_POINTS)), ("action", action), ("duration", duration),
            ("times", 1))


def _draw_network(d: Draw, host: str) -> Params:
    return (("link", d.pick(LINKS)), ("kind", d.pick(TOXICS)),
            ("duration", float(d.pick((10, 60, 300)))))


def _draw_clock_jump(d: Draw, host: str) -> Params:
    return (("duration", float(d.pick((30, 600, 3 * 3600)))),)


# -- what each kind accepts in a scenario file (harness.schedules.scenario_file calls `check`)


def _check_service_fault(params: dict[str, Any]) -> Problem | None:
    if params["service"] not in SERVICES:
        return ("service", f"unknown service {params['service']!r}",
                f"use one of {list(SERVICES)}")
    fault = params["fault"]
    if fault not in FAULT_NAMES and fault not in FAULT_ALIASES:
        return ("fault", f"unknown {params['service']} fault {fault!r}",
                f"use one of {list(FAULT_NAMES)}")
    params["fault"] = FAULT_ALIASES.get(fault, fault)
    return None


def _check_arm(params: dict[str, Any]) -> Problem | None:
    if params["point"] not in POINTS:
        return ("point", f"unknown fault point {params['point']!r}",
                f"use one of {sorted(POINTS)}")
    if params["action"] not in ("crash", "pause"):
        return "action", f"unknown action {params['action']!r}", "use 'crash' or 'pause'"
    return None


def _check_network(params: dict[str, Any]) -> Problem | None:
    if params["link"] not in LINKS:
        return "link", f"unknown link {params['link']!r}", f"use one of {list(LINKS)}"
    if params["kind"] not in TOXICS:
        return ("kind", f"unknown network fault {params['kind']!r}",
                f"use one of {list(TOXICS)}")
    return None


# -- how each kind shrinks (harness.schedules.shrink calls `simpler`)


def _shorter(params: Params) -> Iterator[tuple[str, Any]]:
    duration = dict(params).get("duration")
    if isinstance(duration, float) and duration > SHRUNK_DURATION:
        yield "duration", SHRUNK_DURATION


def _plainer_fault(params: Params) -> Iterator[tuple[str, Any]]:
    fault = dict(params).get("fault")
    if fault in FAULT_NAMES:
        for simpler in FAULT_NAMES[:FAULT_NAMES.index(fault)]:
            yield "fault", simpler


def _arm_kind(params: Params) -> str:
    return f"arm ({dict(params).get('action')})"


def _service_fault_kind(params: Params) -> str:
    p = dict(params)
    return f"service-fault ({p.get('service')} {p.get('fault')})"


_KINDS: Final = (
    FaultKind(
        "gc-pause", "a host stops for `duration` (a GC pause, SIGSTOP), then goes on",
        (), {"host": "owner", "duration": 120.0}, Pausable, _gc_pause, lasts=None,
        draw=_draw_gc_pause, record="fault.gc-pause", ends_on="host.resumed",
        open_until_end=True, shrinks=_shorter),
    FaultKind(
        "crash", "a host dies (SIGKILL) and restarts", (), {"host": "owner"}, Crashable,
        _crash, lasts=RESTART_AFTER, draw=_draw_crash, record="fault.crash",
        ends_on="host.restarted"),
    FaultKind(
        "deploy", "a new version is deployed; the old one drains", (), {"version": ""},
        Redeployable, _deploy, draw=_draw_deploy, record="fault.redeploy"),
    FaultKind(
        "service-fault", "a world service fails its next `times` calls the way `fault` says",
        ("service", "fault"), {"times": 1}, None, _service_fault,
        draw=_draw_service_fault, record="fault.service-fault", shrinks=_plainer_fault,
        check=_check_service_fault,
        step_kinds=tuple(f"service-fault ({service} {fault})" for service in SERVICES
                         for fault in FAULT_NAMES),
        step_kind_of=_service_fault_kind),
    FaultKind(
        "arm", "the next `times` arrivals at a fault point crash or pause their host",
        ("point",), {"action": "crash", "duration": 120.0, "times": 1}, FaultPoints, _arm,
        lasts=None, draw=_draw_arm, record="fault.arm", shrinks=_shorter,
        step_kinds=("arm (crash)", "arm (pause)"), step_kind_of=_arm_kind, check=_check_arm),
    FaultKind(
        "network", "a network link degrades for `duration` (Toxiproxy)", ("link", "kind"),
        {"duration": 60.0}, NetworkFaults, _network, lasts=None, draw=_draw_network,
        record="fault.network", shrinks=_shorter, check=_check_network),
    FaultKind(
        "clock-jump", "the clock jumps forward by `duration`", ("duration",), {},
        ClockEffects, _clock_jump, lasts=None, draw=_draw_clock_jump,
        record="fault.clock-jump"),
)

FAULTS: Final[Mapping[str, FaultKind]] = MappingProxyType({k.name: k for k in _KINDS})
"""Every fault kind by name, in the order the generator draws from."""

BY_RECORD: Final[Mapping[str, FaultKind]] = MappingProxyType({k.record: k for k in _KINDS})
"""Every fault kind by the record kind the runner writes for it (`fault.redeploy`: deploy)."""


def fault(name: str) -> FaultKind:
    """The fault kind called `name`; a ConfigError naming the valid ones if none."""
    found = FAULTS.get(name)
    if found is None:
        raise ConfigError(f"Expected a fault kind but got {name!r}; choose one of: "
                          f"{', '.join(FAULTS)}")
    return found


def is_fault(action: str) -> bool:
    return action in FAULTS


def healed_at(steps: Iterable[Step]) -> float | None:
    """When the last fault of `steps` has healed (None: they hold none)."""
    heal = None
    for step in steps:
        kind = FAULTS.get(step.action)
        if kind is None:
            continue
        end = kind.heals_at(step)
        heal = end if heal is None else max(heal, end)
    return heal
