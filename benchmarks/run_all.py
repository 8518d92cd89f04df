"""Every benchmark in one command; writes benchmarks/RESULTS.md.

    python benchmarks/run_all.py [--quick]

Runs: exploration speed (benchmarks/exploration.py), the 8-day approval flow on the simulator,
Temporal and Restate (benchmarks/eight_day_flow.py), the simulator's raw event rate
(benchmarks/sim_events.py) and bug finding (benchmarks/bug_finding.py, when it exists).
Each figure is a median with its spread (min-max) over several runs, with the command that
reproduces it and the machine it ran on. Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import re
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

TARGET_SCHEDULES_PER_S = 200.0
TARGET_TEMPORAL_RATIO = 40.0


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "cpus": str(os.cpu_count()),
        "cpu model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load average at start (1, 5, 15 min)": load,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def fmt(s: dict[str, float], unit: str = "", digits: int = 1) -> tuple[str, str]:
    median = f"{s['median']:,.{digits}f}{unit}"
    spread = f"{s['min']:,.{digits}f} - {s['max']:,.{digits}f} (n={int(s['n'])})"
    return median, spread


Row = tuple[str, str, str, str]


def exploration_rows(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    import exploration

    n, repeats = (100, 3) if quick else (300, 5)
    res = exploration.measure(n, repeats)
    cmd = f"python benchmarks/exploration.py --schedules {n} --repeats {repeats}"
    rows: list[Row] = [
        ("generated schedules/s (3 sessions, 10 turns, 5 faults), pre-generated, "
         "run_schedule + checkers, wall", *fmt(res["run_schedule_per_s"]), cmd),
        ("same, per CPU second of the process", *fmt(res["run_schedule_per_cpu_s"]), cmd),
        ("generated schedules/s through explore (generation included, no shrink)",
         *fmt(res["explore_per_s"]), cmd),
        ("simulated seconds per wall second (run_schedule)",
         *fmt(res["run_schedule_sim_s_per_wall_s"], digits=0), cmd),
        ("simulated seconds per wall second (explore)",
         *fmt(res["explore_sim_s_per_wall_s"], digits=0), cmd),
    ]
    return rows, res


def flow_rows(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    import eight_day_flow

    runs = 10 if quick else 30
    restate_runs = 1 if quick else 3
    res = eight_day_flow.measure(runs, restate_runs)
    cmd = f"python benchmarks/eight_day_flow.py --runs {runs} --restate-runs {restate_runs}"
    rows: list[Row] = [
        ("8-day approval flow, simulator + reference impl, SimRuntime direct (no checkers)",
         *fmt(res["sim_direct_ms"], " ms", 2), cmd),
        ("8-day approval flow, simulator, one run_schedule (2 steps, all checkers)",
         *fmt(res["sim_run_schedule_ms"], " ms", 2), cmd),
    ]
    temporal = res["temporal"]
    if "temporal_ms" in temporal:
        rows.append(("8-day approval flow, Temporal time-skipping test server",
                     *fmt(temporal["temporal_ms"], " ms", 2), cmd))
    else:
        rows.append(("8-day approval flow, Temporal time-skipping test server",
                     f"not measured: {temporal['error']}", "", cmd))
    restate = res["restate"]
    if "restate_ms" in restate:
        rows.append(("8-day approval flow, Restate (real server, scaled time: 8 d -> 25 s)",
                     *fmt(restate["restate_ms"], " ms", 0), cmd))
    else:
        rows.append(("8-day approval flow, Restate (scaled time)",
                     f"not measured: {restate['error']}", "", cmd))
    for name, ratio in res["ratios"].items():
        rows.append((f"ratio {name} (medians)", f"{ratio:,.1f}x", "", cmd))
    return rows, res


def sim_events_rows(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    import sim_events

    # sim_events times with time.perf_counter: it must run outside any freezer.
    runs = 5 if quick else 20
    sim_events.eight_day_flow()
    flows = [sim_events.eight_day_flow() * 1000 for _ in range(runs)]
    rates = [sim_events.events_per_second()[0] for _ in range(max(3, runs // 4))]
    cmd = f"python benchmarks/sim_events.py --runs {runs}"
    s_flow = {"median": statistics.median(flows), "min": min(flows), "max": max(flows),
              "n": len(flows)}
    s_rate = {"median": statistics.median(rates), "min": min(rates), "max": max(rates),
              "n": len(rates)}
    rows: list[Row] = [
        ("simulator alone: 8-day sleep + awakeable (no application)",
         *fmt(s_flow, " ms", 3), cmd),
        ("simulator alone: history events per second", *fmt(s_rate, digits=0), cmd),
    ]
    return rows, {"eight_day_sleep_ms": s_flow, "events_per_s": s_rate}


def bug_finding_rows(quick: bool) -> tuple[list[Row], dict[str, Any]]:
    if not (HERE / "bug_finding.py").exists():
        return [("bug finding: schedules and wall time until each planted bug is found",
                 "not measured: benchmarks/bug_finding.py does not exist yet", "",
                 "python benchmarks/bug_finding.py")], {}
    module = importlib.import_module("bug_finding")
    measure = getattr(module, "measure", None)
    if measure is None:
        return [("bug finding", "not measured: benchmarks/bug_finding.py has no measure()",
                 "", "python benchmarks/bug_finding.py")], {}
    res = measure(quick=quick) if "quick" in measure.__code__.co_varnames else measure()
    seeds = res.get("seeds", [])
    cmd = "python benchmarks/bug_finding.py" + (f" --seeds {' '.join(map(str, seeds))}"
                                                  if seeds else "")
    rows: list[Row] = []
    for bug, fig in res.get("bugs", {}).items():
        what = f"bug finding: {bug} ({fig.get('invariant') or 'control: none'})"

        def cell(key: str, unit: str = "", digits: int = 0, fig: dict[str, Any] = fig) -> str:
            s = fig.get(key) or {}
            if not s:
                return f"{key}: -"
            return f"{key} {s['median']:.{digits}f}{unit}"

        def span(key: str, unit: str = "", digits: int = 0, fig: dict[str, Any] = fig) -> str:
            s = fig.get(key) or {}
            return f"{s['min']:.{digits}f}-{s['max']:.{digits}f}{unit}" if s else "-"

        rows.append((
            what,
            f"found {fig.get('found')}; " + ", ".join((
                cell("schedules"), cell("detect_s", " s", 1), cell("total_s", " s", 1),
                cell("steps"))),
            ", ".join(f"{k} {span(k)}" for k in ("schedules", "steps"))
            + f", detect {span('detect_s', ' s', 1)}, total {span('total_s', ' s', 1)}",
            cmd,
        ))
    if not rows:
        rows.append(("bug finding", json.dumps(res, default=str)[:300], "", cmd))
    return rows, res


def targets(explo: dict[str, Any], flow: dict[str, Any]) -> list[str]:
    out = []
    if explo:
        rate = explo["run_schedule_per_s"]["median"]
        cpu = explo["run_schedule_per_cpu_s"]["median"]
        rate_e = explo["explore_per_s"]["median"]
        met = "met" if min(rate, rate_e) >= TARGET_SCHEDULES_PER_S else "NOT met"
        out.append(f"- >= {TARGET_SCHEDULES_PER_S:.0f} generated schedules/s per core: **{met}**"
                   f" (run_schedule {rate:,.1f}/s wall, {cpu:,.1f}/s per CPU second; "
                   f"explore {rate_e:,.1f}/s).")
    if flow and "temporal_ms" in flow.get("temporal", {}):
        ratio = flow["ratios"]["temporal / sim direct"]
        ratio_s = flow["ratios"]["temporal / sim run_schedule"]
        met = "met" if ratio >= TARGET_TEMPORAL_RATIO else "NOT met"
        out.append(f"- 8-day flow >= {TARGET_TEMPORAL_RATIO:.0f}x faster on the simulator than "
                   f"on Temporal's time-skipping server: **{met}** ({ratio:,.1f}x direct, "
                   f"{ratio_s:,.1f}x through run_schedule).")
    return out


_SECTION = re.compile(r"<!-- ([a-z0-9-]+):begin -->.*?<!-- \1:end -->\n", re.S)


def kept_sections(path: Path) -> list[str]:
    """Sections other benchmarks write into RESULTS.md between `<!-- NAME:begin -->` and
    `<!-- NAME:end -->` markers (component start-up, fan-out): kept when this rewrites it."""
    if not path.exists():
        return []
    return [m.group(0) for m in _SECTION.finditer(path.read_text(encoding="utf-8"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer runs (about a minute)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    env = machine()
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for name, fn in (("exploration", exploration_rows), ("eight_day_flow", flow_rows),
                     ("sim_events", sim_events_rows), ("bug_finding", bug_finding_rows)):
        print(f"run_all: {name} ...", file=sys.stderr, flush=True)
        try:
            part_rows, part = fn(args.quick)
        except Exception as exc:  # one broken benchmark must not hide the others
            traceback.print_exc()
            part_rows, part = [(name, f"not measured: {type(exc).__name__}: {exc}"[:300], "",
                                "")], {}
        rows.extend(part_rows)
        raw[name] = part
    lines = [
        "# Benchmark results",
        "",
        f"Written by `python benchmarks/run_all.py{' --quick' if args.quick else ''}`. "
        "Medians with their spread (min - max over n runs). Wall times are real seconds "
        "(`perf_counter` kept out of freezegun's reach).",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in env.items()],
        "",
        "## Figures",
        "",
        "| what | median | spread (min - max) | command |",
        "|---|---|---|---|",
        *[f"| {w} | {m} | {s} | `{c}` |" if c else f"| {w} | {m} | {s} | |"
          for w, m, s, c in rows],
        "",
        "## Targets",
        "",
        *targets(raw.get("exploration", {}), raw.get("eight_day_flow", {})),
        "",
        *kept_sections(args.out),
        "## Raw",
        "",
        "```json",
        json.dumps(raw, indent=2, default=str),
        "```",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[: lines.index("## Raw")]))
    print(f"run_all: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
