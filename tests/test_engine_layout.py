"""How the real-engine adapters and workers are put together.

One base for what every engine shares (`harness.adapters.engine`), one module per engine
with only its own; a worker host of one engine loads no other engine's SDK (a Temporal-only
or DBOS-only user lacks restate-sdk). No real components: these read code and imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from contract.records import unknown_kind
from harness.adapters.dbos import DbosRuntime, NaiveDbosAdapter, ReferenceDbosAdapter
from harness.adapters.engine import EngineAdapter, EngineRuntime
from harness.adapters.restate import NaiveRestateAdapter, ReferenceRestateAdapter, RestateRuntime
from harness.adapters.temporal import (
    NaiveTemporalAdapter,
    ReferenceTemporalAdapter,
    TemporalRuntime,
)
from harness.history import History

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("restate", "temporal", "dbos")
SDKS = ("restate", "temporalio", "dbos")


def test_each_engine_runtime_and_adapter_builds_on_the_shared_base_only() -> None:
    runtimes = (RestateRuntime, TemporalRuntime, DbosRuntime)
    for runtime in runtimes:
        assert runtime.__mro__[1] is EngineRuntime, runtime.__mro__
    assert {r.engine_name for r in runtimes} == set(ENGINES)
    adapters = (ReferenceRestateAdapter, ReferenceTemporalAdapter, ReferenceDbosAdapter)
    for adapter in adapters:
        assert adapter.__mro__[1] is EngineAdapter, adapter.__mro__
        # The thresholds and the common preflight are written once, in the base.
        assert "check_config" not in vars(adapter) and "preflight" not in vars(adapter)
    for naive, reference in ((NaiveRestateAdapter, ReferenceRestateAdapter),
                             (NaiveTemporalAdapter, ReferenceTemporalAdapter),
                             (NaiveDbosAdapter, ReferenceDbosAdapter)):
        assert naive().variant == "naive" and issubclass(naive, reference)
        assert naive().check_config() == reference().check_config()


def test_no_engine_module_imports_another_engines_module_or_private_names() -> None:
    for engine in ENGINES:
        path = ROOT / "harness" / "adapters" / f"{engine}.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            others = {f"harness.adapters.{e}" for e in ENGINES if e != engine}
            assert node.module not in others, (path.name, node.module)
            if node.module.startswith("harness."):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, (path.name, node.module, private)


# Each worker module imported, and its app built as the worker builds it (what that loads
# counts too).
@pytest.mark.parametrize("program, own", [
    ("import asyncio\n"
     "from reference_impl.temporal.worker import build_app_from_env\n"
     "build_app_from_env(asyncio.new_event_loop())\n", "temporalio"),
    ("import reference_impl.dbos.worker\n"
     "from reference_impl.worker_common import build_from_env\n"
     "build_from_env()\n", "dbos"),
    ("from reference_impl.worker_common import build_from_env\n"
     "build_from_env()\n", None),
], ids=["temporal", "dbos", "common"])
def test_a_worker_host_loads_no_other_engines_sdk(program: str, own: str | None) -> None:
    program += ("import sys\n"
                f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(SDKS)!r}))\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([own] if own else [])


def test_an_old_history_with_restate_stalled_still_loads() -> None:
    # Histories saved before `clock.stalled` hold `restate.stalled`: an adapter's own
    # namespace, which nothing judges, so they still load.
    assert unknown_kind("restate.stalled") is None
    history = History()
    history.add("restate.stalled", "info", data={"seconds": 60.0, "active": []})
    assert [r.kind for r in history] == ["restate.stalled"]
    assert unknown_kind("clock.stalled") is None
