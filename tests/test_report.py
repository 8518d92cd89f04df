"""The report: what a person reads after a chaos run, and what CI reads (JUnit).

Every value here is built by hand: RunOutcome/Result values, and small histories saved as
JSONL for the timeline. `naive_vs_reference` is the suite of Figure 1 of the source design:
eight releases over eight days, one approval per day held to its limit; the naive adapter
waits in-call (every version stays alive, pinning-bound fails), the reference hands the wait
off after five minutes (one version alive). tests/test_report_browser.py opens it in Chromium.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import harness.report
from harness.checkers.base import Result, Violation
from harness.history import History
from harness.outcome import RunOutcome, SuiteOutcome
from harness.report import html as report_html
from harness.report import junit as report_junit
from harness.report import write_report
from harness.report.timeline import (
    TimeAxis,
    Timeline,
    alive_series,
    build_timeline,
    fmt_tick,
    nice_step,
)

DAY = 86400.0
HAND_OFF = 300.0
INVARIANTS = ("no-duplicate-effects", "pinning-bound", "busy-rule", "turn-outcome")


# --------------------------------------------------------------------------- hand-made runs


def approval_history(naive: bool, days: int = 8, tool: str = "send_email") -> History:
    """One release a day; an hour after each release an approval waits until 7.5 days later.

    naive: the executor and the turn stay suspended for the whole wait (pinning their
    deployment). reference: after five minutes the wait is handed off (turn.waiting) and both
    invocations end; the answer re-runs the tool on the latest deployment and the same turn
    resumes in a new invocation."""
    events: list[tuple[float, int, str, str, dict[str, Any]]] = []
    seq = 0

    def ev(t: float, kind: str, type: str = "event", **fields: Any) -> None:
        nonlocal seq
        seq += 1
        events.append((t, seq, kind, type, fields))

    inv = 0

    def new_inv() -> str:
        nonlocal inv
        inv += 1
        return f"inv{inv}"

    pinned_until: dict[str, float] = {}
    for d in range(days):
        dep = f"dep{d + 1}"
        t0 = d * DAY
        ev(t0, "deployment.registered", deployment=dep,
           data={"version": f"v{d + 1}", "hosts": [f"{dep}.h1"]})
        if d:
            ev(t0, "deployment.superseded", deployment=f"dep{d}", data={"by": dep})
        start = t0 + 3600
        session, turn, call = f"s{d + 1}", f"t{d + 1}", f"c{d + 1}"
        answer = start + 7.5 * DAY
        turn_inv, exec_inv = new_inv(), new_inv()
        ev(start, "invocation.created", invocation=turn_inv,
           data={"target": "Controller/doTurn", "key": session})
        ev(start, "invocation.started", invocation=turn_inv, deployment=dep)
        ev(start, "turn.started", session=session, turn=turn, data={"message": "hi"})
        ev(start + 1, "invocation.created", invocation=exec_inv,
           data={"target": "ChatToolExecutor/execute", "key": None})
        ev(start + 1, "invocation.started", invocation=exec_inv, deployment=dep)
        ev(start + 2, "tool.awaiting", session=session, turn=turn, tool_call=call,
           data={"tool": tool})
        ev(start + 2, "invocation.suspended", invocation=exec_inv, deployment=dep,
           host=f"{dep}.h1", data={"on": "awakeable"})
        ev(start + 2, "invocation.suspended", invocation=turn_inv, deployment=dep,
           host=f"{dep}.h1", data={"on": "call"})
        if naive:
            if answer <= days * DAY:
                ev(answer, "invocation.resumed", invocation=exec_inv, deployment=dep)
                ev(answer + 1, "tool.result", session=session, turn=turn, tool_call=call,
                   data={"outcome": "answered"})
                ev(answer + 1, "invocation.completed", "ok", invocation=exec_inv,
                   deployment=dep, data={"target": "ChatToolExecutor/execute"})
                ev(answer + 1, "invocation.resumed", invocation=turn_inv, deployment=dep)
                ev(answer + 2, "turn.ended", session=session, turn=turn,
                   data={"reason": "completed"})
                ev(answer + 2, "invocation.completed", "ok", invocation=turn_inv,
                   deployment=dep, data={"target": "Controller/doTurn"})
                pinned_until[dep] = answer + 2
            else:
                pinned_until[dep] = float("inf")
        else:
            h = start + HAND_OFF
            ev(h, "invocation.resumed", invocation=exec_inv, deployment=dep)
            ev(h, "tool.handoff", session=session, turn=turn, tool_call=call)
            ev(h, "invocation.completed", "ok", invocation=exec_inv, deployment=dep,
               data={"target": "ChatToolExecutor/execute"})
            ev(h, "invocation.resumed", invocation=turn_inv, deployment=dep)
            ev(h + 1, "turn.waiting", session=session, turn=turn, tool_call=call)
            ev(h + 1, "invocation.completed", "ok", invocation=turn_inv, deployment=dep,
               data={"target": "Controller/doTurn"})
            pinned_until[dep] = h + 1
            if answer <= days * DAY:
                latest = f"dep{min(days, int(answer // DAY) + 1)}"
                resume_inv = new_inv()
                ev(answer, "tool.rerun", session=session, turn=turn, tool_call=call,
                   deployment=latest, data={"access": "granted"})
                ev(answer + 1, "invocation.created", invocation=resume_inv,
                   data={"target": "Controller/doTurn", "key": session})
                ev(answer + 1, "invocation.started", invocation=resume_inv, deployment=latest)
                ev(answer + 1, "turn.resumed", session=session, turn=turn, tool_call=call,
                   data={"outcome": "answered"})
                ev(answer + 2, "turn.ended", session=session, turn=turn,
                   data={"reason": "completed"})
                ev(answer + 2, "invocation.completed", "ok", invocation=resume_inv,
                   deployment=latest, data={"target": "Controller/doTurn"})
    # A superseded deployment drains when nothing is pinned to it any more.
    for d in range(days - 1):
        dep = f"dep{d + 1}"
        superseded = (d + 1) * DAY
        until = pinned_until.get(dep, 0.0)
        if until != float("inf"):
            drained = max(superseded, until)
            ev(drained, "deployment.drained", deployment=dep,
               data={"superseded_at": superseded, "after": drained - superseded})
    # Faults: a GC pause on the newest host, a crash and restart, a fault point.
    ev(2 * DAY + 7200, "fault.gc-pause", host="dep3.h1", data={"duration": 45.0})
    ev(2 * DAY + 7200, "host.paused", host="dep3.h1", deployment="dep3",
       data={"duration": 45.0})
    ev(2 * DAY + 7245, "host.resumed", host="dep3.h1", deployment="dep3")
    ev(5 * DAY, "fault.crash", host="dep6.h1")
    ev(5 * DAY, "host.crashed", host="dep6.h1", deployment="dep6")
    ev(5 * DAY + 2, "host.restarted", host="dep6.h1", deployment="dep6")
    ev(5 * DAY + 3600 + 2, "faultpoint.reached", host="dep6.h1", deployment="dep6",
       data={"point": "effect.email.after_send", "action": None})
    ev(days * DAY, "run.end")

    history = History()
    for t, _, kind, type, fields in sorted(events, key=lambda e: (e[0], e[1])):
        history.add(kind, type, time=t, **fields)  # type: ignore[arg-type]
    return history


def pinning_violation(history: History) -> Violation:
    """The naive run's first pinned invocation, cited by its suspension and supersession."""
    suspended = next(r for r in history if r.kind == "invocation.suspended"
                     and r.deployment == "dep1")
    superseded = next(r for r in history if r.kind == "deployment.superseded"
                      and r.deployment == "dep1")
    return Violation(
        f"{suspended.invocation} held dep1 suspended for 7.5d (bound 5m + 1m tolerance); "
        "dep1 was superseded at 1d and drained 6.5d later",
        (suspended.index, superseded.index),
    )


def run_outcome(name: str, adapter: str, results: tuple[Result, ...], *, seed: int = 7,
                history: Path | None = None, **kw: Any) -> RunOutcome:
    fields: dict[str, Any] = {
        "source": "scenario",
        "schedule_toml": f'name = "{name}"\n[[step]]\nat = "1h"\ndo = "message"\n',
        "steps": 1,  # as the schedule above: one step
        "replay_command": f"durable-chaos replay --adapter {adapter} --seed {seed} "
                          f"scenarios/{name}.toml",
        "history_path": str(history) if history else None,
        "virtual_time": 8 * DAY,
        "wall_time": 0.25,
    }
    fields.update(kw)
    return RunOutcome(name=name, adapter=adapter, seed=seed, results=results, **fields)


def passing(*names: str, reached: bool = True) -> tuple[Result, ...]:
    return tuple(Result(n, True, reached=reached) for n in names)


def naive_vs_reference(tmp: Path) -> SuiteOutcome:
    """Figure 1 as a suite: the naive adapter fails pinning-bound, the reference passes."""
    naive_h = approval_history(naive=True)
    ref_h = approval_history(naive=False)
    naive_path = naive_h.save(tmp / "runs" / "naive-eight-releases.jsonl")
    ref_path = ref_h.save(tmp / "runs" / "reference-eight-releases.jsonl")
    violation = pinning_violation(naive_h)
    others = tuple(n for n in INVARIANTS if n != "pinning-bound")
    naive_run = run_outcome(
        "eight-releases", "naive",
        (*passing(*others[:1]), Result("pinning-bound", False, (violation,)),
         *passing(*others[1:])),
        history=naive_path, faults={"gc-pause": 1, "crash": 1, "redeploy": 7},
        fault_points={"effect.email.after_send": 1, "threadlog.append.before_commit": 0},
        expected="fail: pinning-bound", wall_time=0.41,
    )
    ref_run = run_outcome(
        "eight-releases", "reference", passing(*INVARIANTS), history=ref_path,
        faults={"gc-pause": 1, "crash": 1, "redeploy": 7},
        fault_points={"effect.email.after_send": 1, "threadlog.append.before_commit": 0},
        wall_time=0.38,
    )
    shrunk = dataclasses.replace(
        naive_run, name="eight-releases",
        schedule_toml='name = "eight-releases (shrunk)"\n[[step]]\nat = "0s"\n'
                      'do = "deploy"\n[[step]]\nat = "1d"\ndo = "deploy"\n',
        replay_command="durable-chaos replay --adapter naive --seed 7 "
                       "reports/shrunk/eight-releases.toml",
        history_path=None,
    )
    quiet = run_outcome("quiet-session", "reference", passing(*INVARIANTS), seed=8,
                        source="generated", virtual_time=600.0)
    return SuiteOutcome(
        adapters=("naive", "reference"), seed=7,
        runs=(naive_run, ref_run, quiet), wall_time=1.5,
        environment={"python": "3.11", "machine": "x86_64"}, shrunk=(shrunk,),
    )


# --------------------------------------------------------------------------- HTML helpers


class _Cells(HTMLParser):
    """Text of the property-table cells, keyed by (invariant, adapter)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self._key: tuple[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "td" and "data-invariant" in a:
            self._key = (a["data-invariant"] or "", a["data-adapter"] or "")
            self.cells[self._key] = ""
        elif self._key is not None:
            self.cells[self._key] += " "

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._key is not None:
            self._key = None

    def handle_data(self, data: str) -> None:
        if self._key is not None:
            self.cells[self._key] += data


def cells(page: str) -> dict[tuple[str, str], str]:
    parser = _Cells()
    parser.feed(page)
    return {k: re.sub(r"\s+", " ", v).strip() for k, v in parser.cells.items()}


_BLOCK = frozenset(("p", "div", "li", "td", "th", "dt", "dd", "tr", "br", "h1", "h2", "h3",
                    "h4", "section", "article", "header", "span", "text", "title", "pre"))


def text_of(page: str) -> str:
    """The page as a person reads it: tags dropped, entities decoded, spaces collapsed."""
    class _Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("style", "script"):
                self.skip += 1
            elif tag in _BLOCK:
                self.parts.append(" ")

        def handle_endtag(self, tag: str) -> None:
            if tag in ("style", "script"):
                self.skip -= 1

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.parts.append(data)

    parser = _Text()
    parser.feed(page)
    return re.sub(r"\s+", " ", "".join(parser.parts))


@pytest.fixture
def suite(tmp_path: Path) -> SuiteOutcome:
    return naive_vs_reference(tmp_path)


# --------------------------------------------------------------------------- the page


def test_public_api_is_pinned() -> None:
    assert harness.report.__all__ == ["Timeline", "alive_series", "build_timeline",
                                      "write_report"]


def test_write_report_writes_both_files_and_returns_the_page(suite: SuiteOutcome,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "out" / "nested"
    page = write_report(suite, out)
    assert page == out / "index.html"
    assert page.is_file() and (out / "junit.xml").is_file()
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_violation_shows_witness_records_minimal_schedule_and_replay(suite: SuiteOutcome,
                                                                     tmp_path: Path) -> None:
    page = write_report(suite, tmp_path / "r").read_text(encoding="utf-8")
    text = text_of(page)
    naive_run = suite.runs[0]
    violation = naive_run.results[1].violations[0]
    assert "held dep1 suspended for 7.5d" in text
    history = History.load(naive_run.history_path or "")
    for index in violation.records:
        assert history[index].describe() in text  # the events that prove it, by index
    # The minimal schedule is the shrunk one, with its replay command; the original's too.
    assert "Minimal schedule (shrunk)" in text
    assert 'name = "eight-releases (shrunk)"' in text
    assert ("durable-chaos replay --adapter naive --seed 7 reports/shrunk/eight-releases.toml"
            in text)
    assert naive_run.replay_command in text
    assert re.search(r'<pre class="copy"><code>durable-chaos replay --adapter naive', page)
    # Only the failing run gets a violation block.
    assert page.count('<article class="failing"') == 1


def test_property_table_counts_per_invariant_and_adapter(tmp_path: Path) -> None:
    crashed = RunOutcome("c", "a", 3, "generated", passing("inv-x"), "", "replay c",
                         error="adapter died: BrokenPipeError")
    runs = (
        run_outcome("r1", "a", passing("inv-x", "inv-y")),
        run_outcome("r2", "a", (Result("inv-x", True), Result("inv-y", False,
                                                              (Violation("y broke"),)))),
        run_outcome("r3", "a", (Result("inv-x", False, (Violation("x broke"),)),
                                Result("inv-y", None, reached=False, note="checker crashed"))),
        crashed,
        run_outcome("r1", "b", (*passing("inv-x"), *passing("inv-y", reached=False))),
    )
    suite = SuiteOutcome(("a", "b"), 1, runs, 2.0)
    got = cells(report_html.render(suite))
    assert got[("inv-x", "a")].startswith("fail 2 pass · 1 fail · 1 unknown")
    assert "window reached in 3 of 4 runs" in got[("inv-x", "a")]
    assert got[("inv-y", "a")].startswith("fail 1 pass · 1 fail · 2 unknown")
    assert got[("inv-x", "b")].startswith("pass 1 pass · 0 fail · 0 unknown")
    # A pass that never reached its window says so plainly.
    assert got[("inv-y", "b")].startswith("not reached 1 pass · 0 fail · 0 unknown")
    assert "Passed only because no run reached its window" in got[("inv-y", "b")]
    assert "window reached in 0 of 1 run" in got[("inv-y", "b")]


def test_some_unreached_passes_are_counted(tmp_path: Path) -> None:
    runs = (run_outcome("r1", "a", passing("inv")),
            run_outcome("r2", "a", passing("inv", reached=False)))
    got = cells(report_html.render(SuiteOutcome(("a",), 1, runs, 1.0)))
    assert got[("inv", "a")].startswith("pass 2 pass")
    assert "1 of the 2 passes never reached its window" in got[("inv", "a")]


def test_fault_kinds_and_points_report_how_often_they_were_reached(suite: SuiteOutcome) -> None:
    text = text_of(report_html.render(suite))
    assert "gc-pause 2 2 of 3 0" in text  # injected twice, in 2 of 3 runs, never skipped
    assert "effect.email.after_send 2 2 of 3" in text
    assert "threadlog.append.before_commit never reached 0 of 3" in text


def test_skipped_faults_are_reported(tmp_path: Path) -> None:
    run = run_outcome("r", "restate", passing("inv"), faults={"crash": 1},
                      skipped_faults=("gc-pause",))
    text = text_of(report_html.render(SuiteOutcome(("restate",), 1, (run,), 1.0)))
    assert "gc-pause 0 0 of 1 1 run" in text
    assert "skipped faults (adapter lacks the capability): gc-pause" in text


def test_step_kinds_are_counted_once_per_generated_schedule(tmp_path: Path) -> None:
    from harness.cli import _summary
    from harness.report.summary import step_kinds_of
    from harness.schedules.model import STEP_KINDS

    def generated(name: str, adapter: str, kinds: tuple[str, ...]) -> RunOutcome:
        return run_outcome(name, adapter, passing("inv"), source="generated",
                           schedule_toml=f'name = "{name}"\n', step_kinds=kinds)

    runs = (
        # One schedule run by two adapters is one schedule.
        generated("g1", "reference", ("message", "cancel")),
        generated("g1", "naive", ("message", "cancel")),
        generated("g2", "reference", ("message", "service-fault (payments 500_after)")),
        # A scenario file is the author's, not the exploration's: not counted.
        run_outcome("s", "reference", passing("inv"), step_kinds=("deploy",)),
    )
    held = step_kinds_of(runs)
    counts = dict(held.counts)
    assert held.schedules == 2 and list(counts) == list(STEP_KINDS)
    assert (counts["message"], counts["cancel"], counts["deploy"]) == (2, 1, 0)
    assert counts["service-fault (payments 500_after)"] == 1
    assert "deploy" in held.never and "cancel" not in held.never
    text = text_of(report_html.render(SuiteOutcome(("reference", "naive"), 0, runs, 1.0)))
    assert "Step kinds of the generated schedules" in text
    assert "cancel 1 of 2 (50%)" in text and "deploy 0 of 2" in text
    line = _summary(SuiteOutcome(("reference", "naive"), 0, runs, 1.0), tmp_path)
    assert f"step kinds: 3 of {len(STEP_KINDS)} step kinds in 2 generated schedule(s); " \
           "never: message (steer)," in line
    assert f"and {len(STEP_KINDS) - 3 - 5} more" in line  # five named, the rest counted


def test_summary_states_adapters_seed_runs_times_and_faults(suite: SuiteOutcome) -> None:
    text = text_of(report_html.render(suite))
    assert "Adapters naive, reference" in text
    assert "Seed 7" in text
    assert "3 runs of 2 schedules: 2 scenario, 1 generated; 1 schedule shrunk" in text
    assert "Virtual time 16.01d in total, longest run 8.00d" in text
    assert "Wall time 1.5 s" in text
    assert "Faults injected crash: 2, gc-pause: 2, redeploy: 14" in text
    assert "python" in text and "x86_64" in text
    assert "FAIL" in text and "1 invariant violated in 1 of 3 runs" in text
    assert "Incomplete" not in text


def test_incomplete_suite_is_marked_and_shows_what_was_checked(suite: SuiteOutcome,
                                                               tmp_path: Path) -> None:
    partial = dataclasses.replace(suite, runs=suite.runs[:1], complete=False)
    page = write_report(partial, tmp_path / "r").read_text(encoding="utf-8")
    assert '<div class="banner incomplete" role="alert"><strong>Incomplete.</strong>' in page
    assert "what was checked so far: 1 run" in text_of(page)
    assert "held dep1 suspended" in text_of(page)
    root = ET.parse(tmp_path / "r" / "junit.xml").getroot()
    err = root.find("testsuite[@name='durable-chaos']/testcase[@name='suite complete']/error")
    assert err is not None and err.get("type") == "Incomplete"


def test_empty_interrupted_suite_still_writes_a_report(tmp_path: Path) -> None:
    suite = SuiteOutcome(("reference",), 3, (), 0.2, complete=False)
    page = write_report(suite, tmp_path).read_text(encoding="utf-8")
    text = text_of(page)
    assert "Incomplete." in text and "No invariant was checked before the suite stopped" in text
    assert "INCOMPLETE" in text and "stopped early after 0 runs" in text
    assert "<title>durable-chaos: INCOMPLETE" in page
    ET.parse(tmp_path / "junit.xml")


def test_adapter_crash_shows_every_result_as_unknown(tmp_path: Path) -> None:
    looked_bad = Result("inv-b", False, (Violation("looked bad before the crash"),))
    crashed = run_outcome("boom", "ext", (*passing("inv-a"), looked_bad),
                          error="ConnectionResetError: worker gone")
    fine = run_outcome("calm", "ext", passing("inv-a", "inv-b"))
    suite = SuiteOutcome(("ext",), 5, (crashed, fine), 3.0, complete=False)
    page = write_report(suite, tmp_path).read_text(encoding="utf-8")
    got = cells(page)
    assert got[("inv-a", "ext")].startswith("pass 1 pass · 0 fail · 1 unknown")
    assert got[("inv-b", "ext")].startswith("pass 1 pass · 0 fail · 1 unknown")
    text = text_of(page)
    assert "Adapter crashed: ConnectionResetError: worker gone" in text
    assert "No invariant was violated in any run" in text
    root = ET.parse(tmp_path / "junit.xml").getroot()
    boom = root.findall("testsuite[@name='ext']/testcase[@classname='boom']")
    assert [c.get("name") for c in boom] == ["adapter", "inv-a", "inv-b"]
    assert boom[0].find("error") is not None
    assert all(c.find("skipped") is not None for c in boom[1:])


def test_runtime_text_is_escaped_everywhere(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    history = History()
    history.add("deployment.registered", time=0.0, deployment="dep1",
                data={"version": evil, "hosts": ["dep1.h1"]})
    history.add("invocation.created", time=1.0, invocation="inv1",
                data={"target": evil, "key": evil})
    history.add("invocation.started", time=1.0, invocation="inv1", deployment="dep1")
    history.add("turn.started", time=1.0, session=evil, turn="t1", data={"message": evil})
    history.add("tool.awaiting", time=2.0, session=evil, turn="t1", tool_call="c1",
                data={"tool": evil})
    history.add("fault.service-fault", time=3.0, data={"mode": evil})
    history.add("run.end", time=10.0)
    path = history.save(tmp_path / "evil.jsonl")
    run = run_outcome(evil, evil, (Result(evil, False, (Violation(evil, (1, 3, 4)),)),),
                      history=path, schedule_toml=evil, replay_command=evil, expected=evil,
                      faults={evil: 1}, fault_points={evil: 0}, error=None, virtual_time=10.0)
    crashed = run_outcome("c", evil, passing(evil), error=evil)
    suite = SuiteOutcome((evil,), 1, (run, crashed), 1.0, environment={evil: evil})
    page = write_report(suite, tmp_path / "r").read_text(encoding="utf-8")
    assert "<script>alert" not in page
    assert "<img" not in page
    assert page.count("<script") == 1  # the page's own copy-button script only
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    text = text_of(page)
    assert evil in text  # shown as text: in the witness, the records, the schedule
    assert f"turn.started session={evil} turn=t1" in text
    # The SVG timeline escapes lane labels and fault labels too.
    svg = page[page.index('<svg class="tl"'):]
    svg = svg[: svg.index("</svg>")]
    assert "&lt;script&gt;" in svg and "<script" not in svg
    # JUnit carries the same text, XML-escaped, and parses back to it.
    root = ET.parse(tmp_path / "r" / "junit.xml").getroot()
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("classname") == evil and case.get("name") == evil
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == evil
    assert evil in (failure.text or "")


def test_control_characters_do_not_break_html_or_xml(tmp_path: Path) -> None:
    nasty = "bell\x07 esc\x1b[31m nul\x00 del\x7f"
    run = run_outcome("r", "a", (Result("inv", False, (Violation(nasty),)),))
    write_report(SuiteOutcome(("a",), 1, (run,), 1.0), tmp_path)
    failure = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == "bell\\x07 esc\\x1b[31m nul\\x00 del\\x7f"
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "bell\\x07 esc\\x1b[31m" in page and "\x1b" not in page and "\x00" not in page


def test_page_is_self_contained(suite: SuiteOutcome) -> None:
    page = report_html.render(suite)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    assert "<style>" in page and ".badge" in page  # the stylesheet is inlined


def test_same_input_same_output_except_wall_times(suite: SuiteOutcome) -> None:
    assert report_html.render(suite) == report_html.render(suite)
    assert report_junit.render(suite) == report_junit.render(suite)
    slower = dataclasses.replace(
        suite, wall_time=99.25,
        runs=tuple(dataclasses.replace(r, wall_time=r.wall_time + 50) for r in suite.runs))

    def no_walls(page: str) -> str:
        return re.sub(r"(?<![\w.])\d+(?:\.\d+)? (?:ms|s)\b", "WALL", page)

    assert report_html.render(slower) != report_html.render(suite)
    assert no_walls(report_html.render(slower)) == no_walls(report_html.render(suite))
    assert re.sub(r'time="[\d.]+"', "", report_junit.render(slower)) == re.sub(
        r'time="[\d.]+"', "", report_junit.render(suite))


def test_a_shrunk_schedule_goes_with_the_generated_run_it_came_from(tmp_path: Path) -> None:
    """The runner's naming: exploration keeps no history of `generated-1217`, then replays the
    minimal schedule as `shrunk-generated-0` with its history saved. A scenario that failed
    the same invariant (same seed) is not given that minimal schedule."""
    history = approval_history(naive=True, days=2)
    violation = pinning_violation(history)
    path = history.save(tmp_path / "shrunk.jsonl")
    failing = (Result("pinning-bound", False, (Violation("generated run pinned dep1"),)),)
    scenario = run_outcome("answered-after-3-days", "naive", failing, seed=0)
    generated = run_outcome("generated-1217", "naive", failing, seed=0, source="generated")
    shrunk = run_outcome("shrunk-generated-0", "naive",
                         (Result("pinning-bound", False, (violation,)),), seed=0,
                         source="generated", history=path,
                         replay_command="durable-chaos replay --adapter naive "
                                        "reports/runs/naive/shrunk-generated-0/schedule.toml")
    suite = SuiteOutcome(("naive",), 0, (scenario, generated), 1.0, shrunk=(shrunk,))
    page = report_html.render(suite)
    first, second = page.split('<article class="failing"')[1:]
    assert "Schedule (not shrunk)" in text_of(first) and "shrunk-generated-0" not in first
    text = text_of(second)
    assert "Minimal schedule (shrunk)" in text and shrunk.replay_command in text
    assert "This run kept no history" in text and "shrunk-generated-0" in text
    # The original schedule stays available (folded), next to its replay command.
    assert '<details class="orig"><summary>Schedule of the original run (1 step)' in second
    assert history[violation.records[0]].describe() in text  # the shrunk run's records
    assert '<svg class="tl"' in second and "Timeline of shrunk-generated-0" in second
    # The index of violations links both.
    assert '<a href="#violation-1">answered-after-3-days</a>' in page
    assert '<a href="#violation-2">generated-1217</a>' in page
    junit = ET.fromstring(report_junit.render(suite))
    texts = [f.text or "" for f in junit.iter("failure")]
    assert "replay: " + scenario.replay_command in texts[0]
    assert "replay: " + shrunk.replay_command in texts[1]


def test_a_shrunk_schedule_nobody_claims_is_still_reported() -> None:
    shrunk = run_outcome("shrunk-generated-0", "naive",
                         (Result("liveness", False, (Violation("s1 stayed busy"),)),))
    suite = SuiteOutcome(("naive",), 0, (), 1.0, shrunk=(shrunk,))
    text = text_of(report_html.render(suite))
    assert "Minimal failing schedule found by shrinking: shrunk-generated-0" in text
    assert "s1 stayed busy" in text and shrunk.replay_command in text


# --------------------------------------------------------------------------- timeline


def test_failing_run_has_an_svg_timeline_with_lanes_faults_and_cited_records(
        suite: SuiteOutcome) -> None:
    page = report_html.render(suite)
    assert page.count('<svg class="tl"') == 1
    svg = page[page.index('<svg class="tl"'):]
    svg = svg[: svg.index("</svg>")]
    for group in ("Hosts", "Deployments", "Sessions", "Invocations"):
        assert f">{group}</text>" in svg
    assert 'data-lane="dep1.h1"' in svg and 'data-lane="dep1"' in svg
    assert 'data-lane="inv1"' in svg and 'data-lane="s1"' in svg
    assert 'class="sp sp-suspended' in svg  # pinned invocations
    assert 'class="sp sp-superseded' in svg  # superseded deployments kept alive
    assert 'class="fault f-gc-pause"' in svg and 'class="fault f-crash"' in svg
    assert 'class="mk mk-cited"' in svg
    assert "8d" in svg  # the axis reaches day 8


def test_build_timeline_draws_handed_off_waits_and_suspensions() -> None:
    ref = build_timeline(approval_history(naive=False))
    s1 = next(lane for lane in ref.lanes if lane.id == "s1")
    waiting = [s for s in s1.spans if s.kind == "waiting"]
    assert len(waiting) == 1
    # Handed off at 1h + 5m (+1 s for the turn to record it); resumed 7.5 days after asking.
    assert waiting[0].start == 3600 + HAND_OFF + 1 and waiting[0].end == 3600 + 7.5 * DAY + 1
    awaiting = next(s for s in s1.spans if s.kind == "awaiting")
    assert awaiting.end - awaiting.start == HAND_OFF - 2  # the in-call wait, pinned
    inv1 = next(lane for lane in ref.lanes if lane.id == "inv1")
    assert [s.kind for s in inv1.spans if s.kind == "suspended"] == ["suspended"]
    assert max(s.end - s.start for s in inv1.spans if s.kind == "suspended") <= HAND_OFF

    naive = build_timeline(approval_history(naive=True))
    dep1 = next(lane for lane in naive.lanes if lane.id == "dep1")
    assert [(s.kind, s.start, s.end) for s in dep1.spans] == [
        ("live", 0.0, DAY), ("superseded", DAY, 3600 + 7.5 * DAY + 2)]
    dep8 = next(lane for lane in naive.lanes if lane.id == "dep8")
    assert dep8.spans[-1].open  # the latest never drains
    pause = next(f for f in naive.faults if f.kind == "gc-pause")
    assert (pause.start, pause.end, pause.host) == (2 * DAY + 7200, 2 * DAY + 7245, "dep3.h1")
    crash = next(f for f in naive.faults if f.kind == "crash")
    assert crash.end == 5 * DAY + 2  # shaded until the host restarted
    host = next(lane for lane in naive.lanes if lane.id == "dep3.h1")
    assert any(s.kind == "paused" for s in host.spans)


def test_overlapping_turns_stack_in_rows() -> None:
    h = History()
    h.add("turn.started", time=0.0, session="s", turn="a")
    h.add("turn.started", time=1.0, session="s", turn="b")  # busy rule broken: both run
    h.add("turn.ended", time=3.0, session="s", turn="a", data={"reason": "completed"})
    h.add("turn.ended", time=4.0, session="s", turn="b", data={"reason": "completed"})
    lane = build_timeline(h).lanes[0]
    assert sorted((s.label, s.row) for s in lane.spans) == [("turn a", 0), ("turn b", 1)]
    assert lane.rows == 2


def test_lanes_are_capped_keeping_the_cited_ones() -> None:
    h = History()
    for i in range(50):
        h.add("invocation.created", time=float(i), invocation=f"inv{i}", data={"target": "X/y"})
        h.add("invocation.completed", "ok", time=i + 0.5, invocation=f"inv{i}")
    cited = next(r.index for r in h if r.invocation == "inv42")
    tl = build_timeline(h, focus=[cited], max_invocations=5)
    ids = [lane.id for lane in tl.lanes]
    assert len(ids) == 5 and "inv42" in ids and tl.hidden == {"invocation": 45}
    page_svg = report_html.timeline_svg(tl, "t", "t")
    assert "45 more invocations not shown" in page_svg


def test_timeline_round_trips_through_a_dict_and_is_used_without_history(
        tmp_path: Path) -> None:
    tl = build_timeline(approval_history(naive=True, days=3))
    assert Timeline.from_dict(tl.to_dict()) == tl
    run = run_outcome("r", "a", (Result("inv", False, (Violation("broke"),)),),
                      timeline=tl.to_dict())
    page = report_html.render(SuiteOutcome(("a",), 1, (run,), 1.0))
    assert '<svg class="tl"' in page and 'data-lane="dep2"' in page


def test_missing_history_file_is_a_note_not_a_crash(tmp_path: Path) -> None:
    run = run_outcome("r", "a", (Result("inv", False, (Violation("broke", (3,)),)),),
                      history=tmp_path / "gone.jsonl")
    text = text_of(report_html.render(SuiteOutcome(("a",), 1, (run,), 1.0)))
    assert "Records #3: history file" in text and "could not be read" in text
    assert "No timeline: history file" in text


# --------------------------------------------------------------------------- time axis


def test_tick_labels_follow_the_scale_from_milliseconds_to_days() -> None:
    assert fmt_tick(0.25, 0.05) == "0.25s"
    assert fmt_tick(30, 5) == "30s"
    assert fmt_tick(270, 30) == "4m30s"
    assert fmt_tick(600, 300) == "10m"
    assert fmt_tick(8100, 900) == "2h15m"
    assert fmt_tick(7200, 3600) == "2h"
    assert fmt_tick(DAY + 6 * 3600, 21600) == "1d 06h"
    assert fmt_tick(8 * DAY, DAY) == "8d"
    assert fmt_tick(8 * DAY + 5, 5) == "8d 00:00:05"
    assert fmt_tick(8 * DAY + 302.2, 0.1) == "8d 00:05:02.2"
    assert fmt_tick(3725, 1) == "1:02:05" and fmt_tick(125.5, 0.5) == "2m05.5s"
    assert nice_step(30, 6) == 5 and nice_step(8 * DAY, 10) == DAY
    assert nice_step(600, 10) == 60


@pytest.mark.parametrize("end", [0.8, 30.0, 600.0, 7200.0, 2 * DAY, 8 * DAY])
def test_linear_axis_has_a_handful_of_readable_ticks(end: float) -> None:
    axis = TimeAxis.linear(0.0, end, 880)
    assert 3 <= len(axis.ticks) <= 11
    xs = [tick.x for tick in axis.ticks]
    assert xs == sorted(xs) and all(0 <= x <= 880 for x in xs)
    assert all(len(tick.label) <= 12 for tick in axis.ticks)


def test_axis_breaks_an_eight_day_idle_stretch_so_the_first_minutes_stay_readable() -> None:
    times = [0.0, 1.0, 2.0, 60.0, 300.0, 301.0, 8 * DAY, 8 * DAY + 2]
    axis = TimeAxis.fit(times, 0.0, 8 * DAY + 2, 880)
    assert len(axis.breaks) == 1 and axis.breaks[0].t1 - axis.breaks[0].t0 > 7 * DAY
    assert axis.x(300.0) > 300  # the first five minutes take real width
    xs = [axis.x(t) for t in sorted(times)]
    assert xs == sorted(xs) and axis.x(8 * DAY + 2) == pytest.approx(880)
    labels = [tick.label for tick in axis.ticks]
    assert any(label.endswith(("m", "s")) for label in labels)
    # Where the axis resumes after the break is named to the second.
    resume = next(t for t in axis.ticks if t.x >= axis.breaks[0].x1)
    assert (resume.label, resume.anchor) == ("8d 00:00:00", "start")
    # No two labels overlap (about 6 px a character).
    extents = sorted((t.x - (len(t.label) * 6 if t.anchor == "end" else
                             len(t.label) * 3 if t.anchor == "middle" else 0),
                      len(t.label) * 6) for t in axis.ticks)
    assert all(a[0] + a[1] <= b[0] for a, b in itertools.pairwise(extents))
    # Evenly spread events need no break.
    assert not TimeAxis.fit([i * DAY for i in range(9)], 0.0, 8 * DAY, 880).breaks


# --------------------------------------------------------------------------- alive chart


def test_alive_series_counts_versions_from_registration_until_drained() -> None:
    naive = alive_series(approval_history(naive=True))
    ref = alive_series(approval_history(naive=False))
    assert max(n for _, n in naive) == 8  # every version kept alive by its wait
    assert [n for _, n in naive][:8] == [1, 2, 3, 4, 5, 6, 7, 8]
    # After the hand-off nothing is pinned when the next release comes: it drains at once.
    assert ref == ((0.0, 1), (DAY, 1), (2 * DAY, 1), (3 * DAY, 1), (4 * DAY, 1), (5 * DAY, 1),
                   (6 * DAY, 1), (7 * DAY, 1))


def test_alive_chart_puts_naive_and_reference_on_one_chart(suite: SuiteOutcome) -> None:
    page = report_html.render(suite)
    assert page.count('<svg class="alive"') == 1
    chart = page[page.index('<svg class="alive"'):]
    chart = chart[: chart.index("</svg>")]
    assert chart.count('class="series"') == 2
    assert "naive: 7 alive" in chart and "reference: 1 alive" in chart
    assert chart.count('class="release"') == 8
    text = text_of(page)
    assert "naive: peak 8 versions alive" in text and "reference: peak 1 version alive" in text


def test_alive_series_from_the_run_outcome_is_used_when_there_is_no_history() -> None:
    run = run_outcome("r", "solo", passing("inv"), alive=((0.0, 1), (10.0, 2), (20.0, 3)),
                      virtual_time=30.0)
    page = report_html.render(SuiteOutcome(("solo",), 1, (run,), 1.0))
    assert page.count('<svg class="alive"') == 1 and "solo: 3 alive" in page


# --------------------------------------------------------------------------- JUnit


def test_junit_has_one_testcase_per_run_and_invariant(suite: SuiteOutcome,
                                                      tmp_path: Path) -> None:
    write_report(suite, tmp_path)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("12", "1", "0")
    naive = root.find("testsuite[@name='naive']")
    assert naive is not None
    cases = naive.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("eight-releases", name) for name in INVARIANTS]
    failure = naive.find("testcase[@name='pinning-bound']/failure")
    assert failure is not None
    assert failure.get("message", "").startswith("inv2 held dep1 suspended for 7.5d")
    body = failure.text or ""
    assert "invocation.suspended" in body and "deployment.superseded" in body
    assert "replay: durable-chaos replay --adapter naive --seed 7 reports/shrunk/" in body
    ref = root.find("testsuite[@name='reference']")
    assert ref is not None and ref.get("failures") == "0" and ref.get("tests") == "8"


def test_junit_skips_unknown_and_unreached(tmp_path: Path) -> None:
    run = run_outcome("r", "a", (Result("u", None, reached=False, note="checker crashed: X"),
                                 Result("n", True, reached=False), Result("p", True)))
    write_report(SuiteOutcome(("a",), 1, (run,), 1.0), tmp_path)
    ts = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert ts is not None and ts.get("skipped") == "2" and ts.get("failures") == "0"
    skipped = {c.get("name"): c.find("skipped") for c in ts.findall("testcase")}
    assert skipped["u"] is not None and "checker crashed: X" in skipped["u"].get("message", "")
    assert skipped["n"] is not None and "never got to" in skipped["n"].get("message", "")
    assert skipped["p"] is None
