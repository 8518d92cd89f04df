"""Running one schedule against an adapter.

The lifecycle of one run (`run_schedule`), written once:

1. The adapter opens a runtime for the schedule's seed, with a fresh history.
2. For each step in time order: let the runtime run until the step's time, then apply it
   (a person's message or answer, an operator's deploy, a fault). A step that needs what the
   runtime lacks (a capability protocol, a world endpoint, a fault point it does not
   declare; see `harness.adapters.base.lacking`) is not applied: it is recorded as skipped
   (`step.skipped`, `RunOutcome.skipped_steps`) with what it lacks.
3. Let the runtime run to the horizon (past the last wait's expiry), record when the faults
   healed, let the runtime record its final committed state, mark the end.
4. Every checker judges the history; an adapter that crashes makes the run "unknown". The
   invariants the adapter does not claim (`claimed_invariants`) are judged too but kept
   apart (`RunOutcome.unclaimed`): they never fail the run or make it unknown.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.adapters import (
    Adapter,
    Runtime,
    claimed_invariants,
    deterministic,
    lacking,
    open_run,
    run_history,
)
from harness.checkers import ALL
from harness.checkers.base import CheckConfig, Checker, Result, run_checkers
from harness.errors import AdapterUnavailable, OutputUnwritable, RunTimeout
from harness.evidence import claim_run_dir, write_text
from harness.faults import FAULTS, healed_at
from harness.history import History, Record, fmt_duration
from harness.outcome import RunOutcome, SkippedStep, StepNote
from harness.scaling import Scale, fmt_real
from harness.schedules.model import FAULT_ACTIONS, STEP_KINDS, Schedule, Step
from harness.supervisor import beat, guard, in_worker
from harness.watchdog import Watchdog

# freezegun replaces module attributes that are the real time functions; one kept inside a
# dict is out of its reach, so wall times stay real while virtual time drives handlers.
_REAL = {"perf_counter": time.perf_counter, "time": time.time}


def wall() -> float:
    return _REAL["perf_counter"]()


def epoch() -> float:
    """The real epoch seconds, out of freezegun's reach: a deadline handed to another process
    (whose `wall()` is not this one's) travels as epoch seconds."""
    return _REAL["time"]()


@dataclass(frozen=True)
class RunOptions:
    adapter_spec: str = "reference"
    report_dir: Path | None = None
    save_history: bool = True
    checkers: Sequence[Checker] = ALL
    # Wall-clock limit of one run in seconds: None is the engine's default
    # (`DEFAULT_RUN_TIMEOUT`), math.inf none at all.
    run_timeout: float | None = None
    # The invariants to judge the run by (`--invariants`, `chaos_invariants`); None: the
    # adapter's own `claims`, else all of `checkers`.
    invariants: tuple[str, ...] | None = None


# A simulated run takes milliseconds, so a minute means it hangs; a real one starts servers
# and waits in real seconds on scaled time.
DEFAULT_RUN_TIMEOUT: dict[str, float] = {"sim": 60.0, "real": 600.0}
# close() stops what the runtime started; it gets its own limit so that a runtime that hangs
# in close() cannot hang the suite either.
CLOSE_TIMEOUT = 60.0
# A step the runtime applies this much later than its `at` is "late": scenario seconds, or
# real seconds on a runtime that maps scenario time onto the real clock (`time_scale`).
LATE_AFTER = 1.0
# On a real engine a card is shown by another process: an answer that finds none drives the
# runtime on in small steps, for at most this many real seconds, before it is dropped.
CARD_PATIENCE = 30.0
CARD_STEP = 1.0


def run_timeout(adapter: Adapter, options: RunOptions) -> float | None:
    """The wall-clock limit of one run of `adapter` (None: no limit)."""
    limit = options.run_timeout
    if limit is None:
        limit = DEFAULT_RUN_TIMEOUT.get(adapter.engine, DEFAULT_RUN_TIMEOUT["real"])
    return None if math.isinf(limit) else limit


def horizon_of(schedule: Schedule, config: CheckConfig) -> float:
    if schedule.horizon is not None:
        return schedule.horizon
    last = max((s.at for s in schedule.steps), default=0.0)
    return last + config.max_wait + config.hand_off_after + 3600.0


# Real seconds the threads a runtime started get to end after its close().
THREAD_GRACE = 1.0


def run_schedule(adapter: Adapter, schedule: Schedule, options: RunOptions) -> RunOutcome:
    """Run one schedule; see the module docstring for the lifecycle."""
    beat()  # a supervising parent counts the runs started: which one a lost worker held
    threads_before = {t.ident for t in threading.enumerate()}
    children_before = _children()
    history = run_history(adapter)
    started = wall()
    skipped: list[SkippedStep] = []
    notes: list[StepNote] = []
    error: str | None = None
    opened = False
    limit = run_timeout(adapter, options)
    # The runtime, once open() returned: closed below whatever happened after.
    opening: list[Runtime] = []
    try:
        check_config = adapter.check_config()
    except Exception as exc:  # a user's adapter: its own bug, named, not a traceback
        raise AdapterUnavailable(f"adapter {adapter.name!r}: check_config() raised "
                                 f"{type(exc).__name__}: {exc}") from None
    claimed = set(claimed_invariants(adapter, options.invariants,
                                     _known(options.checkers)))
    try:
        # The watchdog ends a run blocked anywhere in the adapter (see harness.watchdog);
        # after it fired the runtime is only closed, never driven again.
        # A runtime that is not one, or a misspelled world endpoint, fails as an open() that
        # fails (the suite ends with exit 2), not step by step.
        with Watchdog(limit), open_run(adapter, schedule.seed, history, hosts=schedule.hosts,
                                       opened=opening.append) as runtime:
            opened = True
            messages: dict[str, int] = {}
            now = 0.0
            for number, step in enumerate(schedule.steps):
                runtime.advance(step.at)
                now = _now(runtime, now)
                late = _lateness(runtime, step.at, now)
                if late is not None:
                    notes.append(StepNote("late", number, f"step {number} "
                                          f"({_step_label(step)}) applied {late} late"))
                _apply(runtime, step, history, skipped, messages,
                       not deterministic(adapter), notes, number)
            # Every engine's clock reads scenario time (a real one is virtual too).
            runtime.advance(max(horizon_of(schedule, check_config), runtime.now()))
            heal = _healed_at(schedule)
            if heal is not None:
                history.add("fault.heal", data={"at": heal})
            runtime.finish()
            board, extra = _board(runtime)
            history.add("run.end", data={"cards": board, **extra} if board else None)
    except RunTimeout:
        error = (f"timed out: the run passed its wall-clock limit of {limit:g}s (raise it "
                 "with --run-timeout or the ini key chaos_run_timeout)")
        history.add("run.error", data={"error": error})
    except KeyboardInterrupt:
        _close(opening[0] if opening else None, limit)
        raise
    except BaseException as exc:
        # An adapter that crashes makes the run unknown, not the harness: whatever it raises,
        # its own BaseException, a SystemExit(0) or a GeneratorExit included (those would
        # otherwise end the suite with no report, or with exit status 0).
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if not opened:
            error = f"open() failed: {error}"
        history.add("run.error", data={"error": error})
    closing = _close(opening[0] if opening else None, limit)
    error = error or closing or _threads_left(threads_before) or \
        _processes_left(children_before)
    elapsed = wall() - started
    if error is None:
        judged = tuple(run_checkers(options.checkers, history, check_config))
    else:
        judged = tuple(Result(c.name, None, reached=False, note=f"adapter crashed: {error}")
                       for c in options.checkers)
    results = tuple(r for r in judged if r.checker in claimed)
    # One filtering pass for both summaries (each walked the whole history: about 0.1 us a
    # record, 900 records a generated schedule).
    summarised = [r for r in history.records if r.kind in _SUMMARY_KINDS]
    outcome = RunOutcome(
        name=schedule.name,
        adapter=adapter.name,
        seed=schedule.seed,
        source=schedule.source,
        results=results,
        schedule_toml=schedule.to_toml(),
        # The command of a run whose schedule is not saved (it names `schedule.toml`, or a
        # scenario's own file); `_save` replaces it for a run it keeps.
        replay_command=_replay(options.adapter_spec, schedule.path, options.run_timeout,
                               options.invariants),
        virtual_time=history[-1].time if len(history) else 0.0,
        wall_time=elapsed,
        faults=_injected(schedule, skipped),
        fault_points=_fault_points(summarised),
        skipped_faults=tuple(s.action for s in skipped if s.action in FAULT_ACTIONS),
        error=error,
        expected=_expected(schedule),
        expected_failures=tuple(k for k, v in schedule.expect if v == "fails"),
        step_kinds=_step_kinds(schedule),
        alive=_alive(summarised),
        opened=opened,
        step_notes=tuple(note.text for note in notes),
        notes=tuple(notes),
        skipped_steps=tuple(skipped),
        unclaimed=tuple(r for r in judged if r.checker not in claimed),
        steps=len(schedule.steps),
    )
    return _save(outcome, schedule, history, options)


def _step_kinds(schedule: Schedule) -> tuple[str, ...]:
    held = schedule.step_kinds()
    return tuple(kind for kind in STEP_KINDS if kind in held)


def _threads_left(before: set[int | None]) -> str | None:
    """Why the run is unknown when its runtime left threads running after close() (a pump,
    an executor never shut down: they act on after the run, on the next run's world), or
    None. They get `THREAD_GRACE` to end first."""
    def left() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.ident not in before and not t.daemon
                and t.is_alive() and t is not threading.current_thread()]

    threads = left()
    give_up = wall() + THREAD_GRACE
    for thread in threads:
        thread.join(max(0.0, give_up - wall()))
    threads = left()
    if not threads:
        return None
    names = ", ".join(sorted(t.name for t in threads))
    return (f"the runtime left {len(threads)} thread(s) running after close() ({names}); "
            "stop them in close()")


def _children() -> set[int]:
    """This process's live child processes (Linux; elsewhere none are known)."""
    import glob

    found: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path, encoding="ascii") as handle:
                found.update(int(pid) for pid in handle.read().split())
        except (OSError, ValueError):
            continue
    return {pid for pid in found if not _zombie(pid)}


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state == "Z":
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        return True
    return False


def _processes_left(before: set[int]) -> str | None:
    """Why the run is unknown when its runtime left child processes running after close()
    (a fork that went on, a server never stopped), or None; they are killed. Only in a
    supervised worker: a user's own test that opens a runtime is its own business."""
    if not in_worker():
        return None
    give_up = wall() + THREAD_GRACE
    left = _children() - before
    while left and wall() < give_up:
        time.sleep(0.05)
        left = _children() - before
    if not left:
        return None
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return (f"the runtime left {len(left)} process(es) running after close() (a fork, or a "
            "server it started); they were killed: stop them in close()")


def lost_outcome(adapter: Adapter, spec: str, schedule: Schedule, options: RunOptions,
                 why: str) -> RunOutcome:
    """The outcome of a run whose worker process was lost (see harness.supervisor): unknown,
    saying why, with its schedule saved for a replay when the report keeps histories."""
    history = History()
    history.add("run.error", data={"error": why})
    claimed = set(claimed_invariants(adapter, options.invariants, _known(options.checkers)))
    outcome = RunOutcome(
        name=schedule.name, adapter=adapter.name, seed=schedule.seed, source=schedule.source,
        results=tuple(Result(c.name, None, reached=False, note=f"adapter crashed: {why}")
                      for c in options.checkers if c.name in claimed),
        schedule_toml=schedule.to_toml(),
        replay_command=_replay(spec, schedule.path, options.run_timeout, options.invariants),
        error=why, expected=_expected(schedule),
        expected_failures=tuple(k for k, v in schedule.expect if v == "fails"),
        step_kinds=_step_kinds(schedule), steps=len(schedule.steps))
    return _save(outcome, schedule, history, replace(options, save_history=True))


def _injected(schedule: Schedule, skipped: Sequence[SkippedStep]) -> dict[str, int]:
    """Faults injected by kind: the schedule's, less those the runtime could not take."""
    counts = schedule.faults()
    for skip in skipped:
        if counts.get(skip.action, 0) > 0:
            counts[skip.action] -= 1
            if not counts[skip.action]:
                del counts[skip.action]
    return counts


def _known(checkers: Sequence[Checker]) -> list[str]:
    """Invariant names `claims` and `--invariants` may use: the built-in ones and the run's."""
    return list(dict.fromkeys([c.name for c in ALL] + [c.name for c in checkers]))


def _close(runtime: Runtime | None, run_limit: float | None = None) -> str | None:
    """Close a runtime under its own limit; why it failed, or None.

    The limit is `CLOSE_TIMEOUT`, or the run's own when that is shorter: a runtime whose
    close() hangs would otherwise cost every run a minute, whatever --run-timeout says.
    """
    if runtime is None:
        return None
    limit = CLOSE_TIMEOUT if run_limit is None else min(CLOSE_TIMEOUT, run_limit)
    try:
        with Watchdog(limit):
            runtime.close()
    except RunTimeout:
        return f"close() did not return within {limit:g}s"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # as in run_schedule: whatever close() raises
        return f"close failed: {type(exc).__name__}: {exc}"
    return None


def _lateness(runtime: Runtime, at: float, now: float) -> str | None:
    """How late a step due at `at` came at `now`, if later than `LATE_AFTER`, else None.

    A runtime on the real clock through a scale (`time_scale`, a `harness.scaling.Scale`:
    the kit's runtimes have one) is late by real seconds: near 8 days on an anchored scale a
    real second is hours of scenario time, and every step would be late in scenario seconds.
    """
    late = now - at
    scale = getattr(runtime, "time_scale", None)
    # `None` first: an isinstance check against a runtime-checkable protocol walks the
    # protocol's attributes every time, and this runs at every step of a simulated run.
    if scale is None or not isinstance(scale, Scale):
        return fmt_duration(late) if late > LATE_AFTER else None
    real = scale.real(now) - scale.real(at)
    return f"{fmt_duration(late)} ({fmt_real(real)})" if real > LATE_AFTER else None


def _now(runtime: Runtime, before: float) -> float:
    """The runtime's clock, which every step's time is read against: a finite number that
    never goes back (else the run is unknown, naming it: a clock that lies makes every
    "applied late" and the horizon meaningless)."""
    now = runtime.now()
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise TypeError(f"now() returned {now!r}; return the seconds since the run started, "
                        "a finite float")
    if now < before - 1e-6:
        raise ValueError(f"now() went back from {before:g}s to {now:g}s; a runtime's clock "
                         "never goes backwards")
    return float(now)


def _step_label(step: Step) -> str:
    where = step.get("session") or step.get("host") or step.get("version")
    return f"{step.action} at {fmt_duration(step.at)}" + (f", {where}" if where else "")


def _apply(runtime: Runtime, step: Step, history: History, skipped: list[SkippedStep],
           messages: dict[str, int], waits: bool = False,
           notes: list[StepNote] | None = None,
           number: int = 0) -> None:
    action = step.action
    notes = notes if notes is not None else []
    lacks = lacking(runtime, action, step.get("point"), step.get("service"))
    if lacks is not None:
        # Not applied, and said so: a step the runtime cannot take must not read as a step
        # it took and survived.
        skipped.append(SkippedStep(number, action, step.at, lacks))
        notes.append(StepNote("skipped", number, f"step {number} ({_step_label(step)}) "
                              f"skipped: the runtime lacks {lacks}"))
        history.add("step.skipped", "info", data={"step": number, "action": action,
                                                  "lacks": lacks})
        return
    if action == "message" and step.get("malformed"):
        _message_malformed(runtime, step, history, notes, number)
    elif action == "message":
        session = step.get("session")
        messages[session] = messages.get(session, 0) + 1
        message_id = f"{session}.m{messages[session]}"
        message = {"message_id": message_id, "text": step.get("text"),
                   "user": step.get("user"), "plan": list(step.get("tools"))}
        # `planned`: how many tools the message asks for (context-kept checks the model was
        # asked for each of them).
        # `user`: who sent it, in the runner's word, which the runtime cannot rewrite: the
        # person a turn acts for (access-rechecked).
        sent: dict[str, Any] = {"message_id": message_id, "planned": len(message["plan"])}
        if message["user"] is not None:
            sent["user"] = message["user"]
        history.add("op.message", "invoke", session=session, data=sent)
        runtime.send_message(session, message)
        history.add("op.message", "ok", session=session, data={"message_id": message_id})
    elif action == "answer" and step.get("call") is not None:
        _answer_named(runtime, step, history, messages, notes, number)
    elif action == "background" and step.get("malformed"):
        _background_malformed(runtime, step, history, notes, number)
    elif action in ("answer", "background"):
        session = step.get("session")
        # `of`: a request from `session` naming a call of another session (a stranger's).
        owner = step.get("of") if action == "background" else None
        cards = _open_cards(runtime, owner or session, waits, (owner or session) in messages)
        kind = f"op.{action}"
        if not cards:
            reason = "no open card" if session in messages else "unknown session"
            history.add(kind, "invoke", session=session)
            # The history keeps its words of before: same seed, same bytes.
            history.add(kind, "fail", session=session, data={"reason": "no open card"})
            notes.append(StepNote("dropped", number, f"step {number} ({_step_label(step)}) "
                                  f"dropped: {reason}"
                                  + ("" if session in messages else
                                     " (no message was sent to it before)")))
            return
        card = cards[0]
        # Who answered: the run's access rules judge the approver's access (`access-rechecked`).
        data = (_answer_data(step) if action == "answer" else {"of": owner} if owner else {})
        history.add(kind, "invoke", session=session, turn=card.turn, tool_call=card.tool_call,
                    data=data)
        if action == "answer":
            if not _answer_sent(runtime, step, history, session, card.turn, card.tool_call,
                                notes, number):
                return
        else:
            runtime.background(session, card.tool_call)  # type: ignore[attr-defined]
        history.add(kind, "ok", session=session, turn=card.turn, tool_call=card.tool_call,
                    data={"of": owner} if owner else None)
    elif action == "cancel":
        session = step.get("session")
        if session not in messages:
            notes.append(StepNote("unknown session", number, f"step {number} "
                                  f"({_step_label(step)}): unknown session (no message was "
                                  "sent to it before)"))
        history.add("op.cancel", "invoke", session=session)
        runtime.cancel(session)  # type: ignore[attr-defined]
        history.add("op.cancel", "ok", session=session)
    elif action == "revoke":
        runtime.world.directory.revoke(step.get("user"), step.get("tool"))
    elif action == "grant":
        runtime.world.directory.grant(step.get("user"), step.get("tool"))
    else:
        # A fault: its one home applies it (harness.faults).
        FAULTS[action].apply(runtime, step, history)


def _answer_data(step: Step) -> dict[str, Any]:
    """An answer's `op.answer` fields besides its call: the decision and who gave it, and,
    only when the step says so (an answer of before records exactly what it did), that it
    named its call itself (`named`) or is malformed on purpose (`malformed`)."""
    data: dict[str, Any] = {"decision": step.get("decision"), "user": step.get("user")}
    if step.get("call") is not None:
        data["named"] = True
    if step.get("malformed"):
        data["malformed"] = True
    return data


def _answer_named(runtime: Runtime, step: Step, history: History, messages: dict[str, int],
                  notes: list[StepNote], number: int) -> None:
    """An answer naming its tool call (`call`), sent whether or not a card is open: a client
    that races the card. Its turn is the call id's (`{turn}.t{k}`)."""
    session = step.get("session")
    tool_call = str(step.get("call"))
    turn = tool_call.rsplit(".", 1)[0]
    if session not in messages:
        notes.append(StepNote("unknown session", number, f"step {number} "
                              f"({_step_label(step)}): unknown session (no message was "
                              "sent to it before)"))
    history.add("op.answer", "invoke", session=session, turn=turn, tool_call=tool_call,
                data=_answer_data(step))
    if _answer_sent(runtime, step, history, session, turn, tool_call, notes, number):
        history.add("op.answer", "ok", session=session, turn=turn, tool_call=tool_call)


def _answer_sent(runtime: Runtime, step: Step, history: History, session: str, turn: str,
                 tool_call: str, notes: list[StepNote], number: int) -> bool:
    """Send an answer whose `op.answer` invoke is recorded; False when the runtime refused
    it by raising, recorded as the answer's `fail` with the error as its reason.

    Only an answer a client may send wrong on purpose (`call`: a call with no card yet, maybe
    never; `malformed`) may be refused that way: an error returned to the client is a fate
    the person sees, not a crash of the run. A well-formed answer to an open card that
    raises is the adapter's error, as before (the run is unknown).
    """
    try:
        runtime.answer(tool_call, step.get("decision"), step.get("user"))
    except Exception as exc:  # BaseExceptions (the run's timeout, Ctrl-C) go on up
        if step.get("call") is None and not step.get("malformed"):
            raise
        _refused(history, "op.answer", exc, step, notes, number, session=session, turn=turn,
                 tool_call=tool_call)
        return False
    return True


def _background_malformed(runtime: Runtime, step: Step, history: History,
                          notes: list[StepNote], number: int) -> None:
    """A background request that names no call (`tool_call` null), as a client that lost the
    id sends it, whether or not a card is open: the runtime must refuse it, as the client's
    error, and move nothing. Its refusal by raising is recorded as its `fail`."""
    session = step.get("session")
    history.add("op.background", "invoke", session=session, data={"malformed": True})
    try:
        runtime.background(session, None)  # type: ignore[attr-defined]
    except Exception as exc:  # BaseExceptions (the run's timeout, Ctrl-C) go on up
        _refused(history, "op.background", exc, step, notes, number, session=session)
        return
    history.add("op.background", "ok", session=session)


def _message_malformed(runtime: Runtime, step: Step, history: History,
                       notes: list[StepNote], number: int) -> None:
    """A message with no id (`message_id` null), as a client that lost it sends it: the
    runtime must refuse it, as the client's error. It is no message of the session's (no
    `message_id` on its records: no turn is owed to it). Its refusal by raising is recorded
    as its `fail`."""
    session = step.get("session")
    user = step.get("user")
    history.add("op.message", "invoke", session=session,
                data={"malformed": True, **({"user": user} if user is not None else {})})
    try:
        runtime.send_message(session, {"message_id": None, "text": step.get("text"),
                                       "user": user, "plan": list(step.get("tools"))})
    except Exception as exc:  # BaseExceptions (the run's timeout, Ctrl-C) go on up
        _refused(history, "op.message", exc, step, notes, number, session=session)
        return
    history.add("op.message", "ok", session=session)


def _refused(history: History, kind: str, exc: Exception, step: Step, notes: list[StepNote],
             number: int, **fields: Any) -> None:
    """A request the runtime refused by raising: its `fail`, with the error as its reason
    and the HTTP status the refusal carried, if it says one."""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    status = status_of(exc)
    history.add(kind, "fail", **fields,
                data={"reason": reason, **({"status": status} if status is not None else {})})
    notes.append(StepNote("refused", number, f"step {number} ({_step_label(step)}) "
                          f"refused by the runtime: {reason}"))


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a refusal carries, when it says one: a terminal error's
    `status_code`, an HTTP client's error's response status."""
    for owner in (exc, getattr(exc, "response", None)):
        for name in ("status_code", "status"):
            value = getattr(owner, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def _open_cards(runtime: Runtime, session: str, waits: bool, known: bool) -> list[Any]:
    """The session's open cards, oldest first.

    On a real engine (`waits`: it acts outside `advance()`) the card is shown by another
    process, possibly a moment after the schedule's time: drive the runtime on in small
    steps until one shows or `CARD_PATIENCE` real seconds passed. The simulator is left
    exactly as it is (same seed, same history): there a missing card is the schedule's own
    doing.
    """
    def cards() -> list[Any]:
        return sorted(runtime.world.cards.open_cards(session), key=lambda c: c.shown_at)

    found = cards()
    if found or not waits or not known:
        return found
    # A runtime on a scaled clock says how long in real seconds (`card_patience`): 30 real
    # seconds can be days of its scenario time.
    give_up = wall() + float(getattr(runtime, "card_patience", CARD_PATIENCE))
    while not found and wall() < give_up:
        runtime.advance(runtime.now() + CARD_STEP)
        found = cards()
    return found


def _board(runtime: Runtime) -> tuple[dict[str, str | None] | None, dict[str, Any]]:
    """The world's card board at the run's end (`card-closed` judges it), or None when the
    runtime's world keeps none (a world of the user's own making); and what else the board
    says, when it says it: when each closed card was closed (`closed_at`, cancel-honored) and
    what each card showed the call would do (`shown`, effect-authorized)."""
    try:
        cards = getattr(runtime.world, "cards", None)
        board = getattr(cards, "board", None)
        if not callable(board):
            return None, {}
        extra = {}
        for name in ("closed_at", "shown"):
            read = getattr(cards, name, None)
            value = read() if callable(read) else None
            if value:
                extra[name] = value
        return board(), extra
    except Exception:  # a world the adapter broke: card-closed is then not judged, the run is
        return None, {}


def _healed_at(schedule: Schedule) -> float | None:
    return healed_at(schedule.steps)


# The record kinds `_fault_points` and `_alive` read.
_SUMMARY_KINDS = frozenset({"faultpoint.reached", "deployment.registered",
                            "deployment.drained"})


def _fault_points(records: Iterable[Record]) -> dict[str, int]:
    """How many times each fault point was reached, from a history's records."""
    counts: dict[str, int] = {}
    for record in records:
        if record.kind != "faultpoint.reached":
            continue
        point = str(record.data.get("point"))
        counts[point] = counts.get(point, 0) + 1
    return counts


def _alive(records: Iterable[Record]) -> tuple[tuple[float, int], ...]:
    """Deployments alive over time, from a history's records."""
    alive = 0
    series: list[tuple[float, int]] = []
    for record in records:
        if record.kind == "deployment.registered":
            alive += 1
        elif record.kind == "deployment.drained":
            alive -= 1
        else:
            continue
        if series and series[-1][0] == record.time:
            series[-1] = (record.time, alive)
        else:
            series.append((record.time, alive))
    return tuple(series)


def _expected(schedule: Schedule) -> str | None:
    if not schedule.expect:
        return None
    fails = [k for k, v in schedule.expect if v == "fails"]
    notes = [f"{k}={v}" for k, v in schedule.expect if v != "fails"]
    return ", ".join(notes + ([f"fails=[{', '.join(fails)}]"] if fails else []))


def _save(outcome: RunOutcome, schedule: Schedule, history: History,
          options: RunOptions) -> RunOutcome:
    """The outcome, with its history and schedule saved when the report keeps them (a
    scenario's run, a failing or unknown one) and the replay command that names them."""
    guard()  # a process the adapter forked, running on in harness code, writes nothing
    spec = options.adapter_spec
    timeout = options.run_timeout
    invariants = options.invariants
    if options.report_dir is None or not options.save_history:
        return outcome
    if not (schedule.source == "scenario" or outcome.failed or outcome.unknown):
        return outcome
    run_dir = claim_run_dir(options.report_dir, outcome.adapter, schedule.name)
    try:
        history_path = history.save(run_dir / "history.jsonl")
    except OSError as exc:
        raise OutputUnwritable(str(run_dir / "history.jsonl"), exc.strerror or str(exc)) \
            from None
    schedule_path = run_dir / "schedule.toml"
    write_text(schedule_path, schedule.to_toml())
    replay_from = schedule.path if schedule.source == "scenario" and schedule.path else None
    return replace(outcome, history_path=str(history_path),
                   replay_command=_replay(spec, replay_from or str(schedule_path), timeout,
                                          invariants))


def _replay(spec: str, path: str | None, run_timeout: float | None = None,
            invariants: tuple[str, ...] | None = None) -> str:
    # A command that reruns as printed, from any directory (see harness.replay), judging
    # the invariants the run was judged by.
    from harness.replay import replay_command

    return replay_command(spec, path, run_timeout=run_timeout, invariants=invariants)
