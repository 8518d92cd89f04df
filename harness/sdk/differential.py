"""Differential check: the same adapter's verdicts on the simulator and on real Restate.

An adapter built on the kit (`SdkSimRuntime` / `SdkRealRuntime`) is a frozen dataclass with
an `engine` field: `"sim"` and `"real"` give the same user services on each engine. This runs
each scenario on both and reports every invariant whose verdict differs.

    python -m harness.sdk.differential --adapter examples.restate_sdk_agent.adapter:ADAPTER \
        [--scenarios builtin:real]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters import load_adapter
from harness.run import RunOptions, run_schedule
from harness.schedules.model import Schedule
from harness.schedules.scenario_file import load_scenario

__all__ = ["Difference", "differences", "main"]

REAL_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "real"


@dataclass(frozen=True, slots=True)
class Difference:
    scenario: str
    invariant: str
    sim: str  # "pass" | "fail" | "unknown"
    real: str
    witness: str  # the failing side's witness


def differences(adapter: Any, schedules: Sequence[Schedule]) -> list[Difference]:
    """Every (scenario, invariant) whose verdict differs between `engine="sim"` and
    `engine="real"` of `adapter`."""
    out: list[Difference] = []
    for schedule in schedules:
        sides = {}
        for engine in ("sim", "real"):
            outcome = run_schedule(dataclasses.replace(adapter, engine=engine), schedule,
                                   RunOptions(save_history=False))
            if outcome.error is not None:
                sides[engine] = {"(run)": ("unknown", outcome.error)}
                continue
            sides[engine] = {r.checker: (r.outcome, r.witness()) for r in outcome.results}
        for invariant in sorted(set(sides["sim"]) | set(sides["real"])):
            sim = sides["sim"].get(invariant, ("unknown", "not judged"))
            real = sides["real"].get(invariant, ("unknown", "not judged"))
            if sim[0] != real[0]:
                witness = real[1] if real[0] != "pass" else sim[1]
                out.append(Difference(schedule.name, invariant, sim[0], real[0], witness))
    return out


def _scenarios(spec: str) -> list[Schedule]:
    if spec == "builtin:real":
        return [load_scenario(p) for p in sorted(REAL_SCENARIOS.glob("*.toml"))]
    path = Path(spec)
    files = sorted(path.glob("*.toml")) if path.is_dir() else [path]
    return [load_scenario(p) for p in files]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.sdk.differential",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--scenarios", default="builtin:real")
    args = parser.parse_args(argv)
    adapter = load_adapter(args.adapter)
    schedules = _scenarios(args.scenarios)
    found = differences(adapter, schedules)
    for diff in found:
        print(f"{diff.scenario}: {diff.invariant}: sim {diff.sim}, real {diff.real}: "
              f"{diff.witness}")
    print(f"{len(found)} verdict(s) differ over {len(schedules)} scenario(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
