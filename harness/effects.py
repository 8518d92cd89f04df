"""Effects an app keeps itself, fed to the harness's world.

An app that does not call the world over HTTP (it sends its own email, keeps its own approval
UI) writes what it did to a log of its own; the harness still has to judge what reached the
world. `EffectsFile` follows such a log, one JSON object per line, and hands each complete
line to a callback as soon as it is written (a line still being written waits for its end);
`apply_effect` is the callback for lines in the harness's own shape:

    {"effect": "email", "key": "msg-17", "tool_call": "s1.turn1.t1", "turn": "s1.turn1",
     "to": "bob@example.com"}
    {"card": "show", "session": "s1", "turn": "s1.turn1", "tool_call": "s1.turn1.t1",
     "tool": "send_email", "args": {"to": "bob@example.com"}}
    {"card": "close", "tool_call": "s1.turn1.t1", "outcome": "answered"}

`to` (an email's recipient) and `amount` (a charge's) say what the effect carried, `args`
what the card showed the call would do; each is optional, and effect-authorized compares the
two where both are given.

An app with its own shape maps each line onto `World.deliver`, `World.show_card` and
`World.close_card` itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.world import World

__all__ = ["EffectsFile", "apply_effect"]

Line = dict[str, Any]


def apply_effect(world: World, line: Line) -> None:
    """Feed one line of the harness's shape (see the module docstring) to `world`."""
    card = line.get("card")
    if card == "show":
        args = line.get("args")
        world.show_card(session=str(line["session"]), turn=str(line["turn"]),
                        tool_call=str(line["tool_call"]), tool=str(line.get("tool", "")),
                        args=args if isinstance(args, dict) else None)
    elif card == "close":
        world.close_card(str(line["tool_call"]), str(line["outcome"]))
    elif "effect" in line:
        key = line.get("key")
        world.deliver(str(line["effect"]), None if key is None else str(key),
                      tool_call=line.get("tool_call"), turn=line.get("turn"),
                      session=line.get("session"),
                      content={k: line[k] for k in ("to", "amount") if k in line})
    else:
        raise ConfigError(f"Expected an effects line with 'effect' or 'card' but got {line!r}; "
                          "e.g. {\"effect\": \"email\", \"key\": \"msg-17\", "
                          "\"tool_call\": \"s1.turn1.t1\"}")


class EffectsFile:
    """Follows the JSONL file at `path` (it may not exist yet) on a thread of its own and
    calls `on_line(obj)` once per complete line, in order.

    `read()` takes what is there now (the thread calls it every `interval` real seconds);
    `stop()` reads what is left, so every line written before it is handed over.
    """

    def __init__(self, path: str | Path, on_line: Callable[[Line], None], *,
                 interval: float = 0.02) -> None:
        self.path = Path(path)
        self.on_line = on_line
        self.interval = interval
        self.lines = 0
        self._offset = 0
        self._partial = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> int:
        """Hand over the complete lines written since the last read; returns how many."""
        with self._lock:
            try:
                with self.path.open("rb") as f:
                    f.seek(self._offset)
                    chunk = f.read()
            except FileNotFoundError:
                return 0
            self._offset += len(chunk)
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            count = 0
            for raw in complete:
                if raw.strip():
                    self.on_line(json.loads(raw))
                    count += 1
            self.lines += count
            return count

    def start(self) -> EffectsFile:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="effects-file", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.read()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.read()
