"""Adapters written outside durable-chaos that misbehave, each in one way a user's can.

Public API only, as a user writes them: each wraps the reference app on the simulator
(`harness.adapters.sim.SimRuntime`) and breaks one promise. Load them as
`misbehaving:ATTRIBUTE` with `--adapter-path` pointing at this directory (the CLI) or with
the directory on `sys.path` (the pytest plugin). `BROKEN` lists every attribute with what it
does wrong; the tests (tests/test_misbehaving_adapters.py) pin what the harness answers.

Hangs wait on a `threading.Event` that nothing sets: an engine that never answers. The
harness's watchdog interrupts them; a signal wakes such a wait.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app


class CustomStop(BaseException):
    """A user's own BaseException (not an Exception): `except Exception` lets it through."""


def _hang() -> None:
    threading.Event().wait()


class Runtime:
    """The reference app on the simulator, broken where `mode` says."""

    def __init__(self, ctx: RunContext, mode: str) -> None:
        self._engine = SimRuntime(ctx, build_app)
        self._history = ctx.history
        self.world = self._engine.world
        self.mode = mode
        self._advances = 0
        self._now_calls = 0

    def now(self) -> Any:
        self._now_calls += 1
        if self.mode == "now_str":
            return str(self._engine.now())
        if self.mode == "now_backwards":
            return self._engine.now() - 3600.0 * self._now_calls
        return self._engine.now()

    def advance(self, until: float) -> None:
        self._advances += 1
        if self._advances == 2:  # every run advances at least twice (a step, the end)
            if self.mode == "advance_raises":
                raise ConnectionResetError("the engine closed the connection")
            if self.mode == "advance_hangs":
                _hang()
        if self.mode == "noisy":
            # A runtime that logs to stdout, a lot.
            for n in range(2000):
                print(f"engine log line {n}: advancing to {until}")
            sys.stdout.flush()
        self._engine.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        if self.mode == "send_custom_base":
            raise CustomStop("the user's own BaseException")
        if self.mode == "send_system_exit":
            raise SystemExit(0)
        if self.mode == "send_generator_exit":
            raise GeneratorExit
        if self.mode == "later_system_exit" and not session.startswith("contract-"):
            raise SystemExit(0)  # keeps the contract, breaks in the chaos runs
        if self.mode == "misspelled_kind":
            self._history.add("turn.begun", session=session)
        if self.mode == "missing_field":
            self._history.add("tool.result", session=session, turn="t", tool_call="c")
        self._engine.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._engine.answer(tool_call, decision, user)

    def finish(self) -> None:
        self._engine.finish()

    def close(self) -> None:
        self._engine.close()
        if self.mode == "close_raises":
            raise OSError("the worker would not stop")
        if self.mode == "close_hangs":
            _hang()

    def deploy(self, version: str) -> str:
        return self._engine.deploy(version)


@dataclass(frozen=True)
class Adapter:
    mode: str
    name: str = "misbehaving"
    description: str = "a user's adapter that breaks one promise"
    engine: str = "sim"
    claims: Any = None

    def check_config(self) -> Any:
        if self.mode == "config_garbage":
            return "hand_off_after=300"
        if self.mode == "config_none":
            return None
        if self.mode == "config_raises_lines":
            raise ValueError("bad thresholds:\n  hand_off_after missing\n  max_wait missing")
        return CheckConfig()

    def open(self, ctx: RunContext) -> Runtime:
        if self.mode == "open_raises":
            raise ConnectionRefusedError("no engine at 127.0.0.1:9")
        if self.mode == "open_raises_lines":
            raise RuntimeError("engine failed to start:\n  port 9 in use\n\n  see engine.log")
        if self.mode == "open_hangs":
            _hang()
        if self.mode == "leaks_thread":
            # A client library's worker thread, never stopped (not a daemon).
            threading.Thread(target=_hang, name="engine-client-pump").start()
        if self.mode == "open_returns_none":
            return None  # type: ignore[return-value]
        return Runtime(ctx, self.mode)


BROKEN: dict[str, str] = {
    "open_raises": "open() raises ConnectionRefusedError",
    "open_raises_lines": "open() raises an error whose message has several lines",
    "open_hangs": "open() never returns",
    "close_raises": "close() raises OSError",
    "close_hangs": "close() never returns",
    "advance_raises": "advance() raises on its second call",
    "advance_hangs": "advance() never returns on its second call",
    "now_str": "now() returns a str",
    "now_backwards": "now() goes backwards",
    "send_custom_base": "send_message raises a BaseException of its own",
    "send_system_exit": "send_message raises SystemExit(0)",
    "send_generator_exit": "send_message raises GeneratorExit",
    "misspelled_kind": "records 'turn.begun'",
    "missing_field": "records a tool.result without its outcome",
    "config_garbage": "check_config() returns a str",
    "config_none": "check_config() returns None",
    "config_raises_lines": "check_config() raises an error of several lines",
    "noisy": "prints thousands of lines to stdout",
    "open_returns_none": "open() returns None",
    "leaks_thread": "open() starts a thread that never ends (not a daemon)",
    "later_system_exit": "send_message raises SystemExit(0), except in the contract check",
}

for _mode in BROKEN:
    globals()[_mode] = Adapter(_mode, name=f"misbehaving-{_mode}")

claims_unknown = Adapter("claims_unknown", name="misbehaving-claims", claims=("busy-rul",))
claims_none = Adapter("claims_none", name="misbehaving-claims-none", claims=())
claims_str = Adapter("claims_str", name="misbehaving-claims-str", claims="pinning-bound")
engine_typo = Adapter("engine_typo", name="misbehaving-engine", engine="simulator")
name_none = Adapter("", name=None)  # type: ignore[arg-type]
not_an_adapter = 42
class_not_instance = Adapter  # the class itself: a user who forgot the ()
well_behaved = Adapter("", name="well-behaved")
