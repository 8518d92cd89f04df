"""A checker that judges nothing and keeps the history of the run it is given, for tests
that read a whole run's records after `run_schedule` (it declares no `reads`, so it is
given every record)."""

from __future__ import annotations

from harness.checkers import CheckConfig, Result
from harness.history import History


class KeepHistory:
    """Not an invariant: `history` is the last run's, whole."""

    name = "test.keep"
    description = "keeps the history"

    def __init__(self) -> None:
        self.history: History | None = None

    def check(self, history: History, config: CheckConfig) -> Result:
        self.history = history
        return Result(self.name, True)
