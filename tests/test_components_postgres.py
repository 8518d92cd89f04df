"""What a killed harness leaves behind is bounded: PostgreSQL's SysV segment, scratch and
log directories of a dead owner are removed by the next run (and by `stop` after a kill).

Real PostgreSQL: skipped with the reason when its binaries are missing, failed under CI=true.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pg_fixtures import unavailable

from harness.components.net import wait_until
from harness.components.postgres import PostgresServer, PostgresUnavailable
from harness.components.procs import _attached, scratch_dir, sweep_stale

pytestmark = pytest.mark.real


def _started() -> PostgresServer:
    server = PostgresServer()
    try:
        server.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    return server


def _segment(server: PostgresServer) -> int:
    line = (server.data_dir / "postmaster.pid").read_text().splitlines()[6]
    shmid = int(line.split()[1])
    assert _attached(shmid) is not None, "PostgreSQL should hold a SysV segment"
    return shmid


def _kill_postmaster(server: PostgresServer, shmid: int) -> None:
    group = server.process
    assert group is not None
    group.kill()
    # Once every backend has noticed the postmaster's death the segment is orphaned.
    wait_until(lambda: True if _attached(shmid) == 0 else None, timeout=20,
               what="the segment's last detach")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stop_after_the_postmaster_was_killed_releases_its_segment() -> None:
    server = _started()
    shmid = _segment(server)
    _kill_postmaster(server, shmid)
    server.stop()
    assert _attached(shmid) is None


def test_next_scratch_dir_sweeps_a_dead_owners_dirs_and_segment() -> None:
    server = _started()
    shmid = _segment(server)
    _kill_postmaster(server, shmid)
    # As if the harness that owned it had been killed with its postmaster: its pid is gone.
    base = server.base_dir
    assert base is not None
    stale = base.with_name(f"durable-chaos-{_dead_pid()}-pg-stale")
    base.rename(stale)
    server._base_dir = None  # nothing of this process cleans it up
    server._group = None
    probe = scratch_dir("probe-")
    try:
        assert not stale.exists()
        assert _attached(shmid) is None
    finally:
        probe.rmdir()


def test_stale_log_dirs_of_dead_owners_are_swept(tmp_path: Path) -> None:
    dead = tmp_path / f"durable-chaos-run-{_dead_pid()}-abc"
    alive = tmp_path / f"durable-chaos-run-{os.getppid()}-abc"
    other = tmp_path / "durable-chaos-run-notapid"
    for d in (dead, alive, other):
        (d / "logs").mkdir(parents=True)
    sweep_stale(tmp_path, "durable-chaos-run-")
    assert not dead.exists()
    assert alive.exists() and other.exists()
