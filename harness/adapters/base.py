"""The adapter protocol: how the harness drives a runtime and what it observes.

An adapter connects the harness to one runtime. `Adapter.open(ctx)` starts a runtime for one
run; the `Runtime` drives it (messages, answers, background, cancel, letting time pass) and
exposes the world it acts on. Faults are optional capabilities, small separate protocols: a
runtime that cannot be paused simply lacks `Pausable`, the faults that need it are skipped and
the report says which.

What the harness observes comes through the history: the runtime writes its events there
(the simulator's own events, the reference implementation's observations, the world's
deliveries), and `finish()` records the final committed state (thread logs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from contract.ports import Config
from harness.checkers.base import CheckConfig
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

    def background(self, session: str, tool_call: str) -> None: ...

    def cancel(self, session: str) -> None: ...

    def finish(self) -> None:
        """Record the final committed state (e.g. the thread logs) into the history."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Pausable(Protocol):
    def pause_host(self, host: str, duration: float) -> str:
        """GC-pause a host (selector: 'owner', 'any', 'latest/N' or an id); returns its id."""
        ...


@runtime_checkable
class Crashable(Protocol):
    def crash_host(self, host: str) -> str: ...


@runtime_checkable
class Redeployable(Protocol):
    def deploy(self, version: str) -> str:
        """Release a new version; new invocations go to it. Returns the deployment id."""
        ...


@runtime_checkable
class FaultPoints(Protocol):
    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        """At the next `times` arrivals at `point`, crash or pause the host running there."""
        ...


@runtime_checkable
class ClockEffects(Protocol):
    def clock_jump(self, seconds: float) -> None: ...


LINKS: tuple[str, ...] = ("pg", "world")
"""Network links a runtime may expose: workers -> PostgreSQL ("pg"), workers -> the world
("world": the model provider, outbox, ledger, identity, catalog and cards)."""
TOXICS: tuple[str, ...] = ("latency", "timeout", "reset_peer", "down")


@runtime_checkable
class NetworkFaults(Protocol):
    """A runtime whose network links can be degraded for a while (Toxiproxy)."""

    def toxic(self, link: str, kind: str, duration: float) -> None:
        """Degrade `link` with `kind` for `duration` seconds of scenario time, then heal it.

        Kinds: "latency" (every answer delayed), "timeout" (nothing gets through, and the
        connections are closed when the fault ends), "reset_peer" (every connection that
        receives an answer is reset instead: the other side had done the work), "down" (the
        link refuses connections and closes the open ones).
        """
        ...


CAPABILITY_OF = {
    "network": NetworkFaults,
    "gc-pause": Pausable,
    "crash": Crashable,
    "deploy": Redeployable,
    "arm": FaultPoints,
    "clock-jump": ClockEffects,
}


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

