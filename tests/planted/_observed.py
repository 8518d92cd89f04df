"""An observer that rewrites some of the runtime's reports: the planted bugs of what a runtime
says about itself (the report is false, what the runtime does is the reference's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract.ports import Observer

# (kind, fields) -> fields to report instead, or None to report nothing.
Rewrite = Callable[[str, dict[str, Any]], dict[str, Any] | None]


class Misreporting:
    def __init__(self, observer: Observer, rewrite: Rewrite) -> None:
        self.observer = observer
        self.rewrite = rewrite

    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        changed = self.rewrite(kind, dict(fields))
        if changed is not None:
            self.observer.emit(kind, event_id=event_id, **changed)
