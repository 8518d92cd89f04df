"""The 8-day approval flow side by side in one run: simulator, Temporal, Restate.

The flow: a user message starts a turn; its tool (``send_email``) needs approval; the wait is
handed off at 5 minutes; the person answers on day 7; the same turn resumes and completes.

* **sim, direct**: the reference implementation on ``SimRuntime`` (no checkers): open, send
  the message, advance to day 7, answer the card, advance until idle.
* **sim, run_schedule**: one ``run_schedule`` of the 2-step schedule below on the
  ``reference`` adapter, every checker included.
* **temporal**: ``benchmarks/temporal_flow.measure`` (time-skipping test server; server
  start-up is not counted, as for the others).
* **restate**: the same 2-step schedule on the ``reference-restate`` adapter (real
  restate-server, PostgreSQL, Toxiproxy; scaled time: 5 min -> 5 s, 8 days -> 25 s), run in a
  child process with a time limit.

    python benchmarks/eight_day_flow.py [--runs 20] [--restate-runs 1] [--json]

Besides the times it prints the work of one flow on the simulator (history records,
coroutine steps, invocations created) and what one unit of it costs on the direct path.

Timing lives here, never in tests (the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.adapters import load_adapter
from harness.adapters.base import RunContext
from harness.clock import VirtualClock, wall_clock_follows
from harness.history import History
from harness.run import RunOptions, run_schedule, wall
from harness.schedules.model import Schedule, Step

DAY = 86400.0
ANSWER_AT = 7 * DAY
HORIZON = ANSWER_AT + 3600.0
ROOT = Path(__file__).resolve().parent.parent

SCHEDULE = Schedule(
    name="eight-day-approval",
    description="hand-off at 5 minutes, answer on day 7, the same turn resumes",
    steps=(
        Step(0.0, "message", (("session", "s1"), ("text", "email the contract"),
                              ("tools", ["send_email"]), ("user", "alice"))),
        Step(ANSWER_AT, "answer", (("session", "s1"), ("decision", "approve"),
                                   ("user", "alice"))),
    ),
    seed=1,
    hosts=2,
    horizon=HORIZON,
    source="generated",
)


def summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "n": len(s)}


def _check_flow(history: History) -> None:
    """The flow happened: hand-off at >= 5 min, resumed after day 7, the turn completed."""
    handoff = [r for r in history if r.kind == "tool.handoff"]
    resumed = [r for r in history if r.kind == "turn.resumed"]
    ended = [r for r in history if r.kind == "turn.ended"]
    if not (handoff and 300.0 <= handoff[0].time < ANSWER_AT
            and resumed and resumed[0].time >= ANSWER_AT
            and resumed[0].get("outcome") == "answered"
            and ended and ended[-1].get("reason") == "completed"):
        raise RuntimeError("eight_day_flow: the simulator did not run the 8-day flow as expected")


def sim_direct_once() -> float:
    """Wall seconds of the flow on SimRuntime, without checkers."""
    start = wall()
    history, _ = _direct_flow()
    elapsed = wall() - start
    _check_flow(history)
    return elapsed


def flow_work() -> dict[str, float]:
    """The work of one flow on SimRuntime (an untimed run; the simulator is deterministic,
    so every timed run did the same): history records, coroutine steps of the simulator,
    invocations created."""
    history, runtime = _direct_flow()
    return {"records": float(len(history)), "coroutine_steps": float(runtime.sim.steps),
            "invocations": float(sum(1 for r in history if r.kind == "invocation.created"))}


def _direct_flow() -> tuple[History, Any]:
    from contract.ports import Config

    adapter = load_adapter("reference")
    history = History()
    runtime = adapter.open(RunContext(seed=1, history=history, config=Config(), hosts=2))
    runtime.send_message("s1", {"message_id": "s1.m1", "text": "email the contract",
                                "user": "alice", "plan": ["send_email"]})
    runtime.advance(ANSWER_AT)
    card = min(runtime.world.cards.open_cards("s1"), key=lambda c: c.shown_at)
    runtime.answer(card.tool_call, "approve", "alice")
    runtime.advance(HORIZON)
    runtime.close()
    return history, runtime


def sim_schedule_once() -> float:
    """Wall seconds of one run_schedule of the 2-step schedule (checkers included)."""
    adapter = load_adapter("reference")
    start = wall()
    outcome = run_schedule(adapter, SCHEDULE, RunOptions(report_dir=None, save_history=False))
    elapsed = wall() - start
    if outcome.error or any(r.valid is not True for r in outcome.results):
        raise RuntimeError(f"eight_day_flow: run_schedule failed: {outcome.error or ''} "
                           f"{[(r.checker, r.valid) for r in outcome.results]}")
    return elapsed


def measure_sim(runs: int) -> dict[str, Any]:
    with wall_clock_follows(VirtualClock()):  # one freezer, as run_suite does
        sim_direct_once()
        sim_schedule_once()  # warm-up
        direct = [sim_direct_once() * 1000 for _ in range(runs)]
        sched = [sim_schedule_once() * 1000 for _ in range(runs)]
        work = flow_work()
    direct_ms = statistics.median(direct)
    return {"sim_direct_ms": summary(direct), "sim_run_schedule_ms": summary(sched),
            "work_per_flow": work,
            "sim_direct_cost_per_unit": {
                "us_per_record": 1000 * direct_ms / work["records"],
                "us_per_coroutine_step": 1000 * direct_ms / work["coroutine_steps"],
                "ms_per_invocation": direct_ms / max(work["invocations"], 1e-9)}}


def measure_temporal(runs: int) -> dict[str, Any]:
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import temporal_flow

        res = temporal_flow.measure(runs)
    except (ImportError, RuntimeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    s = res["summary_ms"]
    return {"temporal_ms": {"median": s["median"], "min": s["min"], "max": s["max"],
                            "n": res["runs"]}, "startup_ms": res["startup_ms"]}


def restate_once() -> dict[str, Any]:
    """One run of the schedule on reference-restate (called in a child process)."""
    adapter = load_adapter("reference-restate")
    start = wall()
    outcome = run_schedule(adapter, SCHEDULE, RunOptions(report_dir=None, save_history=False))
    elapsed = wall() - start
    return {"wall_ms": elapsed * 1000, "error": outcome.error,
            "results": {r.checker: r.valid for r in outcome.results}}


def measure_restate(runs: int, timeout: float = 300.0) -> dict[str, Any]:
    if not (ROOT / "harness" / "adapters" / "restate.py").exists():
        return {"error": "harness/adapters/restate.py does not exist"}
    times: list[float] = []
    for _ in range(runs):
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--restate-once"],
                capture_output=True, text=True, timeout=timeout, cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"one run did not finish within {timeout:.0f} s"}
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out["error"]:
            return {"error": f"adapter error: {str(out['error'])[:200]}"}
        bad = [k for k, v in out["results"].items() if v is not True]
        if bad:
            return {"error": f"checkers not passing on Restate: {', '.join(bad)}"}
        times.append(out["wall_ms"])
    return {"restate_ms": summary(times)}


def measure(runs: int = 20, restate_runs: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out.update(measure_sim(runs))
    out["temporal"] = measure_temporal(runs)
    out["restate"] = measure_restate(restate_runs) if restate_runs > 0 else {
        "error": "skipped (--restate-runs 0)"}
    direct = out["sim_direct_ms"]["median"]
    sched = out["sim_run_schedule_ms"]["median"]
    ratios: dict[str, float] = {}
    if "temporal_ms" in out["temporal"]:
        t = out["temporal"]["temporal_ms"]["median"]
        ratios["temporal / sim direct"] = t / direct
        ratios["temporal / sim run_schedule"] = t / sched
    if "restate_ms" in out["restate"]:
        r = out["restate"]["restate_ms"]["median"]
        ratios["restate / sim direct"] = r / direct
        ratios["restate / sim run_schedule"] = r / sched
        if "temporal_ms" in out["temporal"]:
            ratios["restate / temporal"] = r / out["temporal"]["temporal_ms"]["median"]
    out["ratios"] = ratios
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--restate-runs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--restate-once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.restate_once:
        print(json.dumps(restate_once()))
        return
    out = measure(args.runs, args.restate_runs)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
