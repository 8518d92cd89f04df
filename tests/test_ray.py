"""The fan-out on a Ray cluster (`durable-chaos run --ray local|ADDRESS`).

One test, since starting Ray costs seconds: a local Ray instance bound to 127.0.0.1 with two
workers runs the same schedules with the same verdicts as one process, brings the failing
run's history back into the report directory, and leaves no Ray process behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.suite import run_suite
from tests.test_fanout import BUG, SEED, _verdicts

try:
    import ray
except ImportError:  # pragma: no cover - the test extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("Ray is not installed: pip install -e '.[test]' (or '.[ray]')",
                allow_module_level=True)


def _ray_processes() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"raylet" in cmdline or b"gcs_server" in cmdline or b"ray::" in cmdline:
            found.add(int(entry.name))
    return found


def test_ray_local_runs_the_same_schedules_and_brings_histories_back(tmp_path: Path) -> None:
    before = _ray_processes()
    on_ray = run_suite([BUG], [], schedules=200, seed=SEED, report_dir=tmp_path / "ray",
                       progress=False, workers=2, ray="local")
    assert not ray.is_initialized()
    serial = run_suite([BUG], [], schedules=200, seed=SEED, report_dir=tmp_path / "one",
                       progress=False, workers=1)

    assert _verdicts(on_ray.runs) == _verdicts(serial.runs)
    assert on_ray.runs[-1].failed
    assert [m.schedule_toml for m in on_ray.shrunk] == [m.schedule_toml for m in serial.shrunk]
    history = Path(on_ray.runs[-1].history_path or "")
    assert history.is_relative_to(tmp_path / "ray")
    assert history.read_bytes() == Path(serial.runs[-1].history_path or "").read_bytes()

    # ray.shutdown() stops what ray.init started; its processes may take a moment to exit.
    give_up = time.monotonic() + 30
    while _ray_processes() - before and time.monotonic() < give_up:
        time.sleep(0.1)
    assert not _ray_processes() - before
