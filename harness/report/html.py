"""The HTML report: one self-contained page a person reads after a chaos run.

No network and no external files: the stylesheet is inlined, charts are inline SVG, and the
only script (copy buttons on code blocks) is inline, optional and pinned by hash in the page's
Content-Security-Policy, so markup smuggled in through runtime text could not run even if it
escaped. Everything that came from the runtime or a scenario goes through `esc`.

Reading order: verdict and summary, the property table (every invariant, per adapter, with
how often its window was reached), every violation (witness, the records that prove it, the
minimal schedule, the replay command, the run's timeline), deployments alive over time, the
faults and fault points reached, every run, the environment.

Same input, same page, except the wall times it prints.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Final

from harness.checkers.base import Valid, Violation
from harness.history import History, Record, fmt_duration
from harness.outcome import RunOutcome, SuiteOutcome
from harness.report.summary import Histories as _Histories
from harness.report.summary import (
    Summary,
    adapters_of,
    clean,
    effective,
    expected_failure,
    invariants,
    skipped_kinds,
    step_kinds_of,
    unclaimed_of,
    unmet_note,
)
from harness.report.summary import shrunk_for as _shrunk_for
from harness.report.timeline import (
    GROUP_TITLES,
    GROUPS,
    SPAN_TITLES,
    Lane,
    Mark,
    TimeAxis,
    Timeline,
    alive_series,
    build_timeline,
    releases,
)

# What each built-in invariant means (docs/design.md, section 4); user checkers show no blurb.
DESCRIPTIONS: Final[dict[str, str]] = {
    "no-duplicate-effects": "Each effect key is delivered to the world at most once.",
    "pinning-bound": "No invocation holds its deployment suspended longer than hand_off_after "
                     "(plus tolerance); every superseded deployment drains within that bound.",
    "busy-rule": "At most one turn in progress per session; queued messages keep their order.",
    "fencing": "Every accepted append carries the owner's current epoch; the log is linear.",
    "turn-outcome": "Every waiting turn ends exactly once: answered, expired at max_wait, or "
                    "ended by a new message.",
    "access-rechecked": "A re-run after hand-off runs on the latest deployment and rejects a "
                        "user who lost access.",
    "conservative-recovery": "A tool intent without a known result is never re-executed "
                             "without its idempotency key; the turn is held.",
    "liveness": "Once faults heal, every session becomes idle within a bound.",
    "effect-authorized": "Every effect of a call that waited on a person is authorized by an "
                         "approving answer that is the call's final outcome.",
    "answer-fate": "Every accepted answer is applied, or refused with its reason; none is "
                   "silently dropped.",
    "effect-done": "A call with an effect reported answered or completed had its effect "
                   "delivered to the world.",
    "hold-justified": "A call is held for confirmation only on an intent of unknown outcome, "
                      "found by a later attempt under a newer owner of the thread.",
    "outcome-justified": "Rejected for access only after a revocation of the tool; cancelled "
                         "only after a cancel of the session.",
    "message-logged": "A turn that ended had its message appended to the thread log first.",
    "approval-asked": "A tool that needs approval is decided, or run, only after its card "
                      "was shown.",
    "context-kept": "The model is told what came of every tool call it made: none asked for "
                    "again, none skipped.",
    "turn-per-message": "Every message the person sent gets exactly one turn: none lost, none "
                        "doubled.",
    "background-honored": "A call the person sent to the background goes there, or was "
                          "already decided.",
    "cancel-honored": "A cancelled turn stops spending: at most the model step in flight, "
                      "and no approval after the cancel runs its tools.",
    "turn-answered": "A turn that completed gave the model's answer (or spent its step "
                     "bound), and none spent more model steps than the bound.",
    "card-closed": "A call's approval card closes when the call ends, with its outcome, and "
                   "stays open while the call still waits on the person.",
    "no-code-error": "No attempt fails on an error of the runtime's own code (a NameError, "
                     "an AttributeError): attempts fail only on faults and rejections.",
    "malformed-refused": "A malformed request is refused as the client's error (400 or 422), "
                         "never as the runtime's failure or a conflict.",
    "result-told": "An approved call that finished after its turn ended starts a new turn: "
                   "the person is told what was done.",
}

_MAX_VIOLATIONS_SHOWN: Final = 10
_MAX_RECORDS_SHOWN: Final = 40
_MAX_ALIVE_CHARTS: Final = 3

_SCRIPT: Final = """
(function () {
  var blocks = document.querySelectorAll("pre.copy");
  for (var i = 0; i < blocks.length; i++) {
    (function (pre) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-btn";
      button.textContent = "Copy";
      button.addEventListener("click", function () {
        var text = pre.textContent;
        function selectIt() {
          var range = document.createRange();
          range.selectNodeContents(pre);
          var sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          button.textContent = "Selected: press Ctrl+C";
        }
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(text).then(function () {
            button.textContent = "Copied";
          }, selectIt);
        } else {
          selectIt();
        }
      });
      pre.parentNode.insertBefore(button, pre);
    })(blocks[i]);
  }
})();
""".strip()


def esc(value: object) -> str:
    """Text from anywhere (runtime, scenario, checker) as inert HTML/SVG text."""
    return html.escape(clean(str(value)), quote=True)


def stylesheet() -> str:
    return resources.files("harness.report").joinpath("style.css").read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _num(x: float) -> str:
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _fmt_wall(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return fmt_duration(seconds)


_STEP_NOTES = 10  # step notes shown per run; the history has them all


def badge(kind: str, text: str | None = None) -> str:
    label = text or {"pass": "pass", "fail": "fail", "unknown": "unknown",
                     "unreached": "not reached", "notclaimed": "not claimed",
                     "xfail": "expected failure"}.get(kind, kind)
    return f'<span class="badge b-{esc(kind)}">{esc(label)}</span>'


# --------------------------------------------------------------------------- history access


# --------------------------------------------------------------------------- property table


@dataclass
class _Tally:
    passed: int = 0
    failed: int = 0
    unknown: int = 0
    reached: int = 0  # runs that reached the window (and gave a verdict)
    unreached_passes: int = 0
    expected: int = 0  # violations a scenario's [expect] fails asked for

    @property
    def runs(self) -> int:
        return self.passed + self.failed + self.unknown + self.expected

    @property
    def status(self) -> str:
        if self.failed:
            return "fail"
        if self.expected and not self.passed:
            return "xfail"
        if self.passed and self.unreached_passes == self.passed:
            return "unreached"
        if self.passed:
            return "pass"
        return "unknown"

    def add(self, valid: Valid, reached: bool) -> None:
        if valid is True:
            self.passed += 1
            if not reached:
                self.unreached_passes += 1
        elif valid is False:
            self.failed += 1
        else:
            self.unknown += 1
        if reached and valid is not None:
            self.reached += 1


def tallies(suite: SuiteOutcome) -> dict[tuple[str, str], _Tally]:
    """(invariant, adapter) -> counts over the suite's runs (shrunk runs are not counted)."""
    names = invariants(suite.runs)
    out: dict[tuple[str, str], _Tally] = {}
    for run in suite.runs:
        by_name = {r.checker: r for r in run.results}
        for name in names:
            tally = out.setdefault((name, run.adapter), _Tally())
            result = by_name.get(name)
            if result is None:
                if run.error is not None:
                    tally.add(None, False)
                continue
            if expected_failure(run, result):
                tally.expected += 1
                tally.reached += 1
                continue
            tally.add(effective(run, result), result.reached)
    return out


def unclaimed_tallies(suite: SuiteOutcome) -> dict[tuple[str, str], _Tally]:
    """(invariant, adapter) -> how the runs that do not claim it would have been judged."""
    out: dict[tuple[str, str], _Tally] = {}
    for run in suite.runs:
        for result in run.unclaimed:
            out.setdefault((result.checker, run.adapter), _Tally()).add(
                effective(run, result), result.reached)
    return out


_adapters = adapters_of


def _property_table(suite: SuiteOutcome) -> str:
    names = invariants(suite.runs)
    adapters = _adapters(suite)
    counts = tallies(suite)
    unclaimed = unclaimed_tallies(suite)
    out = ['<section id="properties"><h2>Properties</h2>']
    if not names:
        out.append('<p class="muted">No invariant was checked'
                   + (" before the suite stopped." if not suite.complete else ".") + "</p>")
        return "".join(out) + "</section>"
    out.append('<p class="lede">Every invariant, per adapter: runs that passed, failed or '
               "could not tell, and in how many runs the schedule actually reached the window "
               "the invariant is about.</p>")
    out.append('<div class="table-wrap"><table class="props"><thead><tr><th>Invariant</th>')
    for adapter in adapters:
        out.append(f'<th scope="col">{esc(adapter)}</th>')
    out.append("</tr></thead><tbody>")
    for name in names:
        rows_status = [counts.get((name, a), _Tally()).status for a in adapters
                       if counts.get((name, a), _Tally()).runs]
        worst = ("fail" if "fail" in rows_status else
                 "unknown" if all(s in ("unknown", "unreached") for s in rows_status)
                 else "pass")  # all() of nothing: an invariant no adapter claims
        out.append(f'<tr class="row-{worst}"><th scope="row"><span class="inv">{esc(name)}'
                   "</span>")
        if name in DESCRIPTIONS:
            out.append(f'<span class="desc">{esc(DESCRIPTIONS[name])}</span>')
        out.append("</th>")
        for adapter in adapters:
            t = counts.get((name, adapter))
            u = unclaimed.get((name, adapter))
            if (t is None or t.runs == 0) and u is not None and u.runs:
                out.append(_not_claimed_cell(name, adapter, u))
                continue
            if t is None or t.runs == 0:
                out.append('<td class="na"><span class="muted">not run</span></td>')
                continue
            out.append(f'<td data-invariant="{esc(name)}" data-adapter="{esc(adapter)}">')
            out.append(badge(t.status))
            out.append(
                '<span class="counts">'
                f'<span class="c-pass" title="passed">{t.passed} pass</span> · '
                f'<span class="c-fail" title="failed">{t.failed} fail</span> · '
                f'<span class="c-unknown" title="unknown">{t.unknown} unknown</span>'
                + (f' · <span class="c-xfail" title="violated, as the scenario expects">'
                   f"{t.expected} expected failure</span>" if t.expected else "")
                + "</span>")
            out.append(f'<span class="reach">window reached in {t.reached} of '
                       f"{_plural(t.runs, 'run')}</span>")
            if t.passed and t.unreached_passes == t.passed and not t.failed:
                out.append('<span class="note">Passed only because no run reached its '
                           "window: this says nothing about the invariant.</span>")
            elif t.unreached_passes:
                out.append(f'<span class="note">{t.unreached_passes} of the '
                           f"{_plural(t.passed, 'pass', 'passes')} never reached its window."
                           "</span>")
            out.append("</td>")
        out.append("</tr>")
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _not_claimed_cell(name: str, adapter: str, u: _Tally) -> str:
    """An invariant the adapter's design does not promise: shown, judged, never a failure."""
    seen = (f"would fail in {u.failed} of {_plural(u.runs, 'run')}" if u.failed
            else f"no violation in {_plural(u.runs, 'run')}")
    return (f'<td class="notclaimed" data-invariant="{esc(name)}" data-adapter="{esc(adapter)}">'
            f'{badge("notclaimed")}<span class="counts">{esc(seen)}</span>'
            '<span class="note">Not claimed by this adapter (<code>claims</code>, '
            "<code>--invariants</code>): judged for information, never a failure.</span></td>")


# --------------------------------------------------------------------------- summary


def _verdict(suite: SuiteOutcome) -> tuple[str, str]:
    failing_runs = sum(1 for run in suite.runs
                       if any(effective(run, r) is False for r in run.results))
    violations = sum(1 for run in suite.runs for r in run.results
                     if effective(run, r) is False)
    unknown_runs = sum(1 for run in suite.runs if run.unknown)
    runs = len(suite.runs)
    if violations:
        return "fail", (f"{_plural(violations, 'invariant')} violated in "
                        f"{failing_runs} of {_plural(runs, 'run')}")
    if not suite.complete:
        # Never PASS on a suite that stopped early: what did not run was not judged.
        stopped = f"stopped by {suite.interrupted}" if suite.interrupted else "stopped early"
        return "incomplete", f"{stopped} after {_plural(runs, 'run')}" + (
            f" ({unknown_runs} inconclusive)" if unknown_runs else "")
    if runs == 0:
        return "unknown", "no run finished"
    if unknown_runs == runs:
        return "unknown", f"no verdict: all {_plural(runs, 'run')} inconclusive"
    text = f"no violation in {_plural(runs, 'run')}"
    if unknown_runs:
        text += f" ({unknown_runs} inconclusive)"
    return "pass", text


def _fault_totals(runs: Sequence[RunOutcome]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for run in runs:
        for kind, n in run.faults.items():
            totals[kind] = totals.get(kind, 0) + n
    return dict(sorted(totals.items()))


def _header(suite: SuiteOutcome) -> str:
    status, text = _verdict(suite)
    return (
        '<header class="top"><div class="top-inner">'
        '<div class="brand">durable-chaos <span>report</span></div>'
        f'<div class="verdict v-{status}">{badge(status, status.upper())}'
        f'<span class="verdict-text">{esc(text)}</span></div>'
        "</div></header>"
    )


def _summary(suite: SuiteOutcome) -> str:
    runs = suite.runs
    scenarios = sum(1 for r in runs if r.source == "scenario")
    generated = sum(1 for r in runs if r.source == "generated")
    other = len(runs) - scenarios - generated
    schedules = len({r.name for r in runs})
    run_text = (f"{_plural(len(runs), 'run')} of {_plural(schedules, 'schedule')}: "
                f"{scenarios} scenario, {generated} generated"
                + (f", {other} other" if other else ""))
    if suite.shrunk:
        run_text += f"; {_plural(len(suite.shrunk), 'schedule')} shrunk"
    virtual = sum(r.virtual_time for r in runs)
    longest = max((r.virtual_time for r in runs), default=0.0)
    faults = _fault_totals(runs)
    fault_text = (", ".join(f"{kind}: {n}" for kind, n in faults.items())
                  if faults else "none injected")
    crashed = [r for r in runs if r.error is not None]
    items = [
        ("Adapters", ", ".join(_adapters(suite)) or "none"),
        ("Seed", str(suite.seed)),
        ("Schedules run", run_text),
        ("Scenario sets", ", ".join(suite.scenario_sets) or "none"),
        ("Virtual time", f"{fmt_duration(virtual)} in total, longest run "
                         f"{fmt_duration(longest)}"),
        ("Wall time", _fmt_wall(suite.wall_time)),
        ("Faults injected", fault_text),
    ]
    if crashed:
        items.append(("Adapter crashed", f"in {_plural(len(crashed), 'run')}: "
                                         "their invariants count as unknown"))
    kinds = skipped_kinds(runs)
    if kinds:
        items.append(("Steps skipped (runtime lacks the capability)",
                      "; ".join(k.describe() for k in kinds)))
    not_claimed = unclaimed_of(runs)
    if not_claimed:
        items.append(("Not claimed (never fail the run)", "; ".join(
            f"{u.invariant}: " + (f"would fail in {_plural(u.would_fail, 'run')}"
                                  if u.would_fail else "no violation seen")
            for u in not_claimed)))
    noted = [run for run in runs if run.step_notes]
    if noted:
        count = sum(len(run.step_notes) for run in noted)
        items.append(("Steps not applied as written",
                      f"{_plural(count, 'step')} late, dropped or skipped in "
                      f"{_plural(len(noted), 'run')} (see Runs)"))
    out = ['<section id="summary" class="summary"><h2 class="sr">Summary</h2>']
    if not suite.complete:
        out.append(
            '<div class="banner incomplete" role="alert"><strong>Incomplete.</strong> '
            "The suite stopped before it finished (interrupted, or an adapter crashed). "
            f"What follows is what was checked so far: {_plural(len(runs), 'run')}. "
            "A pass here covers only these runs.</div>")
    out.append('<dl class="facts">')
    for key, value in items:
        out.append(f"<div><dt>{esc(key)}</dt><dd>{esc(value)}</dd></div>")
    out.append("</dl></section>")
    return "".join(out)


# --------------------------------------------------------------------------- violations


def _record_line(record: Record) -> str:
    line = f'<span class="rec">{esc(record.describe())}</span>'
    if record.data:
        data = json.dumps(record.data, sort_keys=True, default=str, ensure_ascii=False)
        if len(data) > 240:
            data = data[:239] + "…"
        line += f' <span class="data">{esc(data)}</span>'
    return line


def _violation_block(v: Violation, history: History | str) -> str:
    out = [f'<div class="violation"><p class="witness">{esc(v.message)}</p>']
    if v.records and isinstance(history, History):
        out.append('<p class="proof-h">The records that prove it</p><ol class="records">')
        for index in v.records[:_MAX_RECORDS_SHOWN]:
            if 0 <= index < len(history):
                out.append(f"<li>{_record_line(history[index])}</li>")
            else:
                out.append(f'<li><span class="rec">#{index}</span> '
                           '<span class="muted">(not in the history file)</span></li>')
        more = len(v.records) - _MAX_RECORDS_SHOWN
        if more > 0:
            out.append(f'<li class="muted">… and {more} more records</li>')
        out.append("</ol>")
    elif v.records:
        shown = ", ".join(f"#{i}" for i in v.records[:_MAX_RECORDS_SHOWN])
        out.append(f'<p class="muted small">Records {esc(shown)}: {esc(history)}.</p>')
    out.append("</div>")
    return "".join(out)


def _code(text: str, label: str, cls: str = "") -> str:
    return (f'<div class="codeblock {cls}"><div class="code-h">{esc(label)}</div>'
            f'<pre class="copy"><code>{esc(text)}</code></pre></div>')


def _failing_run(run: RunOutcome, suite: SuiteOutcome, histories: _Histories, n: int,
                 *, shrunk_origin: bool = False) -> str:
    shrunk = None if shrunk_origin else _shrunk_for(run, suite)
    # The evidence: this run's own history, or, when the run kept none (exploration keeps
    # only the replayed minimal schedule), the minimal schedule's.
    evidence = run
    history = histories.get(run)
    if not isinstance(history, History) and shrunk is not None:
        shrunk_history = histories.get(shrunk)
        if isinstance(shrunk_history, History):
            evidence, history = shrunk, shrunk_history
    failing = [r for r in evidence.results if effective(evidence, r) is False]
    title = (("Smallest failing schedule found before the time budget cut shrinking short: "
              if run.shrink_cut_short else "Minimal failing schedule found by shrinking: ")
             if shrunk_origin else "") + run.name
    out = [f'<article class="failing" id="violation-{n}">',
           f'<header><h3>{badge("fail")} {esc(title)}</h3>'
           f'<p class="meta">adapter <b>{esc(run.adapter)}</b> · seed <b>{run.seed}</b> · '
           f"{esc(run.source)} · virtual time {esc(fmt_duration(run.virtual_time))}"
           + (f" · expected: {esc(run.expected)}" if run.expected else "")
           + "</p></header>"]
    if evidence is not run:
        out.append(f'<p class="evidence-note">This run kept no history; the witness, records '
                   f"and timeline below are from its minimal schedule, "
                   f"<b>{esc(evidence.name)}</b>, replayed with its history saved.</p>")
    cited: set[int] = set()
    for result in failing:
        out.append(f'<section class="inv-fail" data-invariant="{esc(result.checker)}">'
                   f'<h4><span class="inv">{esc(result.checker)}</span></h4>')
        if result.checker in DESCRIPTIONS:
            out.append(f'<p class="desc">{esc(DESCRIPTIONS[result.checker])}</p>')
        for v in result.violations[:_MAX_VIOLATIONS_SHOWN]:
            out.append(_violation_block(v, history))
            cited.update(v.records)
        if result.valid is True:  # an expected failure that did not show
            out.append(f'<p class="witness">{esc(unmet_note(result))}</p>')
        elif not result.violations:
            out.append(f'<p class="witness">{esc(result.note or "failed without a witness")}'
                       "</p>")
        more = len(result.violations) - _MAX_VIOLATIONS_SHOWN
        if more > 0:
            out.append(f'<p class="muted">… and {_plural(more, "more violation")} of '
                       "this invariant in this run.</p>")
        out.append("</section>")

    source = shrunk or run
    out.append('<div class="repro">')
    if source.shrink_cut_short:
        heading = "Smallest failing schedule so far (shrinking cut short)"
        out.append('<p class="evidence-note shrink-cut-short">Shrinking was cut short by the '
                   "time budget: this is the smallest failing schedule found by then, not a "
                   "minimal one. A larger <code>--time-budget</code> shrinks further.</p>")
    elif shrunk is not None:
        heading = "Minimal schedule (shrunk)"
    elif shrunk_origin:
        heading = "Minimal schedule"
    else:
        heading = "Schedule (not shrunk)"
    out.append(_code(source.replay_command, "Replay command", "replay"))
    out.append(_code(source.schedule_toml, heading + " · scenario TOML", "schedule"))
    if shrunk is not None:
        out.append(_code(run.replay_command, "Replay the original run", "replay"))
        steps = run.steps
        out.append(f'<details class="orig"><summary>Schedule of the original run '
                   f"({_plural(steps, 'step')})</summary>"
                   + _code(run.schedule_toml, "Original schedule · scenario TOML", "schedule")
                   + "</details>")
    out.append("</div>")

    timeline: Timeline | None = None
    note = ""
    if isinstance(history, History):
        timeline = build_timeline(history, focus=cited, end=evidence.virtual_time or None)
    elif evidence.timeline:
        try:
            timeline = Timeline.from_dict(evidence.timeline)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            note = f"the run's timeline could not be read: {type(exc).__name__}: {exc}"
    else:
        note = history
    out.append('<div class="timeline"><h4>Timeline'
               + (f' <span class="muted">of {esc(evidence.name)}</span>' if evidence is not run
                  else "") + "</h4>")
    if timeline is not None and not timeline.empty:
        out.append(timeline_svg(timeline, f"tl{n}",
                                f"Timeline of {evidence.name} on {evidence.adapter}"))
    else:
        out.append(f'<p class="muted">No timeline: {esc(note or "the history is empty")}.</p>')
    out.append("</div></article>")
    return "".join(out)


def _violations(suite: SuiteOutcome, histories: _Histories) -> str:
    out = ['<section id="violations"><h2>Violations</h2>']
    failing = [run for run in suite.runs
               if any(effective(run, r) is False for r in run.results)]
    matched = {id(s) for run in failing if (s := _shrunk_for(run, suite)) is not None}
    orphans = [s for s in suite.shrunk if id(s) not in matched and s.failed]
    if not failing and not orphans:
        out.append('<p class="muted">No invariant was violated in any run.</p></section>')
        return "".join(out)
    listed = [*failing, *orphans]
    if len(listed) > 1:
        out.append('<ol class="vindex">')
        for n, run in enumerate(listed, 1):
            names = ", ".join(r.checker for r in run.results if effective(run, r) is False)
            out.append(f'<li><a href="#violation-{n}">{esc(run.name)}</a> '
                       f'<span class="muted">on {esc(run.adapter)}:</span> '
                       f'<span class="inv">{esc(names)}</span></li>')
        out.append("</ol>")
    for n, run in enumerate(failing, 1):
        out.append(_failing_run(run, suite, histories, n))
    for n, run in enumerate(orphans, len(failing) + 1):
        out.append(_failing_run(run, suite, histories, n, shrunk_origin=True))
    out.append(_legend())
    out.append("</section>")
    return "".join(out)


# --------------------------------------------------------------------------- timeline SVG

_W: Final = 1100.0
_LABEL_W: Final = 210.0
_RIGHT: Final = 16.0
_ROW: Final = 16.0
_GROUP_H: Final = 20.0
_AXIS_H: Final = 30.0
# (offset from the row's top, height) per span kind; the rest fill the row.
_GEOMETRY: Final[dict[str, tuple[float, float]]] = {
    "up": (5.0, 6.0),
    "turn": (11.0, 3.0),  # a turn underlines its waits
    "awaiting": (2.0, 8.0),
    "waiting": (2.0, 8.0),
}


def _truncate(text: str, px: float, char_px: float = 6.4) -> str:
    limit = max(4, int(px / char_px))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def timeline_svg(tl: Timeline, uid: str, title: str) -> str:
    plot_w = _W - _LABEL_W - _RIGHT
    axis = TimeAxis.fit(tl.times(), tl.start, tl.end, plot_w)

    def x(t: float) -> float:
        return _LABEL_W + axis.x(t)

    body: list[str] = []
    y = _AXIS_H + 8
    lane_top = y
    for group in GROUPS:
        members = [lane for lane in tl.lanes if lane.group == group]
        hidden = tl.hidden.get(group, 0)
        if not members and not hidden:
            continue
        body.append(f'<text class="grp" x="4" y="{_num(y + 14)}">'
                    f"{esc(GROUP_TITLES[group])}</text>")
        body.append(f'<line class="grp-line" x1="0" x2="{_num(_W)}" y1="{_num(y + 19)}" '
                    f'y2="{_num(y + 19)}"/>')
        y += _GROUP_H + 2
        for lane in members:
            body.append(_lane_svg(lane, y, x))
            y += lane.rows * _ROW + 4
        if hidden:
            body.append(f'<text class="hidden-note" x="12" y="{_num(y + 11)}">'
                        f"{hidden} more {group}{'' if hidden == 1 else 's'} not shown"
                        " (the ones a witness cites and the longest waits are kept)</text>")
            y += _ROW
        y += 4
    height = y + 6

    # Faults: shaded bands (or lines) across every lane, labelled above the axis.
    shade: list[str] = []
    for f in tl.faults:
        x0 = x(f.start)
        tip = f"{f.label} · #{f.record} at {fmt_duration(f.start)}"
        if f.end is not None and f.end > f.start:
            w = max(3.0, x(f.end) - x0)
            shade.append(f'<rect class="fault f-{esc(f.kind)}" x="{_num(x0)}" '
                         f'y="{_num(lane_top)}" width="{_num(w)}" '
                         f'height="{_num(height - lane_top)}"><title>{esc(tip)} to '
                         f"{esc(fmt_duration(f.end))}</title></rect>")
        else:
            shade.append(f'<line class="fault-line f-{esc(f.kind)}" x1="{_num(x0)}" '
                         f'x2="{_num(x0)}" y1="{_num(lane_top)}" y2="{_num(height)}">'
                         f"<title>{esc(tip)}</title></line>")
        shade.append(f'<text class="fault-label" x="{_num(x0 + 2)}" y="{_num(lane_top - 1)}">'
                     f"{esc(_truncate(f.label, 140))}</text>")

    axis_svg: list[str] = []
    for tick in axis.ticks:
        xx = _LABEL_W + tick.x
        axis_svg.append(f'<line class="grid" x1="{_num(xx)}" x2="{_num(xx)}" '
                        f'y1="{_num(_AXIS_H - 6)}" y2="{_num(height)}"/>')
        axis_svg.append(f'<text class="tick" x="{_num(xx)}" y="{_num(_AXIS_H - 10)}" '
                        f'text-anchor="{tick.anchor}">{esc(tick.label)}</text>')
    for seg in axis.breaks:
        x0, x1 = _LABEL_W + seg.x0, _LABEL_W + seg.x1
        gap = fmt_duration(seg.t1 - seg.t0)
        axis_svg.append(f'<rect class="axis-break" x="{_num(x0 + 4)}" y="{_num(_AXIS_H - 6)}" '
                        f'width="{_num(x1 - x0 - 8)}" height="{_num(height - _AXIS_H + 6)}">'
                        f"<title>{esc(gap)} without events (drawn short)</title></rect>")
        for edge, sign in ((x0 + 4, 1), (x1 - 4, -1)):
            zig = " ".join(f"{_num(edge + sign * (i % 2) * 3)},{_num(_AXIS_H - 6 + i * 5)}"
                           for i in range(int((height - _AXIS_H) / 5) + 3))
            axis_svg.append(f'<polyline class="zig" points="{zig}"/>')
        axis_svg.append(f'<text class="break-label" x="{_num((x0 + x1) / 2)}" '
                        f'y="{_num(_AXIS_H - 10)}">{esc(gap)}</text>')
    axis_svg.append(f'<line class="axis" x1="{_num(_LABEL_W)}" x2="{_num(_W - _RIGHT)}" '
                    f'y1="{_num(_AXIS_H - 6)}" y2="{_num(_AXIS_H - 6)}"/>')

    return (f'<svg class="tl" id="{esc(uid)}" viewBox="0 0 {_num(_W)} {_num(height)}" '
            f'width="{_num(_W)}" height="{_num(height)}" role="img" '
            f'aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg">'
            f"<title>{esc(title)}</title>"
            + "".join(axis_svg) + "".join(shade) + "".join(body) + "</svg>")


def _lane_svg(lane: Lane, y: float, x: Callable[[float], float]) -> str:
    out = [f'<g class="lane lane-{esc(lane.group)}" data-lane="{esc(lane.id)}">',
           f'<text class="lane-label" x="12" y="{_num(y + 11)}">'
           f"<title>{esc(lane.label)}</title>{esc(_truncate(lane.label, _LABEL_W - 18))}</text>"]
    for s in lane.spans:
        x0 = x(s.start)
        w = max(2.0, x(s.end) - x0)
        top, h = _GEOMETRY.get(s.kind, (2.0, _ROW - 4))
        ry = y + s.row * _ROW + top
        tip = (f"{s.label or SPAN_TITLES.get(s.kind, s.kind)}: {fmt_duration(s.start)} to "
               + ("end of run (still open)" if s.open else fmt_duration(s.end))
               + f" ({fmt_duration(s.end - s.start)})")
        cls = f"sp sp-{esc(s.kind)}" + (" open" if s.open else "")
        out.append(f'<rect class="{cls}" x="{_num(x0)}" y="{_num(ry)}" width="{_num(w)}" '
                   f'height="{_num(h)}" rx="2"><title>{esc(tip)}</title></rect>')
    cited: list[list[tuple[float, Mark]]] = []
    for m in sorted((m for m in lane.marks if m.kind == "cited"),
                    key=lambda m: (m.row, m.time, m.record or 0)):
        mx = x(m.time)
        if cited and cited[-1][0][1].row == m.row and mx - cited[-1][0][0] < 26:
            cited[-1].append((mx, m))
        else:
            cited.append([(mx, m)])
    for m in lane.marks:
        if m.kind == "cited":
            continue
        mx = x(m.time)
        my = y + m.row * _ROW + _ROW / 2
        tip = f"{m.label} at {fmt_duration(m.time)}"
        if m.kind in ("ok", "fail"):
            out.append(f'<circle class="mk mk-{m.kind}" cx="{_num(mx)}" cy="{_num(my)}" r="3">'
                       f"<title>{esc(tip)}</title></circle>")
        else:
            out.append(f'<line class="mk mk-info" x1="{_num(mx)}" x2="{_num(mx)}" '
                       f'y1="{_num(my - 5)}" y2="{_num(my + 5)}"><title>{esc(tip)}</title>'
                       "</line>")
    for cluster in cited:
        mx, first = cluster[0]
        my = y + first.row * _ROW + _ROW / 2
        label = first.label.split(" ", 1)[0] + (f" +{len(cluster) - 1}" if len(cluster) > 1
                                                 else "")
        tip = "; ".join(f"{m.label} at {fmt_duration(m.time)}" for _, m in cluster)
        out.append(f'<g class="mk mk-cited"><title>{esc(tip)} (cited by the witness)</title>')
        for cx, _ in cluster:
            out.append(f'<path d="M{_num(cx)} {_num(my - 6)} l6 6 l-6 6 l-6 -6 z"/>')
        out.append(f'<text x="{_num(mx + 7)}" y="{_num(my - 4)}">{esc(label)}</text></g>')
    out.append("</g>")
    return "".join(out)


def _legend() -> str:
    items = [
        ("sp-live", "deployment live"), ("sp-superseded", "superseded, still alive"),
        ("sp-running", "invocation running"), ("sp-suspended", "suspended: pins its deployment"),
        ("sp-queued", "queued"), ("sp-stuck", "paused by the engine"),
        ("sp-turn", "turn in progress"), ("sp-awaiting", "in-call wait (pinned)"),
        ("sp-waiting", "wait handed off (nothing pinned)"),
        ("sp-paused", "host paused"), ("sp-crashed", "host crashed"),
        ("fault", "fault window"),
    ]
    out = ['<div class="legend" aria-label="Timeline legend">']
    for cls, text in items:
        out.append(f'<span class="lg"><svg width="22" height="10" aria-hidden="true">'
                   f'<rect class="{cls}" x="0" y="0" width="22" height="10" rx="2"/></svg>'
                   f"{esc(text)}</span>")
    out.append('<span class="lg"><svg width="12" height="12" aria-hidden="true">'
               '<path class="mk-cited-sw" d="M6 0 l6 6 l-6 6 l-6 -6 z"/></svg>'
               "record cited by a witness</span>")
    out.append('<span class="lg"><svg width="22" height="12" aria-hidden="true">'
               '<rect class="axis-break" x="2" y="0" width="18" height="12"/></svg>'
               "idle time drawn short</span>")
    out.append("</div>")
    return "".join(out)


# --------------------------------------------------------------------------- alive chart

_PALETTE_WARM: Final = ("#c2410c", "#b91c1c", "#a16207")
_PALETTE_COOL: Final = ("#15803d", "#1d4ed8", "#7e22ce", "#0e7490")
_DASHES: Final = ("", "6 3", "2 3", "8 3 2 3")


@dataclass
class _Series:
    adapter: str
    run: str
    points: tuple[tuple[float, int], ...]
    end: float
    releases: tuple[float, ...] = ()
    color: str = "#333"
    dash: str = ""

    @property
    def peak(self) -> int:
        return max((n for _, n in self.points), default=0)

    @property
    def last(self) -> int:
        return self.points[-1][1] if self.points else 0


@dataclass
class _Chart:
    schedule: str
    series: list[_Series] = field(default_factory=list)


def _colors(adapters: Sequence[str]) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    warm = cool = 0
    for i, adapter in enumerate(adapters):
        if "naive" in adapter.lower() or "before" in adapter.lower():
            out[adapter] = (_PALETTE_WARM[warm % len(_PALETTE_WARM)], _DASHES[i % len(_DASHES)])
            warm += 1
        else:
            out[adapter] = (_PALETTE_COOL[cool % len(_PALETTE_COOL)], _DASHES[i % len(_DASHES)])
            cool += 1
    return out


def _series_of(run: RunOutcome, histories: _Histories) -> _Series | None:
    history = histories.get(run) if (not run.alive or run.history_path) else None
    points = run.alive
    rel: tuple[float, ...] = ()
    if isinstance(history, History):
        if not points:
            points = alive_series(history)
        rel = tuple(t for t, _ in releases(history))
    if not points:
        return None
    if not rel:
        prev = 0
        rel_list = []
        for t, n in points:
            if n > prev:
                rel_list.append(t)
            prev = n
        rel = tuple(rel_list)
    end = max(run.virtual_time, points[-1][0])
    return _Series(run.adapter, run.name, tuple(points), end, rel)


def _alive_charts(suite: SuiteOutcome, histories: _Histories) -> list[_Chart]:
    colors = _colors(_adapters(suite))
    charts: dict[str, _Chart] = {}
    for run in suite.runs:
        s = _series_of(run, histories)
        if s is None or (s.peak < 2 and len(s.releases) < 2):
            continue
        chart = charts.setdefault(run.name, _Chart(run.name))
        if any(existing.adapter == run.adapter for existing in chart.series):
            continue  # one series per adapter and schedule: the first run of it
        s.color, s.dash = colors.get(run.adapter, ("#333", ""))
        chart.series.append(s)
    ranked = sorted(charts.values(),
                    key=lambda c: (-len(c.series), -max(s.peak for s in c.series), c.schedule))
    return ranked[:_MAX_ALIVE_CHARTS]


def alive_svg(chart: _Chart, uid: str) -> str:
    width, height = _W, 250.0
    left, right, top, bottom = 48.0, 150.0, 18.0, 50.0
    pw, ph = width - left - right, height - top - bottom
    end = max(s.end for s in chart.series)
    axis = TimeAxis.linear(0.0, end, pw)
    ymax = max(2, max(s.peak for s in chart.series))
    ystep = 1 if ymax <= 10 else max(1, round(ymax / 8))

    def sx(t: float) -> float:
        return left + axis.x(t)

    def sy(n: float) -> float:
        return top + ph - n / ymax * ph

    title = f"Deployments alive over time: {chart.schedule}"
    out = [f'<svg class="alive" id="{esc(uid)}" viewBox="0 0 {_num(width)} {_num(height)}" '
           f'width="{_num(width)}" height="{_num(height)}" role="img" aria-label="{esc(title)}" '
           f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>']
    n = 0
    while n <= ymax:
        yy = sy(n)
        out.append(f'<line class="grid" x1="{_num(left)}" x2="{_num(left + pw)}" '
                   f'y1="{_num(yy)}" y2="{_num(yy)}"/>')
        out.append(f'<text class="ytick" x="{_num(left - 8)}" y="{_num(yy + 4)}">{n}</text>')
        n += ystep
    for tick in axis.ticks:
        xx = left + tick.x
        out.append(f'<line class="grid" x1="{_num(xx)}" x2="{_num(xx)}" y1="{_num(top)}" '
                   f'y2="{_num(top + ph)}"/>')
        out.append(f'<text class="tick" x="{_num(xx)}" y="{_num(top + ph + 40)}" '
                   f'text-anchor="{tick.anchor}">{esc(tick.label)}</text>')
    out.append(f'<line class="axis" x1="{_num(left)}" x2="{_num(left + pw)}" '
               f'y1="{_num(top + ph)}" y2="{_num(top + ph)}"/>')
    out.append(f'<text class="ylabel" x="12" y="{_num(top + ph / 2)}" '
               f'transform="rotate(-90 12 {_num(top + ph / 2)})">versions alive</text>')
    release_times = sorted({t for s in chart.series for t in s.releases})
    labelled = -1e9
    for i, t in enumerate(release_times):
        xx = sx(t)
        out.append(f'<path class="release" d="M{_num(xx)} {_num(top + ph + 2)} l4 8 l-8 0 z">'
                   f"<title>release v{i + 1} at {esc(fmt_duration(t))}</title></path>")
        if xx - labelled >= 24:
            labelled = xx
            out.append(f'<text class="rel-label" x="{_num(xx)}" y="{_num(top + ph + 22)}">'
                       f"v{i + 1}</text>")
    label_ys: list[float] = []
    for s in chart.series:
        d = [f"M{_num(sx(s.points[0][0]))} {_num(sy(0))}"]
        for t, count in s.points:
            d.append(f"H{_num(sx(t))} V{_num(sy(count))}")
        d.append(f"H{_num(sx(s.end))}")
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(f'<path class="series" d="{" ".join(d)}" stroke="{s.color}"{dash}>'
                   f"<title>{esc(s.adapter)}: peak {s.peak} alive</title></path>")
        ly = sy(s.last) + 4
        while any(abs(ly - other) < 14 for other in label_ys):
            ly += 14
        label_ys.append(ly)
        out.append(f'<text class="end-label" x="{_num(left + pw + 8)}" y="{_num(ly)}" '
                   f'fill="{s.color}">{esc(_truncate(s.adapter, 80))}: {s.last} alive</text>')
    out.append("</svg>")
    return "".join(out)


def _alive_section(suite: SuiteOutcome, histories: _Histories) -> str:
    out = ['<section id="alive"><h2>Deployments alive over time</h2>',
           '<p class="lede">How many deployment versions are alive (registered and not yet '
           "drained) after each release. A version stays alive while anything is pinned to it; "
           "a design that waits in-call keeps every version alive as long as its longest open "
           "wait, one that hands waits off drains them shortly after each release.</p>"]
    charts = _alive_charts(suite, histories)
    if not charts:
        out.append('<p class="muted">No run released more than one deployment.</p></section>')
        return "".join(out)
    for i, chart in enumerate(charts, 1):
        out.append('<figure class="chart">')
        out.append(alive_svg(chart, f"alive{i}"))
        parts = [f'<span class="key"><svg width="26" height="10" aria-hidden="true"><line '
                 f'x1="0" x2="26" y1="5" y2="5" stroke="{s.color}" stroke-width="2.5"'
                 + (f' stroke-dasharray="{s.dash}"' if s.dash else "")
                 + f'/></svg><b>{esc(s.adapter)}</b>: peak {_plural(s.peak, "version")} '
                 f"alive, {s.last} at the end</span>" for s in chart.series]
        out.append(f"<figcaption><span class=\"sched\">schedule {esc(chart.schedule)}</span>"
                   + "".join(parts) + "</figcaption></figure>")
    out.append("</section>")
    return "".join(out)


# --------------------------------------------------------------------------- faults reached


def _faults_section(suite: SuiteOutcome) -> str:
    runs = suite.runs
    out = ['<section id="faults"><h2>Faults and fault points reached</h2>']
    kinds = sorted({k for r in runs for k in r.faults} | {k for r in runs
                                                         for k in r.skipped_faults})
    if kinds:
        out.append('<div class="table-wrap"><table class="grid-t"><thead><tr><th>Fault</th>'
                   "<th>Injected</th><th>In runs</th><th>Skipped (adapter lacks it)</th>"
                   "</tr></thead><tbody>")
        for kind in kinds:
            total = sum(r.faults.get(kind, 0) for r in runs)
            in_runs = sum(1 for r in runs if r.faults.get(kind, 0) > 0)
            skipped = sum(1 for r in runs if kind in r.skipped_faults)
            cls = "" if total else ' class="row-unknown"'
            out.append(f"<tr{cls}><th scope=\"row\">{esc(kind)}</th><td>{total}</td>"
                       f"<td>{in_runs} of {len(runs)}</td><td>"
                       + (f'<span class="warn">{_plural(skipped, "run")}</span>' if skipped
                          else "0") + "</td></tr>")
        out.append("</tbody></table></div>")
    else:
        out.append('<p class="muted">No fault was injected.</p>')
    held = step_kinds_of(runs)
    if held.schedules:
        out.append('<h3>Step kinds of the generated schedules</h3><p class="lede">How many '
                   f"of the {held.schedules} generated schedule(s) held each kind of step a "
                   "scenario file can hold: a kind in none was never tried.</p>")
        out.append('<div class="table-wrap"><table class="grid-t" id="step-kinds"><thead><tr>'
                   "<th>Step kind</th><th>Generated schedules</th></tr></thead><tbody>")
        for kind, n in held.counts:
            cls = "" if n else ' class="row-unknown"'
            share = f" ({100 * n / held.schedules:.0f}%)" if n else ""
            out.append(f'<tr{cls}><th scope="row">{esc(kind)}</th>'
                       f"<td>{n} of {held.schedules}{share}</td></tr>")
        out.append("</tbody></table></div>")
    points = sorted({p for r in runs for p in r.fault_points})
    if points:
        out.append('<h3>Fault points</h3><p class="lede">Named windows in the reference code '
                   "(between FOR UPDATE and COMMIT, after an effect and before its journal "
                   "entry). A point never reached was armed but the run never got there.</p>")
        out.append('<div class="table-wrap"><table class="grid-t"><thead><tr><th>Fault point'
                   "</th><th>Times reached</th><th>Runs reaching it</th></tr></thead><tbody>")
        for point in points:
            total = sum(r.fault_points.get(point, 0) for r in runs)
            in_runs = sum(1 for r in runs if r.fault_points.get(point, 0) > 0)
            reach = badge("unreached", "never reached") if total == 0 else str(total)
            out.append(f"<tr><th scope=\"row\"><code>{esc(point)}</code></th><td>{reach}</td>"
                       f"<td>{in_runs} of {len(runs)}</td></tr>")
        out.append("</tbody></table></div>")
    out.append("</section>")
    return "".join(out)


# --------------------------------------------------------------------------- runs


def _runs_section(suite: SuiteOutcome) -> str:
    out = ['<section id="runs"><h2>Runs</h2>']
    if not suite.runs:
        out.append('<p class="muted">No run finished.</p></section>')
        return "".join(out)
    out.append('<div class="table-wrap"><table class="grid-t runs"><thead><tr>'
               "<th>Run</th><th>Adapter</th><th>Seed</th><th>Outcome</th><th>Checks</th>"
               "<th>Virtual time</th><th>Wall time</th><th>Faults</th></tr></thead><tbody>")
    for run in suite.runs:
        vals = [effective(run, r) for r in run.results]
        xfails = [r for r in run.results if expected_failure(run, r)]
        outcome = ("fail" if False in vals else
                   "unknown" if run.error is not None or None in vals or not vals else
                   "xfail" if xfails else "pass")
        checks = (f"{vals.count(True)} pass · {vals.count(False)} fail · "
                  f"{sum(1 for v in vals if v is None)} unknown")
        faults = ", ".join(f"{k}: {n}" for k, n in sorted(run.faults.items())) or "none"
        out.append(f'<tr class="row-{outcome}"><th scope="row">{esc(run.name)}'
                   f'<span class="src">{esc(run.source)}</span></th>'
                   f"<td>{esc(run.adapter)}</td><td>{run.seed}</td><td>{badge(outcome)}</td>"
                   f"<td>{esc(checks)}</td><td>{esc(fmt_duration(run.virtual_time))}</td>"
                   f"<td>{esc(_fmt_wall(run.wall_time))}</td><td>{esc(faults)}</td></tr>")
        notes = []
        if run.error is not None:
            notes.append(f'<span class="err">Adapter crashed: {esc(run.error)}</span>')
        if run.expected:
            notes.append(f"expected: {esc(run.expected)}")
        for r in xfails:
            first = r.violations[0].message if r.violations else r.note
            notes.append(f"expected failure of {esc(r.checker)} ([expect] fails): "
                         f"{esc(first)}")
        if run.skipped_steps:
            notes.append("skipped steps (the runtime lacks the capability): " + esc(", ".join(
                f"{s.action} (lacks {s.lacks})" for s in run.skipped_steps)))
        elif run.skipped_faults:
            notes.append("skipped faults (adapter lacks the capability): "
                         + esc(", ".join(run.skipped_faults)))
        if run.unclaimed:
            notes.append("not claimed (judged, never failing): " + esc(", ".join(
                f"{r.checker} ({'would fail' if effective(run, r) is False else r.outcome})"
                for r in run.unclaimed)))
        if run.step_notes:
            shown = run.step_notes[:_STEP_NOTES]
            more = len(run.step_notes) - len(shown)
            notes.append("steps not applied as written: " + esc("; ".join(shown))
                         + (f" (and {more} more in the history)" if more else ""))
        for r in run.results:
            if effective(run, r) is None and r.note:
                notes.append(f"{esc(r.checker)} unknown: {esc(r.note)}")
        if notes:
            out.append(f'<tr class="run-note"><td colspan="8">{"<br>".join(notes)}</td></tr>')
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _environment(suite: SuiteOutcome) -> str:
    if not suite.environment:
        return ""
    rows = "".join(f'<tr><th scope="row">{esc(k)}</th><td><code>{esc(v)}</code></td></tr>'
                   for k, v in suite.environment.items())
    return ('<section id="environment"><h2>Environment</h2><div class="table-wrap">'
            f'<table class="grid-t env"><tbody>{rows}</tbody></table></div></section>')


# --------------------------------------------------------------------------- page


def render(suite: SuiteOutcome, summary: Summary | None = None) -> str:
    """The whole page as one string (`summary`: what the JUnit file reads too)."""
    summary = summary or Summary.of(suite)
    histories = summary.histories
    css = stylesheet()
    status, text = _verdict(suite)
    csp = ("default-src 'none'; img-src data:; "
           f"style-src {_csp_hash(css)}; script-src {_csp_hash(_SCRIPT)}")
    nav = ('<nav class="toc"><a href="#properties">Properties</a>'
           '<a href="#violations">Violations</a><a href="#alive">Deployments alive</a>'
           '<a href="#faults">Faults</a><a href="#runs">Runs</a>'
           + ('<a href="#environment">Environment</a>' if suite.environment else "")
           + "</nav>")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>durable-chaos: {esc(status.upper())}, {esc(text)}</title>",
        f"<style>{css}</style></head>",
        f'<body class="{"incomplete" if not suite.complete else "complete"}">',
        _header(suite),
        '<main class="page">',
        nav,
        _summary(suite),
        _property_table(suite),
        _violations(suite, histories),
        _alive_section(suite, histories),
        _faults_section(suite),
        _runs_section(suite),
        _environment(suite),
        "</main>",
        '<footer class="foot">Generated by durable-chaos. Self-contained: no network, '
        "no external files.</footer>",
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write(suite: SuiteOutcome, path: Path, summary: Summary | None = None) -> Path:
    from harness.evidence import atomic_write_text

    # Atomic: a kill or a second Ctrl-C while writing leaves the old file or the new one.
    atomic_write_text(path, render(suite, summary))
    return path
