"""The public face of the package is small and pinned; importing it costs nothing."""

from __future__ import annotations

import subprocess
import sys

import harness

PUBLIC = [
    "Adapter", "AnchoredScale", "KitAdapter", "KitRuntime", "Timing", "Turn",
    "AdapterContractError", "CheckConfig", "DurableChaosError", "History",
    "Record", "Result", "RunContext", "RunOptions", "RunOutcome", "Runtime", "Schedule",
    "ScenarioError", "Simulator", "Step", "SuiteOutcome", "SystemClock", "UsageError",
    "VirtualClock", "check_adapter", "explore", "load_adapter", "load_scenario",
    "run_schedule", "run_suite", "write_report",
]


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert harness.__all__ == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(harness, name) is not None


def test_importing_the_plugin_imports_neither_hypothesis_nor_the_simulator() -> None:
    code = ("import sys, harness, harness.plugin; "
            "print(sorted(m for m in ('hypothesis', 'harness.sim', 'harness.run', "
            "'freezegun') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
