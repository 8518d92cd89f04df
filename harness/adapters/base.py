"""The adapter protocol: how the harness drives a runtime and what it observes.

An adapter connects the harness to one runtime. `Adapter.open(ctx)` starts a runtime for one
run; the `Runtime` drives it (messages, answers, letting time pass) and exposes the world it
acts on. Everything else is optional, so that a runtime never has to fake what it cannot do:

- small separate protocols: `Backgroundable`, `Cancellable`, `Pausable`, `Crashable`,
  `Redeployable`, `FaultPoints` (with the list of `points` it supports), `ClockEffects`,
  `NetworkFaults`;
- declared attributes of the runtime: `world_endpoints`, the parts of the harness's world its
  code really calls (`contract.services.SERVICES`: "provider", the model provider; "email";
  "payments"; "identity", the identity/catalog, so access revocation reaches it; "cards", the
  approval card service): a service fault reaches only a declared endpoint. The world object
  exists either way, so only a declaration can tell the harness that a fault there would
  change anything.

A step that needs what the runtime lacks is not applied: the run records it as skipped, with
the capability it lacks (`lacking`), and the CLI summary, the report and JUnit list it. It
is never counted as a step that passed. An adapter may also say which invariants its design
promises (`claims`, see `claimed_invariants`); the others are shown "not claimed".

What the harness observes comes through the history: the runtime writes its events there
(the simulator's own events, the reference implementation's observations, the world's
deliveries), and `finish()` records the final committed state (thread logs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any, Protocol, runtime_checkable

from contract.ports import Config
from contract.services import SERVICES
from contract.threadlog import LogEntry
from contract.thresholds import CheckConfig
from harness.capabilities import (
    Backgroundable,
    Cancellable,
    ClockEffects,
    Crashable,
    NetworkFaults,
    Pausable,
    Redeployable,
)
from harness.errors import UsageError
from harness.faults import FAULTS
from harness.history import History
from harness.world import World


@dataclass(frozen=True)
class RunContext:
    """What the harness hands an adapter for one run."""

    seed: int
    history: History
    config: Config = field(default_factory=Config)
    hosts: int = 2


@runtime_checkable
class Runtime(Protocol):
    world: World

    def now(self) -> float:
        """Seconds since the run started (virtual on the simulator)."""
        ...

    def advance(self, until: float) -> None:
        """Let the runtime run until time `until`."""
        ...

    def send_message(self, session: str, message: dict[str, object]) -> None: ...

    def answer(self, tool_call: str, decision: str, user: str) -> None: ...

    def finish(self) -> None:
        """Record the final committed state (e.g. the thread logs) into the history."""
        ...

    def close(self) -> None: ...


RUNTIME_MEMBERS: tuple[str, ...] = ("world", "now", "advance", "send_message", "answer",
                                    "finish", "close")


def not_a_runtime(runtime: object) -> str | None:
    """Why what `open(ctx)` returned is not a `Runtime` (the members it lacks), or None."""
    missing = [name for name in RUNTIME_MEMBERS if not hasattr(runtime, name)]
    if not missing:
        return None
    return (f"open(ctx) returned {type(runtime).__name__}, which lacks {', '.join(missing)}; "
            "return a harness.adapters.base.Runtime")


CAPABILITY_OF: dict[str, type] = {
    "background": Backgroundable,
    "cancel": Cancellable,
    # Each fault kind's capability is in its one home, harness.faults (which imports the
    # protocols from here): `capability_of` finds it there.
}
"""The capabilities a person's steps need (a fault's: `capability_of`)."""


WORLD_ENDPOINTS: tuple[str, ...] = SERVICES
"""Parts of the harness's world a runtime may declare it calls (`Runtime.world_endpoints`)."""
ENDPOINT_OF: dict[str, str] = {"revoke": "identity", "grant": "identity"}
"""Schedule actions that act through the world, and the endpoint they need (a
`service-fault` needs the endpoint of its own `service`)."""


def world_endpoints(runtime: object) -> frozenset[str]:
    """The world endpoints `runtime` declares (none without a declaration).

    A `UsageError` naming the attribute and the valid names if one is unknown: a typo would
    otherwise skip every provider fault without a word.
    """
    declared = getattr(runtime, "world_endpoints", ())
    if isinstance(declared, str):
        declared = (declared,)
    names = frozenset(str(name) for name in declared)
    unknown = sorted(names - set(WORLD_ENDPOINTS))
    if unknown:
        raise UsageError(f"{type(runtime).__name__}.world_endpoints: unknown endpoint "
                         f"{unknown[0]!r}; use some of {', '.join(WORLD_ENDPOINTS)}")
    return names


# The capabilities made of methods only. `isinstance` against such a protocol first walks
# the protocol's members (about 7 us, on every fault step of every run), then answers True
# if `issubclass` of the object's class does (cached by abc: 0.2 us), else looks at the
# instance; `_has` asks `issubclass` first, then `isinstance` as before. A protocol with a
# data member (`FaultPoints.points`) supports no `issubclass`.
_METHODS_ONLY: frozenset[type] = frozenset({
    Backgroundable, Cancellable, Pausable, Crashable, Redeployable, ClockEffects,
    NetworkFaults})


def capability_of(action: str) -> type | None:
    """The protocol a runtime needs to take a step of `action` (None: none)."""
    found = CAPABILITY_OF.get(action)
    if found is not None:
        return found
    kind = FAULTS.get(action)
    return None if kind is None else kind.capability


def _has(runtime: object, capability: type) -> bool:
    """`isinstance(runtime, capability)`, sooner for a protocol of methods only."""
    if capability in _METHODS_ONLY and issubclass(runtime.__class__, capability):
        return True
    return isinstance(runtime, capability)


def lacking(runtime: object, action: str, point: str | None = None,
            service: str | None = None) -> str | None:
    """What `runtime` lacks to take a step of `action` (None: it can take it); `point` and
    `service` are an `arm` step's fault point and a `service-fault` step's service.

    The answer names the capability, as the report shows it: a protocol ("Backgroundable"),
    a world endpoint ("world endpoint 'provider'") or a fault point ("fault point 'x'").
    """
    capability = capability_of(action)
    if capability is not None and not _has(runtime, capability):
        return capability.__name__
    endpoint = service if action == "service-fault" else ENDPOINT_OF.get(action)
    if endpoint is not None and endpoint not in world_endpoints(runtime):
        return f"world endpoint {endpoint!r}"
    if action == "arm" and point is not None:
        points = getattr(runtime, "points", ())
        if point not in points:
            return f"fault point {point!r}"
    return None


class Adapter(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def engine(self) -> str:
        """'sim': deterministic, virtual time; 'real': real processes (virtual time where
        the runtime keeps the engine's timers)."""
        ...

    def check_config(self) -> CheckConfig:
        """The thresholds the checkers must judge this runtime by."""
        ...

    def open(self, ctx: RunContext) -> Runtime: ...


@runtime_checkable
class Preflight(Protocol):
    """An adapter that can tell, before any run, whether it can run here at all.

    `preflight()` checks what `open()` will need (binaries installed, URLs answering) and
    raises `harness.errors.ComponentUnavailable` or `UsageError` naming what is missing and
    how to fix it. Optional: without it the first `open()` is the check, and an `open()` that
    fails on an adapter's first run stops the suite all the same.
    """

    def preflight(self) -> None: ...



def claimed_invariants(adapter: Any, override: Sequence[str] | None,
                       known: Sequence[str]) -> tuple[str, ...]:
    """The invariants the run is judged by: `override` (`--invariants`, `chaos_invariants`)
    if given, else the adapter's `claims`, else all of `known`.

    Every name must be one of `known`: a `UsageError` names the nearest valid one.
    """
    source = "--invariants"
    names: Sequence[str] | None = override
    if names is None:
        names = getattr(adapter, "claims", None)
        source = f"adapter {getattr(adapter, 'name', '?')!r}: claims"
    if names is None:
        return tuple(known)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    check_invariant_names(names, known, source)
    if not names:
        # Nothing claimed, nothing judged: such a run would exit 0 without having judged
        # anything.
        raise UsageError(f"{source}: names no invariant, so a run would judge nothing; list "
                         f"at least one of: {', '.join(known)}")
    return tuple(n for n in known if n in set(names))


def check_invariant_names(names: Sequence[str], known: Sequence[str], source: str) -> None:
    """A `UsageError` for the first name not in `known`, with the nearest valid name."""
    for name in names:
        if name not in known:
            near = get_close_matches(name, known, n=1, cutoff=0.0)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise UsageError(f"{source}: unknown invariant {name!r}; {hint}valid: "
                             f"{', '.join(known)}")


def record_committed(history: History, thread_id: str, entry: LogEntry) -> None:
    """`threadlog.committed` for one entry of `thread_id`'s log, read back at the end of a
    run: its place, owner and kind, its id, and the turn it was filed under (its payload's
    `turn`, as `threadlog.appended` reports it), so a rule matches it to a turn by data."""
    turn = entry.payload.get("turn")
    history.add("threadlog.committed", session=thread_id, epoch=entry.epoch,
                turn=None if turn is None else str(turn),
                data={"seq": entry.seq, "owner": entry.owner, "kind": entry.kind,
                      "entry": entry.payload.get("id")})
