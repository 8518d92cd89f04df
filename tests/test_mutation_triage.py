"""The mutation-testing bookkeeping (`benchmarks/mutation.py`): every survivor listed in
benchmarks/mutation-latest.json has a verdict in benchmarks/mutation-triage.toml, and a rerun of
the survivors merges into the last score without counting a mutant twice."""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mutation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "benchmarks" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module
    spec.loader.exec_module(module)
    return module


def test_every_listed_survivor_is_triaged_with_a_reason() -> None:
    latest = json.loads((ROOT / "benchmarks" / "mutation-latest.json").read_text())
    entries = tomllib.loads((ROOT / "benchmarks" / "mutation-triage.toml").read_text())["mutant"]
    known = {(e["module"], e["operator"], e["source"], *([e["mutated"]] if "mutated" in e
                                                        else [])): e for e in entries}
    for s in latest["survivors"]:
        key = (s["module"], s["operator"], s["source"])
        entry = (known.get((*key, s["mutated"])) if s.get("mutated") else None) or known.get(key)
        assert entry is not None, f"untriaged survivor: {s}"
        assert entry["verdict"] in ("equivalent", "gap"), entry
        assert entry["why"].strip(), entry
        assert s["triage"] == ("equivalent" if entry["verdict"] == "equivalent" else "gap")
    for e in entries:
        assert e["verdict"] == "equivalent" or e.get("closed_by"), e
    assert latest["untriaged"] == 0


def _row(source: str, outcome: str, line: int = 1) -> dict[str, Any]:
    return {"module": "m.py", "line": line, "operator": "op", "source": source,
            "worker_outcome": "normal", "test_outcome": outcome}


def test_a_rerun_merges_its_kills_once_and_keeps_what_it_did_not_reach(
    mutation: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(mutation, "TRIAGE", tmp_path / "none.toml")
    survivor = {"module": "m.py", "line": 1, "operator": "op", "triage": "untriaged"}
    previous = {"mutants": 10, "judged": 10, "skipped": 0, "killed": 6, "incompetent": 0,
                "survivors": [survivor | {"source": "a"}, survivor | {"source": "a"},
                              survivor | {"source": "b"}, survivor | {"source": "c"}]}
    chosen = Counter({("m.py", "op", "a"): 2, ("m.py", "op", "b"): 1, ("m.py", "op", "c"): 1})
    # Key "a" has three mutants now (one was killed before): two killed, one survives; "b" is
    # killed; "c" was not reached (an interrupted rerun).
    rows = [_row("a", "killed", 7), _row("a", "killed", 7), _row("a", "survived", 7),
            _row("b", "killed")]
    items = Counter({("m.py", "op", "a"): 3, ("m.py", "op", "b"): 1, ("m.py", "op", "c"): 1})
    merged = mutation.merge_rerun(previous, chosen, rows, items)
    # Of "a"'s two survivors one is killed now (the mutant killed before is killed again and
    # not counted twice), "b" is killed, "c" still survives.
    assert merged["killed"] == 6 + 1 + 1
    assert merged["survived"] == 1 + 1
    assert sorted((s["source"], s["line"]) for s in merged["survivors"]) == [("a", 7), ("c", 1)]
    assert merged["score"] == pytest.approx(8 / 10)
    # Interrupted after one of "a"'s three mutants, a kill (maybe the one killed before):
    # both of its survivors may still be alive.
    partial = mutation.merge_rerun(previous, chosen, [rows[0], rows[3]], items)
    assert partial["killed"] == 6 + 1 and partial["survived"] == 3


def test_equivalent_survivors_are_not_rerun_and_count_out_of_the_score(
    mutation: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    triage = tmp_path / "triage.toml"
    triage.write_text('[[mutant]]\nmodule = "m.py"\noperator = "op"\nsource = "a"\n'
                      'verdict = "equivalent"\nwhy = "nothing reads it"\n')
    monkeypatch.setattr(mutation, "TRIAGE", triage)
    survivors = [{"module": "m.py", "line": n, "operator": "op", "source": s}
                 for n, s in ((1, "a"), (2, "b"))]
    assert mutation.rerun_keys(survivors, set()) == Counter({("m.py", "op", "b"): 1})
    assert mutation.rerun_keys(survivors, {("m.py", 1)}) == Counter()
    summary = mutation.scored({"judged": 10, "killed": 8, "incompetent": 0,
                               "survivors": survivors})
    assert (summary["equivalent"], summary["untriaged"]) == (1, 1)
    assert summary["score"] == pytest.approx(8 / 9)


def test_lines_name_a_module_and_its_lines(mutation: ModuleType) -> None:
    assert mutation.wanted_lines(["reference_impl/pending.py:126,141", "a/b.py:3"]) == {
        ("reference_impl/pending.py", 126), ("reference_impl/pending.py", 141), ("a/b.py", 3)}
    with pytest.raises(SystemExit, match="write module:line"):
        mutation.wanted_lines(["reference_impl/pending.py"])


def test_an_entry_with_its_mutated_line_judges_only_that_mutant_of_its_key(
    mutation: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    triage = tmp_path / "triage.toml"
    triage.write_text('''
[[mutant]]
module = "m.py"
operator = "op"
source = "x = 1"
verdict = "gap"
why = "x = 0 lets a stale timer through"
closed_by = "open"

[[mutant]]
module = "m.py"
operator = "op"
source = "x = 1"
mutated = "x = 2"
verdict = "equivalent"
why = "still distinct"
''')
    monkeypatch.setattr(mutation, "TRIAGE", triage)
    assert mutation.mutated_line("--- a\n+++ b\n@@ -1 +1 @@\n-    x = 1\n+    x = 2\n") == "x = 2"
    row = {"module": "m.py", "line": 3, "operator": "op", "source": "x = 1"}
    listed = mutation.classify([row | {"mutated": "x = 2"}, row | {"mutated": "x = 0"}, row])
    assert [s["triage"] for s in listed] == ["equivalent", "gap", "gap"]
    assert listed[0]["mutated"] == "x = 2" and "mutated" not in listed[2]
    # A rerun still selects the key: one of its mutants is not equivalent.
    assert mutation.rerun_keys([row], set()) == Counter({("m.py", "op", "x = 1"): 1})
