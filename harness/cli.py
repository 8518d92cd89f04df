"""`durable-chaos`: run the chaos suite, replay a failure, list adapters.

Exit status:
  0    every run was judged and no invariant was violated
  1    at least one invariant was violated (this outranks 3); one the adapter does not
       claim (`claims`, `--invariants`) never counts
  2    usage or configuration error: one line on stderr naming the option, file or field and
       the fix, no traceback; a missing component or an adapter that cannot open is one
  3    could not judge: some run(s) ended unknown (an adapter crashed or timed out, a checker
       could not decide); `--allow-unknown` turns this into 0
  130  interrupted (Ctrl-C), 143 terminated (SIGTERM): the report of what ran is written and
       marked incomplete
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import NoReturn

from harness import settings
from harness.errors import (
    ComponentUnavailable,
    DurableChaosError,
    OutputUnwritable,
    Terminated,
    UsageError,
    WorkerLost,
)
from harness.outcome import RunOutcome, StepNote, SuiteOutcome, printable
from harness.schedules.model import Schedule

EPILOG = """\
examples:
  durable-chaos run                          scenarios + 100 generated schedules, reference adapter
  durable-chaos run --adapter naive          the 'before' design: exits 1 with pinning-bound
  durable-chaos run --adapter naive --adapter reference   side by side in one report
  durable-chaos replay --adapter reference reports/runs/reference/NAME/schedule.toml
  durable-chaos replay --seed 7 --schedules 100           rerun a generated exploration
  durable-chaos adapters                     what --adapter accepts

exit status:
  0    every run judged, no violation
  1    violations found (outranks 3)
  2    usage or configuration error (a missing component, an adapter that cannot open)
  3    could not judge: some run(s) unknown (--allow-unknown: 0 instead)
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM): the report is marked incomplete
The report is written to REPORT_DIR/index.html and REPORT_DIR/junit.xml.
"""

EXIT_OK, EXIT_VIOLATIONS, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line like every other usage error (its own print
    the whole usage first, which buries the line that says what is wrong)."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        if "expected one argument" in message:
            # `--run-timeout -1s`: argparse takes a value that starts with '-' for an option.
            hint = " (give it a value; one that starts with '-' goes after '=': --option=VALUE)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {printable(message)}{hint}; see "
                              f"`{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="durable-chaos",
        description="Chaos harness for durable agent runtimes: runs scenarios and generated "
        "schedules with GC pauses, crashes, redeploys, provider faults and network faults, "
        "then checks invariants on the recorded history.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--adapter", action="append", metavar="NAME|module:attr",
                       help="runtime under test (repeatable); default: reference. "
                       "See `durable-chaos adapters`.")
        p.add_argument("--adapter-path", action="append", default=None, metavar="DIR",
                       help="a directory to import a module:attr adapter from (repeatable; "
                       "the current directory is always searched); replay commands name it")
        p.add_argument("--report-dir", default="reports", metavar="DIR",
                       help="where histories, index.html and junit.xml go (default: reports)")
        p.add_argument("--quiet", action="store_true", help="no progress display")
        p.add_argument("--allow-unknown", action="store_true",
                       help="exit 0, not 3, when some runs could not be judged (unknown)")
        p.add_argument("--run-timeout", default=None, metavar="SECONDS",
                       help="wall-clock limit of one run, e.g. 90 or 10m; a run past it ends "
                       "unknown and its runtime is closed; 'none' for no limit (default: "
                       "60s on the simulator, 10m on a real engine)")
        p.add_argument("--restate-ingress-url", default=None, metavar="URL",
                       help="a Restate server you run: its ingress, e.g. http://127.0.0.1:8080 "
                       "(with --restate-admin-url; env DURABLE_CHAOS_RESTATE_INGRESS_URL)")
        p.add_argument("--restate-admin-url", default=None, metavar="URL",
                       help="its admin API, e.g. http://127.0.0.1:9070 "
                       "(env DURABLE_CHAOS_RESTATE_ADMIN_URL)")
        p.add_argument("--invariants", default=None, metavar="NAME,...",
                       help="judge only these invariants (comma list), overriding each "
                       "adapter's `claims`; the others are shown 'not claimed' and never "
                       "fail the run")
        p.add_argument("--components", default=None,
                       metavar="processes|containers",
                       help="how the real path runs restate-server, PostgreSQL, Toxiproxy and "
                       "worker hosts: processes (default) or Docker containers (`make docker "
                       "images`); env DURABLE_CHAOS_COMPONENTS")

    run = sub.add_parser("run", help="run the scenarios and generated schedules",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(run)
    run.add_argument("--scenarios", action="append", default=None, metavar="PATH",
                     help="a scenario file, a directory of *.toml, 'builtin' (the library "
                     "shipped with durable-chaos) or 'builtin:real' (its subset for real "
                     "engines); repeatable. Default: ./scenarios if it holds *.toml, else "
                     "builtin. 'none' for generated schedules only")
    run.add_argument("--schedules", default="100", metavar="N",
                     help="how many generated schedules per adapter (default: 100)")
    run.add_argument("--seed", default="0", metavar="S",
                     help="seed of the generated schedules (default: 0)")
    run.add_argument("--time-budget", default=None, metavar="SECONDS",
                     help="stop generating after this much wall time, e.g. 60 or 5m (leave "
                     "it out for no budget; 0 is an error)")
    run.add_argument("--workers", default=None, metavar="N",
                     help="processes the generated schedules fan out over (default: every "
                     "core on the simulator, 1 on a real engine); the seed alone decides "
                     "the schedules and verdicts, whatever N")
    run.add_argument("--ray", default=None, metavar="ADDRESS",
                     help="fan out over a Ray cluster instead (an address such as "
                     "127.0.0.1:6379, or 'local' to start one here); needs the 'ray' extra")

    replay = sub.add_parser("replay", help="rerun one saved schedule or one seed",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    common(replay)
    replay.add_argument("schedule", nargs="?", metavar="SCHEDULE.toml",
                        help="a scenario file or a schedule.toml saved by a run")
    replay.add_argument("--seed", default=None, metavar="S",
                        help="rerun the generated exploration of this seed instead")
    replay.add_argument("--schedules", default=None, metavar="N",
                        help="with --seed: how many generated schedules (default: 100)")

    sub.add_parser("adapters", help="list the adapters --adapter accepts")

    from harness.doctor import INSTALLABLE, PATHS

    doctor = sub.add_parser(
        "doctor", help="what each engine path needs, what is found here, how to install it",
        description="For each engine path, every component it needs: found or missing, "
        "where, which version, and the one command that installs it.")
    doctor.add_argument("--path", action="append", choices=PATHS, default=None,
                        help="check only this path (repeatable); exit 1 unless it can run")
    doctor.add_argument("--install", nargs="+", choices=INSTALLABLE, default=None,
                        metavar="COMPONENT",
                        help="install restate-server and/or toxiproxy-server (pinned "
                        "versions) into the per-user components cache: "
                        + " ".join(INSTALLABLE))
    doctor.add_argument("--adapter", default=None, metavar="SPEC",
                        help="check what this adapter needs (its requires and preflight, the "
                        "engine of each --path), not what the built-in path needs")
    return parser


def _int(value: str, option: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{option}: expected an integer, got {value!r}") from None
    if number < 0:
        raise UsageError(f"{option}: expected a number >= 0, got {value}")
    return number


def _fan_out(args: argparse.Namespace) -> tuple[int | None, str | None]:
    """`--workers` (None: the default) and `--ray`, checked."""
    import importlib.util

    raw = getattr(args, "workers", None)
    workers = None if raw is None else _int(raw, "--workers")
    if workers == 0:
        raise UsageError("--workers: expected at least 1 worker, got 0")
    ray = getattr(args, "ray", None)
    if workers is not None and ray is None:
        workers = settings.workers(workers, "--workers", _warn)
    if ray is not None and not ray.strip():
        raise UsageError("--ray: expected a Ray address such as 127.0.0.1:6379 or 'local'")
    if ray is not None and importlib.util.find_spec("ray") is None:
        raise UsageError("--ray: Ray is not installed here; pip install 'durable-chaos[ray]'")
    if ray is not None:
        from harness.fanout import check_ray_address

        check_ray_address(ray.strip())
    return workers, ray


def _warn(text: str) -> None:
    with _quiet_stream_errors():
        print(f"durable-chaos: warning: {printable(text)}", file=sys.stderr)


@contextmanager
def _quiet_stream_errors() -> Iterator[None]:
    """A closed or full terminal (`| head -0`, `>/dev/full`) changes nothing: the verdict is
    the exit status. The stream is pointed at /dev/null, so that Python's own flush at exit
    does not fail either (it would turn the status into 120)."""
    try:
        yield
    except OSError:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                try:
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, stream.fileno())
                    os.close(devnull)
                except (OSError, ValueError, AttributeError):
                    pass


def _say(text: str) -> None:
    with _quiet_stream_errors():
        print(text)
        sys.stdout.flush()


def _budget(value: str | None) -> float | None:
    # 0 is refused rather than read as "no budget" or "stop at once": both readings are
    # plausible, and leaving the option out already means no budget.
    return None if value is None else settings.duration(value, "--time-budget")


def _report_dir(value: str) -> Path:
    """The report directory, created and writable, or a UsageError saying why not."""
    if not value.strip():
        # Path("") is the current directory: the report would land among the user's files.
        raise UsageError("--report-dir: empty; give a directory such as reports")
    return settings.report_directory(Path(value), f"--report-dir {value}")


def load_scenarios(specs: Sequence[str] | None) -> list[Schedule]:
    """The `--scenarios` values in order (default: ./scenarios, else the built-in library)."""
    from harness.schedules.library import default_sources, resolve_all
    from harness.schedules.scenario_file import load_scenario

    if specs and any(not spec.strip() for spec in specs):
        # Path("") is the current directory, which would be searched for *.toml instead.
        raise UsageError("--scenarios: empty; give a scenario file, a directory of them, "
                         "'builtin', 'builtin:real' or 'none'")
    sources = default_sources(Path.cwd()) if not specs else resolve_all(specs)
    return [load_scenario(f) for source in sources for f in source.files]


def _summary(suite: SuiteOutcome, report_dir: Path) -> str:
    from harness.report.summary import step_kinds_of

    lines = []
    for adapter in suite.adapters:
        runs = suite.of_adapter(adapter)
        failed = [r for r in runs if r.failed]
        unknown = [r for r in runs if r.unknown and not r.failed]
        lines.append(f"{adapter}: {len(runs)} run(s), {len(failed)} with violations, "
                     f"{len(unknown)} unknown")
        if unknown:
            example = unknown[0]
            why = example.error or next((f"{r.checker}: {r.note}" for r in example.results
                                         if r.valid is None), "")
            why = " | ".join(line.strip() for line in why.splitlines() if line.strip())
            lines.append(f"  unknown: {len(unknown)} run(s), e.g. {example.name}: {why}")
        # Skipped steps have a line of their own (`_capability_lines`).
        # A scenario file's author timed each step: one that could not be applied as written
        # is worth a line with an example. A generated answer that finds no open card is the
        # generator's timing, hundreds per default run: counted apart, listed in the report.
        notes = [(r.name, note) for r in runs if r.source != "generated"
                 for note in r.notes if note.kind != "skipped"]
        if notes:
            kinds = _note_kinds(note for _, note in notes)
            lines.append(f"  steps not applied as written: {kinds}; e.g. {notes[0][0]}: "
                         f"{notes[0][1].text}")
        generated = [note for r in runs if r.source == "generated" for note in r.notes
                     if note.kind != "skipped"]
        if generated:
            lines.append(f"  generated steps not applied as written: {_note_kinds(generated)} "
                         "(random timing: a step can come when nothing is open to take it; "
                         "the report lists them per run)")
        by_invariant: dict[str, list[tuple[str, str]]] = {}
        for run in failed:
            for result in run.unexpected_violations:
                first = result.violations[0].message if result.violations else ""
                by_invariant.setdefault(result.checker, []).append(
                    (f"{run.name}: {first}", run.replay_command))
            for name in run.unmet_expectations:
                by_invariant.setdefault(name, []).append(
                    (f"{run.name}: held, but the scenario expects it to fail ([expect] "
                     f"fails): the known bug it pins did not show; if it was fixed, remove "
                     f"{name} from [expect] fails", run.replay_command))
        expected = [(run.name, r.checker) for run in runs for r in run.expected_violations
                    if run.error is None]
        if expected:
            lines.append(f"  expected failures ([expect] fails): {len(expected)}, e.g. "
                         f"{expected[0][0]}: {expected[0][1]} violated, as expected")
        for invariant, examples in by_invariant.items():
            lines.append(f"  {invariant}: {len(examples)} run(s), e.g. {examples[0][0]}")
            if examples[0][1]:
                lines.append(f"    replay: {examples[0][1]}")
        lines.extend(_capability_lines(runs))
    held = step_kinds_of(suite.runs)
    if held.schedules:
        lines.append(f"step kinds: {held.describe()} (the report counts each)")
    if suite.scenario_sets:
        lines.append(f"scenario sets: {', '.join(suite.scenario_sets)}")
    for minimal in suite.shrunk:
        if minimal.shrink_cut_short:
            lines.append("shrinking cut short by the time budget: the smallest failing "
                         "schedule found so far is reported, not a minimal one")
            lines.append(f"replay the smallest failing schedule: {minimal.replay_command}")
        else:
            lines.append(f"replay the minimal failing schedule: {minimal.replay_command}")
    if suite.interrupted is not None:
        lines.append(f"incomplete: stopped by {suite.interrupted}; the report covers the "
                     f"{len(suite.runs)} run(s) that finished")
    elif not suite.complete:
        lines.append("the run was incomplete (out of time budget)")
    lines.append(f"report: {report_dir / 'index.html'}  junit: {report_dir / 'junit.xml'}")
    return printable("\n".join(lines))


def _capability_lines(runs: Sequence[RunOutcome]) -> list[str]:
    """Steps the runtime could not take, and invariants it does not claim: never a pass."""
    from harness.report.summary import skipped_kinds, unclaimed_of

    lines = []
    kinds = skipped_kinds(runs)
    if kinds:
        lines.append("  skipped steps (the runtime lacks what they need): "
                     + "; ".join(k.describe() for k in kinds) + f"; e.g. {kinds[0].example}")
    unclaimed = unclaimed_of(runs)
    if unclaimed:
        lines.append("  not claimed (judged, never failing the run): "
                     + ", ".join(item.invariant for item in unclaimed))
    for item in unclaimed:
        if item.would_fail:
            lines.append(f"  {item.invariant} (not claimed) would fail in "
                         f"{item.would_fail} run(s), e.g. {item.example}")
    return lines


def _note_kinds(notes: Iterable[StepNote]) -> str:
    counts: dict[str, int] = {}
    for note in notes:
        counts[note.kind] = counts.get(note.kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def exit_status(suite: SuiteOutcome, allow_unknown: bool = False) -> int:
    """The exit status of a finished suite (see the module docstring)."""
    if suite.interrupted == "SIGTERM":
        return 128 + signal.SIGTERM
    if suite.interrupted is not None:
        return 128 + signal.SIGINT
    if suite.output_error is not None:
        return EXIT_UNKNOWN  # evidence missing: nothing it would show can be trusted
    if suite.violations:
        return EXIT_VIOLATIONS
    if (suite.unknown_runs or not suite.runs) and not allow_unknown:
        return EXIT_UNKNOWN  # never green on nothing: no run at all judged nothing either
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """The `durable-chaos` command. With `argv` None (the process's own command line: the
    console script, `python -m harness.cli`) the process also ends when the command does,
    even if an adapter left threads running (see `_leave`)."""
    status = _main(argv)
    if argv is None:
        _leave(status)
    return status


# Real seconds the threads an adapter left behind get to end before the process leaves them.
LEFTOVER_GRACE = 5.0


def _leave(status: int) -> None:
    """End the process with `status` now if non-daemon threads outlive the command.

    An adapter's client library may leave a thread running (a pump, an executor never shut
    down): Python waits for every such thread before it exits, so the command would hang
    after writing its report, until a CI job's timeout. They get a moment to end, then are
    named on stderr and left behind.
    """
    import threading
    import time

    give_up = time.monotonic() + LEFTOVER_GRACE
    while True:
        left = [t for t in threading.enumerate()
                if t is not threading.main_thread() and not t.daemon and t.is_alive()]
        if not left or time.monotonic() > give_up:
            break
        left[0].join(timeout=max(0.0, give_up - time.monotonic()))
    if not left:
        return
    names = ", ".join(sorted(t.name for t in left))
    print(f"durable-chaos: {len(left)} thread(s) the adapter started are still running "
          f"({printable(names)}); exiting without them (stop them in the runtime's close())",
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        with _sigterm_stops():
            return _dispatch(args)
    except UsageError as exc:
        _error(f"error: {_one_line(exc)}")
        return EXIT_USAGE
    except ComponentUnavailable as exc:
        _error(f"error: {_one_line(exc)}")
        return EXIT_USAGE
    except OutputUnwritable as exc:
        _error(f"could not judge: {_one_line(exc)}; free space or give a --report-dir you "
               "can write to")
        return EXIT_UNKNOWN
    except (WorkerLost, DurableChaosError) as exc:  # the report of what ran is written
        _error(f"could not judge: {_one_line(exc)}")
        return EXIT_UNKNOWN
    except Terminated:
        _error("terminated")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        _error("interrupted")
        return 128 + signal.SIGINT


def _one_line(exc: BaseException) -> str:
    """The error's message on one line: an adapter's own exception may carry several (a
    driver's DETAIL, a subprocess's stderr), and the error line is one line."""
    return printable(" | ".join(line.strip() for line in str(exc).splitlines()
                                if line.strip()))


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM stops the suite like Ctrl-C does (the report of what ran is written), then the
    process exits 143. Only the main thread can install a handler; elsewhere nothing changes."""
    def stop(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _dispatch(args: argparse.Namespace) -> int:
    from harness.adapters import describe_builtin, load_adapter
    from harness.suite import run_suite

    if args.command == "doctor":
        from harness.doctor import run_doctor

        return run_doctor(args.path, args.install, adapter=args.adapter)
    if args.command == "adapters":
        for name, description in describe_builtin():
            print(f"{name:20} {description}")
        print(f"{'module:attribute':20} your own adapter (see README, 'Test your own runtime')")
        return 0
    ingress = getattr(args, "restate_ingress_url", None)
    admin = getattr(args, "restate_admin_url", None)
    if ingress or admin:
        from harness.adapters.restate import use_restate

        use_restate(ingress, admin)  # a UsageError unless both are given
    from harness.components.stack import COMPONENTS_ENV, use_components

    if getattr(args, "components", None):
        use_components(args.components, source="--components")
    elif os.environ.get(COMPONENTS_ENV):
        use_components(os.environ[COMPONENTS_ENV], source=f"${COMPONENTS_ENV}")
    if getattr(args, "adapter_path", None):
        from harness.replay import use_adapter_paths

        use_adapter_paths(args.adapter_path)
    adapters = args.adapter or ["reference"]
    for option, values in (("--adapter", args.adapter), ("--adapter-path", args.adapter_path)):
        if values and any(not value.strip() for value in values):
            raise UsageError(f"{option}: empty; give a value (see `durable-chaos --help`)")
    if getattr(args, "schedule", None) is not None and not args.schedule.strip():
        raise UsageError("replay: empty SCHEDULE.toml; give a schedule file")
    run_timeout = settings.run_timeout(args.run_timeout, "--run-timeout")
    workers, ray = _fan_out(args)
    # Everything the user gave is checked before anything starts or is written: options,
    # scenario files, adapters (and what they need here), then the report directory.
    if args.command == "run":
        schedules = _int(args.schedules, "--schedules")
        seed = _int(args.seed, "--seed")
        budget = _budget(args.time_budget)
        scenarios = load_scenarios(args.scenarios)
    else:
        if args.schedule is None and args.seed is None:
            raise UsageError("replay: give a SCHEDULE.toml or --seed S")
        if args.schedule is not None and args.seed is not None:
            # The file holds its own seed: a --seed beside it would be silently ignored.
            raise UsageError(f"replay: give {args.schedule} or --seed {args.seed}, not both "
                             "(a schedule file holds its own seed)")
        budget = None
        if args.schedule is not None:
            from harness.schedules.scenario_file import load_scenario

            if args.schedules is not None:
                # It would be ignored: a file is one schedule.
                raise UsageError(f"replay: --schedules goes with --seed, not with "
                                 f"{args.schedule} (a file is one schedule)")
            scenarios = [load_scenario(args.schedule)]
            schedules, seed = 0, scenarios[0].seed
        else:
            scenarios = []
            schedules = _int(args.schedules or "100", "--schedules")
            seed = _int(args.seed, "--seed")
    invariants = settings.invariant_names(getattr(args, "invariants", None), "--invariants")
    from harness.jobs import probe_adapters

    # Loaded and checked in a worker first (user code never ends this process), then here.
    probe_adapters(adapters, invariants)
    for spec in adapters:
        load_adapter(spec)
    report_dir = _report_dir(args.report_dir)
    suite = run_suite(adapters, scenarios, schedules=schedules, seed=seed, time_budget=budget,
                      report_dir=report_dir, progress=not args.quiet, run_timeout=run_timeout,
                      workers=workers, ray=ray, invariants=invariants)
    _say(_summary(suite, report_dir))
    status = exit_status(suite, args.allow_unknown)
    if suite.output_error is not None and suite.interrupted is None:
        _error(f"could not judge: {_one_line(Exception(suite.output_error))}; free space "
               "or give a --report-dir you can write to")
    elif status == EXIT_UNKNOWN and not suite.runs:
        _error("could not judge: nothing ran (no scenario and no generated schedule); give "
               "--scenarios or --schedules N")
    elif status == EXIT_UNKNOWN:
        _error(f"could not judge: {suite.unknown_runs} run(s) unknown (see the report; "
               "--allow-unknown exits 0 instead)")
    return status


def _error(text: str) -> None:
    with _quiet_stream_errors():
        print(f"durable-chaos: {text}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
