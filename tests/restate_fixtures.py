"""Helpers for the tests of the real path (Restate, PostgreSQL, Toxiproxy).

`real_stack` skips a module when a binary is missing (`make restate toxiproxy`), and fails it
instead under CI=true. `Capturing` keeps the runtimes an adapter opened, to look at their
history and process groups after the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from harness.adapters.base import RunContext
from harness.adapters.restate import ReferenceRestateAdapter, RestateRuntime
from harness.components.net import wait_until
from harness.components.procs import group_members
from harness.history import History, Record
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule
from harness.schedules.model import Schedule, parse_duration
from harness.schedules.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"


def missing() -> str | None:
    """Why the real stack cannot run here, or None."""
    from harness.components.postgres import PostgresUnavailable, find_binaries
    from harness.components.restate import RestateUnavailable, find_restate_server
    from harness.components.toxiproxy import ToxiproxyUnavailable, find_toxiproxy_server

    try:
        find_restate_server()
        find_toxiproxy_server()
        find_binaries()
    except (RestateUnavailable, ToxiproxyUnavailable, PostgresUnavailable) as exc:
        return str(exc)
    return None


def require_real_stack() -> None:
    reason = missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the real stack is required: {reason}", pytrace=False)
    pytest.skip(f"real stack missing ({reason}); run `make restate toxiproxy`")


@dataclass(frozen=True)
class Capturing(ReferenceRestateAdapter):
    """The reference adapter, keeping the runtimes it opened (to inspect after close)."""

    opened: list[RestateRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> RestateRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


def scenario(name: str, horizon: str | None = None) -> Schedule:
    """A scenario file of `scenarios/`, with a shorter horizon if given (scenario time)."""
    schedule = load_scenario(SCENARIOS / name)
    return schedule if horizon is None else replace(schedule, horizon=parse_duration(horizon))


def run(adapter: ReferenceRestateAdapter, schedule: Schedule) -> RunOutcome:
    return run_schedule(adapter, schedule, RunOptions(adapter_spec=adapter.name,
                                                      report_dir=None))


def failing(outcome: RunOutcome) -> dict[str, str]:
    return {r.checker: r.witness() for r in outcome.results if r.valid is not True}


def component_groups(pid: int, kinds: Iterable[str]) -> dict[int, tuple[int, str]]:
    """The components a command started, found among all its descendants (pid -> (pgid,
    kind)): the command runs adapters in a supervised worker process of its own, so the
    components are the worker's children, not the command's."""
    kinds = tuple(kinds)
    parent: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdlines[int(entry.name)] = (
                (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
        parent[int(entry.name)] = int(stat[stat.rfind(")") + 2:].split()[1])
    found: dict[int, tuple[int, str]] = {}
    frontier = [pid]
    while frontier:
        below = [child for child, ppid in parent.items() if ppid in frontier]
        frontier = below
        for child in below:
            kind = next((k for k in kinds if k in cmdlines.get(child, "")), None)
            if kind is None:
                continue
            try:
                found[child] = (os.getpgid(child), kind)
            except ProcessLookupError:
                continue
    return found


def groups_gone(pgids: Iterable[int], timeout: float = 15.0) -> None:
    """Every process of these groups has exited (bounded polling; zombies do not count)."""
    pgids = list(pgids)

    def none_left() -> bool | None:
        return True if not any(group_members(g) for g in pgids) else None

    try:
        wait_until(none_left, timeout=timeout, what="the run's process groups to exit",
                   interval=0.05)
    except TimeoutError:
        left = {g: group_members(g) for g in pgids if group_members(g)}
        raise AssertionError(f"processes left running (pgid: pids): {left}") from None


def of(history: History, record_kind: str, **where: object) -> list[Record]:
    """Records of `record_kind` whose fields or data match `where`."""
    out = []
    for r in history.of_kind(record_kind):
        if all(getattr(r, k, None) == v or r.data.get(k) == v for k, v in where.items()):
            out.append(r)
    return out


def assert_linear(history: History, session: str) -> list[Record]:
    """The committed log of `session` is linear: seqs 1..n, no entry twice, epochs never go
    down. Returns its records."""
    log = sorted((r for r in history.of_kind("threadlog.committed") if r.session == session),
                 key=lambda r: int(r.data["seq"]))
    assert [int(r.data["seq"]) for r in log] == list(range(1, len(log) + 1)), log
    entries = [r.data["entry"] for r in log]
    assert len(entries) == len(set(entries)), f"an entry was committed twice: {entries}"
    epochs = [int(r.epoch or 0) for r in log]
    assert epochs == sorted(epochs), f"epochs go down along the log: {epochs}"
    return log
