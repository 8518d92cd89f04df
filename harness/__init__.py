"""durable-chaos: a testing and chaos harness for durable agent runtimes.

The public face is small; everything here is imported lazily (PEP 562), so that importing the
pytest plugin (`harness.plugin`) costs nothing for projects that never ask for chaos.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # running
    "run_schedule": "harness.run",
    "run_suite": "harness.suite",
    "explore": "harness.exploration",
    "RunOptions": "harness.run",
    # schedules
    "Schedule": "harness.schedules.model",
    "Step": "harness.schedules.model",
    "load_scenario": "harness.schedules.scenario_file",
    # adapters
    "Adapter": "harness.adapters",
    "Runtime": "harness.adapters",
    "RunContext": "harness.adapters",
    "load_adapter": "harness.adapters",
    # the kit for real-engine adapters
    "KitAdapter": "harness.kit",
    "KitRuntime": "harness.kit",
    "Timing": "harness.kit",
    "Turn": "harness.kit",
    "AnchoredScale": "harness.scaling",
    # engine, clock, history
    "Simulator": "harness.sim",
    "VirtualClock": "harness.clock",
    "SystemClock": "harness.clock",
    "History": "harness.history",
    "Record": "harness.history",
    # judging and reporting
    "CheckConfig": "harness.checkers.base",
    "Result": "harness.checkers.base",
    "RunOutcome": "harness.outcome",
    "SuiteOutcome": "harness.outcome",
    "write_report": "harness.report",
    "check_adapter": "harness.conformance",
    # errors
    "DurableChaosError": "harness.errors",
    "UsageError": "harness.errors",
    "ScenarioError": "harness.errors",
    "AdapterContractError": "harness.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
