"""What a runtime can do beyond the `Runtime` protocol: the capabilities a step may need.

A protocol per capability, checked with `isinstance` before a step is applied: a runtime that
lacks one has the step skipped and named, never failed. Their own module so that the fault
kinds (harness.faults), which name the capability each needs, stand below the adapters.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

__all__ = ["Backgroundable", "Cancellable", "ClockEffects", "Crashable", "FaultPoints",
           "NetworkFaults", "Pausable", "Redeployable"]


@runtime_checkable
class Backgroundable(Protocol):
    """A runtime whose tool calls can be sent to the background (the turn resumes with a
    placeholder; the real result arrives later as a new message)."""

    def background(self, session: str, tool_call: str) -> None: ...


@runtime_checkable
class Cancellable(Protocol):
    """A runtime whose sessions can be cancelled (stop the turn, stop spending)."""

    def cancel(self, session: str) -> None: ...


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
    """A runtime that stops at named points of its code when a schedule arms them.

    `points` lists the names it supports; arming any other point is a skipped step naming
    the point (a point the code never reaches would otherwise pass as "armed, nothing
    happened").
    """

    points: Collection[str]

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        """At the next `times` arrivals at `point`, crash or pause the host running there."""
        ...


@runtime_checkable
class ClockEffects(Protocol):
    def clock_jump(self, seconds: float) -> None: ...


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
