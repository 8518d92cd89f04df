"""Import rules of the harness, read from the source (every import, a function's own too).

What they keep: the supervision and evidence modules stand alone (they import only the
error hierarchy), so that what protects the judging process depends on nothing it guards;
the judging side (suite, CLI, plugin, fan-out) never calls into an adapter itself: runs and
the contract check are jobs sent to a worker (harness.jobs); the plugin does not import the
simulator, the runner does not import the report.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"


def _tree(module: str) -> ast.Module:
    return ast.parse((HARNESS / f"{module}.py").read_text(encoding="utf-8"))


def _imports(module: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith(("harness", "reference_impl"))}


@pytest.mark.parametrize(("module", "allowed"), [
    ("supervisor", {"harness.errors"}),
    ("evidence", {"harness.errors"}),
])
def test_supervision_and_evidence_import_only_the_error_hierarchy(
        module: str, allowed: set[str]) -> None:
    imported = {name for name in _imports(module) if not any(
        name == a or name.startswith(a + ".") for a in allowed)}
    assert not imported, imported


@pytest.mark.parametrize(("module", "banned"), [
    ("plugin", "harness.sim"),
    ("run", "harness.report"),
    ("conformance", "harness.suite"),
    ("suite", "harness.sim"),
    ("cli", "harness.sim"),
])
def test_module_does_not_import(module: str, banned: str) -> None:
    assert not [n for n in _imports(module) if n == banned or n.startswith(banned + ".")]


# What runs adapter code: only a worker calls these (harness.jobs, harness.fanout.run_batch).
ADAPTER_ENTRIES = {"run_schedule", "check_adapter", "explore", "preflight"}


@pytest.mark.parametrize("module", ["suite", "cli", "plugin"])
def test_the_judging_process_never_calls_an_adapter_itself(module: str) -> None:
    called = {node.func.id if isinstance(node.func, ast.Name) else
              node.func.attr if isinstance(node.func, ast.Attribute) else ""
              for node in ast.walk(_tree(module)) if isinstance(node, ast.Call)}
    assert not called & ADAPTER_ENTRIES, called & ADAPTER_ENTRIES
