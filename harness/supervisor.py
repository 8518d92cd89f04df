"""Adapters run in worker processes the harness supervises; the parent only judges and reports.

User code never decides the exit status: an adapter may end its process (`os._exit`, a
SIGKILL of its own pid), fork, leave threads or hang where no signal reaches it. So every run
of `durable-chaos run`/`replay` and every collected item of the pytest plugin runs in a worker
process of a `Pool`, and the parent, which never runs adapter code, turns a worker that died
or went silent into an "unknown" run naming why (`lost_outcome`), then starts a fresh worker.

The lifecycle of one job, written once:

1. `submit` sends a picklable job (a module-level function and its arguments) to an idle
   worker over its pipe. Workers are forked once per pool and kept across jobs: a fork costs
   a few milliseconds, a simulated run about one.
2. The worker counts a `beat()` at the start of every run, in memory it shares with the
   parent (a run takes about a millisecond: a message per run woke the parent a thousand
   times a second), and then sends `done` with the result, or `raised` with the harness
   error it raised.
3. The parent waits on every pipe and every worker's sentinel at once (`next_event`), with a
   short timeout so that Ctrl-C and the time budget are seen within a fraction of a second.
   A worker whose sentinel fires before `done` is `lost`; one silent for longer than its job's
   `silence` (the run's limit, twice, plus `GRACE`: the in-process watchdog had its chance)
   is killed and `lost`.
4. `close` ends every worker (SIGKILL when aborting) and reaps it.

A worker dies with its parent even when the parent is SIGKILLed: `PR_SET_PDEATHSIG` on Linux,
elsewhere a thread that watches the parent's pid. A worker ignores SIGINT (Ctrl-C reaches the
whole process group: the parent alone decides) and takes SIGTERM's default.

Rejected: `concurrent.futures.ProcessPoolExecutor` (one dead worker breaks the whole pool and
every batch it held; no way to tell which run killed it) and a process per run (a fork and a
pipe per run cost more than a simulated run).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from typing import Any

from harness.errors import DurableChaosError, OutputUnwritable, UsageError

__all__ = ["GRACE", "Event", "Pool", "beat", "in_worker", "silence_for"]

# Real seconds a worker may stay silent past its run's own limit and close limit before it is
# killed: the watchdog inside the worker interrupts a hang first; this catches the hangs it
# cannot reach (signals blocked, a C call that never returns).
GRACE = 3.0
# How often the parent looks up from waiting (Ctrl-C, the time budget).
TICK = 0.2
# Real seconds a stopped worker gets to close the runtime it holds before SIGKILL.
STOP_GRACE = 10.0
PR_SET_PDEATHSIG = 1

_REAL = {"monotonic": time.monotonic}
# In a worker: the pipe to the parent and the worker's own pid (a process the adapter forks
# shares the pipe, and must never write to it).
_link: tuple[Connection, int] | None = None
_beats: Any = None  # the worker's shared counter of runs started


def in_worker() -> bool:
    return _link is not None and _link[1] == os.getpid()


def guard() -> None:
    """End a process the adapter forked from a worker that runs on in harness code (it
    would write the worker's evidence twice, or answer for it)."""
    if _link is not None and os.getpid() != _link[1]:
        os._exit(0)


def beat() -> None:
    """Tell the parent this worker started a run (it is alive, and which run a lost worker
    held); a no-op outside a worker."""
    if _link is None:
        return
    if os.getpid() != _link[1]:  # a process the adapter forked, running on in harness code
        os._exit(0)
    _beats.value += 1


def silence_for(limit: float | None) -> float | None:
    """How long a worker running runs of `limit` seconds may stay silent (None: forever)."""
    if limit is None:
        return None
    return 2 * limit + GRACE


@dataclass(frozen=True)
class Event:
    """What a worker did: `done` (payload: the result), `raised` (payload: (kind, detail):
    "usage" and a message, "output" and (path, problem), "error" and a message) or `lost`
    (payload: why, one line). `beats`: the runs the job started (`beat`)."""

    key: Any
    kind: str
    payload: Any
    beats: int = 0


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:  # no parent-death signal: a thread watches for the parent's end
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="durable-chaos-orphan").start()
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _serve(conn: Connection, parent: int, beats: Any) -> None:
    global _beats
    _beats = beats
    try:
        _loop(conn, parent)
    except BaseException:  # SIGTERM while idle, or the pipe gone: nothing to say
        pass
    os._exit(0)


def _stop(signum: int, frame: object) -> None:
    from harness.errors import Terminated

    # Once: the run's runtime is being closed (run_schedule closes it on the way out).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated(signum)


def _loop(conn: Connection, parent: int) -> None:
    global _link
    _die_with_parent(parent)
    # A process group of its own: an adapter that signals its group (os.killpg(0, ...))
    # reaches its worker, never the parent that judges; the parent ends the whole group.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (the parent stopping the suite, or a CI job cancelled) stops the run like
    # Ctrl-C does in one process: its runtime is closed (a real engine's servers stopped),
    # then the worker ends. Not the CLI's handler it inherited (that writes a report).
    signal.signal(signal.SIGTERM, _stop)
    me = os.getpid()
    _link = (conn, me)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if message is None:
            os._exit(0)
        fn, args = message
        try:
            reply: tuple[str, Any] = ("done", fn(*args))
        except OutputUnwritable as exc:
            reply = ("raised", ("output", (exc.path, exc.problem)))
        except UsageError as exc:
            reply = ("raised", ("usage", str(exc)))
        except KeyboardInterrupt:  # stopped (SIGTERM): the parent no longer waits
            os._exit(0)
        except BaseException as exc:  # the parent decides what it means; never a traceback
            reply = ("raised", ("error", f"{type(exc).__name__}: {exc}"))
        if os.getpid() != me:
            os._exit(0)
        try:
            conn.send(reply)
        except Exception as exc:  # a result that does not pickle: said, not a dead worker
            conn.send(("raised", ("error", f"the result could not be sent back: "
                                           f"{type(exc).__name__}: {exc}")))


class _Worker:
    def __init__(self, context: Any) -> None:
        parent_end, child_end = context.Pipe()
        self.beats = context.RawValue("q", 0)
        self.seen = 0  # `beats` when the parent last looked
        self.base = 0  # `beats` when the job was sent
        self.process = context.Process(target=_serve,
                                       args=(child_end, os.getpid(), self.beats),
                                       name="durable-chaos-worker")
        self.process.start()
        child_end.close()
        self.conn: Connection = parent_end
        self.key: Any = None
        self.silence: float | None = None
        self.heard = _REAL["monotonic"]()

    @property
    def busy(self) -> bool:
        return self.key is not None

    def kill(self) -> None:
        pid = self.process.pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # the worker and what it forked
        with contextlib.suppress(ProcessLookupError, OSError, AttributeError, ValueError):
            self.process.kill()
        self.process.join(5)
        with contextlib.suppress(OSError):
            self.conn.close()

    def terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError, AttributeError, ValueError):
            self.process.terminate()


def _stop_all(workers: list[_Worker]) -> None:
    """SIGTERM, so that each closes the runtime it holds; SIGKILL after `STOP_GRACE`."""
    for worker in workers:
        worker.terminate()
    give_up = _REAL["monotonic"]() + STOP_GRACE
    for worker in workers:
        worker.process.join(max(0.0, give_up - _REAL["monotonic"]()))
        worker.kill()


def _why(process: Any) -> str:
    code = process.exitcode
    if code is None:
        return "the worker process running it stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the process running it was killed by {name} (the adapter, or the system)"
    return (f"the process running it exited with status {code} in the middle of the run "
            "(the adapter ended its own process: os._exit, sys.exit in a thread, a crash)")


class Pool:
    """`slots` worker processes, kept alive across jobs (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        # Forked on Linux: a spawned worker imports the harness again (about 1.5 s). The
        # parent forks outside any frozen clock; the watchdog's timer restarts in a child.
        method = "fork" if sys.platform == "linux" else "spawn"
        self._context = multiprocessing.get_context(method)
        self.slots = max(1, slots)
        self._workers: list[_Worker] = []
        self._queue: list[tuple[Any, Callable[..., Any], tuple[Any, ...], float | None]] = []
        self._events: list[Event] = []
        self._closed = False

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(abort=exc[0] is not None)

    @property
    def pending(self) -> int:
        return len(self._queue) + sum(1 for w in self._workers if w.busy)

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any,
               silence: float | None = None) -> None:
        """Run `fn(*args)` in a worker; its events carry `key`."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        self._queue.append((key, fn, args, silence))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue:
            idle = next((w for w in self._workers if not w.busy), None)
            if idle is None and len(self._workers) < self.slots:
                idle = _Worker(self._context)
                self._workers.append(idle)
            if idle is None:
                return
            key, fn, args, silence = self._queue.pop(0)
            idle.key, idle.silence, idle.heard = key, silence, _REAL["monotonic"]()
            idle.base = idle.seen = idle.beats.value
            try:
                idle.conn.send((fn, args))
            except (OSError, ValueError) as exc:
                self._lose(idle, f"the worker could not take the job ({exc})")
            except Exception as exc:  # the job itself does not pickle: the harness's bug
                idle.key = None
                raise DurableChaosError(f"a job could not be sent to a worker: "
                                        f"{type(exc).__name__}: {exc}") from None

    def _lose(self, worker: _Worker, why: str) -> None:
        key = worker.key
        beats = worker.beats.value - worker.base
        worker.kill()
        self._workers.remove(worker)
        self._events.append(Event(key, "lost", why, beats))

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event of a submitted job; None when `timeout` passed without one (or
        nothing is pending). Wakes every `TICK` so that a KeyboardInterrupt lands."""
        give_up = None if timeout is None else _REAL["monotonic"]() + timeout
        while True:
            if self._events:
                return self._events.pop(0)
            busy = [w for w in self._workers if w.busy]
            if not busy and not self._queue:
                return None
            now = _REAL["monotonic"]()
            if give_up is not None and now >= give_up:
                return None
            wait_for = TICK if give_up is None else min(TICK, give_up - now)
            handles: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in busy]
            ready = wait_any(handles, timeout=wait_for)
            for worker in busy:
                if worker.conn in ready:
                    self._read(worker)
                elif worker.process.sentinel in ready:
                    worker.process.join(1)  # its exit status says why
                    self._lose(worker, _why(worker.process))
            now = _REAL["monotonic"]()
            for worker in [w for w in self._workers if w.busy]:
                if worker.beats.value != worker.seen:
                    worker.seen, worker.heard = worker.beats.value, now
                if worker.silence is not None and now - worker.heard > worker.silence:
                    self._lose(worker, f"the run did not end, and the worker running it did "
                               f"not answer for {worker.silence:g}s (the adapter blocks "
                               "where the run's wall-clock limit cannot interrupt it); "
                               "killed")
            self._dispatch()

    def _read(self, worker: _Worker) -> None:
        try:
            kind, payload = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(1)
            self._lose(worker, _why(worker.process))
            return
        except Exception as exc:  # garbage on the pipe (a forked child wrote to it)
            self._lose(worker, f"the worker sent what cannot be read ({type(exc).__name__})")
            return
        worker.heard = _REAL["monotonic"]()
        self._events.append(Event(worker.key, kind, payload,
                                  worker.beats.value - worker.base))
        worker.key = None

    def run(self, fn: Callable[..., Any], *args: Any, silence: float | None = None) -> Event:
        """Run one job and wait for its end (`done`, `raised` or `lost`)."""
        key = object()
        self.submit(key, fn, *args, silence=silence)
        while True:
            event = self.next_event()
            if event is None:  # pragma: no cover - a submitted job always ends
                raise DurableChaosError("a job vanished from the pool")
            if event.key is not key:
                self._events.append(event)
                continue
            return event

    def cancel_all(self) -> None:
        """Kill the workers that hold jobs and drop the queue (the pool stays usable)."""
        self._queue.clear()
        self._events.clear()
        busy = [w for w in self._workers if w.busy]
        for worker in busy:
            self._workers.remove(worker)
        _stop_all(busy)

    def close(self, abort: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.clear()
        _stop_all([w for w in self._workers if abort or w.busy])
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in self._workers:
            worker.process.join(2)
            worker.kill()  # it has ended; what it forked and left has not, maybe
        self._workers.clear()

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None]


def raise_for(event: Event) -> None:
    """A `raised` event, raised in the parent as the harness's own error."""
    kind, detail = event.payload
    if kind == "usage":
        raise UsageError(detail)
    if kind == "output":
        raise OutputUnwritable(*detail)
    raise DurableChaosError(detail)


@contextlib.contextmanager
def pool_of(slots: int) -> Iterator[Pool]:
    pool = Pool(slots)
    aborted = True
    try:
        yield pool
        aborted = False
    finally:
        pool.close(abort=aborted)
