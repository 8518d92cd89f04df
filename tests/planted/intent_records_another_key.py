"""conservative-recovery (the intent's key): a charge's intent records an email's key.

The reference writes each intent with the idempotency key its effect will carry
(`effect_key`), so that a recovery that finds the intent re-sends under the same key. Here
the key recorded for a charge is the form an email's message id takes (`email:CALL`), while
the charge goes out under `charge:CALL`: a recovery that trusted the intent would charge
again under a key the payment service never saw.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Observer, Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "conservative-recovery"


class _WrongKey:
    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        key = fields.get("key")
        if kind == "tool.intent" and isinstance(key, str) and key.startswith("charge:"):
            fields["key"] = "email:" + key.removeprefix("charge:")  # the bug
        self.observer.emit(kind, event_id=event_id, **fields)


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=_WrongKey(ports.observer)), version)


ADAPTER = SimAdapter("planted-intent-records-another-key",
                     "a charge's intent records an email's key", build)
