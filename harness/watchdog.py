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

One timer thread serves every watchdog of the process: a simulated run takes about a
millisecond, and starting a `threading.Timer` per run (and per close) cost a third of one.

Rejected: SIGALRM (`setitimer`). pytest-timeout and users' own code own that signal; a signal
of our own that passes foreign deliveries on to the previous handler leaves theirs alone.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from harness.errors import RunTimeout

__all__ = ["SIGNAL", "Watchdog"]

SIGNAL: signal.Signals = signal.SIGUSR2
REPEAT = 1.0  # seconds between interrupts once the limit has passed
# Kept in a dict: freezegun replaces module attributes that are the real time functions.
_REAL = {"monotonic": time.monotonic}


class _Timers:
    """One daemon thread that calls each scheduled function once its delay has passed."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._active: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, fn: Callable[[], None]) -> int:
        with self._cond:
            ident = next(self._ids)
            self._active[ident] = fn
            heapq.heappush(self._heap, (_REAL["monotonic"]() + delay, ident))
            if len(self._heap) > 2 * len(self._active) + 64:
                # Cancelled entries (most runs end long before their limit) are dropped.
                self._heap = [e for e in self._heap if e[1] in self._active]
                heapq.heapify(self._heap)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name="durable-chaos-watchdog")
                self._thread.start()
            # Woken only for a new earliest deadline: otherwise the thread already wakes
            # in time, and waking it for nothing cost each run a thread switch.
            if self._heap[0][1] == ident:
                self._cond.notify()
            return ident

    def cancel(self, ident: int) -> None:
        with self._cond:
            self._active.pop(ident, None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][1] not in self._active:
                        heapq.heappop(self._heap)
                    now = _REAL["monotonic"]()
                    if self._heap and self._heap[0][0] <= now:
                        fn = self._active.pop(heapq.heappop(self._heap)[1])
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
            fn()


_TIMERS = _Timers()
# A forked child (the fan-out's workers) has no timer thread, and its copy of the lock may
# have been taken by that thread at the moment of the fork: it starts afresh.
os.register_at_fork(after_in_child=_TIMERS.reset)


class Watchdog:
    """`with Watchdog(seconds): ...` raises `RunTimeout` inside the block after `seconds`.

    `seconds=None` arms nothing. `fired` says whether the limit passed while armed.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired = False
        self._lock = threading.Lock()
        self._armed = False
        self._timer: int | None = None
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
        self._timer = _TIMERS.schedule(max(0.0, self.seconds), self._fire)
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
            _TIMERS.cancel(timer)
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
            self._timer = _TIMERS.schedule(REPEAT, self._fire)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._armed and self.fired:
            raise RunTimeout(f"the run passed its wall-clock limit of {self.seconds:g}s")
        previous = self._previous
        if callable(previous):  # a delivery that is not ours: whoever had the signal gets it
            previous(signum, frame)
