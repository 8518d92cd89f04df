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
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from harness.adapters import Adapter, deterministic
from harness.errors import DurableChaosError, UsageError, WorkerLost
from harness.evidence import SCRATCH_PREFIX, claim_run_dir, make_scratch, write_text
from harness.exploration import Exploration, explore
from harness.jobs import shrink_job, stop_in, stop_now
from harness.outcome import RunOutcome
from harness.replay import adapter_paths, replay_command
from harness.run import RunOptions, epoch, lost_outcome, run_timeout, wall
from harness.schedules.generate import generate
from harness.supervisor import Event, Pool, pool_of, raise_for, silence_for

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
    # Where the batch's scratch directory goes (the parent's, removed by it on every path);
    # None: the system's temporary directory (a Ray node).
    scratch: str | None = None


@dataclass(frozen=True)
class BatchResult:
    index: int
    runs: tuple[RunOutcome, ...]
    # (position in `runs`, history as JSONL) of the failing and unknown runs.
    histories: tuple[tuple[int, str], ...]
    out_of_time: bool
    failed: bool


def _run_until(pool: Pool, deadline: float | None, fn: Callable[..., Any], *args: Any,
               silence: float | None = None) -> Event | None:
    """Run one job on `pool` and wait for its end; None when `deadline` (on `wall()`) came
    first: the job is stopped then (its runtime closed), so a time budget bounds the whole
    command, shrinking included, and not only the start of each run."""
    key = object()
    pool.submit(key, fn, *args, silence=silence)
    while True:
        event = pool.next_event(timeout=stop_in(deadline))
        if event is not None and event.key is key:
            return event
        if event is None and stop_now(deadline):
            pool.cancel_all()
            return None


def batch_seed(seed: int, index: int) -> int:
    """The seed of batch `index` of a suite seeded `seed` (stable across Python processes,
    unlike `hash`)."""
    digest = hashlib.sha256(f"durable-chaos/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def iter_plan(spec: str, count: int, seed: int, *, run_timeout: float | None = None,
              deadline: float | None = None, invariant: str | None = None,
              invariants: tuple[str, ...] | None = None,
              scratch: str | None = None) -> Iterator[BatchJob]:
    """The batches of `count` schedules, made as they are asked for (a hundred million
    schedules are two million batches: planning them up front took gigabytes)."""
    for index, start in enumerate(range(0, count, BATCH)):
        yield BatchJob(spec, index, batch_seed(seed, index), min(BATCH, count - start),
                       run_timeout, deadline, invariant, invariants, scratch)


def plan(spec: str, count: int, seed: int, **options: Any) -> list[BatchJob]:
    return list(iter_plan(spec, count, seed, **options))


def run_batch(job: BatchJob) -> BatchResult:
    """Run one batch in this process (a pool worker or a Ray task)."""
    from harness.jobs import hold_clock, worker_adapter

    adapter = worker_adapter(job.adapter_spec)
    hold_clock(adapter)
    deadline = None
    if job.deadline is not None:
        deadline = wall() + (job.deadline - epoch())
    runs: list[RunOutcome] = []
    histories: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-",
                                     dir=job.scratch) as tmp:
        options = RunOptions(adapter_spec=job.adapter_spec, report_dir=Path(tmp),
                             run_timeout=job.run_timeout, invariants=job.invariants)

        def on_run(outcome: RunOutcome) -> None:
            if not (outcome.failed or outcome.unknown or outcome.expected_failures):
                # A passing generated run keeps its verdict, not its schedule (the seed
                # makes it again): memory per finished run stays small at any --schedules.
                outcome = replace(outcome, schedule_toml="")
            if outcome.history_path is not None:
                path = Path(outcome.history_path)
                histories.append((len(runs), path.read_text(encoding="utf-8")))
                path.unlink()
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


class Local:
    """Batches on a supervised pool of this machine's processes (harness.supervisor).

    A worker lost in the middle of a batch (the adapter ended its process, a kill, out of
    memory) loses only the run it held: that run is unknown, saying why, and the runs of the
    batch before it are run again on a fresh worker (same seed, same schedules), so the
    search goes on. Each run counts its start (`beat`), which is how the parent knows which
    one a lost worker held.
    """

    # A batch whose worker is lost before its first run starts is sent again this often.
    RETRIES = 2

    def __init__(self, pool: Pool, adapter: Adapter, spec: str, options: RunOptions,
                 deadline: float | None = None) -> None:
        self.slots = pool.slots
        self._pool = pool
        self._deadline = deadline  # on wall(): batches in flight then are stopped
        self._adapter, self._spec, self._options = adapter, spec, options
        self._silence = silence_for(run_timeout(adapter, options))
        self._jobs: dict[int, BatchJob] = {}
        self._retries: dict[int, int] = {}
        self._lost: dict[int, RunOutcome] = {}

    def submit(self, job: BatchJob) -> None:
        self._jobs[job.index] = job
        self._pool.submit(("batch", job.index), run_batch, job, silence=self._silence)

    def next_result(self) -> BatchResult:
        while True:
            event = self._pool.next_event(timeout=stop_in(self._deadline))
            if event is None:
                if stop_now(self._deadline) and self._jobs:
                    # Out of budget with a run in flight (a minute on a real engine): stop
                    # it rather than finish it; the search ends there, out of time.
                    self._pool.cancel_all()
                    index = min(self._jobs)
                    self._jobs.clear()
                    return BatchResult(index, (), (), out_of_time=True, failed=False)
                continue
            index = event.key[1]
            if event.kind == "raised":
                raise_for(event)
            job = self._jobs.pop(index)
            started = event.beats
            if event.kind == "done":
                result: BatchResult = event.payload
                lost = self._lost.pop(index, None)
                if lost is not None:
                    result = replace(result, runs=(*result.runs, lost), out_of_time=False)
                return result
            # Lost: the run it held is unknown; the ones before it are run again.
            if started == 0:
                self._retries[index] = self._retries.get(index, 0) + 1
                if self._retries[index] > self.RETRIES:
                    raise WorkerLost(f"a worker process was lost {self.RETRIES + 1} times "
                                     f"before a batch's first run started ({event.payload})")
                self.submit(job)
                continue
            self._lost[index] = lost_outcome(self._adapter, self._spec,
                                             generate(job.seed, started - 1),
                                             self._options, event.payload)
            if started == 1:
                return BatchResult(index, (self._lost.pop(index),), (), False, False)
            self.submit(replace(job, count=started - 1))

    def close(self, abort: bool) -> None:
        if abort:
            self._pool.cancel_all()


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
    paths = [*adapter_paths(), os.getcwd(),
             *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return list(dict.fromkeys(paths))


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
    pool: Pool | None = None,
) -> Exploration:
    """`explore`, fanned out; see the module docstring for the lifecycle.

    `deadline` is on `wall()`'s clock, as `explore`'s. Batches run on `pool` (kept by the
    caller across runs), else on a pool of `workers` made for this call, or on Ray; the
    adapter never runs in this process. Batches are planned as they are sent, two per
    worker in flight, so memory does not grow with `count`. A KeyboardInterrupt stops every
    worker before it propagates.
    """
    started = wall()
    epoch_deadline = None if deadline is None else epoch() + (deadline - wall())
    found = Exploration([], [])
    with ExitStack() as stack:
        if pool is None and ray is None:
            pool = stack.enter_context(pool_of(max(1, workers or 1)))
        scratch = None if ray is not None else make_scratch()
        if scratch is not None:
            stack.callback(shutil.rmtree, scratch, True)
        backend: Backend = (RayCluster(ray, workers) if ray is not None else
                            Local(pool, adapter, spec, options,  # type: ignore[arg-type]
                                  deadline))
        jobs = iter_plan(spec, count, seed, run_timeout=options.run_timeout,
                         deadline=epoch_deadline, invariant=invariant,
                         invariants=options.invariants,
                         scratch=None if scratch is None else str(scratch))
        in_flight: dict[int, BatchJob] = {}
        pending: dict[int, BatchResult] = {}
        merged = 0
        exhausted = False
        first_failure: BatchJob | None = None
        aborted = True
        try:
            while True:
                while not exhausted and len(in_flight) < 2 * backend.slots:
                    job = next(jobs, None)
                    if job is None:
                        exhausted = True
                        break
                    in_flight[job.index] = job
                    backend.submit(job)
                if not in_flight:
                    break
                result = backend.next_result()
                pending[result.index] = result
                stop = False
                while merged in pending and not stop:
                    batch = pending.pop(merged)
                    job = in_flight.pop(merged)
                    merged += 1
                    for run in _place(batch, options):
                        found.examples += 1
                        found.runs.append(run)
                        if on_run is not None:
                            on_run(run)
                    if batch.failed:
                        first_failure = job
                        stop = True
                    elif batch.out_of_time:
                        found.out_of_time = True
                        stop = True
                if stop:
                    break
            aborted = False
        finally:
            # Batches still running are not needed: a failure or the budget ended the search.
            backend.close(abort=aborted or bool(in_flight))
        if first_failure is not None:
            # Shrink once, in a worker: the batch's search is replayed up to its failure
            # (same seed, same examples) and then shrunk.
            shrinker = pool if pool is not None else stack.enter_context(pool_of(1))
            event = _run_until(shrinker, deadline, shrink_job, spec, first_failure.count,
                               first_failure.seed, options, invariant, epoch_deadline,
                               silence=silence_for(run_timeout(adapter, options)))
            if event is None:  # the budget ran out during a shrinking run: stopped there
                found.out_of_time = found.shrink_cut_short = True
            elif event.kind == "raised":
                raise_for(event)
            elif event.kind == "done":
                again: Exploration = event.payload
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
        if options.report_dir is None:
            runs[position] = replace(outcome,
                                     replay_command=replay_command(options.adapter_spec, None,
                                                                   **_replaying(options)))
            continue
        run_dir = claim_run_dir(options.report_dir, outcome.adapter, outcome.name)
        history_path = run_dir / "history.jsonl"
        write_text(history_path, text)
        schedule_path = run_dir / "schedule.toml"
        write_text(schedule_path, outcome.schedule_toml)
        runs[position] = replace(outcome, history_path=str(history_path),
                                 replay_command=replay_command(options.adapter_spec,
                                                               str(schedule_path),
                                                               **_replaying(options)))
    return runs


def _replaying(options: RunOptions) -> dict[str, Any]:
    # As harness.run names a saved run's replay: judging the invariants it was judged by.
    return {"run_timeout": options.run_timeout, "invariants": options.invariants}


def default_workers(adapters: Sequence[Adapter], asked: int | None) -> int:
    """`asked`, else every core for the simulator and one worker for a real engine (it owns
    ports and processes)."""
    if asked is not None:
        return asked
    if not all(deterministic(adapter) for adapter in adapters):
        return 1
    return os.cpu_count() or 1
