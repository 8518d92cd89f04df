"""Import rules of the harness, read from the source (every import, a function's own too).

What they keep: the supervision and evidence modules stand alone (they import only the
error hierarchy), so that what protects the judging process depends on nothing it guards;
the judging side (suite, CLI, plugin, fan-out) never calls into an adapter itself: runs and
the contract check are jobs sent to a worker (harness.jobs); the layers of the run path
(adapters, schedules, the runner, conformance, fixtures and plugin) import only what is
below them; no module reaches into another's private names; the public packages say what
they export (`__all__`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"


ROOT = HARNESS.parent
# Where the private-name rule holds: the harness, the contract and the reference.
PACKAGES = ("harness", "contract", "reference_impl")


def _tree(module: str) -> ast.Module:
    return ast.parse((HARNESS / f"{module}.py").read_text(encoding="utf-8"))


def _modules(pattern: str) -> list[str]:
    """The modules of harness/ matching a glob (`adapters/*`), as `_imports` takes them."""
    return sorted(str(path.relative_to(HARNESS).with_suffix(""))
                  for path in HARNESS.glob(f"{pattern}.py"))


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


def _banned(module: str, banned: str) -> list[str]:
    return sorted(n for n in _imports(module) if n == banned or n.startswith(banned + "."))


@pytest.mark.parametrize(("module", "banned"), [
    ("suite", "harness.sim"),
    ("cli", "harness.sim"),
])
def test_module_does_not_import(module: str, banned: str) -> None:
    assert not _banned(module, banned)


# The import rules of the run path (issue 23): each layer imports only what is below it.
RULES = [
    # The adapters drive a runtime; judging it is not theirs (the thresholds they hand the
    # checkers, `CheckConfig`, are the contract's).
    ("adapters/*", "harness.checkers", set()),
    # The contract check opens a runtime as a run does (harness.adapters.open_run), without
    # the runner.
    ("conformance", "harness.run", set()),
    ("conformance", "harness.exploration", set()),
    ("conformance", "harness.suite", set()),
    # Loaded when pytest starts, for projects that may never ask for chaos.
    ("fixtures", "harness.sim", set()),
    ("plugin", "harness.sim", set()),
    # A schedule is data: reading or generating one needs no runtime and no checker.
    ("schedules/*", "harness.adapters", set()),
    ("schedules/*", "harness.checkers", set()),
    # The runner runs and judges; the report and the engine are not its business.
    ("run", "harness.report", set()),
    ("run", "harness.sim", set()),
    ("exploration", "harness.report", set()),
    ("exploration", "harness.sim", set()),
]


@pytest.mark.parametrize(("pattern", "banned", "allowed"), RULES,
                         ids=[f"{p}-not-{b}" for p, b, _ in RULES])
def test_the_layers_of_the_run_path(pattern: str, banned: str, allowed: set[str]) -> None:
    modules = _modules(pattern)
    assert modules, f"no module matches {pattern}"
    broken = {m: found for m in modules
              if (found := [n for n in _banned(m, banned) if n not in allowed])}
    assert not broken, broken


def test_an_import_rule_sees_an_import_hidden_in_a_function(tmp_path: Path) -> None:
    # The rules read every import of a module, a function's own too: hiding one there does
    # not pass them.
    tree = ast.parse("def f():\n    from harness.checkers import ALL\n")
    hidden = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert hidden == {"harness.checkers"}
    assert "harness.checkers" in _imports_of(tree)


def _imports_of(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _private_imports(path: Path) -> list[str]:
    """The private names (`_x`, not dunders) `path` imports from another module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [f"{node.module}.{alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_imports_a_private_name_from_another() -> None:
    # What two modules share is public in its home; a private name stays in its module.
    # (A private module behind a package, such as harness.checkers._common, is imported by
    # its own package's modules under public names.)
    found = {str(path.relative_to(ROOT)): names
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if (names := _private_imports(path))}
    assert not found, found


def test_the_private_name_rule_catches_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from harness.run import _replay, wall\nfrom x import __version__\n")
    assert _private_imports(module) == ["harness.run._replay"]


def test_every_public_package_says_what_it_exports() -> None:
    packages = [path for package in PACKAGES for path in (ROOT / package).rglob("__init__.py")]
    assert packages
    missing = [str(path.relative_to(ROOT)) for path in packages
               if not any(isinstance(node, ast.Assign | ast.AnnAssign)
                          and "__all__" in ast.unparse(node)
                          for node in ast.parse(path.read_text(encoding="utf-8")).body)]
    assert not missing, missing


def test_the_re_export_shim_of_the_runner_is_gone() -> None:
    # One home per name: harness.run, harness.exploration, harness.suite, harness.progress.
    assert not (HARNESS / "runner.py").exists()
    users = [str(p.relative_to(ROOT)) for d in ("harness", "tests", "benchmarks", "examples")
             for p in (ROOT / d).rglob("*.py")
             if "harness.runner" in p.read_text(encoding="utf-8")
             and p != Path(__file__).resolve()]
    assert not users, users


# What runs adapter code: only a worker calls these (harness.jobs, harness.fanout.run_batch).
ADAPTER_ENTRIES = {"run_schedule", "check_adapter", "explore", "preflight"}


@pytest.mark.parametrize("module", ["suite", "cli", "plugin"])
def test_the_judging_process_never_calls_an_adapter_itself(module: str) -> None:
    called = {node.func.id if isinstance(node.func, ast.Name) else
              node.func.attr if isinstance(node.func, ast.Attribute) else ""
              for node in ast.walk(_tree(module)) if isinstance(node, ast.Call)}
    assert not called & ADAPTER_ENTRIES, called & ADAPTER_ENTRIES


def test_steps_are_counted_from_data_never_by_scanning_toml() -> None:
    # A run's steps travel as data (`RunOutcome.steps`, the `Schedule`); only the schedule
    # package reads and writes scenario TOML. (fixtures.py tells a schedule's text from a
    # path by it, and counts nothing.)
    scanning = sorted(str(path.relative_to(HARNESS)) for path in HARNESS.rglob("*.py")
                      if "schedules" not in path.parts and path.name != "fixtures.py"
                      and any(isinstance(node, ast.Constant) and node.value == "[[step]]"
                              for node in ast.walk(ast.parse(path.read_text("utf-8")))))
    assert not scanning, scanning


def _compares_to_sim(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Compare)
               and any(isinstance(c, ast.Constant) and c.value == "sim"
                       for c in [node.left, *node.comparators])
               for node in ast.walk(tree))


@pytest.mark.parametrize("module", ["run", "conformance", "fixtures"])
def test_the_runner_conformance_and_the_fixtures_open_a_run_one_way(module: str) -> None:
    # One open_run (harness.adapters.opening): the history, the runtime's thresholds and the
    # clock its body runs on are chosen there, never by the engine's name here.
    called = {node.func.id if isinstance(node.func, ast.Name) else ""
              for node in ast.walk(_tree(module)) if isinstance(node, ast.Call)}
    assert "open_run" in called
    assert not _compares_to_sim(_tree(module))


def test_only_the_adapters_and_the_runtimes_branch_on_the_simulated_engine() -> None:
    # The runtime classes (the kit's, the SDK's, the simulator's own) may; the run path may
    # not: it asks harness.adapters (`deterministic`, `runtime_clock`, `suite_clock`).
    runtimes = {"adapters", "sim", "sdk"}
    branching = sorted(str(path.relative_to(HARNESS)) for path in HARNESS.rglob("*.py")
                       if not runtimes & set(path.relative_to(HARNESS).parts[:-1])
                       and path.name != "kit.py"
                       and _compares_to_sim(ast.parse(path.read_text("utf-8"))))
    assert not branching, branching
    assert _compares_to_sim(ast.parse('if adapter.engine == "sim": pass'))


def _module_of(name: str) -> str | None:
    """The harness module (`schedules/model`) an imported name lives in, if it is one."""
    parts = name.split(".")[1:]
    while parts:
        path = HARNESS.joinpath(*parts)
        if path.with_suffix(".py").is_file():
            return "/".join(parts)
        if (path / "__init__.py").is_file():
            return "/".join([*parts, "__init__"])
        parts = parts[:-1]
    return None


def _reached(module: str) -> set[str]:
    """Every harness module `module` imports, directly or through another."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for name in _imports(todo.pop()):
            found = _module_of(name) if name.startswith("harness.") else None
            if found is not None and found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


@pytest.mark.parametrize("pattern", ["schedules/*", "faults", "capabilities"])
def test_a_schedule_reaches_neither_adapters_nor_checkers_through_another_module(
        pattern: str) -> None:
    # Through the fault kinds too: a fault names the capability it needs (harness.capabilities),
    # never the adapters' module, so reading a scenario file loads no adapter.
    for module in _modules(pattern):
        reached = _reached(module)
        assert not {m for m in reached if m.startswith(("adapters/", "checkers/"))}, (
            module, sorted(reached))
