"""Conformance: does an adapter keep the adapter contract? Checked before any chaos starts.

A chaos run against an adapter that breaks the contract proves nothing: a runtime that never
records which deployment an invocation runs on passes `pinning-bound` vacuously, one that
ignores `deploy` never meets a redeploy. So `check_adapter` drives one tiny schedule first and
raises `AdapterContractError` naming the broken promise and the fix. Like Trio's
`check_two_way_stream`, it tests any implementation of the interface, the built-in ones too.

The lifecycle of the check, written once:

1. The adapter's face: `name`, `description`, `engine` ('sim' or 'real'), `check_config()`
   with 0 < hand_off_after < max_wait, and `open(ctx)`.
2. `open(ctx)` for a fresh history returns a `Runtime` whose `world` has the cards, the
   directory and the provider the runner drives; `advance(t)` reaches `t`.
3. A message whose model calls a tool that needs approval starts a turn (`turn.started`) and
   shows an approval card; answering the open card ends that turn (`turn.ended`).
4. When `Redeployable`: `deploy()` returns the id of a registered deployment and new work
   starts on it (every later `invocation.started` carries that id); a plain message then
   runs a whole turn.
5. Every capability the runtime declares works: `Pausable` and `Crashable` accept the host
   selectors of schedules ('any', 'owner', 'latest/1'), return a host id and record
   `host.paused` / `host.crashed`; `FaultPoints` stops at an armed point
   (`faultpoint.reached`); `ClockEffects` moves `now()` forward. After all of them a new
   message still runs a whole turn.
6. `finish()` and `close()` succeed, and every record is well formed: a kind from the
   vocabulary (`contract.records`, docs/events.md) or a namespace of the adapter's own, its
   required fields (a deployment on every invocation event that pins or runs it), the values
   of closed value sets, a known type, times that never decrease, the fields an observation
   promises. `History.add` refuses an unknown kind or a missing field already when the
   adapter appends it; the check then names the adapter call that did, and the nearest kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from typing import Any, Final, NoReturn, TypeVar

from contract import records as vocabulary
from contract.thresholds import CheckConfig
from harness.adapters.base import Adapter, Runtime, not_a_runtime
from harness.adapters.opening import deterministic, open_run, run_history
from harness.capabilities import ClockEffects, Crashable, FaultPoints, Pausable, Redeployable
from harness.errors import AdapterContractError, RecordError, RunTimeout
from harness.history import TYPES, History, Record

__all__ = ["NAMESPACES", "VOCABULARY", "check_adapter"]

T = TypeVar("T")

# What a history may hold, and what each record must carry: the one vocabulary,
# `contract.records` (docs/events.md). Kept under these names for code that imported them.
VOCABULARY: Final[frozenset[str]] = frozenset(vocabulary.KINDS)
# The vocabulary's namespaces are closed: 'turn.begun' is a typo that every checker would
# silently miss. An adapter records its own diagnostics under a namespace of its own
# ('restate.started'); checkers never read those.
NAMESPACES: Final[frozenset[str]] = vocabulary.NAMESPACES
_RECORD_FIELDS: Final = frozenset(vocabulary.RECORD_FIELDS)
_SELECTORS: Final = ("any", "owner", "latest/1")
_POINT: Final = "effect.model.after_call"  # every turn calls the model
_USER: Final = "alice"
# The runtime's clock (`now`, `advance`) runs in schedule time, the time of scenario files:
# the runner calls `advance(step.at)`, and a runtime that scales time (the real path turns
# 5 minutes into seconds) converts inside. So waits here are in schedule seconds, whatever
# thresholds `check_config()` gives the checkers for the history's own time.
_PATIENCE: Final = 300.0
# Real seconds a real runtime gets, at least, for what `_PATIENCE` waits on.
_REAL_PATIENCE: Final = 60.0
# While a real runtime is waited on: the least real time between two advance() calls.
_BREATHE: Final = 0.01


def check_adapter(adapter: Adapter) -> None:
    """Raise `AdapterContractError` if `adapter` breaks the adapter contract.

    Opens one runtime on a tiny schedule (see the module docstring for what is checked);
    returns None when the contract holds. The message names the broken promise and the fix.
    """
    _Contract(adapter).check()


def _named(exc: BaseException) -> str:
    """'OSError: why', or the class alone for an exception without a message
    (GeneratorExit)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Contract:
    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.label = repr(getattr(adapter, "name", None) or type(adapter).__name__)
        self.history = History()
        self.config = CheckConfig()

    # -- failing

    def fail(self, stage: str, problem: str, fix: str) -> NoReturn:
        raise AdapterContractError(f"adapter {self.label}: {stage}: {problem}; {fix}")

    def call(self, stage: str, what: str, action: Callable[[], T]) -> T:
        try:
            return action()
        except AdapterContractError:
            raise
        except RecordError as exc:
            # Raised by History.add at the adapter's own line: the kind or field it got wrong,
            # with the nearest valid kind, before any checker could pass vacuously.
            self.fail(stage, f"{what} appended a record the vocabulary refuses: {exc}",
                      "record the kinds and fields of docs/events.md")
        except (KeyboardInterrupt, RunTimeout):
            raise
        except BaseException as exc:
            # Whatever the adapter raises, its own BaseException or a SystemExit included:
            # a contract failure that names it, not a traceback (or an exit) out of pytest.
            self.fail(stage, f"{what} raised {_named(exc)}",
                      "the harness calls it exactly like this during a chaos run")

    # -- the lifecycle

    def check(self) -> None:
        self.face()
        adapter = self.adapter
        self.history = run_history(adapter)
        # Opened as every run opens it (the same context, on the runtime's clock); what it
        # returned is checked below, where a failure names the contract's rule.
        clock = ExitStack()
        runtime = self.call("open", "open(ctx)", lambda: clock.enter_context(
            open_run(adapter, 0, self.history, hosts=2, check=False)))
        failed = True
        try:
            with clock:
                self.runtime_face(runtime)
                self.conversation(runtime)
                self.redeploy(runtime)
                self.capabilities(runtime)
                self.call("finish", "finish()", runtime.finish)
            self.records()
            failed = False
        finally:
            try:
                runtime.close()
            except (KeyboardInterrupt, RunTimeout):
                raise
            except BaseException as exc:
                if not failed:
                    self.fail("close", f"close() raised {_named(exc)}",
                              "close() must release the runtime without raising")

    def face(self) -> None:
        adapter = self.adapter
        for attr in ("name", "description", "engine", "check_config", "open"):
            if not hasattr(adapter, attr):
                self.fail("protocol", f"it has no {attr!r}",
                          "an adapter needs name, description, engine, check_config() and "
                          "open(ctx) (see harness.adapters.base.Adapter)")
        if not isinstance(adapter.name, str) or not adapter.name:
            self.fail("protocol", f"name is {adapter.name!r}", "give it a non-empty str name")
        if not isinstance(adapter.description, str):
            self.fail("protocol", f"description is {adapter.description!r}",
                      "give it a one-line str description")
        if adapter.engine not in ("sim", "real"):
            self.fail("protocol", f"engine is {adapter.engine!r}",
                      "use 'sim' (deterministic, virtual time) or 'real' (real processes)")
        config = self.call("protocol", "check_config()", adapter.check_config)
        if not isinstance(config, CheckConfig):
            self.fail("protocol", f"check_config() returned {config!r}",
                      "return a harness.checkers.base.CheckConfig")
        if not 0 < config.hand_off_after < config.max_wait:
            self.fail("protocol", f"check_config() has hand_off_after={config.hand_off_after}"
                      f" and max_wait={config.max_wait}",
                      "thresholds must satisfy 0 < hand_off_after < max_wait")
        self.config = config

    def runtime_face(self, runtime: Any) -> None:
        wrong = not_a_runtime(runtime)
        if wrong is not None:
            problem, _, fix = wrong.partition("; ")
            self.fail("open", problem, fix)
        world = runtime.world
        for path in ("cards.open_cards", "directory.revoke", "directory.grant",
                     "services.inject"):
            owner, _, method = path.partition(".")
            if not callable(getattr(getattr(world, owner, None), method, None)):
                self.fail("open", f"runtime.world has no {path}()",
                          "expose the harness.world.World whose ports the runtime uses")
        start = self.call("open", "now()", runtime.now)
        if not isinstance(start, int | float) or start < 0:
            self.fail("open", f"now() returned {start!r}", "return seconds since the run "
                      "started, a float >= 0")
        self.advance(runtime, start + self.unit, "open")

    def conversation(self, runtime: Runtime) -> None:
        stage = "message and answer"
        session = "contract-s1"
        mark = len(self.history)
        self.send(runtime, stage, session, ["send_email"])
        limit = _PATIENCE
        cards: list[Any] = []

        def card_shown() -> bool:
            cards[:] = list(runtime.world.cards.open_cards(session))
            return bool(cards)

        if not self.wait(runtime, card_shown, limit, stage):
            if not self.after(mark, "turn.started", session=session):
                self.fail(stage, f"a message to session {session} recorded no turn.started "
                          f"within {self.patience(limit)}", "emit the observations of "
                          "docs/events.md through the world's observer")
            self.fail(stage, "a message whose model calls send_email (needs approval) showed "
                      f"no approval card within {self.patience(limit)}", "show cards through "
                      "the world's ApprovalUI port (ports.ui), which runtime.world.cards reads")
        if not self.after(mark, "turn.started", session=session):
            self.fail(stage, f"the card of session {session} was shown but no turn.started "
                      "was recorded", "emit turn.started when a turn begins")
        card = sorted(cards, key=lambda c: c.shown_at)[0]
        self.call(stage, f"answer({card.tool_call!r}, 'approve', {_USER!r})",
                  lambda: runtime.answer(card.tool_call, "approve", _USER))
        if not self.wait(runtime, lambda: bool(self.after(mark, "turn.ended", turn=card.turn)),
                         limit, stage):
            self.fail(stage, f"answering the open card {card.tool_call} did not end turn "
                      f"{card.turn} within {self.patience(limit)} (no turn.ended)",
                      "route answer(tool_call, ...) to the waiting tool call and emit "
                      "turn.ended when the turn completes")
        if any(c.tool_call == card.tool_call
               for c in runtime.world.cards.open_cards(session)):
            self.fail(stage, f"card {card.tool_call} is still open after its turn ended",
                      "close the card (ports.ui.close_card) once the tool call has a result")

    def redeploy(self, runtime: Runtime) -> None:
        stage = "deploy"
        session = "contract-s2"
        if not isinstance(runtime, Redeployable):
            mark = len(self.history)
            self.send(runtime, "message", session, [])
            self.turn_runs(runtime, "message", session, mark)
            return
        mark = len(self.history)
        dep = self.call(stage, "deploy('v2')", lambda: runtime.deploy("v2"))
        if not isinstance(dep, str) or not dep:
            self.fail(stage, f"deploy('v2') returned {dep!r}",
                      "return the new deployment's id, a non-empty str")
        if not any(r.deployment == dep for r in self.after(mark, "deployment.registered")):
            self.fail(stage, f"deploy('v2') returned {dep!r} but recorded no "
                      f"deployment.registered for it", "record deployment.registered with "
                      "the new deployment's id when a version is released")
        mark = len(self.history)
        self.send(runtime, stage, session, [])
        self.turn_runs(runtime, stage, session, mark)
        started = self.after(mark, "invocation.started")
        if not started:
            self.fail(stage, "a message after deploy('v2') recorded no invocation.started",
                      "record invocation.started (with its deployment) for every invocation")
        stray = [r for r in started if r.deployment != dep]
        if stray:
            self.fail(stage, f"new work after deploy('v2') started on "
                      f"{stray[0].deployment!r}, not on the new deployment {dep!r}: "
                      f"{stray[0].describe()}", "route new invocations to the latest "
                      "deployment; only invocations already running stay pinned")

    def capabilities(self, runtime: Runtime) -> None:
        small = max(self.unit, 1e-3)
        if isinstance(runtime, Pausable):
            for selector in _SELECTORS:
                mark = len(self.history)
                host = self.call("gc-pause", f"pause_host({selector!r}, {small:g})",
                                 partial(runtime.pause_host, selector, small))
                self.host_event("gc-pause", f"pause_host({selector!r}, ...)", host, mark,
                                "host.paused")
                # Let it resume: pausing a host that is already paused changes nothing.
                self.advance(runtime, runtime.now() + 2 * small, "gc-pause")
        if isinstance(runtime, Crashable):
            mark = len(self.history)
            host = self.call("crash", "crash_host('any')", lambda: runtime.crash_host("any"))
            self.host_event("crash", "crash_host('any')", host, mark, "host.crashed")
        armed = len(self.history)
        if callable(getattr(runtime, "arm", None)) and not isinstance(runtime, FaultPoints):
            self.fail("arm", "the runtime has arm() but no `points`, so every arm step would "
                      "be skipped", "declare the fault points it supports: `points = (...)`")
        # A runtime whose declared points leave out the one every turn reaches is not asked.
        armable = isinstance(runtime, FaultPoints) and _POINT in runtime.points
        if armable and isinstance(runtime, FaultPoints):
            self.call("arm", f"arm({_POINT!r}, 'pause', {small:g}, 1)",
                      lambda: runtime.arm(_POINT, "pause", small, 1))
        if isinstance(runtime, ClockEffects):
            jump = 10 * self.unit
            before = self.call("clock-jump", "now()", runtime.now)
            self.call("clock-jump", f"clock_jump({jump:g})", lambda: runtime.clock_jump(jump))
            after = self.call("clock-jump", "now()", runtime.now)
            if after < before + jump - 1e-6:
                self.fail("clock-jump", f"clock_jump({jump:g}) moved now() from {before:g} to "
                          f"{after:g}", "move the runtime's clock forward by the amount")
        declared = [c.__name__ for c in (Pausable, Crashable, FaultPoints, ClockEffects)
                    if isinstance(runtime, c)]
        if not declared:
            return
        stage = f"after {', '.join(declared)}"
        session = "contract-s3"
        mark = len(self.history)
        self.send(runtime, stage, session, [])
        self.turn_runs(runtime, stage, session, mark,
                       limit=2 * _PATIENCE + 60 * self.unit)
        if armable:
            reached = [r for r in self.after(armed, "faultpoint.reached")
                       if r.get("point") == _POINT]
            if not reached:
                self.fail("arm", f"{_POINT} was armed but no faultpoint.reached record for "
                          "it followed a turn that called the model", "stop at armed points "
                          "(contract.faultpoints hook) and record faultpoint.reached")
            if "action" in reached[0].data and reached[0].get("action") != "pause":
                self.fail("arm", f"{_POINT} was armed to pause but was reached with action "
                          f"{reached[0].get('action')!r}", "apply the armed action at the "
                          "next arrival at the point")

    def records(self) -> None:
        previous: Record | None = None
        for position, record in enumerate(self.history):
            here = record.describe()
            if record.index != position:
                self.fail("history", f"record {here} sits at position {position}",
                          "append records through History.add only")
            if record.type not in TYPES:
                self.fail("history", f"record {here} has type {record.type!r}",
                          f"use one of {list(TYPES)}")
            # History.add already refuses these; a record that bypassed it is judged the same.
            named = {n: getattr(record, n) for n in _RECORD_FIELDS}
            problem = (vocabulary.unknown_kind(record.kind)
                       or vocabulary.missing_field(record.kind, named, record.data)
                       or vocabulary.bad_value(record.kind, named, record.data))
            if problem is not None:
                self.fail("history", f"record {here}: {problem}",
                          "record the kinds and fields of docs/events.md")
            if previous is not None and record.time < previous.time - 1e-9:
                self.fail("history", f"time goes backwards from {previous.describe()} to "
                          f"{here}", "stamp records with the runtime's clock, which never "
                          "goes backwards")
            kind = vocabulary.KINDS.get(record.kind)
            if kind is not None and kind.source == "runtime":
                self.observation(record, kind)
            previous = record

    def observation(self, record: Record, kind: vocabulary.Kind) -> None:
        missing = [name for name in kind.promised
                   if (getattr(record, name) if name in _RECORD_FIELDS
                       else record.data.get(name)) is None]
        if "event_id" not in record.data:
            missing.append("event_id")
        if missing:
            self.fail("history", f"observation {record.describe()} lacks "
                      f"{', '.join(missing)}", "emit the fields docs/events.md lists for "
                      "its kind, with a deterministic event_id")

    # -- helpers

    @property
    def unit(self) -> float:
        """One second of schedule time."""
        return 1.0

    def send(self, runtime: Runtime, stage: str, session: str, plan: list[str]) -> None:
        message: dict[str, object] = {"message_id": f"{session}.m1", "text": "contract",
                                      "user": _USER, "plan": plan}
        self.call(stage, f"send_message({session!r}, ...)",
                  lambda: runtime.send_message(session, message))

    def turn_runs(self, runtime: Runtime, stage: str, session: str, mark: int,
                  limit: float | None = None) -> None:
        limit = limit if limit is not None else _PATIENCE
        if not self.wait(runtime, lambda: bool(self.after(mark, "turn.ended",
                                                          session=session)), limit, stage):
            what = "turn.ended" if self.after(mark, "turn.started", session=session) \
                else "turn.started nor turn.ended"
            self.fail(stage, f"a message to session {session} (no tools) recorded no {what} "
                      f"within {self.patience(limit)}", "run a turn per message and emit "
                      "turn.started and turn.ended")

    def host_event(self, stage: str, call: str, host: object, mark: int, kind: str) -> None:
        if not isinstance(host, str) or not host:
            self.fail(stage, f"{call} returned {host!r}", "return the id of the host it hit")
        if not any(r.host == host for r in self.after(mark, kind)):
            self.fail(stage, f"{call} returned {host!r} but recorded no {kind} for it",
                      f"record {kind} with the host's id when the fault lands")

    def after(self, mark: int, kind: str, **fields: str) -> list[Record]:
        return [r for r in self.history.records[mark:]
                if r.kind == kind and all(getattr(r, k) == v for k, v in fields.items())]

    def advance(self, runtime: Runtime, until: float, stage: str) -> None:
        self.call(stage, f"advance({until:g})", lambda: runtime.advance(until))
        now = self.call(stage, "now()", runtime.now)
        if now < until - 1e-6:
            self.fail(stage, f"advance({until:g}) returned at now()={now:g}",
                      "advance(until) must let the runtime run until `until`")

    def wait(self, runtime: Runtime, done: Callable[[], bool], limit: float,
             stage: str) -> bool:
        """Drive the runtime in small steps until `done()` or the patience is spent.

        On the simulator the patience is `limit` seconds of schedule time. A real runtime does
        its work in real time, and may only observe its engine inside `advance()`; so it is
        driven on (schedule time keeps moving, in small steps) until `done()` or both `limit`
        schedule seconds and `_REAL_PATIENCE` real seconds passed. Waiting without advancing
        would starve such a runtime and blame it for a turn it did run.
        """
        deadline = runtime.now() + limit
        step = limit / 50
        if deterministic(self.adapter):
            while not done():
                now = runtime.now()
                if now >= deadline:
                    return False
                self.advance(runtime, min(deadline, now + step), stage)
            return True
        wall_deadline = time.monotonic() + _REAL_PATIENCE
        while not done():
            if runtime.now() >= deadline and time.monotonic() >= wall_deadline:
                return False
            began = time.monotonic()
            self.advance(runtime, runtime.now() + step, stage)
            if time.monotonic() - began < _BREATHE:
                time.sleep(_BREATHE)  # an advance() that returns at once must not spin
        return True

    def patience(self, limit: float) -> str:
        """The patience of `wait`, as the failure messages state it."""
        if deterministic(self.adapter):
            return f"{limit:g}s"
        return f"{limit:g}s of schedule time and {_REAL_PATIENCE:g}s of real time"
