"""Engine observers: a durable engine's own state, recorded as the checkers' records.

`RestateObserver`, `TemporalObserver` and `DbosObserver` each poll their engine on a thread of
their own and write `invocation.*` and `deployment.*` records (and, given the agent's turn
mapping and the world, `turn.*` and the approval cards' `tool.*`) into a run's history, so a
user's adapter drives only its application. See docs/observers.md.

The engine modules are imported on first use: each needs its own extra.
"""

from __future__ import annotations

import importlib
from typing import Any

from harness.observers.base import (
    DeploymentState,
    EngineObserver,
    InvocationState,
    Snapshot,
    Status,
    TurnOf,
)

_LAZY = {
    "RestateObserver": "harness.observers.restate",
    "TemporalObserver": "harness.observers.temporal",
    "DbosObserver": "harness.observers.dbos",
    "WorkerHosts": "harness.observers.hosts",
}

__all__ = ["DeploymentState", "EngineObserver", "InvocationState", "Snapshot", "Status",
           "TurnOf", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.observers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
