"""A whole chaos suite: scenario files, then generated schedules, per adapter.

A suite (`run_suite`) runs the scenario files, then generated schedules (the first failure shrunk
to a minimal failing schedule), and writes histories, `index.html` and `junit.xml`.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import harness.schedules.library as scenario_library
from harness.adapters import load_adapter
from harness.errors import (
    AdapterUnavailable,
    OutputUnwritable,
    Terminated,
    UsageError,
    WorkerLost,
)
from harness.evidence import ReportLock, signals_deferred, sweep_scratch
from harness.fanout import default_workers, explore_fanned
from harness.jobs import dispatch_runs
from harness.outcome import RunOutcome, SuiteOutcome
from harness.progress import Progress
from harness.run import RunOptions, wall
from harness.schedules.model import Schedule
from harness.supervisor import pool_of


def environment() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "durable-chaos": _version(),
    }


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("durable-chaos")
    except Exception:
        return "unknown"


class _CannotOpen(BaseException):
    """The first run of an adapter could not open its runtime: stop the suite (a
    BaseException, so that no `except Exception` on the way, an adapter's included, takes it
    for a failed run)."""

    def __init__(self, spec: str, error: str) -> None:
        self.spec, self.error = spec, error
        super().__init__(error)


def run_suite(
    adapter_specs: Sequence[str],
    scenarios: Sequence[Schedule],
    *,
    schedules: int,
    seed: int,
    time_budget: float | None = None,
    report_dir: Path | None = Path("reports"),
    progress: bool = True,
    stream: Any = None,
    run_timeout: float | None = None,
    workers: int | None = None,
    ray: str | None = None,
    invariants: Sequence[str] | None = None,
) -> SuiteOutcome:
    """Scenarios then generated schedules, per adapter; writes the report even if interrupted.

    Every run happens in a supervised worker process (harness.supervisor), never here: a
    worker that dies or hangs makes its run unknown. Scenario files are spread over the same
    pool and reported in their order; generated schedules are fanned out over it (default:
    every core for the simulator, one for a real engine) or, with `ray` (an address or
    "local"), over a Ray cluster; the seed alone decides which schedules run and their
    verdicts (harness.fanout). `invariants` overrides every adapter's `claims`.
    A spent time budget or an interruption stops every worker and marks the suite
    incomplete. The report directory is locked for the run (harness.evidence).

    Raises `AdapterUnavailable` (after writing the report) when an adapter's `open()` fails on
    its first run: every other run would fail the same way and prove nothing.
    """
    adapters = [(spec, load_adapter(spec)) for spec in adapter_specs]
    started = wall()
    deadline = started + time_budget if time_budget else None
    runs: list[RunOutcome] = []
    shrunk: list[RunOutcome] = []
    complete = True
    interrupted: str | None = None
    cannot_open: _CannotOpen | None = None
    lost: WorkerLost | UsageError | None = None
    output_error: str | None = None
    total = len(adapters) * (len(scenarios) + schedules)
    bar = Progress(total, stream, progress)
    sweep_scratch()
    with ExitStack() as outer:
        if report_dir is not None:
            try:
                report_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputUnwritable(str(report_dir), exc.strerror or str(exc)) from None
            outer.enter_context(ReportLock(report_dir))
            fresh_runs_dir(report_dir)
        slots = default_workers([a for _, a in adapters], workers if ray is None else None)
        try:
            pool = outer.enter_context(pool_of(slots))
            for spec, adapter in adapters:
                options = RunOptions(adapter_spec=spec, report_dir=report_dir,
                                     run_timeout=run_timeout,
                                     invariants=None if invariants is None
                                     else tuple(invariants))
                first = [True]

                def record(outcome: RunOutcome, spec: str = spec,
                           first: list[bool] = first) -> None:
                    runs.append(outcome)
                    bar.update(outcome)
                    if first[0] and not outcome.opened:
                        raise _CannotOpen(spec, outcome.error or "open() failed")
                    first[0] = False

                if not dispatch_runs(pool, adapter, spec, scenarios, options, record,
                                     deadline):
                    complete = False
                if schedules > 0 and complete:
                    result = explore_fanned(adapter, spec, schedules, seed, options,
                                            workers=workers, ray=ray, deadline=deadline,
                                            on_run=record,
                                            pool=None if ray is not None else pool)
                    shrunk.extend(result.shrunk)
                    for minimal in result.shrunk:
                        bad = [r for r in minimal.results if r.valid is False]
                        what = ("smallest failing schedule so far (shrinking cut short by "
                                "the time budget)" if minimal.shrink_cut_short else
                                "minimal failing schedule")
                        for r in bad:
                            bar.message(f"{what} ({minimal.steps} steps) for "
                                        f"{r.checker}: {minimal.replay_command}")
                    if result.out_of_time:
                        complete = False
                        bar.message(f"time budget spent after {result.examples} generated "
                                    "schedule(s)")
        except _CannotOpen as exc:
            complete = False
            cannot_open = exc
        except OutputUnwritable as exc:
            complete = False
            output_error = str(exc)
        except (WorkerLost, UsageError) as exc:
            # A worker lost, or a usage error found only by a worker (an adapter that does
            # not load on a Ray node): the report of what ran is written, then it is raised.
            complete = False
            lost = exc
            if isinstance(exc, WorkerLost):  # a usage error is printed once, by the CLI
                bar.message(f"{exc}; writing the report of what ran so far")
        except KeyboardInterrupt as exc:
            complete = False
            interrupted = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
            bar.message("interrupted: writing the report of what ran so far")
        finally:
            bar.close()
        suite = SuiteOutcome(
            adapters=tuple(adapter.name for _, adapter in adapters),
            seed=seed,
            scenario_sets=scenario_library.describe_sets(scenarios),
            runs=tuple(runs),
            wall_time=wall() - started,
            complete=complete,
            environment=environment(),
            shrunk=tuple(shrunk),
            interrupted=interrupted,
            output_error=output_error,
        )
        if report_dir is not None:
            suite = write_guarded(suite, report_dir)
    if lost is not None:
        raise lost
    if cannot_open is not None:
        raise AdapterUnavailable(f"adapter {cannot_open.spec!r} cannot run here: "
                                 f"{cannot_open.error}")
    return suite


def write_guarded(suite: SuiteOutcome, report_dir: Path) -> SuiteOutcome:
    """Write the report with Ctrl-C and SIGTERM held off until it is whole; the suite, with
    `output_error` set when it could not be written. A signal that arrived meanwhile stops
    a suite that was complete as it would have stopped it before."""
    with signals_deferred() as arrived:
        try:
            write_outputs(suite, report_dir)
        except OutputUnwritable as exc:
            suite = replace(suite, output_error=suite.output_error or str(exc))
    if arrived and suite.interrupted is None:
        import signal

        suite = replace(suite, complete=False, interrupted=(
            "SIGTERM" if signal.SIGTERM in arrived else "SIGINT"))
    return suite


def fresh_runs_dir(report_dir: Path) -> None:
    """The previous run's histories go, so that this run's are never mixed with them (the
    report that named them is replaced by this run's)."""
    old = report_dir / "runs"
    if not old.is_dir() or old.is_symlink():
        return
    aside = report_dir / f".runs-old-{os.getpid()}"
    try:
        old.rename(aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def write_outputs(suite: SuiteOutcome, report_dir: Path) -> Path:
    from harness.report import write_report

    return write_report(suite, report_dir)
