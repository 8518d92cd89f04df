"""What a failing item of the pytest plugin says (harness.plugin): the text pytest shows in
place of a traceback, made from the run's outcome."""

from __future__ import annotations

from collections.abc import Sequence

from harness.outcome import RunOutcome
from harness.replay import replay_command
from harness.schedules.model import Schedule

__all__ = ["crashed", "generated", "scenario"]


def scenario(outcome: RunOutcome, schedule: Schedule) -> str:
    """A scenario's run that failed or could not be judged: every violated invariant with
    its witness, then the scenario and how to replay it."""
    lines = []
    if outcome.error is not None:
        lines.append(f"unknown: the adapter crashed: {outcome.error}")
    for name in outcome.unmet_expectations:
        lines.append(f"{name}: held, but the scenario expects it to fail ([expect] fails): "
                     f"the known bug it pins did not show; if it was fixed, remove {name} "
                     "from [expect] fails")
    for result in outcome.results:
        if result.valid is False:
            expected = (" (expected: [expect] fails)"
                        if result.checker in outcome.expected_failures else "")
            lines.append(f"{result.checker}{expected}: {_indent(result.witness(3))}")
        elif result.valid is None and outcome.error is None:
            lines.append(f"{result.checker}: unknown: {result.note}")
    lines.append("")
    lines.append(f"scenario {schedule.name} ({schedule.path}, seed {schedule.seed})"
                 + (f", expected {outcome.expected}" if outcome.expected else ""))
    lines.append(f"replay: {outcome.replay_command}")
    return "\n".join(lines)


def generated(invariant: str, spec: str, minimal: RunOutcome, seed: int, examples: int,
              rerun: str) -> str:
    """Generated schedules broke `invariant`: the minimal one's witness, the schedule, how
    to replay it and how to rerun the item (`rerun`)."""
    by_name = {r.checker: r for r in minimal.results}
    result = by_name.get(invariant)
    if result is not None and result.valid is False:
        head = f"{invariant}: {_indent(result.witness(3))}"
    else:
        head = (f"{invariant}: failed while exploring, but the minimal schedule did not "
                f"fail again when replayed ({result.outcome if result else 'not checked'})")
    others = sorted(r.checker for r in minimal.results
                    if r.valid is False and r.checker != invariant)
    steps = minimal.steps
    lines = [head]
    if others:
        lines.append(f"(this schedule also breaks: {', '.join(others)})")
    lines += [
        "",
        f"minimal failing schedule ({steps} step(s), shrunk from the failure found after "
        f"{examples} generated schedule(s), item seed {seed}):",
        "",
        minimal.schedule_toml.rstrip("\n"),
        "",
        _replay(minimal, spec),
        f"rerun this item: {rerun}",
    ]
    return "\n".join(lines)


def crashed(invariant: str, spec: str, runs: Sequence[RunOutcome], seed: int) -> str:
    """The adapter crashed on some generated schedules (and none failed): unknown, with the
    first such schedule and how to replay it."""
    broken = [r for r in runs if r.error is not None]
    first = broken[0]
    return (f"{invariant}: unknown: the adapter crashed on {len(broken)} of {len(runs)} "
            f"generated schedule(s) (seed {seed}); first: {first.error}"
            f"\n\nschedule:\n\n{first.schedule_toml}\n{_replay(first, spec)}")


def _replay(outcome: RunOutcome, spec: str) -> str:
    if outcome.history_path is not None:
        return f"replay: {outcome.replay_command}"
    return ("replay: save the schedule above as schedule.toml, then: "
            + replay_command(spec, None))


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")
