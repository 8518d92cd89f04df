"""Does a real engine give the simulator's verdict? Scenario x engine x verdict.

Runs every scenario file of a directory on pairs ENGINE=SIM of adapters (the same design on a
real engine and on the simulator), compares the verdict of each invariant, prints one table
per pair, saves each engine's results and renders the table of docs/engines.md from all saved
results. Exit status 1 when any verdict differs, 0 when all agree, 2 on bad input.

    python benchmarks/verdicts_real.py --engines temporal            # both Temporal pairs
    python benchmarks/verdicts_real.py --pairs reference-restate=reference --only 03,14
    python benchmarks/verdicts_real.py --render                      # table only, no runs

Options:
  --engines E[,E]   shorthand: for engine E the pairs reference-E=reference, naive-E=naive
  --pairs P[,P]     ENGINE_ADAPTER=SIM_ADAPTER (the older SIM:REAL form is accepted too)
  --only 03,14      scenario file prefixes
  --scenarios DIR   default scenarios/
  --save DIR        where each engine adapter's results go, one JSON file per adapter
                    (default benchmarks/verdicts/; a partial run (--only) updates its rows)
  --table FILE      the Markdown file whose table is re-rendered from every saved result,
                    between the markers <!-- verdicts:begin --> and <!-- verdicts:end -->
                    (default docs/engines.md; --table '' to leave it alone)
  --render          re-render the table from saved results without running anything
  --report DIR      save every run's history under DIR/runs/
  --json FILE       also write this run's rows to FILE

A scenario whose steps need a capability the engine's runtime lacks (the runner skips such a
fault and says so) is not compared: the table lists it with the skipped steps as the reason.
Real runs take tens of seconds each; timing lives here and in benchmarks/RESULTS.md, never in
tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.adapters import load_adapter
from harness.errors import DurableChaosError
from harness.run import RunOptions, run_schedule
from harness.schedules.model import Schedule
from harness.schedules.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = ("naive-restate=naive", "reference-restate=reference")
BEGIN, END = "<!-- verdicts:begin -->", "<!-- verdicts:end -->"


def verdicts(adapter_spec: str, schedule: Schedule, report: Path | None) -> dict[str, Any]:
    adapter = load_adapter(adapter_spec)
    options = RunOptions(adapter_spec=adapter_spec, report_dir=report,
                         save_history=report is not None)
    outcome = run_schedule(adapter, schedule, options)
    return {"verdicts": {r.checker: r.outcome for r in outcome.results},
            "wall_seconds": round(outcome.wall_time, 1), "error": outcome.error,
            "skipped": list(outcome.skipped_faults)}


def parse_pairs(pairs: str, engines: str) -> list[tuple[str, str]]:
    """(engine adapter, simulator adapter) pairs; ValueError names the bad one."""
    out: list[tuple[str, str]] = []
    for engine in (e.strip() for e in engines.split(",") if e.strip()):
        out += [(f"reference-{engine}", "reference"), (f"naive-{engine}", "naive")]
    for pair in (p.strip() for p in pairs.split(",") if p.strip()):
        if "=" in pair:
            real, _, sim = pair.partition("=")
        elif ":" in pair:
            sim, _, real = pair.partition(":")
        else:
            real = sim = ""
        if not real or not sim:
            raise ValueError(f"--pairs: {pair!r} is not ENGINE=SIM (e.g. "
                             "reference-temporal=reference)")
        out.append((real, sim))
    return out


def _cell(row: dict[str, Any]) -> str:
    if row.get("skipped"):
        return "n/a: cannot express " + ", ".join(row["skipped"])
    real, sim = row["real"]["verdicts"], row["sim"]["verdicts"]
    failing = [k for k, v in real.items() if v != "pass"]
    text = "all pass" if not failing else ", ".join(f"{k} {real[k]}" for k in failing)
    differ = [k for k in sim if real.get(k) != sim[k]]
    if row["real"].get("error"):
        return f"**error** ({row['real']['error'][:80]})"
    if differ:
        return f"**differs** ({', '.join(f'{k} {real.get(k)} vs {sim[k]}' for k in differ)})"
    return f"{text} (= {row['sim_adapter']})"


def render(save: Path) -> str:
    """The Markdown table of every saved engine adapter's results."""
    results: dict[str, dict[str, Any]] = {}
    for path in sorted(save.glob("*.json")):
        results[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    if not results:
        return "(no saved results: run benchmarks/verdicts_real.py)"
    engines = sorted(results)
    scenarios = sorted({s for r in results.values() for s in r})
    lines = ["| scenario | " + " | ".join(engines) + " |",
             "|---|" + "---|" * len(engines)]
    for scenario in scenarios:
        cells = [(_cell(results[e][scenario]) if scenario in results[e] else "not run")
                 for e in engines]
        lines.append(f"| {scenario.removesuffix('.toml')} | " + " | ".join(cells) + " |")
    walls = []
    for e in engines:
        rows = list(results[e].values())
        total = sum(float(r["real"]["wall_seconds"]) for r in rows)
        walls.append(f"{e}: {len(rows)} scenario(s), {total:.0f} s of wall time")
    return "\n".join(lines) + "\n\nWall time (engine runs only): " + "; ".join(walls) + "."


def write_table(table_file: Path, save: Path) -> None:
    text = table_file.read_text(encoding="utf-8") if table_file.exists() else ""
    block = f"{BEGIN}\n{render(save)}\n{END}"
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + block + "\n"
    table_file.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", default=ROOT / "scenarios", type=Path)
    parser.add_argument("--engines", default="")
    parser.add_argument("--pairs", default="")
    parser.add_argument("--only", default="")
    parser.add_argument("--save", type=Path, default=ROOT / "benchmarks" / "verdicts")
    parser.add_argument("--table", default=str(ROOT / "docs" / "engines.md"))
    parser.add_argument("--render", action="store_true")
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    table = Path(args.table) if args.table else None
    if args.render:
        if table is None:
            print(render(args.save))
        else:
            write_table(table, args.save)
            print(f"rendered {table} from {args.save}")
        return 0
    try:
        pairs = parse_pairs(args.pairs, args.engines) or parse_pairs(",".join(DEFAULT_PAIRS), "")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    files = sorted(args.scenarios.glob("*.toml"))
    if args.only:
        prefixes = tuple(p.strip() for p in args.only.split(",") if p.strip())
        files = [f for f in files if f.name.startswith(prefixes)]
    if not files:
        print(f"--scenarios {args.scenarios}: no scenario files (*.toml) there", file=sys.stderr)
        return 2
    for real_spec, sim_spec in pairs:
        for spec in (real_spec, sim_spec):
            try:
                load_adapter(spec)
            except DurableChaosError as exc:
                print(f"--pairs/--engines: {exc}", file=sys.stderr)
                return 2
    args.save.mkdir(parents=True, exist_ok=True)
    differ = 0
    total = 0.0
    rows: list[dict[str, Any]] = []
    for real_spec, sim_spec in pairs:
        print(f"\n{real_spec} vs {sim_spec} (simulator)", flush=True)
        saved_path = args.save / f"{real_spec}.json"
        saved: dict[str, Any] = (json.loads(saved_path.read_text(encoding="utf-8"))
                                 if saved_path.exists() else {})
        for path in files:
            schedule = load_scenario(path)
            sim = verdicts(sim_spec, schedule, args.report)
            real = verdicts(real_spec, schedule, args.report)
            row = {"sim_adapter": sim_spec, "sim": sim, "real": real,
                   "skipped": real["skipped"]}
            saved[path.name] = row
            rows.append({"pair": f"{real_spec}={sim_spec}", "scenario": path.name, **row})
            saved_path.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n",
                                  encoding="utf-8")
            diffs = [] if row["skipped"] else sorted(
                k for k in sim["verdicts"] if real["verdicts"].get(k) != sim["verdicts"][k])
            differ += len(diffs) + (1 if real["error"] and not row["skipped"] else 0)
            total += real["wall_seconds"]
            print(f"  {path.name:55s} {real['wall_seconds']:6.1f}s  {_cell(row)}", flush=True)
    print(f"\n{total:.0f} s of wall time on engines; {differ} verdict(s) differ")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if table is not None:
        write_table(table, args.save)
        print(f"rendered {table}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
