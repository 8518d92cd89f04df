"""Start-up cost of the real path's components: processes vs containers.

    python benchmarks/component_startup.py [--runs 3] [--out benchmarks/RESULTS.md]

For each path, `--runs` times: start PostgreSQL, Toxiproxy, restate-server and one worker host
(each until ready: a query that succeeds), then stop them all. Prints a Markdown table of
medians with min-max and writes it into RESULTS.md between its own markers (the rest of the
file is left alone). Needs `make restate toxiproxy`, and for containers `make docker images`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

BEGIN = "<!-- component-startup:begin -->"
END = "<!-- component-startup:end -->"
PARTS = ("postgres", "toxiproxy", "restate", "worker", "all four", "stop all")


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def one_run(path: str) -> dict[str, float]:
    from harness.components.stack import COMPONENTS_ENV, component_stack
    from harness.components.workers import SharedListener

    os.environ[COMPONENTS_ENV] = path
    stack = component_stack()
    pg, toxi = stack.postgres(), stack.toxiproxy()
    restate = stack.restate()
    listener = SharedListener()
    out: dict[str, float] = {}
    worker = None
    began = time.perf_counter()
    try:
        out["postgres"] = _timed(pg.start)
        out["toxiproxy"] = _timed(toxi.start)
        out["restate"] = _timed(restate.start)
        worker = stack.worker(
            "reference_impl.worker:app", name="worker-bench", pythonpath=[ROOT], cwd=ROOT,
            listener=listener,
            env={"DURABLE_CHAOS_VERSION": "v1", "DURABLE_CHAOS_VARIANT": "reference",
                 "DURABLE_CHAOS_WORLD_URL": "http://127.0.0.1:9",
                 "DURABLE_CHAOS_OBSERVER_URL": "http://127.0.0.1:9",
                 "DURABLE_CHAOS_PG": pg.conninfo, "DURABLE_CHAOS_CONFIG": "{}",
                 "DURABLE_CHAOS_HOST": "h1"})
        out["worker"] = _timed(worker.start)
        out["all four"] = time.perf_counter() - began
    finally:
        stopping = time.perf_counter()
        if worker is not None:
            stack.stop_workers([worker])
        for comp in (restate, toxi, pg):
            comp.stop()
        listener.close()
        out["stop all"] = time.perf_counter() - stopping
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {"processes": [], "containers": []}
    for _ in range(args.runs):
        for path in samples:  # interleaved, so a load spike hits both paths alike
            samples[path].append(one_run(path))
    rows = ["| component | processes: median (min - max) | containers: median (min - max) |",
            "|---|---|---|"]
    for part in PARTS:
        cells = []
        for path in samples:
            values = [s[part] for s in samples[path]]
            cells.append(f"{statistics.median(values):.2f} s ({min(values):.2f} - "
                         f"{max(values):.2f}, n={len(values)})")
        rows.append(f"| {part} | {cells[0]} | {cells[1]} |")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    section = "\n".join([
        BEGIN, "## Start-up cost: processes vs containers", "",
        "Each component started until ready (a query that succeeds), then all stopped; "
        "containers run on Debian's docker.io 20.10 with host networking and images built by "
        "`make images`. Command: "
        f"`python benchmarks/component_startup.py --runs {args.runs}`; "
        f"{platform.python_version()}, {os.cpu_count()} cpus, load average at the end {load}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Runs alternate between the "
        "paths; the first PostgreSQL start of the process pays initdb (both paths share its "
        "template), hence the maximum of the processes column. A container worker pays "
        "`docker run` and the start of its init before hypercorn's own start-up.",
        "", *rows, "", END])
    print(section)
    text = args.out.read_text() if args.out.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        raw = text.find("\n## Raw")
        text = (text[:raw] + "\n" + section + "\n" + text[raw:]) if raw >= 0 else (
            text + "\n" + section + "\n")
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
