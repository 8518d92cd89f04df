"""The fault kinds have one home, harness.faults: every other module reads the registry.

Pinned here: every fault kind a scenario file accepts is in the registry (and the scenario
file accepts every kind in it), the registry is the only list of the fault kinds' names, and
each kind's parts (capability, heal time, generation, shrinking, timeline) behave as the
runner, the generator, the shrinker and the timeline rely on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contract.records import KINDS, SCHEDULE_ACTIONS
from harness.adapters.base import capability_of, lacking
from harness.errors import ConfigError, ScenarioError
from harness.faults import BY_RECORD, FAULTS, RESTART_AFTER, fault, healed_at
from harness.history import History
from harness.report.timeline import build_timeline
from harness.schedules.generate import _FAULT_KINDS, schedules
from harness.schedules.model import ACTIONS, FAULT_ACTIONS, STEP_KINDS, Step
from harness.schedules.scenario_file import parse_scenario
from harness.schedules.shrink import _simpler

ROOT = Path(__file__).resolve().parents[1]
# A person's and the directory's actions: not faults.
PEOPLE = {"message", "answer", "background", "cancel", "revoke", "grant"}


def test_every_fault_a_scenario_file_accepts_is_in_the_registry_and_back() -> None:
    assert set(ACTIONS) - PEOPLE == set(FAULTS) == set(FAULT_ACTIONS)
    # The contract's vocabulary (which never imports the harness) names the same actions.
    assert set(SCHEDULE_ACTIONS) - PEOPLE == set(FAULTS)
    for name, kind in FAULTS.items():
        step = {"at": "1m", "do": name, **{p: _value(p) for p in kind.required}}
        schedule = parse_scenario({"step": [step]}, "x.toml", "x")
        assert schedule.steps[0].action == name
        assert schedule.steps[0].is_fault
        assert kind.record in KINDS, kind.record


def _value(param: str) -> object:
    return {"service": "email", "fault": "500_before", "point": "tool.after_intent",
            "duration": "30s", "link": "world", "kind": "latency"}[param]


def _literal_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return {e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


# contract/records.py names every schedule action for the event vocabulary (the contract never
# imports the harness); the test above pins it to the registry.
_EXEMPT = {ROOT / "harness" / "faults.py", ROOT / "contract" / "records.py"}


def test_no_module_but_the_registry_lists_the_fault_kinds() -> None:
    """A list, tuple, set or dict literal naming two fault kinds or more is a second list of
    them (the three that disagreed: the generator's, the scenario file's, the capabilities')."""
    names = set(FAULTS)
    found = []
    for folder in ("harness", "contract"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in _EXEMPT:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                spelled = _literal_names(node) & names
                if len(spelled) >= 2:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(spelled)}")
    assert not found, found


def test_a_misspelled_fault_kind_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="gc-pause"):
        fault("gc-paus")


def test_heal_times_are_the_kinds_own() -> None:
    steps = (Step(10.0, "gc-pause", (("host", "owner"), ("duration", 90.0))),
             Step(20.0, "crash", (("host", "owner"),)),
             Step(30.0, "deploy", (("version", ""),)),
             Step(5.0, "clock-jump", (("duration", 600.0),)))
    assert healed_at(steps) == 605.0
    assert healed_at(steps[1:3]) == 30.0
    assert healed_at(steps[1:2]) == 20.0 + RESTART_AFTER
    assert healed_at(()) is None
    assert healed_at((Step(0.0, "message", (("session", "s1"),)),)) is None


def test_every_kind_has_its_capability_and_the_runtime_that_lacks_it_skips_it() -> None:
    class Bare:
        world_endpoints: tuple[str, ...] = ()

    for name, kind in FAULTS.items():
        assert capability_of(name) is kind.capability
        lacks = lacking(Bare(), name, "tool.after_intent", "email")
        expected = (kind.capability.__name__ if kind.capability is not None
                    else "world endpoint 'email'")
        assert lacks == expected, name


def test_the_generator_draws_every_kind_and_the_report_counts_each() -> None:
    assert set(_FAULT_KINDS) == set(FAULTS) | {"answer-burst"}
    drawn: set[str] = set()
    for schedule in schedules(7, 300):
        drawn |= {s.action for s in schedule.steps if s.is_fault}
        assert schedule.step_kinds() <= set(STEP_KINDS)
    assert drawn == set(FAULTS)
    for kind in FAULTS.values():
        assert set(kind.kinds()) <= set(STEP_KINDS)


def test_each_kind_shrinks_its_own_parameters() -> None:
    pause = Step(60.0, "gc-pause", (("host", "owner"), ("duration", 900.0)))
    assert Step(60.0, "gc-pause", (("host", "owner"), ("duration", 30.0))) in \
        list(_simpler([pause], 0))
    burst = Step(60.0, "service-fault", (("service", "email"), ("fault", "timeout"),
                                         ("times", 1)))
    faults = [s.get("fault") for s in _simpler([burst], 0) if s.at == 60.0]
    assert faults == ["500_before", "500_after", "429"]
    crash = Step(60.0, "crash", (("host", "owner"),))
    assert all(s.at < 60.0 for s in _simpler([crash], 0))  # only earlier: nothing to simplify


def test_the_timeline_ends_a_window_the_way_its_kind_says() -> None:
    history = History()
    history.add("fault.gc-pause", "info", host="h1", data={"duration": 30.0})
    history.add("fault.crash", "info", host="h2")
    history.add("fault.redeploy", "info", deployment="dep2")
    history.add("run.end")
    drawn = {f.kind: f for f in build_timeline(history, end=100.0).faults}
    assert drawn["gc-pause"].end == 30.0
    assert drawn["crash"].end is None  # no restart recorded: an instant
    assert drawn["redeploy"].end is None
    assert set(BY_RECORD) == {k.record for k in FAULTS.values()}


@pytest.mark.parametrize(("step", "field", "problem"), [
    ({"do": "network", "link": "nope", "kind": "latency"}, "link", "unknown link 'nope'"),
    ({"do": "arm", "point": "nowhere"}, "point", "unknown fault point 'nowhere'"),
    ({"do": "service-fault", "service": "email", "fault": "boom"}, "fault",
     "unknown email fault 'boom'"),
])
def test_a_scenario_file_is_checked_by_the_kinds_own_rules(
        step: dict[str, str], field: str, problem: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"step": [{"at": "1m", **step}]}, "x.toml", "x")
    assert f"step[0].{field}" in str(caught.value) and problem in str(caught.value)


def test_an_older_fault_name_is_read_as_its_kind_says() -> None:
    schedule = parse_scenario({"step": [{"at": "1m", "do": "provider", "fault":
                                         "500_after_billed"}]}, "x.toml", "x")
    assert schedule.steps[0].get("fault") == "500_after"
