"""Generated schedules per second on the restate-sdk example agent on the simulator.

The agent (examples/restate_sdk_agent) is written with restate-sdk alone; the simulator runs
its own service objects (harness.sdk). Schedules of the default size (what `durable-chaos
run` generates) are generated beforehand (not timed) and run one by one with every checker,
inside one `wall_clock_follows` scope as the suite does. Reported per wall second and per CPU
second of this process (one core).

    python benchmarks/sdk_sim.py [--schedules 300] [--repeats 5] [--adapter ADAPTER]
    python benchmarks/sdk_sim.py --real 3     # the same adapter with engine="real"

`--real N`: N of the same generated schedules on a real restate-server (the adapter's
`engine="real"`), one by one, wall seconds each (real time is scaled, nothing skips it).

Timing lives here, never in tests (the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from harness.adapters import load_adapter
from harness.clock import VirtualClock, wall_clock_follows
from harness.run import RunOptions, run_schedule, wall
from harness.schedules.generate import schedules

_cpu = time.process_time  # kept before any freezer starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--adapter", default="examples.restate_sdk_agent.adapter:ADAPTER")
    parser.add_argument("--real", type=int, default=0)
    args = parser.parse_args()
    adapter = load_adapter(args.adapter)
    plan = list(schedules(1, max(args.schedules, args.real)))
    options = RunOptions(save_history=False)
    if args.real:
        real = dataclasses.replace(adapter, engine="real")  # type: ignore[type-var]
        times, cpu = [], []
        for schedule in plan[:args.real]:
            w0, c0 = wall(), _cpu()
            outcome = run_schedule(real, schedule, options)
            times.append(wall() - w0)
            cpu.append(_cpu() - c0)
            print(f"{schedule.name}: {times[-1]:.1f} s wall, {cpu[-1]:.1f} s CPU (this "
                  f"process), failed={outcome.failed} unknown={outcome.unknown}")
        print(f"real Restate: median {statistics.median(times):.1f} s per schedule, "
              f"{1 / statistics.median(times):.3f} schedules per wall second")
        return
    per_wall: list[float] = []
    per_cpu: list[float] = []
    failed = 0
    with wall_clock_follows(VirtualClock()):
        run_schedule(adapter, plan[0], options)  # imports and first-use costs, untimed
        for _ in range(args.repeats):
            w0, c0 = wall(), _cpu()
            for schedule in plan:
                outcome = run_schedule(adapter, schedule, options)
                failed += bool(outcome.failed or outcome.unknown)
            w1, c1 = wall(), _cpu()
            per_wall.append(len(plan) / (w1 - w0))
            per_cpu.append(len(plan) / (c1 - c0))
    print(f"adapter {adapter.name}: {args.schedules} generated schedules x {args.repeats}")
    print(f"per wall second: median {statistics.median(per_wall):.1f} "
          f"(min {min(per_wall):.1f}, max {max(per_wall):.1f})")
    print(f"per CPU second:  median {statistics.median(per_cpu):.1f} "
          f"(min {min(per_cpu):.1f}, max {max(per_cpu):.1f})")
    print(f"runs failed or unknown: {failed} of {args.schedules * args.repeats}")


if __name__ == "__main__":
    main()
