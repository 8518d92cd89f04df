"""Checkers, one per invariant of the design; each judges a finished history and returns data.

`ALL` lists them in the design's order; `by_name` finds one; `run_checkers` composes them.
"""

from __future__ import annotations

from typing import Final

from harness.checkers.access import AccessRechecked
from harness.checkers.answered import TurnAnswered
from harness.checkers.answers import AnswerFate
from harness.checkers.asked import ApprovalAsked
from harness.checkers.authorization import EffectAuthorized
from harness.checkers.background import BackgroundHonored
from harness.checkers.base import (
    CheckConfig,
    Checker,
    Result,
    Valid,
    Violation,
    cite,
    run_checkers,
    verdict,
)
from harness.checkers.busy import BusyRule
from harness.checkers.cancel import CancelHonored
from harness.checkers.cards import CardClosed
from harness.checkers.code import NoCodeError
from harness.checkers.context import ContextKept
from harness.checkers.done import EffectDone
from harness.checkers.effects import NoDuplicateEffects
from harness.checkers.fencing import Fencing
from harness.checkers.holds import HoldJustified
from harness.checkers.justified import OutcomeJustified
from harness.checkers.liveness import Liveness
from harness.checkers.malformed import MalformedRefused
from harness.checkers.messages import TurnPerMessage
from harness.checkers.pinning import PinningBound
from harness.checkers.recovery import ConservativeRecovery
from harness.checkers.told import ResultTold
from harness.checkers.transcript import MessageLogged
from harness.checkers.turns import TurnOutcome
from harness.errors import ConfigError

__all__ = [
    "ALL",
    "AccessRechecked",
    "AnswerFate",
    "ApprovalAsked",
    "BackgroundHonored",
    "BusyRule",
    "CancelHonored",
    "CardClosed",
    "CheckConfig",
    "Checker",
    "ConservativeRecovery",
    "ContextKept",
    "EffectAuthorized",
    "EffectDone",
    "Fencing",
    "HoldJustified",
    "Liveness",
    "MalformedRefused",
    "MessageLogged",
    "NoCodeError",
    "NoDuplicateEffects",
    "OutcomeJustified",
    "PinningBound",
    "Result",
    "ResultTold",
    "TurnAnswered",
    "TurnOutcome",
    "TurnPerMessage",
    "Valid",
    "Violation",
    "by_name",
    "cite",
    "run_checkers",
    "verdict",
]

ALL: Final[tuple[Checker, ...]] = (
    NoDuplicateEffects(),
    PinningBound(),
    BusyRule(),
    Fencing(),
    TurnOutcome(),
    AccessRechecked(),
    ConservativeRecovery(),
    Liveness(),
    EffectAuthorized(),
    AnswerFate(),
    EffectDone(),
    HoldJustified(),
    OutcomeJustified(),
    MessageLogged(),
    ApprovalAsked(),
    ContextKept(),
    TurnPerMessage(),
    BackgroundHonored(),
    CancelHonored(),
    TurnAnswered(),
    CardClosed(),
    NoCodeError(),
    MalformedRefused(),
    ResultTold(),
)


def by_name(name: str) -> Checker:
    """The checker called `name` (as in `ALL`); a ConfigError naming the valid ones if none."""
    for checker in ALL:
        if checker.name == name:
            return checker
    raise ConfigError(
        f"Expected a checker name but got name={name!r}; "
        f"choose one of: {', '.join(c.name for c in ALL)}"
    )
