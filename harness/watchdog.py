"""A wall-clock limit for one run, that also ends a run blocked inside an adapter.

A run can hang in the adapter's own code: a real runtime that waits on a socket, a user's
adapter that loops on `time.monotonic()` under a frozen clock, a `threading.Event().wait()`.
Checking a deadline between steps never fires then, so a watchdog thread watches the clock
and, when the limit passes, interrupts the thread that runs the schedule:

- On the main thread (the CLI, pytest): it sends that thread a real signal (`SIGNAL`) whose
  handler raises `RunTimeout`. A real signal, not `_thread.interrupt_main`, because only a
  signal wakes a thread blocked in `sleep`, `select`, a lock or a socket read (PEP 475 retries
  those calls unless the handler raises, and this one does).
- On another thread (a user driving runs from a worker thread): the exception is set
  asynchronously (`PyThreadState_SetAsyncExc`). It lands at the next bytecode, so a thread
  blocked inside C code is only interrupted once that call returns; documented, not hidden.

What is safe: `RunTimeout` is a BaseException, so an adapter's `except Exception` does not
swallow it; it can land anywhere in the adapter's code, so after it the runtime is only
closed (which stops what it started), never driven again, and the run is judged unknown.
The exception is only raised while the watchdog is armed: leaving the `with` block disarms it
first, so a late signal cannot escape into the code that follows.

Rejected: SIGALRM (`setitimer`). pytest-timeout and users' own code own that signal; a signal
of our own that passes foreign deliveries on to the previous handler leaves theirs alone.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from harness.errors import RunTimeout

__all__ = ["SIGNAL", "Watchdog"]

SIGNAL: signal.Signals = signal.SIGUSR2
REPEAT = 1.0  # seconds between interrupts once the limit has passed


class Watchdog:
    """`with Watchdog(seconds): ...` raises `RunTimeout` inside the block after `seconds`.

    `seconds=None` arms nothing. `fired` says whether the limit passed while armed.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired = False
        self._lock = threading.Lock()
        self._armed = False
        self._timer: threading.Timer | None = None
        self._target = 0
        self._main = False
        self._previous: Any = None

    def __enter__(self) -> Watchdog:
        if self.seconds is None:
            return self
        self._target = threading.get_ident()
        self._main = threading.current_thread() is threading.main_thread()
        if self._main:
            self._previous = signal.signal(SIGNAL, self._handle)
        self._armed = True
        self._timer = threading.Timer(max(0.0, self.seconds), self._fire)
        self._timer.daemon = True
        self._timer.name = "durable-chaos-watchdog"
        self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.seconds is None:
            return
        # First statement: from here on the handler is a no-op (it runs on this thread, so
        # a plain assignment orders it), and under the lock the timer sends nothing more.
        self._armed = False
        with self._lock:
            timer = self._timer
        if timer is not None:
            timer.cancel()
        if self._main:
            signal.signal(SIGNAL, self._previous)
        elif self.fired:
            # Withdraw an asynchronous exception that was set but has not landed yet.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._target), None)

    def _fire(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self.fired = True
            if self._main:
                signal.pthread_kill(self._target, SIGNAL)
            else:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._target), ctypes.py_object(RunTimeout))
            # Again every REPEAT seconds until the block is left: adapter code that swallows
            # the first one (`except BaseException`) and blocks again is interrupted again.
            self._timer = threading.Timer(REPEAT, self._fire)
            self._timer.daemon = True
            self._timer.name = "durable-chaos-watchdog"
            self._timer.start()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._armed and self.fired:
            raise RunTimeout(f"the run passed its wall-clock limit of {self.seconds:g}s")
        previous = self._previous
        if callable(previous):  # a delivery that is not ours: whoever had the signal gets it
            previous(signum, frame)
