"""What a supervised worker process runs (harness.supervisor): every call into an adapter of
`durable-chaos run`/`replay` and of the plugin's collected items goes through one of these.

Each is a module-level function of picklable arguments; the adapter is loaded once per
worker and spec. The parent (`dispatch_runs`, the fan-out, the plugin) turns a worker that
was lost into an unknown run (`harness.run.lost_outcome`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack

from harness.adapters import Adapter, load_adapter, suite_clock
from harness.exploration import Exploration, explore
from harness.outcome import RunOutcome
from harness.run import RunOptions, lost_outcome, run_schedule, run_timeout, wall
from harness.schedules.model import Schedule
from harness.supervisor import Pool, raise_for, silence_for

_adapters: dict[str, Adapter] = {}
# A worker serving simulated runs keeps one wall-clock freezer on between jobs: starting
# freezegun costs about 10 ms (it scans every module), twice a simulated scenario. A real
# engine's job stops it first (its event loops must see time move).
_frozen: ExitStack | None = None


def hold_clock(adapter: Adapter | None) -> None:
    """Keep on the clock `adapter`'s runs share (`suite_clock`) until a job that needs the
    real clock (a real engine's, or `None`: the contract check) comes."""
    global _frozen
    wanted = None if adapter is None else suite_clock(adapter)
    if wanted is not None and _frozen is None:
        stack = ExitStack()
        stack.enter_context(wanted)
        _frozen = stack
    elif wanted is None and _frozen is not None:
        _frozen.close()
        _frozen = None


def worker_adapter(spec: str) -> Adapter:
    adapter = _adapters.get(spec)
    if adapter is None:
        adapter = _adapters[spec] = load_adapter(spec)
    return adapter


def scenario_job(spec: str, schedule: Schedule, options: RunOptions) -> RunOutcome:
    """One schedule, run as it is written (a scenario file, a replayed or shrunk schedule)."""
    adapter = worker_adapter(spec)
    hold_clock(adapter)
    return run_schedule(adapter, schedule, options)


def shrink_job(spec: str, count: int, seed: int, options: RunOptions,
               invariant: str | None, shrink_deadline: float | None) -> Exploration:
    """A batch explored again up to its first failure, which is then shrunk. The deadline is
    epoch seconds (the parent's `wall()` is not this process's)."""
    import time

    adapter = worker_adapter(spec)
    hold_clock(adapter)
    until = None if shrink_deadline is None else wall() + (shrink_deadline - time.time())
    found = explore(adapter, count, seed, options, invariant=invariant,
                    shrink_deadline=until)
    found.runs = []  # the parent has them already; only the minimal schedule goes back
    return found


def contract_job(spec: str, limit: float | None) -> str | None:
    """The adapter contract (harness.conformance) under the run's limit: why it breaks, or
    None."""
    from harness.conformance import check_adapter
    from harness.errors import AdapterContractError, RunTimeout
    from harness.watchdog import Watchdog

    adapter = worker_adapter(spec)
    hold_clock(None)
    try:
        with Watchdog(limit):
            check_adapter(adapter)
    except AdapterContractError as exc:
        return str(exc)
    except RunTimeout:
        return (f"adapter {adapter.name!r}: the contract check passed the wall-clock limit "
                f"of {limit:g}s; raise it with --chaos-run-timeout or make the runtime answer")
    return None


def check_contract(pool: Pool, adapter: Adapter, spec: str,
                   options: RunOptions) -> str | None:
    """The adapter contract checked on the pool under the run's limit: why it breaks (its
    worker lost included), or None."""
    limit = run_timeout(adapter, options)
    # The check is a run too: an adapter that hangs in it must not hang its caller.
    event = pool.run(contract_job, spec, limit, silence=silence_for(limit))
    if event.kind == "done":
        verdict: str | None = event.payload
        return verdict
    if event.kind == "lost":
        return f"adapter {adapter.name!r}: the contract check ended its worker: {event.payload}"
    return f"adapter {adapter.name!r}: {event.payload[1]!s}"


# How long past a time budget's deadline a job in flight may take to end on its own before it
# is stopped: a simulated batch checks the deadline between runs of milliseconds and returns
# the runs it did; a run on a real engine (a minute) is stopped, so the budget bounds the
# whole command (docs/adapter-kit.md states the grace: this, the stop, the report).
BUDGET_GRACE = 3.0


def stop_in(deadline: float | None) -> float | None:
    """Real seconds until a job in flight is stopped (`deadline` on `wall()`, plus
    `BUDGET_GRACE`), never negative; None without a deadline."""
    return None if deadline is None else max(0.0, deadline + BUDGET_GRACE - wall())


def stop_now(deadline: float | None) -> bool:
    """Whether a job still in flight is stopped now (see `stop_in`)."""
    return deadline is not None and wall() >= deadline + BUDGET_GRACE


def dispatch_runs(pool: Pool, adapter: Adapter, spec: str, schedules: Sequence[Schedule],
                  options: RunOptions, record: Callable[[RunOutcome], None],
                  deadline: float | None = None) -> bool:
    """Run `schedules` on the pool, the first alone, then at most two per worker in flight,
    and `record` each
    outcome in the order given (the report does not depend on which worker was faster).
    False when `deadline` (on `wall()`) stopped it before every schedule ran."""
    silence = silence_for(run_timeout(adapter, options))
    done: dict[int, RunOutcome] = {}
    submitted = merged = 0
    complete = True
    try:
        while merged < len(schedules):
            # The first run alone: an adapter that cannot open stops the suite there, before
            # the others start (every one would fail the same way).
            in_flight = 2 * pool.slots if merged else 1
            while submitted < len(schedules) and submitted - merged < in_flight:
                if deadline is not None and wall() > deadline:
                    complete = False
                    break
                pool.submit(("run", id(schedules), submitted), scenario_job, spec,
                            schedules[submitted], options, silence=silence)
                submitted += 1
            if merged == submitted:
                break
            event = pool.next_event(timeout=stop_in(deadline))
            if event is None:
                if stop_now(deadline):
                    # The budget ran out with runs in flight (on a real engine a run takes
                    # a minute): stop them, their runtimes closed, and report them unjudged,
                    # so the command ends within its budget and never passes on them.
                    pool.cancel_all()
                    complete = False
                    for index in range(merged, submitted):
                        done.setdefault(index, lost_outcome(
                            adapter, spec, schedules[index], options,
                            "stopped unjudged: the time budget ran out during the run"))
                    while merged in done:
                        record(done.pop(merged))
                        merged += 1
                    break
                continue
            index = event.key[2]
            if event.kind == "done":
                done[index] = event.payload
            elif event.kind == "lost":
                done[index] = lost_outcome(adapter, spec, schedules[index], options,
                                           event.payload)
            elif event.kind == "raised":
                raise_for(event)
            while merged in done:
                record(done.pop(merged))
                merged += 1
    except BaseException:
        pool.cancel_all()
        raise
    return complete


def run_one(pool: Pool, adapter: Adapter, spec: str, schedule: Schedule,
            options: RunOptions) -> RunOutcome:
    """One schedule on the pool, as `run_schedule` would return it here."""
    found: list[RunOutcome] = []
    dispatch_runs(pool, adapter, spec, [schedule], options, found.append)
    return found[0]


def probe_job(spec: str, invariants: tuple[str, ...] | None) -> None:
    """Load the adapter and check it can run here (`preflight`, its claims)."""
    from harness.adapters import preflight
    from harness.adapters.base import claimed_invariants
    from harness.checkers import ALL

    adapter = worker_adapter(spec)
    preflight(spec, adapter)
    claimed_invariants(adapter, invariants, [c.name for c in ALL])


def probe_adapters(specs: Sequence[str], invariants: tuple[str, ...] | None) -> None:
    """Load and check each adapter in a worker first: a module or constructor that ends its
    process (os._exit at import) ends a worker, not the command; a `UsageError` says why
    (exit 2), as any adapter that does not load."""
    from harness.errors import UsageError
    from harness.supervisor import pool_of

    with pool_of(1) as pool:
        for spec in specs:
            event = pool.run(probe_job, spec, invariants)
            if event.kind == "lost":
                raise UsageError(f"adapter {spec!r}: loading it ended its process "
                                 f"({event.payload}); fix the module or its factory")
            if event.kind == "raised":
                kind, detail = event.payload
                if kind == "usage":
                    raise UsageError(detail)
                raise UsageError(f"adapter {spec!r} failed to load: {detail}")
