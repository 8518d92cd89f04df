"""The contract package: the one source of truth between a runtime and the harness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The harness's core: everything that judges, drives or reports a run without running the
# reference implementation itself. Adapters that run the reference (adapters/sim.py,
# adapters/restate.py) import it inside functions, so importing them loads none of it either.
CORE = (
    "harness", "harness.adapters", "harness.adapters.base", "harness.adapters.sim",
    "harness.adapters.restate", "harness.checkers", "harness.cli", "harness.conformance",
    "harness.exploration", "harness.fanout", "harness.history", "harness.observers",
    "harness.plugin", "harness.report", "harness.report.html", "harness.report.timeline",
    "harness.run", "harness.runner", "harness.schedules.generate", "harness.schedules.library",
    "harness.schedules.scenario_file", "harness.sim", "harness.suite", "harness.world",
    "harness.world_server",
)


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def test_importing_the_harness_core_loads_no_reference_implementation() -> None:
    program = (
        "import importlib, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'reference_impl'))\n"
        "print('contract.ports' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded, contract = done.stdout.splitlines()
    assert loaded == "[]"
    assert contract == "True"  # the harness does use the contract


def test_the_contract_imports_neither_the_harness_nor_the_reference() -> None:
    for path in sorted((ROOT / "contract").glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in ("harness", "reference_impl"), (path, name)


def test_the_reference_imports_the_contract_not_its_old_homes() -> None:
    # reference_impl/binding.py, ports.py and faultpoints.py are re-exports kept for old
    # imports; the reference itself imports from the contract.
    shims = {"binding.py", "ports.py", "faultpoints.py"}
    old = {"reference_impl.binding", "reference_impl.ports", "reference_impl.faultpoints"}
    for path in sorted((ROOT / "reference_impl").glob("*.py")):
        if path.name in shims:
            continue
        assert not old & set(_imports(path)), path


def test_the_re_exports_are_the_contract_s_own_objects() -> None:
    from contract import binding, faultpoints, ports, threadlog
    from reference_impl import binding as old_binding
    from reference_impl import faultpoints as old_faultpoints
    from reference_impl import ports as old_ports
    from reference_impl import threadlog as reference_threadlog

    assert old_binding.Context is binding.Context and old_binding.App is binding.App
    assert old_ports.Config is ports.Config and old_ports.Ports is ports.Ports
    assert reference_threadlog.StaleEpoch is threadlog.StaleEpoch
    assert old_faultpoints.POINTS is faultpoints.POINTS


def test_one_fault_point_hook_for_the_process() -> None:
    import asyncio

    from contract import faultpoints
    from reference_impl import faultpoints as old_faultpoints

    reached: list[str] = []
    previous = old_faultpoints.install(lambda name: reached.append(name))
    try:
        asyncio.run(faultpoints.reach("tool.after_intent"))
    finally:
        assert faultpoints.install(previous) is not None
    assert reached == ["tool.after_intent"]
