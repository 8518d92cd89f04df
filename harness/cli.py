"""`durable-chaos`: run the chaos suite, replay a failure, list adapters.

Exit status: 0 no violation, 1 violations, 2 usage or configuration error (one line, no
traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.errors import UsageError
from harness.outcome import SuiteOutcome
from harness.schedules.model import Schedule, parse_duration

DEFAULT_SCENARIOS = "scenarios"
EPILOG = """\
examples:
  durable-chaos run                          scenarios + 100 generated schedules, reference adapter
  durable-chaos run --adapter naive          the 'before' design: exits 1 with pinning-bound
  durable-chaos run --adapter naive --adapter reference   side by side in one report
  durable-chaos replay --adapter reference reports/runs/reference/NAME/schedule.toml
  durable-chaos replay --seed 7 --schedules 100           rerun a generated exploration
  durable-chaos adapters                     what --adapter accepts

exit status: 0 no violation, 1 violations found, 2 usage or configuration error.
The report is written to REPORT_DIR/index.html and REPORT_DIR/junit.xml.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        p.add_argument("--report-dir", default="reports", metavar="DIR",
                       help="where histories, index.html and junit.xml go (default: reports)")
        p.add_argument("--quiet", action="store_true", help="no progress display")
        p.add_argument("--restate-ingress-url", default=None, metavar="URL",
                       help="a Restate server you run: its ingress, e.g. http://127.0.0.1:8080 "
                       "(with --restate-admin-url; env DURABLE_CHAOS_RESTATE_INGRESS_URL)")
        p.add_argument("--restate-admin-url", default=None, metavar="URL",
                       help="its admin API, e.g. http://127.0.0.1:9070 "
                       "(env DURABLE_CHAOS_RESTATE_ADMIN_URL)")
        p.add_argument("--components", default=None,
                       metavar="processes|containers",
                       help="how the real path runs restate-server, PostgreSQL, Toxiproxy and "
                       "worker hosts: processes (default) or Docker containers (`make docker "
                       "images`); env DURABLE_CHAOS_COMPONENTS")

    run = sub.add_parser("run", help="run the scenarios and generated schedules",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    common(run)
    run.add_argument("--scenarios", default=None, metavar="PATH",
                     help="a scenario file or a directory of *.toml (default: scenarios/ "
                     "if it exists); 'none' for generated schedules only")
    run.add_argument("--schedules", default="100", metavar="N",
                     help="how many generated schedules per adapter (default: 100)")
    run.add_argument("--seed", default="0", metavar="S",
                     help="seed of the generated schedules (default: 0)")
    run.add_argument("--time-budget", default=None, metavar="SECONDS",
                     help="stop generating after this much wall time, e.g. 60 or 5m")

    replay = sub.add_parser("replay", help="rerun one saved schedule or one seed",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    common(replay)
    replay.add_argument("schedule", nargs="?", metavar="SCHEDULE.toml",
                        help="a scenario file or a schedule.toml saved by a run")
    replay.add_argument("--seed", default=None, metavar="S",
                        help="rerun the generated exploration of this seed instead")
    replay.add_argument("--schedules", default="100", metavar="N",
                        help="with --seed: how many generated schedules (default: 100)")

    sub.add_parser("adapters", help="list the adapters --adapter accepts")
    return parser


def _int(value: str, option: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{option}: expected an integer, got {value!r}") from None
    if number < 0:
        raise UsageError(f"{option}: expected a number >= 0, got {value}")
    return number


def _budget(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value if not value.replace(".", "", 1).isdigit()
                              else float(value))
    except ValueError as exc:
        raise UsageError(f"--time-budget: {exc}") from None


def load_scenarios(path: str | None) -> list[Schedule]:
    from harness.schedules.scenario_file import load_scenario

    if path == "none":
        return []
    if path is None:
        default = Path(DEFAULT_SCENARIOS)
        if not default.is_dir():
            return []
        target = default
    else:
        target = Path(path)
        if not target.exists():
            raise UsageError(f"--scenarios: {path} does not exist; give a .toml file or a "
                             "directory of them")
    files = sorted(target.glob("*.toml")) if target.is_dir() else [target]
    return [load_scenario(f) for f in files]


def _summary(suite: SuiteOutcome, report_dir: Path) -> str:
    lines = []
    for adapter in suite.adapters:
        runs = suite.of_adapter(adapter)
        failed = [r for r in runs if r.failed]
        unknown = [r for r in runs if r.unknown and not r.failed]
        lines.append(f"{adapter}: {len(runs)} run(s), {len(failed)} with violations, "
                     f"{len(unknown)} unknown")
        by_invariant: dict[str, list[str]] = {}
        for run in failed:
            for result in run.results:
                if result.valid is False:
                    first = result.violations[0].message if result.violations else ""
                    by_invariant.setdefault(result.checker, []).append(f"{run.name}: {first}")
        for invariant, examples in by_invariant.items():
            lines.append(f"  {invariant}: {len(examples)} run(s), e.g. {examples[0]}")
    for minimal in suite.shrunk:
        lines.append(f"replay the minimal failing schedule: {minimal.replay_command}")
    if not suite.complete:
        lines.append("the run was incomplete (interrupted or out of time budget)")
    lines.append(f"report: {report_dir / 'index.html'}  junit: {report_dir / 'junit.xml'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return _dispatch(args)
    except UsageError as exc:
        print(f"durable-chaos: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("durable-chaos: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from harness.adapters import describe_builtin, load_adapter
    from harness.runner import run_suite

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
    adapters = args.adapter or ["reference"]
    for spec in adapters:
        load_adapter(spec)  # fail early, before anything runs
    report_dir = Path(args.report_dir)
    if args.command == "run":
        scenarios = load_scenarios(args.scenarios)
        suite = run_suite(adapters, scenarios, schedules=_int(args.schedules, "--schedules"),
                          seed=_int(args.seed, "--seed"),
                          time_budget=_budget(args.time_budget), report_dir=report_dir,
                          progress=not args.quiet)
    else:
        if args.schedule is None and args.seed is None:
            raise UsageError("replay: give a SCHEDULE.toml or --seed S")
        if args.schedule is not None:
            from harness.schedules.scenario_file import load_scenario

            scenario = load_scenario(args.schedule)
            suite = run_suite(adapters, [scenario], schedules=0, seed=scenario.seed,
                              report_dir=report_dir, progress=not args.quiet)
        else:
            suite = run_suite(adapters, [], schedules=_int(args.schedules, "--schedules"),
                              seed=_int(args.seed, "--seed"), report_dir=report_dir,
                              progress=not args.quiet)
    print(_summary(suite, report_dir))
    return 1 if suite.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
