"""A user's adapter outside the package, loaded with --adapter-path from another directory,
fanned out over 2 worker processes and over a local Ray instance (127.0.0.1, 2 workers).

Ray workers start fresh, in a directory of Ray's: they import the adapter only if the
--adapter-path directories are on their path (harness.fanout.worker_path). A forked worker
inherits the parent's path. Each case runs the CLI as a user does, in a subprocess, from a
directory that is neither the repository nor the adapter's, with no PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_ray import _ray_processes

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ROOT / "tests" / "outside_adapters"
CLI = str(Path(sys.executable).parent / "durable-chaos")
SPEC = "lean_runtime:busy_claimed_adapter"  # a busy-rule bug it claims: exit 1


def _ray_available() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:  # pragma: no cover - the test extra installs it
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("Ray is not installed: pip install -e '.[test]' (or '.[ray]')")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [CLI, "run", "--scenarios", "none", "--schedules", "100", "--seed", "3",
         "--report-dir", "rep", "--quiet", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _wait_for_ray_to_exit(before: set[int]) -> None:
    # ray.shutdown() stops what ray.init started; its processes may take a moment to exit.
    give_up = time.monotonic() + 30
    while _ray_processes() - before and time.monotonic() < give_up:
        time.sleep(0.1)
    assert not _ray_processes() - before


@pytest.mark.parametrize("fan_out", [["--workers", "2"], ["--ray", "local", "--workers", "2"]],
                         ids=["2 processes", "ray local"])
def test_an_adapter_from_adapter_path_runs_on_every_worker(fan_out: list[str],
                                                           tmp_path: Path) -> None:
    if "--ray" in fan_out:
        _ray_available()
    before = _ray_processes()
    proc = _run(tmp_path, "--adapter", SPEC, "--adapter-path", str(OUTSIDE), *fan_out)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(r"lean-busy-bug-claimed: \d+ run\(s\), 1 with violations, 0 unknown",
                     proc.stdout), proc.stdout
    assert "  busy-rule: 1 run(s), e.g. generated-" in proc.stdout
    # The failing run's history, brought back from the worker that ran it.
    runs = tmp_path / "rep" / "runs" / "lean-busy-bug-claimed"
    assert [p.parent.name for p in runs.glob("generated-*/history.jsonl")], proc.stdout
    assert f"replay --adapter-path {OUTSIDE} --adapter {SPEC} " in proc.stdout
    _wait_for_ray_to_exit(before)


def test_an_adapter_that_loads_here_but_not_on_a_ray_node_is_exit_2_in_one_line(
    tmp_path: Path,
) -> None:
    # A module that imports in the CLI's process and fails in any other one, as a module
    # needing a package the cluster's nodes lack does.
    _ray_available()
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / "here_only.py").write_text(textwrap.dedent(f"""
        import os
        from pathlib import Path

        FIRST = Path({str(tmp_path / "first-pid")!r})
        if not FIRST.exists():
            FIRST.write_text(str(os.getpid()))
        elif FIRST.read_text() != str(os.getpid()):
            raise ImportError("no module named 'engine_sdk' on this node")

        from lean_runtime import adapter as ADAPTER
    """), encoding="utf-8")
    before = _ray_processes()
    proc = _run(tmp_path, "--adapter", "here_only:ADAPTER", "--adapter-path", str(adapters),
                "--adapter-path", str(OUTSIDE), "--ray", "local", "--workers", "2")
    assert proc.returncode == 2, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("durable-chaos:")]
    assert ours == ["durable-chaos: error: adapter 'here_only:ADAPTER': cannot import module "
                    "'here_only' (no module named 'engine_sdk' on this node); check the module "
                    "path and that it is importable from the current directory"], proc.stderr
    assert "Traceback" not in proc.stderr
    # Adapters are loaded in a worker process first (harness.jobs.probe_adapters): the
    # second process to load it fails, before anything runs.
    assert not (tmp_path / "rep" / "index.html").exists()
    _wait_for_ray_to_exit(before)
