"""The adapter contract: the built-in adapters and the example keep it, and every planted
break is caught before any chaos starts, with a message naming the broken promise."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contract.ports import EVENTS
from harness.adapters import RunContext, load_adapter
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from harness.conformance import VOCABULARY, check_adapter
from harness.errors import AdapterContractError
from harness.history import History
from harness.world import World

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("spec", ["reference", "naive"])
def test_the_builtin_simulator_adapters_keep_the_contract(spec: str) -> None:
    check_adapter(load_adapter(spec))


def test_the_example_adapter_keeps_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    check_adapter(load_adapter("my_runtime:adapter"))
    check_adapter(load_adapter("my_runtime:adapter_with_handoff"))


def test_the_vocabulary_holds_every_observation_kind() -> None:
    assert set(EVENTS) <= VOCABULARY
    assert {"invocation.started", "deployment.registered", "host.paused", "op.message",
            "fault.heal", "effect.delivered", "threadlog.committed"} <= VOCABULARY


# ---------------------------------------------------------------------------- planted breaks


class Wrapped:
    """A reference runtime on the simulator, every capability delegated; breaks override."""

    def __init__(self, inner: SimRuntime) -> None:
        self.inner = inner
        self.points = inner.points
        self.world: World = inner.world
        self.history: History = inner.history

    def now(self) -> float:
        return self.inner.now()

    def advance(self, until: float) -> None:
        self.inner.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.inner.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self.inner.answer(tool_call, decision, user)

    def background(self, session: str, tool_call: str) -> None:
        self.inner.background(session, tool_call)

    def cancel(self, session: str) -> None:
        self.inner.cancel(session)

    def finish(self) -> None:
        self.inner.finish()

    def close(self) -> None:
        self.inner.close()

    def deploy(self, version: str) -> str:
        return self.inner.deploy(version)

    def pause_host(self, host: str, duration: float) -> str:
        return self.inner.pause_host(host, duration)

    def crash_host(self, host: str) -> str:
        return self.inner.crash_host(host)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self.inner.arm(point, action, duration, times)

    def clock_jump(self, seconds: float) -> None:
        self.inner.clock_jump(seconds)


@dataclass
class Planted:
    """An adapter around the reference whose runtime is `runtime(inner)`."""

    runtime: Callable[[SimRuntime], Any]
    name: str = "planted"
    description: str = "a reference runtime with one planted break"
    engine: str = "sim"
    config_: CheckConfig = field(default_factory=CheckConfig)

    def check_config(self) -> CheckConfig:
        return self.config_

    def open(self, ctx: RunContext) -> Any:
        from reference_impl.app import build_app

        return self.runtime(SimRuntime(ctx, build_app))


class DeafAnswers(Wrapped):
    def answer(self, tool_call: str, decision: str, user: str) -> None:
        pass


class NoCards(Wrapped):
    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.inner.send_message(session, {**message, "plan": []})


class SilentTurns(Wrapped):
    def send_message(self, session: str, message: dict[str, object]) -> None:
        pass


class LyingDeploy(Wrapped):
    def deploy(self, version: str) -> str:
        self.inner.deploy(version)
        self.history.add("deployment.registered", deployment="dep-elsewhere")
        return "dep-elsewhere"


class GhostDeploy(Wrapped):
    def deploy(self, version: str) -> str:
        return "dep9"


class TypoKind(Wrapped):
    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.history.add("turn.begun", session=session)  # turn.started, misspelt
        super().send_message(session, message)


class OwnKind(Wrapped):
    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.history.add("myengine.sent", session=session)  # a namespace of its own
        super().send_message(session, message)


class TimeTravel(Wrapped):
    def finish(self) -> None:
        self.history.add("myengine.note", time=0.0)
        super().finish()


class Undeployed(Wrapped):
    def finish(self) -> None:
        self.history.add("invocation.started", invocation="inv99")
        super().finish()


class HalfObservation(Wrapped):
    def finish(self) -> None:
        self.history.add("turn.started", session="s9", data={"event_id": "x"})
        super().finish()


class PauseRefuses(Wrapped):
    def pause_host(self, host: str, duration: float) -> str:
        raise NotImplementedError("cannot pause")


class CrashPretends(Wrapped):
    def crash_host(self, host: str) -> str:
        return "dep1.h1"


class ArmIgnored(Wrapped):
    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        pass


class ClockStuck(Wrapped):
    def clock_jump(self, seconds: float) -> None:
        pass


class AdvanceStops(Wrapped):
    def advance(self, until: float) -> None:
        self.inner.advance(until / 2)


class NotARuntime:
    def __init__(self, inner: SimRuntime) -> None:
        self.world = inner.world


class CloseFails(Wrapped):
    def close(self) -> None:
        raise RuntimeError("socket already closed")


BREAKS = [
    (DeafAnswers, "message and answer: answering the open card contract-s1.turn1.t1 did not "
     "end turn contract-s1.turn1"),
    (NoCards, "message and answer: a message whose model calls send_email (needs approval) "
     "showed no approval card"),
    (SilentTurns, "message and answer: a message to session contract-s1 recorded no "
     "turn.started"),
    (LyingDeploy, "deploy: new work after deploy('v2') started on 'dep2', not on the new "
     "deployment 'dep-elsewhere'"),
    (GhostDeploy, "deploy: deploy('v2') returned 'dep9' but recorded no deployment.registered"),
    (TypoKind, "message and answer: send_message('contract-s1', ...) appended a record the "
     "vocabulary refuses: unknown record kind 'turn.begun': turn.* kinds: started, waiting, "
     "resumed, ended, held."),
    (TimeTravel, "history: time goes backwards"),
    (Undeployed, "finish: finish() appended a record the vocabulary refuses: record "
     "'invocation.started' lacks required field 'deployment'"),
    (HalfObservation, "finish: finish() appended a record the vocabulary refuses: record "
     "'turn.started' lacks required field 'turn'"),
    (PauseRefuses, "gc-pause: pause_host('any', 1) raised NotImplementedError: cannot pause"),
    (CrashPretends, "crash: crash_host('any') returned 'dep1.h1' but recorded no host.crashed"),
    (ArmIgnored, "arm: effect.model.after_call was armed to pause but was reached with "
     "action None"),
    (ClockStuck, "clock-jump: clock_jump(10) moved now() from *"),
    (AdvanceStops, "open: advance(1) returned at now()=0.5"),
    (NotARuntime, "open: open(ctx) returned NotARuntime, which lacks now, advance, "
     "send_message, answer, finish, close"),
    (CloseFails, "close: close() raised RuntimeError: socket already closed"),
]


@pytest.mark.parametrize(("runtime", "message"), BREAKS, ids=[b[0].__name__ for b in BREAKS])
def test_a_planted_break_fails_the_contract_naming_it(runtime: Callable[[SimRuntime], Any],
                                                       message: str) -> None:
    with pytest.raises(AdapterContractError) as failure:
        check_adapter(Planted(runtime))
    text = str(failure.value)
    assert text.startswith("adapter 'planted': ")
    from fnmatch import fnmatchcase

    assert fnmatchcase(text, f"adapter 'planted': {message}*; *"), text


def test_the_adapters_own_kinds_are_allowed_under_a_namespace_of_its_own() -> None:
    check_adapter(Planted(OwnKind))


@pytest.mark.parametrize(("change", "message"), [
    ({"name": ""}, "adapter 'Planted': protocol: name is ''"),
    ({"engine": "cloud"}, "adapter 'planted': protocol: engine is 'cloud'"),
    ({"config_": CheckConfig(hand_off_after=900.0, max_wait=600.0)},
     "adapter 'planted': protocol: check_config() has hand_off_after=900.0 and max_wait=600.0"),
])
def test_a_bad_adapter_face_fails_before_a_runtime_opens(change: dict[str, Any],
                                                          message: str) -> None:
    opened: list[bool] = []

    def runtime(inner: SimRuntime) -> Wrapped:
        opened.append(True)
        return Wrapped(inner)

    adapter = Planted(runtime, **change)
    with pytest.raises(AdapterContractError, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        check_adapter(adapter)
    assert opened == []


def test_a_runtime_without_optional_capabilities_keeps_the_contract() -> None:
    class Bare:
        """Only the Runtime protocol: no deploy, pause, crash, arm or clock jump."""

        def __init__(self, inner: SimRuntime) -> None:
            self._inner = inner
            self.world = inner.world
            self.now, self.advance = inner.now, inner.advance
            self.send_message, self.answer = inner.send_message, inner.answer
            self.background, self.cancel = inner.background, inner.cancel
            self.finish, self.close = inner.finish, inner.close

    check_adapter(Planted(Bare))


def test_a_real_runtime_that_observes_its_engine_only_inside_advance_keeps_the_contract(
) -> None:
    # A real engine works in real time and this runtime sees it only when driven: its
    # engine (a simulator here) moves with the wall clock, at most to the time asked for,
    # and only inside advance(). Waiting on it without calling advance() starves it.
    rate = 200.0  # schedule seconds the engine does per real second

    class Observed:
        def __init__(self, inner: SimRuntime) -> None:
            self._inner = inner
            self.world = inner.world
            self._now = 0.0
            self._started = time.monotonic()
            self.answer, self.send_message = inner.answer, inner.send_message
            self.background, self.cancel = inner.background, inner.cancel
            self.finish, self.close = inner.finish, inner.close

        def now(self) -> float:
            return self._now

        def advance(self, until: float) -> None:
            self._now = max(self._now, until)
            engine = (time.monotonic() - self._started) * rate
            self._inner.advance(max(self._inner.now(), min(self._now, engine)))

    check_adapter(Planted(Observed, engine="real"))
