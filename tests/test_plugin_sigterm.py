"""SIGTERM to pytest while the chaos suite runs (a cancelled CI job): the open runtime is
closed, the report of what ran is written marked incomplete, and pytest exits 143, as the CLI
does. A real signal to a real pytest process, sent once the suite is running (the user's
adapter writes a file when it opens its third runtime: that is the readiness signal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ADAPTER = '''
from pathlib import Path

from harness.adapters import load_adapter

HERE = Path(__file__).parent


class Runtime:
    def __init__(self, inner):
        self._inner = inner
        self.world = inner.world

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def close(self):
        with (HERE / "closed").open("a") as f:
            f.write("x")
        self._inner.close()


class Adapter:
    name = "watched"
    description = "the reference, telling the test when it runs"
    engine = "sim"

    def __init__(self):
        self._inner = load_adapter("reference")

    def check_config(self):
        return self._inner.check_config()

    def open(self, ctx):
        with (HERE / "opened").open("a") as f:
            f.write("x")
        if len((HERE / "opened").read_text()) == 3:
            (HERE / "ready").write_text("running")
        return Runtime(self._inner.open(ctx))


ADAPTER = Adapter()
'''


def test_sigterm_writes_the_report_marked_incomplete_and_exits_143(tmp_path: Path) -> None:
    (tmp_path / "watched.py").write_text(textwrap.dedent(ADAPTER), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = .\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--chaos-adapter=watched:ADAPTER", "--chaos-scenarios=none",
         "--chaos-schedules=1000000", "--chaos-seed=1", "--chaos-report=out"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        give_up = time.monotonic() + 120
        while not (tmp_path / "ready").exists():  # readiness: the file the adapter writes
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < give_up, "the suite never opened a third runtime"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, out + err
    assert "Traceback" not in err
    assert "durable-chaos: report out/index.html, junit out/junit.xml" in out
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "<title>durable-chaos: INCOMPLETE" in page
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert 'name="complete" value="false"' in junit
    # Every runtime opened was closed, the one the signal interrupted too.
    assert (tmp_path / "closed").read_text() == (tmp_path / "opened").read_text()


def test_a_project_s_own_sigterm_handler_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import signal

        def mine(signum, frame):
            pass

        signal.signal(signal.SIGTERM, mine)
    """)
    pytester.makepyfile(test_handler="""
        import signal

        def test_still_mine():
            assert signal.getsignal(signal.SIGTERM).__name__ == "mine"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--chaos-adapter=reference",
                                           "--chaos-schedules=0", "--chaos-scenarios=none",
                                           "test_handler.py")
    result.assert_outcomes(passed=1)


pytest_plugins = ["pytester"]
