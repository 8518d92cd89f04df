"""Adapters written outside durable-chaos that attack the process running them.

Public API only, as a user writes them (see misbehaving.py for the gentler ones): each wraps
the reference app on the simulator and, in `send_message` of a chaos run, does one thing no
adapter should. Load them as `hostile:ATTRIBUTE` with `--adapter-path` pointing here. What
the harness must answer: the run is unknown (exit 3), named in the summary and the report,
never exit 0, never a traceback; the command ends; nothing is left running.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app


def _blocked_hang() -> None:
    # Every signal the harness could use to interrupt it is blocked: only a kill ends it.
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL,
                                                                       signal.SIGSTOP})
    threading.Event().wait()


def _attack(mode: str) -> None:
    if mode == "os_exit_0":
        os._exit(0)
    elif mode == "os_exit_1":
        os._exit(1)
    elif mode == "sigkill_self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "sigterm_self":
        os.kill(os.getpid(), signal.SIGTERM)
    elif mode == "sigint_group":
        os.killpg(0, signal.SIGINT)  # as if Ctrl-C was pressed
    elif mode == "sigterm_group":
        os.killpg(0, signal.SIGTERM)
    elif mode == "abort":
        os.abort()
    elif mode == "blocked_hang":
        _blocked_hang()
    elif mode == "fork_sleeps":
        if os.fork() == 0:  # the child sleeps on, holding whatever it inherited
            time.sleep(3600)
            os._exit(0)
    elif mode == "fork_continues":
        os.fork()  # both go on in the harness's code
    elif mode == "exit_in_thread":
        threading.Thread(target=lambda: os._exit(0)).start()
        time.sleep(5)
    elif mode == "close_stdout":
        os.close(1)
    elif mode == "sys_exit_3":
        raise SystemExit(3)


class Runtime:
    def __init__(self, ctx: RunContext, mode: str, where: str) -> None:
        self._engine = SimRuntime(ctx, build_app)
        self.world = self._engine.world
        self.mode, self.where = mode, where

    def now(self) -> float:
        return self._engine.now()

    def advance(self, until: float) -> None:
        self._engine.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        if self.where == "send" and not session.startswith("contract-"):
            _attack(self.mode)
        self._engine.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._engine.answer(tool_call, decision, user)

    def finish(self) -> None:
        self._engine.finish()

    def close(self) -> None:
        self._engine.close()
        if self.where == "close":
            _attack(self.mode)


@dataclass(frozen=True)
class Adapter:
    mode: str
    where: str = "send"
    name: str = "hostile"
    description: str = "a user's adapter that attacks the process running it"
    engine: str = "sim"
    claims: Any = None

    def check_config(self) -> Any:
        return CheckConfig()

    def open(self, ctx: RunContext) -> Runtime:
        if self.where == "open":
            _attack(self.mode)
        return Runtime(ctx, self.mode, self.where)


ATTACKS = ["os_exit_0", "os_exit_1", "sigkill_self", "sigterm_self", "sigint_group",
           "sigterm_group", "abort", "blocked_hang", "fork_sleeps", "exit_in_thread",
           "sys_exit_3"]
for _mode in ATTACKS:
    for _where in ("send", "open", "close"):
        globals()[f"{_mode}_{_where}"] = Adapter(_mode, _where, name=f"hostile-{_mode}-{_where}")

fork_continues = Adapter("fork_continues", name="hostile-fork-continues")
close_stdout = Adapter("close_stdout", name="hostile-close-stdout")
dotdot_name = Adapter("", where="none", name="..")
slash_name = Adapter("", where="none", name="../../escaped")
well_behaved = Adapter("", where="none", name="hostile-none")


