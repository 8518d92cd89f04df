"""`durable-chaos run --adapter reference-restate` as a user runs it, in a subprocess, and what
it leaves behind: nothing, whether the run ends, is interrupted (Ctrl-C) or is killed.

The harness's components are children of its supervised worker process (the command runs
adapters in a worker of its own), each the leader of its own process group:
restate-server, toxiproxy-server, the postmaster (its backends in its group) and the hypercorn
workers. The tests note those groups while the command runs and check, by pgid, that no
process of theirs is left once it is over. After a SIGKILL nothing of the harness runs its
cleanup: the worker dies of its death signal, and the components of the death signal they were
started with (the postmaster's backends follow their postmaster).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from restate_fixtures import (
    ROOT,
    SCENARIOS,
    component_groups,
    groups_gone,
    require_real_stack,
)

from harness.components.net import wait_until

pytestmark = pytest.mark.real

KINDS = ("restate-server", "toxiproxy-server", "postgres", "hypercorn")


@pytest.fixture(scope="module", autouse=True)
def _real_stack() -> None:
    require_real_stack()


class Harness:
    """`durable-chaos run` in its own session, with the process groups of its children."""

    def __init__(self, scenarios: Path, report_dir: Path) -> None:
        self.report_dir = report_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference-restate",
             "--scenarios", str(scenarios), "--schedules", "0", "--report-dir",
             str(report_dir), "--quiet"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.groups: dict[int, str] = {}

    def note_groups(self) -> dict[int, str]:
        for pgid, kind in component_groups(self.proc.pid, KINDS).values():
            self.groups.setdefault(pgid, kind)
        return self.groups

    def wait_started(self, timeout: float = 90.0) -> None:
        """Until every kind of component runs, two workers included."""

        def started() -> bool | None:
            assert self.proc.poll() is None, self.output()
            kinds = list(self.note_groups().values())
            return True if all(kinds.count(k) >= (2 if k == "hypercorn" else 1)
                               for k in KINDS) else None

        wait_until(started, timeout=timeout, what="the harness's components", interval=0.05)

    def wait(self, timeout: float) -> int:
        """Wait for the command to exit, noting its children's groups meanwhile."""

        def exited() -> int | None:
            self.note_groups()
            return self.proc.poll()

        return wait_until(exited, timeout=timeout, what="durable-chaos to exit", interval=0.1)

    def output(self) -> str:
        if self.proc.poll() is None or self.proc.stdout is None:
            return ""
        return self.proc.stdout.read().decode(errors="replace")[-3000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def harness_run(tmp_path: Path) -> Iterator[list[Harness]]:
    started: list[Harness] = []
    yield started
    for h in started:
        h.kill()


def test_cli_runs_the_real_scenarios_and_leaves_nothing_running(
    harness_run: list[Harness], tmp_path: Path
) -> None:
    """A redeploy (02), a GC pause holding the control row (10), a crash after an email was
    sent (11): the same report as on the simulator, every invariant holds."""
    h = Harness(SCENARIOS / "real", tmp_path / "report")
    harness_run.append(h)
    code = h.wait(timeout=400)
    output = h.output()
    assert code == 0, output
    assert "reference-restate: 3 run(s), 0 with violations, 0 unknown" in output, output
    junit = ET.parse(h.report_dir / "junit.xml").getroot()
    suites = [junit] if junit.tag == "testsuite" else list(junit)
    assert sum(int(s.get("tests", 0)) for s in suites) >= 3
    assert sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites) == 0
    assert (h.report_dir / "index.html").stat().st_size > 0
    runs = sorted(p.name for p in (h.report_dir / "runs" / "reference-restate").iterdir())
    assert len(runs) == 3 and all((h.report_dir / "runs" / "reference-restate" / r /
                                   "history.jsonl").exists() for r in runs), runs
    kinds = set(h.groups.values())
    assert kinds == set(KINDS), h.groups
    groups_gone(h.groups)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_nothing_left_running_after_ctrl_c_or_kill(
    harness_run: list[Harness], tmp_path: Path, sig: signal.Signals
) -> None:
    h = Harness(SCENARIOS / "01-answered-in-2-minutes.toml", tmp_path / "report")
    harness_run.append(h)
    h.wait_started()
    os.killpg(h.proc.pid, sig)
    code = h.wait(timeout=60)
    if sig == signal.SIGINT:
        # Interrupted, it still writes the report of what ran so far.
        assert code in (0, 1, 130), h.output()
        assert (h.report_dir / "index.html").exists(), h.output()
    else:
        assert code == -signal.SIGKILL
    assert set(h.groups.values()) == set(KINDS), h.groups
    groups_gone(h.groups, timeout=20)
    if sig == signal.SIGKILL:
        # Killed, it cleaned nothing up: its scratch directories (PostgreSQL's and Restate's
        # data, hundreds of MB on tmpfs), PostgreSQL's SysV segment and its log directory
        # stay until the next run sweeps them, which any request for a scratch dir does.
        from harness.components.procs import _attached, scratch_dir, sweep_stale

        mark = f"durable-chaos-{h.proc.pid}-"
        roots = (Path("/dev/shm"), Path(tempfile.gettempdir()))
        left = [p for root in roots if root.is_dir() for p in root.glob(f"{mark}*")]
        segments = []
        for pid_file in [p / "data" / "postmaster.pid" for p in left]:
            if pid_file.exists():
                segments.append(int(pid_file.read_text().splitlines()[6].split()[1]))
        probe = scratch_dir("probe-")
        probe.rmdir()
        sweep_stale(Path(tempfile.gettempdir()), "durable-chaos-run-")
        assert not [p for root in roots if root.is_dir() for p in root.glob(f"{mark}*")]
        assert not list(Path(tempfile.gettempdir()).glob(f"durable-chaos-run-{h.proc.pid}-*"))
        assert all(_attached(shmid) is None for shmid in segments), segments
