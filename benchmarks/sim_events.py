"""Simulator speed: events per second, and the wall time of an 8-day sleep then an awakeable.

    python benchmarks/sim_events.py [--runs 20] [--json]

Timing lives here, never in tests (the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import timedelta
from typing import Any

from contract.binding import App, Context, Handler, HandlerRef, Service
from harness.sim import Simulator


def _app() -> App:
    async def eight_days(ctx: Context, arg: Any) -> Any:
        await ctx.sleep(timedelta(days=8))
        awk_id, fut = ctx.awakeable()
        await ctx.run("publish", lambda: awk_id)
        return await fut

    async def worker(ctx: Context, arg: Any) -> Any:
        total = 0
        for i in range(5):
            total += await ctx.run(f"step{i}", lambda i=i: i)
            await ctx.sleep(timedelta(seconds=1))
        count = (await ctx.get("count") or 0) + 1
        ctx.set("count", count)
        ctx.object_send(HandlerRef("Obj", "tick"), ctx.key(), None)
        return total

    async def tick(ctx: Context, arg: Any) -> Any:
        return None

    return App("bench", (
        Service("Flow", (Handler("eight_days", eight_days),)),
        Service("Obj", (Handler("work", worker), Handler("tick", tick)), kind="object"),
    ))


def eight_day_flow() -> float:
    """Wall seconds for: sleep 8 days, then wait on an awakeable resolved from outside."""
    start = time.perf_counter()
    sim = Simulator(record_journal=False)
    sim.register(_app())
    inv = sim.invoke("Flow", "eight_days")
    sim.run()
    sim.resolve_awakeable(sim.invocation(inv).journal[1].name, "approved")
    sim.run()
    assert sim.invocation(inv).result == "approved"
    return time.perf_counter() - start


def events_per_second(invocations: int = 2000) -> tuple[float, int]:
    sim = Simulator()
    sim.register(_app(), hosts=3)
    for i in range(invocations):
        sim.invoke("Obj", "work", None, key=f"k{i % 50}")
    start = time.perf_counter()
    sim.run()
    elapsed = time.perf_counter() - start
    return len(sim.history) / elapsed, len(sim.history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    eight_day_flow()  # warm-up
    flows = sorted(eight_day_flow() * 1000 for _ in range(args.runs))
    rates = sorted(events_per_second()[0] for _ in range(max(3, args.runs // 4)))
    out = {
        "eight_day_flow_ms": {"median": statistics.median(flows), "min": flows[0],
                              "max": flows[-1]},
        "events_per_second": {"median": statistics.median(rates), "min": rates[0],
                              "max": rates[-1]},
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        f, r = out["eight_day_flow_ms"], out["events_per_second"]
        print(f"8-day sleep + awakeable: median {f['median']:.3f} ms "
              f"(min {f['min']:.3f}, max {f['max']:.3f}) over {args.runs} runs")
        print(f"events per second: median {r['median']:,.0f} (min {r['min']:,.0f}, "
              f"max {r['max']:,.0f})")


if __name__ == "__main__":
    main()
