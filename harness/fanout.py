"""Generated schedules fanned out over processes, or over a Ray cluster.

The seed alone decides which schedules run and their verdicts, whatever the number of
workers. The lifecycle of a fan-out (`explore_fanned`), written once:

1. The suite seed is cut into batches of `BATCH` schedules; batch i is explored with its own
   seed, derived from (suite seed, i) only, so its schedules do not depend on how many
   workers there are or which one runs it.
2. Workers run batches (generation, no shrinking): each stops at its first failure
   and returns its outcomes, with the histories of its failing and unknown runs as text (a
   Ray node's disk is not the parent's).
3. The parent merges results in batch order: a run is reported (progress, report) only once
   every batch before it is merged, so N=1 and N=2 write the same report. The merge stops at
   the first failure in batch order (as a serial search stops at its first failure) or at a
   batch cut short by the time budget; later batches are cancelled or discarded.
4. The parent shrinks that first failure once, by exploring its batch again with shrinking.

Rejected: a home-made cluster protocol (Ray already schedules, retries and ships values
between machines).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from harness.adapters import Adapter, load_adapter
from harness.errors import DurableChaosError, UsageError, WorkerLost
from harness.exploration import Exploration, _schedule_from, explore
from harness.outcome import RunOutcome
from harness.run import _REAL, RunOptions, _replay, _slug, wall

# Big enough that a batch's start-up (pickling the job, the result's histories) is a small
# share, small enough that two workers share a few hundred schedules evenly.
BATCH = 50


@dataclass(frozen=True)
class BatchJob:
    """One batch of generated schedules: all a worker needs, and nothing it cannot pickle."""

    adapter_spec: str
    index: int
    seed: int
    count: int
    run_timeout: float | None = None
    # Epoch seconds (time.time), so that it means the same on every node of a cluster.
    deadline: float | None = None
    invariant: str | None = None
    # The invariants judged (`RunOptions.invariants`): None, the adapter's own claims.
    invariants: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BatchResult:
    index: int
    runs: tuple[RunOutcome, ...]
    # (position in `runs`, history as JSONL) of the failing and unknown runs.
    histories: tuple[tuple[int, str], ...]
    out_of_time: bool
    failed: bool


def batch_seed(seed: int, index: int) -> int:
    """The seed of batch `index` of a suite seeded `seed` (stable across Python processes,
    unlike `hash`)."""
    digest = hashlib.sha256(f"durable-chaos/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def plan(spec: str, count: int, seed: int, *, run_timeout: float | None = None,
         deadline: float | None = None, invariant: str | None = None,
         invariants: tuple[str, ...] | None = None) -> list[BatchJob]:
    jobs = []
    for index, start in enumerate(range(0, count, BATCH)):
        jobs.append(BatchJob(spec, index, batch_seed(seed, index), min(BATCH, count - start),
                             run_timeout, deadline, invariant, invariants))
    return jobs


_adapters: dict[str, Adapter] = {}


def run_batch(job: BatchJob) -> BatchResult:
    """Run one batch in this process (a pool worker, a Ray task, or the parent itself)."""
    adapter = _adapters.get(job.adapter_spec)
    if adapter is None:
        adapter = _adapters[job.adapter_spec] = load_adapter(job.adapter_spec)
    deadline = None
    if job.deadline is not None:
        deadline = wall() + (job.deadline - _REAL["time"]())
    runs: list[RunOutcome] = []
    histories: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(prefix="durable-chaos-batch-") as tmp:
        options = RunOptions(adapter_spec=job.adapter_spec, report_dir=Path(tmp),
                             run_timeout=job.run_timeout, invariants=job.invariants)

        def on_run(outcome: RunOutcome) -> None:
            if outcome.history_path is not None:
                path = Path(outcome.history_path)
                histories.append((len(runs), path.read_text(encoding="utf-8")))
                outcome = replace(outcome, history_path=None, replay_command="")
            runs.append(outcome)

        found = explore(adapter, job.count, job.seed, options, invariant=job.invariant,
                        deadline=deadline, on_run=on_run, shrink=False, keep_histories=True)
    return BatchResult(job.index, tuple(runs), tuple(histories), found.out_of_time,
                       failed=any(_counts(r, job.invariant) for r in runs))


def _counts(outcome: RunOutcome, invariant: str | None) -> bool:
    return any(r.valid is False and (invariant is None or r.checker == invariant)
               for r in outcome.results)


# ---------------------------------------------------------------------------- backends


class Backend(Protocol):
    slots: int

    def submit(self, job: BatchJob) -> None: ...

    def next_result(self) -> BatchResult:
        """Block until a submitted batch is done (KeyboardInterrupt may arrive meanwhile)."""
        ...

    def close(self, abort: bool) -> None: ...


class InProcess:
    """N=1: batches run in the parent, in order."""

    slots = 1

    def __init__(self) -> None:
        self._jobs: list[BatchJob] = []

    def submit(self, job: BatchJob) -> None:
        self._jobs.append(job)

    def next_result(self) -> BatchResult:
        return run_batch(self._jobs.pop(0))

    def close(self, abort: bool) -> None:
        self._jobs.clear()


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group: the parent alone decides, and stops the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the CLI's SIGTERM handler (raise Terminated, write a report):
    # the parent's own business, not a worker's.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class ProcessPool:
    """N worker processes on this machine.

    Forked on Linux: a spawned worker imports the harness again (about 1.5 s, measured),
    longer than finding a shallow bug takes. The parent forks outside any frozen clock (the
    suite and the plugin leave it first), and the only thread it may have, the watchdog's
    timer, is started again in a child that needs it. Elsewhere (macOS, Windows) fork is
    unsafe or missing: spawn.

    concurrent.futures, not multiprocessing.Pool: a Pool whose worker dies (killed, out of
    memory) never completes the batch it held, and its terminate() can hang on a queue lock
    the dead worker held; the executor reports a broken pool instead.
    """

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.slots = workers
        method = "fork" if sys.platform == "linux" else "spawn"
        self._pool = ProcessPoolExecutor(workers, multiprocessing.get_context(method),
                                         initializer=_worker_init)
        self._futures: set[Future[BatchResult]] = set()

    def submit(self, job: BatchJob) -> None:
        self._futures.add(self._pool.submit(run_batch, job))

    def next_result(self) -> BatchResult:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        while True:
            # A timeout, so that Ctrl-C is seen while waiting.
            done, _ = wait(self._futures, timeout=0.2, return_when=FIRST_COMPLETED)
            if not done:
                continue
            future = done.pop()
            self._futures.discard(future)
            try:
                return future.result()
            except BrokenProcessPool:
                raise WorkerLost(
                    "a worker process died (killed, out of memory, or a crash in C code) "
                    "while it ran a batch of generated schedules; what it ran is lost. Rerun "
                    "with --workers 1 to see the failure in one process") from None

    def close(self, abort: bool) -> None:
        if abort:
            # No public way to stop running workers before Python 3.14 (kill_workers()).
            processes: dict[int, Any] = getattr(self._pool, "_processes", None) or {}
            for process in list(processes.values()):
                if process.is_alive():
                    process.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._futures.clear()


class RayCluster:
    """Batches as Ray tasks, on a cluster (`address`) or a local instance (`local`)."""

    def __init__(self, address: str, workers: int | None) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'durable-chaos[ray]'") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        # A user's adapter module is found from the directory they run in (load_adapter) or
        # from an --adapter-path; Ray workers start elsewhere, with neither on their path.
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(worker_path())}}
        if self._started:
            if address == "local":
                ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False,
                         _node_ip_address="127.0.0.1", runtime_env=env,
                         log_to_driver=False)
            else:
                ray.init(address=address, runtime_env=env, log_to_driver=False)
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        self.slots = workers or max(1, int(resources.get("CPU", 1)))
        self._task = ray.remote(num_cpus=1)(run_batch)
        self._refs: list[Any] = []

    def submit(self, job: BatchJob) -> None:
        self._refs.append(self._task.remote(job))

    def next_result(self) -> BatchResult:
        from ray.exceptions import RayError, RayTaskError

        while True:
            done, self._refs = self._ray.wait(self._refs, num_returns=1, timeout=0.2)
            if not done:
                continue
            try:
                result: BatchResult = self._ray.get(done[0])
            except RayTaskError as exc:
                # The batch raised on a node: the harness's own error (an adapter that does
                # not load there) is raised here as itself, one line; anything else is a
                # worker that could not run its batch, not a traceback from another machine.
                cause = exc.cause
                if isinstance(cause, DurableChaosError):
                    raise cause from None
                raise WorkerLost(f"a Ray task failed while it ran a batch of generated "
                                 f"schedules: {type(cause).__name__}: {cause}; rerun with "
                                 "--workers 1 to see it in one process") from None
            except RayError as exc:  # the worker died (killed, out of memory), the node left
                raise WorkerLost(f"a Ray worker was lost while it ran a batch of generated "
                                 f"schedules ({type(exc).__name__}); what it ran is lost") \
                    from None
            return result

    def close(self, abort: bool) -> None:
        if abort:
            for ref in self._refs:
                self._ray.cancel(ref, force=True)
        self._refs = []
        if self._started:
            self._ray.shutdown()


def check_ray_address(address: str, timeout: float = 5.0) -> None:
    """A `UsageError` unless `address` ('local', 'auto', or a head's HOST:PORT, with or
    without 'ray://') answers: `ray.init` retries a dead address for minutes, logging,
    instead of failing."""
    import socket

    if address in ("local", "auto"):
        return
    target = address.removeprefix("ray://")
    host, colon, port = target.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise UsageError(f"--ray {address}: expected 'local' or a Ray head's address such as "
                         "127.0.0.1:6379")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise UsageError(f"--ray {address}: nothing answers there ({exc.strerror or exc}); "
                         "start the cluster's head (`ray start --head`) and give its "
                         "address, or use --ray local") from None


def worker_path() -> list[str]:
    """What a worker that does not fork from this process needs on its PYTHONPATH to load
    the adapters this process loaded: the --adapter-path directories, the directory it runs
    in (load_adapter searches it) and this process's own PYTHONPATH."""
    from harness.replay import _adapter_paths  # the --adapter-path directories, in order

    paths = [*_adapter_paths, os.getcwd(),
             *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return list(dict.fromkeys(paths))


def backend_for(workers: int | None, ray: str | None) -> Backend:
    """`workers` None: on Ray, the cluster's CPUs; here, one."""
    if ray is not None:
        return RayCluster(ray, workers)
    if workers is None or workers <= 1:
        return InProcess()
    return ProcessPool(workers)


# ---------------------------------------------------------------------------- merging


def explore_fanned(
    adapter: Adapter,
    spec: str,
    count: int,
    seed: int,
    options: RunOptions,
    *,
    workers: int | None = 1,
    ray: str | None = None,
    invariant: str | None = None,
    deadline: float | None = None,
    on_run: Callable[[RunOutcome], None] | None = None,
) -> Exploration:
    """`explore`, fanned out; see the module docstring for the lifecycle.

    `deadline` is on `wall()`'s clock, as `explore`'s. A KeyboardInterrupt stops every
    worker before it propagates.
    """
    started = wall()
    epoch_deadline = None if deadline is None else _REAL["time"]() + (deadline - wall())
    jobs = plan(spec, count, seed, run_timeout=options.run_timeout, deadline=epoch_deadline,
                invariant=invariant, invariants=options.invariants)
    found = Exploration([], [])
    backend = backend_for(workers, ray)
    pending: dict[int, BatchResult] = {}
    submitted = merged = 0
    first_failure: BatchJob | None = None
    aborted = True
    try:
        while merged < len(jobs):
            while submitted < len(jobs) and submitted - merged < 2 * backend.slots:
                backend.submit(jobs[submitted])
                submitted += 1
            result = backend.next_result()
            pending[result.index] = result
            stop = False
            while merged in pending and not stop:
                batch = pending.pop(merged)
                merged += 1
                for run in _place(batch, options):
                    found.examples += 1
                    found.runs.append(run)
                    if on_run is not None:
                        on_run(run)
                if batch.failed:
                    first_failure = jobs[batch.index]
                    stop = True
                elif batch.out_of_time:
                    found.out_of_time = True
                    stop = True
            if stop:
                break
        aborted = False
    finally:
        # Batches still running are not needed: a failure or the budget ended the search.
        backend.close(abort=aborted or merged < len(jobs))
    if first_failure is not None:
        # Shrink once, in the parent: the batch's search is replayed up to its failure (same
        # seed, same examples) and then shrunk.
        again = explore(adapter, first_failure.count, first_failure.seed, options,
                        invariant=invariant, shrink_deadline=deadline)
        found.shrunk.extend(again.shrunk)
        found.shrink_cut_short = again.shrink_cut_short
    found.wall_time = wall() - started
    return found


def _place(batch: BatchResult, options: RunOptions) -> list[RunOutcome]:
    """The batch's runs, with the histories a worker brought back saved in the report
    directory (where the serial path would have saved them)."""
    runs = list(batch.runs)
    for position, text in batch.histories:
        outcome = runs[position]
        schedule = _schedule_from(outcome)
        if options.report_dir is None:
            runs[position] = replace(outcome,
                                     replay_command=_replay(options.adapter_spec, None,
                                                            schedule, options.run_timeout,
                                                            options.invariants))
            continue
        run_dir = options.report_dir / "runs" / _slug(outcome.adapter) / _slug(outcome.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        history_path = run_dir / "history.jsonl"
        history_path.write_text(text, encoding="utf-8")
        schedule_path = run_dir / "schedule.toml"
        schedule_path.write_text(outcome.schedule_toml, encoding="utf-8")
        runs[position] = replace(outcome, history_path=str(history_path),
                                 replay_command=_replay(options.adapter_spec,
                                                        str(schedule_path), schedule,
                                                        options.run_timeout,
                                                        options.invariants))
    return runs


def default_workers(adapters: Sequence[Adapter], asked: int | None) -> int:
    """`asked`, else every core for the simulator and one worker for a real engine (it owns
    ports and processes)."""
    if asked is not None:
        return asked
    if any(adapter.engine != "sim" for adapter in adapters):
        return 1
    return os.cpu_count() or 1
