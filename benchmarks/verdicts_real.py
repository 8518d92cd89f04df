"""Does a real engine give the simulator's verdict? Scenario x invariant x verdict, both ways.

Runs every scenario file of a directory on pairs of adapters, the simulator's and the real
engine's of the same design (default: ``naive`` vs ``naive-restate`` and ``reference`` vs
``reference-restate``), and prints one table per pair: each scenario's verdict for each
invariant on both, a ``!=`` where they differ, and each real run's wall time. Exit status 1
when any verdict differs, 0 when all agree.

    python benchmarks/verdicts_real.py [--scenarios scenarios] [--pairs naive:naive-restate]
                                       [--only 03,14] [--json out.json] [--report DIR]

The real path needs ``make restate toxiproxy`` and PostgreSQL; it takes minutes (each real
run starts its own stack). Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.adapters import load_adapter
from harness.runner import RunOptions, run_schedule
from harness.schedules.model import Schedule
from harness.schedules.scenario_file import load_scenario

PAIRS = ("naive:naive-restate", "reference:reference-restate")


def verdicts(adapter_spec: str, schedule: Schedule,
             report: Path | None) -> tuple[dict[str, str], float, str | None]:
    adapter = load_adapter(adapter_spec)
    options = RunOptions(adapter_spec=adapter_spec, report_dir=report,
                         save_history=report is not None)
    outcome = run_schedule(adapter, schedule, options)
    return ({r.checker: r.outcome for r in outcome.results}, outcome.wall_time,
            outcome.error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="scenarios", type=Path)
    parser.add_argument("--pairs", default=",".join(PAIRS),
                        help="comma list of SIM:REAL adapter pairs")
    parser.add_argument("--only", default="",
                        help="comma list of scenario file prefixes (e.g. 03,14)")
    parser.add_argument("--json", type=Path, default=None, help="write the table as JSON")
    parser.add_argument("--report", type=Path, default=None,
                        help="save every run's history under DIR/runs/")
    args = parser.parse_args(argv)
    files = sorted(args.scenarios.glob("*.toml"))
    if args.only:
        prefixes = tuple(p.strip() for p in args.only.split(",") if p.strip())
        files = [f for f in files if f.name.startswith(prefixes)]
    if not files:
        print(f"--scenarios {args.scenarios}: no scenario files (*.toml) there", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    differ = 0
    for pair in args.pairs.split(","):
        sim_spec, _, real_spec = pair.partition(":")
        if not real_spec:
            print(f"--pairs: {pair!r} is not SIM:REAL (e.g. naive:naive-restate)",
                  file=sys.stderr)
            return 2
        print(f"\n{sim_spec} (simulator) vs {real_spec}")
        for path in files:
            schedule = load_scenario(path)
            sim, _, _ = verdicts(sim_spec, schedule, args.report)
            real, seconds, error = verdicts(real_spec, schedule, args.report)
            diffs = sorted(k for k in sim if real.get(k) != sim[k])
            differ += len(diffs)
            rows.append({"pair": pair, "scenario": path.name, "sim": sim, "real": real,
                         "differ": diffs, "wall_seconds": round(seconds, 1), "error": error})
            cells = " ".join(
                f"{k}={sim[k]}" + ("" if real.get(k) == sim[k] else f"!={real.get(k)}")
                for k in sim)
            print(f"  {path.name:50s} {seconds:6.1f}s  {'DIFFER' if diffs else 'same  '} "
                  f"{cells}" + (f"  error: {error}" if error else ""), flush=True)
    total = sum(r["wall_seconds"] for r in rows)
    print(f"\n{len(rows)} scenario run(s) on real engines, {total:.0f} s of wall time; "
          f"{differ} verdict(s) differ")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
