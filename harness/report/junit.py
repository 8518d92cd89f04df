"""JUnit XML for CI: one testsuite per adapter, one testcase per run and invariant.

classname is the run's name (with its seed when one adapter ran the same schedule twice), name
is the invariant. A violation is a `failure` carrying the witness, the records that prove it
and the replay command; unknown (a crashed checker, a crashed adapter), a pass that never
reached its window and an invariant the adapter does not claim are `skipped` with the
reason. A run with steps the runtime could not take has a `skipped steps` testcase naming
them and what the runtime lacks. An adapter crash is also an `error`
testcase, and an incomplete suite an `error` in the `durable-chaos` testsuite: CI must not turn
green because the run never got far enough to fail.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Final

from harness.checkers.base import Result
from harness.history import History
from harness.outcome import RunOutcome, SuiteOutcome
from harness.report.summary import (
    Summary,
    clean,
    effective,
    expected_failure,
    not_claimed_note,
    unmet_note,
)

_MAX_VIOLATIONS: Final = 10
_MAX_RECORDS: Final = 20


def _t(seconds: float) -> str:
    return f"{max(0.0, seconds):.3f}"


def _failure_text(run: RunOutcome, result: Result, history: History | str,
                  replay: str) -> str:
    lines: list[str] = []
    for v in result.violations[:_MAX_VIOLATIONS]:
        lines.append(v.message)
        for index in v.records[:_MAX_RECORDS]:
            if isinstance(history, History) and 0 <= index < len(history):
                lines.append("    " + history[index].describe())
            else:
                lines.append(f"    #{index}")
        if len(v.records) > _MAX_RECORDS:
            lines.append(f"    ... and {len(v.records) - _MAX_RECORDS} more records")
    if len(result.violations) > _MAX_VIOLATIONS:
        lines.append(f"... and {len(result.violations) - _MAX_VIOLATIONS} more violations")
    if not result.violations:
        lines.append(result.note or "failed without a witness")
    lines += ["", f"replay: {replay}"]
    return clean("\n".join(lines))


def _not_claimed(run: RunOutcome, result: Result) -> str:
    seen = ("it would fail: " + (result.violations[0].message if result.violations
                                 else result.note)
            if effective(run, result) is False else f"judged {result.outcome}")
    return f"{not_claimed_note(run.adapter)}; {seen}"


def _case(parent: ET.Element, classname: str, name: str, time: float) -> ET.Element:
    return ET.SubElement(parent, "testcase",
                         {"classname": clean(classname), "name": clean(name), "time": _t(time)})


def build(suite: SuiteOutcome, summary: Summary | None = None) -> ET.Element:
    summary = summary or Summary.of(suite)
    histories = summary.histories
    names = summary.invariants
    root = ET.Element("testsuites", {"name": "durable-chaos"})
    totals: Counter[str] = Counter()

    for adapter in summary.adapters:
        runs = [r for r in suite.runs if r.adapter == adapter]
        ts = ET.SubElement(root, "testsuite", {"name": clean(adapter)})
        props = ET.SubElement(ts, "properties")
        ET.SubElement(props, "property", {"name": "seed", "value": str(suite.seed)})
        ET.SubElement(props, "property",
                      {"name": "complete", "value": "true" if suite.complete else "false"})
        repeated = Counter(r.name for r in runs)
        counts: Counter[str] = Counter()
        wall = 0.0
        for run in runs:
            wall += run.wall_time
            classname = run.name if repeated[run.name] == 1 else f"{run.name} (seed {run.seed})"
            by_name = {r.checker: r for r in run.results}
            unclaimed = {r.checker: r for r in run.unclaimed}
            checked = [n for n in names
                       if n in by_name or n in unclaimed or run.error is not None]
            per_case = run.wall_time / max(1, len(checked) + (run.error is not None))
            if run.error is not None:
                case = _case(ts, classname, "adapter", per_case)
                ET.SubElement(case, "error", {"message": clean(f"adapter crashed: {run.error}"),
                                              "type": "AdapterCrashed"}).text = clean(
                    f"{run.error}\n\nEvery invariant of this run is unknown.\n"
                    f"replay: {run.replay_command}")
                counts["errors"] += 1
                counts["tests"] += 1
            if run.skipped_steps:
                # Never a silent pass: a step the runtime could not take is a skipped case.
                case = _case(ts, classname, "skipped steps", 0.0)
                ET.SubElement(case, "skipped", {"message": clean("; ".join(
                    s.describe() for s in run.skipped_steps)[:1000])})
                counts["tests"] += 1
                counts["skipped"] += 1
            for name in checked:
                case = _case(ts, classname, name, per_case)
                counts["tests"] += 1
                if name in unclaimed and name not in by_name:
                    ET.SubElement(case, "skipped", {"message": clean(
                        _not_claimed(run, unclaimed[name])[:1000])})
                    counts["skipped"] += 1
                    continue
                result = by_name.get(name)
                valid = None if result is None else effective(run, result)
                if valid is False and result is not None and result.valid is True:
                    # An invariant the scenario expects to fail held: the pinned bug is gone.
                    fail = ET.SubElement(case, "failure", {
                        "message": clean(f"{name} held, but the scenario expects it to fail"),
                        "type": clean(name)})
                    fail.text = clean(f"{unmet_note(result)}\n\nreplay: {run.replay_command}")
                    counts["failures"] += 1
                elif result is not None and expected_failure(run, result):
                    # Shown as skipped, as pytest writes an xfail.
                    first = result.violations[0].message if result.violations else result.note
                    ET.SubElement(case, "skipped", {"type": "pytest.xfail", "message": clean(
                        f"expected failure ([expect] fails): {first}"[:1000])})
                    counts["skipped"] += 1
                elif valid is False and result is not None:
                    shrunk = summary.shrunk_for(run)
                    replay = (shrunk or run).replay_command
                    first = result.violations[0].message if result.violations else result.note
                    fail = ET.SubElement(case, "failure", {
                        "message": clean((first or "violated").splitlines()[0][:500]),
                        "type": clean(name),
                    })
                    fail.text = _failure_text(run, result, histories.get(run), replay)
                    if (shrunk or run).shrink_cut_short:
                        fail.text += ("\n(shrinking cut short by the time budget: the replay "
                                      "is the smallest failing schedule found so far)")
                    counts["failures"] += 1
                elif valid is None:
                    note = result.note if result is not None and result.note else "no verdict"
                    reason = (f"unknown: adapter crashed: {run.error}" if run.error is not None
                              else f"unknown: {note}")
                    ET.SubElement(case, "skipped", {"message": clean(reason[:1000])})
                    counts["skipped"] += 1
                elif result is not None and not result.reached:
                    ET.SubElement(case, "skipped", {"message": (
                        "passed without reaching its window: the run never got to what this "
                        "invariant is about")})
                    counts["skipped"] += 1
        ts.set("tests", str(counts["tests"]))
        ts.set("failures", str(counts["failures"]))
        ts.set("errors", str(counts["errors"]))
        ts.set("skipped", str(counts["skipped"]))
        ts.set("time", _t(wall))
        totals.update(counts)

    if not suite.complete:
        ts = ET.SubElement(root, "testsuite", {"name": "durable-chaos", "tests": "1",
                                               "failures": "0", "errors": "1", "skipped": "0",
                                               "time": _t(suite.wall_time)})
        case = _case(ts, "durable-chaos", "suite complete", 0.0)
        ET.SubElement(case, "error", {
            "message": "the suite stopped before it finished (interrupted, or an adapter "
                       "crashed)",
            "type": "Incomplete"}).text = (
            f"{len(suite.runs)} runs were checked before it stopped; a pass covers only those.")
        totals["tests"] += 1
        totals["errors"] += 1

    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("skipped", str(totals["skipped"]))
    root.set("time", _t(suite.wall_time))
    return root


def render(suite: SuiteOutcome, summary: Summary | None = None) -> str:
    root = build(suite, summary)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(suite: SuiteOutcome, path: Path, summary: Summary | None = None) -> Path:
    from harness.evidence import atomic_write_text

    # Atomic: a kill or a second Ctrl-C while writing leaves the old file or the new one.
    atomic_write_text(path, render(suite, summary))
    return path
