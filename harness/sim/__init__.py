"""The deterministic durable-execution simulator (the embedded default engine)."""

from harness.sim.engine import EntryFuture, SimContext, Simulator
from harness.sim.model import Attempt, Deployment, Entry, Host, Invocation

__all__ = [
    "Attempt",
    "Deployment",
    "Entry",
    "EntryFuture",
    "Host",
    "Invocation",
    "SimContext",
    "Simulator",
]
