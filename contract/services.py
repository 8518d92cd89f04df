"""The world's services and the ways each can fail: the one table of service faults.

Every world service (the model provider, the email outbox, the payment ledger, the identity
directory, the approval card service) fails the ways real providers fail. Each fault kind is
one `ServiceFault` row below: its name, whether the service did the work before it failed,
and how the failure presents to the caller. The world (`harness.world`, in-process and over
HTTP in `harness.world_server`), the scenario files' `service-fault` step, the generator, the
shrinker and the record vocabulary (`service.fault`) all read this table; adding a fault
kind is adding a row (and its presentation, if it is a new one, in `harness.world`).

It lives in `contract/` because a runtime must know how a failure presents to handle it:
`ServiceError` carries the status and `Retry-After`, and `body_error` says when a 200's
body is a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "FAULT_ALIASES",
    "FAULT_NAMES",
    "SERVICES",
    "SERVICE_FAULTS",
    "ServiceError",
    "ServiceFault",
    "body_error",
    "fault_named",
]

# The world's services, by the name a runtime declares in `world_endpoints` and a schedule
# names in a `service-fault` step.
SERVICES: Final = ("provider", "email", "payments", "identity", "cards")

Presents = Literal["status", "no-answer", "slow", "body-error"]


@dataclass(frozen=True, slots=True)
class ServiceFault:
    """One way a service call fails.

    `done`: the service did the work (delivered the email, billed the completion, showed the
    card) before the failure reached the caller, so a retry must carry the same key.
    `presents`: what the caller sees: an HTTP `status` (500, or 429 with `Retry-After`), no
    answer at all (`no-answer`: the call times out), a `slow` answer that succeeds late, or a
    200 whose body is an error (`body-error`).
    """

    name: str
    done: bool
    presents: Presents
    status: int | None
    meaning: str


SERVICE_FAULTS: Final = (
    ServiceFault("500_before", False, "status", 500, "500 before doing the work"),
    ServiceFault("500_after", True, "status", 500,
                 "500 after the work was done (the completion billed, the email sent)"),
    ServiceFault("429", False, "status", 429,
                 "429 with Retry-After; calls before it passes get 429 again"),
    ServiceFault("timeout", True, "no-answer", None,
                 "the work was done and no answer ever comes: the call times out"),
    ServiceFault("slow", True, "slow", 200, "the answer comes, late"),
    ServiceFault("200_error", False, "body-error", 200,
                 "a 200 whose body says error; the work was not done"),
)
FAULT_NAMES: Final = tuple(f.name for f in SERVICE_FAULTS)
# Older spellings scenario files may still use: the provider's "500 after billed" is the
# general "500 after the work was done".
FAULT_ALIASES: Final[Mapping[str, str]] = {"500_after_billed": "500_after"}
# Seconds a 429 asks the caller to wait (Retry-After).
RETRY_AFTER: Final = 5.0

_BY_NAME: Final = {f.name: f for f in SERVICE_FAULTS}


def fault_named(name: str) -> ServiceFault:
    """The fault called `name` (an alias too); KeyError if there is none."""
    return _BY_NAME[FAULT_ALIASES.get(name, name)]


class ServiceError(Exception):
    """A world service failed a call; whether it did the work is unknown to the caller, so a
    retry carries the same idempotency key. `retry_after`: seconds a 429 asks to wait."""

    def __init__(self, message: str, *, service: str = "", status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.service = service
        self.status = status
        self.retry_after = retry_after


def body_error(response: Any) -> str | None:
    """The error a 200's body carries (`{"error": ...}`), or None for a real answer."""
    if isinstance(response, dict) and response.get("error") is not None:
        return str(response["error"])
    return None
