"""conservative-recovery (every intent's key): a charge's intent records no key.

The reference writes each intent with the idempotency key its effect will carry. Here an
email's intent names its key and a charge's names none, as a runtime that added keys to one
tool and not the other would: a recovery that reads keys from the log finds the email's, and
would make up a key of its own for the charge.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._observed import Misreporting

INVARIANT = "conservative-recovery"


def _keyless_charge(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    key = fields.get("key")
    if kind == "tool.intent" and isinstance(key, str) and key.startswith("charge:"):
        del fields["key"]  # the bug
    return fields


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=Misreporting(ports.observer, _keyless_charge)),
                     version)


ADAPTER = SimAdapter("planted-charge-intent-without-key",
                     "a charge's intent names no key, an email's does", build)
