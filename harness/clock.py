"""Clocks, injected everywhere: no harness module reads `time` directly for virtual work.

`VirtualClock` holds the timers of a simulation. It jumps, autojumps to the next deadline
when every task is blocked (the simulator calls `autojump()` when its ready queue is empty),
and refuses to go backwards. Code that reads the wall clock itself (`time.time()`,
`datetime.now()` in a user's handler) sees virtual time too inside `wall_clock_follows()`,
which moves one freezegun freezer with every jump so histories stay deterministic.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import time as _time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from harness.errors import ClockError

# Virtual time 0.0 is this instant on the wall clock seen by handler code.
EPOCH = _dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=_dt.UTC)
_NAIVE_EPOCH = EPOCH.replace(tzinfo=None)  # freezegun keeps naive UTC


class Clock(Protocol):
    """What the harness needs of a clock: seconds since its own start."""

    def now(self) -> float: ...


class SystemClock:
    """Real time, for the real path. `now()` is monotonic seconds since construction."""

    def __init__(self) -> None:
        self._start = _time.monotonic()

    def now(self) -> float:
        return _time.monotonic() - self._start

    @staticmethod
    def wall() -> float:
        return _time.time()


class TimerHandle:
    """A timer of a `VirtualClock`: when it fires, and `cancel()`."""

    __slots__ = ("at", "callback", "cancelled")

    def __init__(self, at: float, callback: Callable[[], None]) -> None:
        self.at = at
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """Virtual seconds with a timer heap. Deterministic: ties fire in scheduling order."""

    __slots__ = ("_heap", "_now", "_on_jump", "_seq")

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        # (at, seq, timer): tuples compare in C, and `seq` (unique) breaks ties in scheduling
        # order before a timer is ever compared (a dataclass with order=True compared in
        # Python, building two tuples per comparison).
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = 0
        self._on_jump: list[Callable[[float], None]] = []

    def now(self) -> float:
        return self._now

    def call_at(self, at: float, callback: Callable[[], None]) -> TimerHandle:
        if at < self._now:
            at = self._now
        self._seq += 1
        timer = TimerHandle(at, callback)
        heapq.heappush(self._heap, (at, self._seq, timer))
        return timer

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return self.call_at(self._now + max(0.0, delay), callback)

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def advance_to(self, at: float) -> None:
        """Move to `at` without firing anything; refuses to go backwards."""
        if at < self._now:
            raise ClockError(f"virtual clock cannot go backwards from {self._now} to {at}")
        if at != self._now:
            self._now = at
            for listener in self._on_jump:
                listener(at)

    def jump(self, seconds: float) -> None:
        """Move forward by `seconds`, firing every timer that falls due on the way."""
        if seconds < 0:
            raise ClockError(f"cannot jump by a negative amount ({seconds})")
        self.fire_until(self._now + seconds)

    def fire_until(self, at: float) -> int:
        """Fire every timer due at or before `at`, in order, then stand at `at`."""
        fired = 0
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > at:
                break
            fired += self.autojump()
        self.advance_to(max(at, self._now))
        return fired

    def autojump(self) -> int:
        """Jump to the next deadline and fire every timer due then. Returns how many fired."""
        deadline = self.next_deadline()
        if deadline is None:
            return 0
        self.advance_to(deadline)
        heap = self._heap
        fired = 0
        while heap and heap[0][0] <= deadline:
            timer = heapq.heappop(heap)[2]
            if not timer.cancelled:
                fired += 1
                timer.callback()
        return fired

    def clear(self) -> None:
        """Drop every timer (the end of a run: their callbacks hold what scheduled them)."""
        self._heap.clear()

    def on_jump(self, listener: Callable[[float], None]) -> Callable[[], None]:
        self._on_jump.append(listener)
        return lambda: self._on_jump.remove(listener)

    def wall(self) -> _dt.datetime:
        return EPOCH + _dt.timedelta(seconds=self._now)


# Starting freezegun scans every loaded module, which costs more than a whole simulated
# schedule; so a scope opened inside another one moves the freezer that is already on.
@contextmanager
def wall_clock_follows(clock: VirtualClock) -> Iterator[None]:
    """Inside this block `time.time()` and `datetime.now()` read `clock`'s virtual time."""
    import freezegun
    import freezegun.api as fapi

    freezer = None
    if not fapi.freeze_factories:
        freezer = freezegun.freeze_time(clock.wall(), tick=False, ignore=["hypothesis"])
        freezer.start()
    factory: Any = fapi.freeze_factories[-1]
    factory.move_to(clock.wall())
    if type(factory) is fapi.FrozenDateTimeFactory:
        # What `move_to` ends with for this factory (a frozen, not ticking, clock), without
        # parsing the target and converting it to naive UTC first: 0.9 us a jump, not 4.5 us,
        # and a generated schedule jumps about 55 times.
        def follow(now: float) -> None:
            factory.time_to_freeze = _NAIVE_EPOCH + _dt.timedelta(seconds=now)
    else:
        def follow(now: float) -> None:
            factory.move_to(clock.wall())
    remove = clock.on_jump(follow)
    try:
        yield
    finally:
        remove()
        if freezer is not None:
            freezer.stop()


class AutojumpClock:
    """Virtual seconds for a real engine: real time counts, and the owner jumps it forward.

    `now()` moves with the monotonic clock at rate 1 (work on a real engine takes the time
    it takes), and `jump_to(t)` adds the gap when the owner decides nothing is running (the
    Restate runtime: no invocation running, no request in flight) so the next deadline comes
    at once, as Trio's autojump clock does when every task is blocked. It never goes
    backwards. Thread-safe: the world server reads it from its request threads.
    """

    __slots__ = ("_lock", "_offset", "_real", "jumped")

    def __init__(self, start: float = 0.0, real: Callable[[], float] = _time.monotonic) -> None:
        import threading

        self._real = real
        self._offset = float(start) - real()
        self._lock = threading.Lock()
        # Virtual seconds skipped so far (the rest of `now()` was real time).
        self.jumped = 0.0

    def now(self) -> float:
        return self._offset + self._real()

    def jump_to(self, at: float) -> float:
        """Stand at `at` if that is ahead; returns the seconds skipped (0 when behind)."""
        with self._lock:
            gap = at - (self._offset + self._real())
            if gap <= 0:
                return 0.0
            self._offset += gap
            self.jumped += gap
            return gap

    def restart(self, at: float = 0.0) -> None:
        """Start counting from `at` now (a runtime's time 0 comes after its startup)."""
        with self._lock:
            self._offset = float(at) - self._real()
            self.jumped = 0.0
