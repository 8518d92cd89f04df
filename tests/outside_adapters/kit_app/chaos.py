"""The toy app's durable-chaos adapter, on the adapter kit: public API only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.history import History
from harness.kit import AnchoredScale, KitAdapter, KitRuntime, Timing, Turn
from harness.observers import (
    DeploymentState,
    EngineObserver,
    InvocationState,
    Snapshot,
)


class FileObserver(EngineObserver):
    """The toy engine's own state (its files) as the checkers' records."""

    def __init__(self, history: History, *, state: Path, **wiring: Any) -> None:
        super().__init__(history, interval=0.02, **wiring)
        self.state = state

    def snapshot(self) -> Snapshot:
        invocations = []
        for path in sorted(self.state.glob("inbox/*.json")):
            status = self.state / "turns" / path.name
            if not status.exists():
                invocations.append(InvocationState(path.stem, "pending"))
                continue
            s = json.loads(status.read_text())
            invocations.append(InvocationState(
                path.stem, "completed" if s["status"] == "completed" else "running",
                s["version"], detail=s.get("result")))
        versions = sorted(self.state.glob("versions/*"), key=lambda p: float(p.read_text()))
        return Snapshot(tuple(invocations), tuple(
            DeploymentState(v.name, v.name, current=v == versions[-1]) for v in versions))


class ToyRuntime(KitRuntime):
    app_dir = Path(__file__).resolve().parent.parent
    fault_points = ("effect.email.after_send",)
    world_endpoints = ()

    def observe(self, **wiring: Any) -> FileObserver:
        self.state = self.scratch / "state"
        for sub in ("inbox", "turns", "answers", "versions"):
            (self.state / sub).mkdir(parents=True)
        self.effects_file = self.state / "effects.jsonl"
        return FileObserver(self.history, state=self.state, **wiring)

    def worker(self, version: str) -> list[str]:
        return [sys.executable, "-m", "kit_app.worker"]

    def worker_env(self, version: str) -> dict[str, str]:
        return super().worker_env(version) | {"KIT_APP_STATE": str(self.state)}

    def send(self, turn: Turn) -> None:
        (self.state / "inbox" / f"{turn.id}.json").write_text(json.dumps(
            {"turn": turn.id, "session": turn.session, "max_wait": turn.max_wait}))

    def reply(self, turn: Turn, tool_call: str, decision: str) -> None:
        (self.state / "answers" / turn.id).write_text(decision)

    def card_outcome(self, turn: Turn, state: InvocationState) -> str | None:
        return "expired" if state.detail == "expired" else None


DAY = 86400.0
# An answer waits up to `card_patience` real seconds for its card: on a loaded machine the
# worker may take seconds to start the turn, and the wait ends as soon as the card shows.
TIMING = Timing(AnchoredScale(((300.0, 0.5), (8 * DAY, 3.0))), hand_off_after=300.0,
                max_wait=8 * DAY, tolerance=0.5, liveness=2.0, downtime=0.5, card_patience=15.0)
adapter = KitAdapter("toy-kit", ToyRuntime, TIMING, "a toy engine's app on harness.kit")
