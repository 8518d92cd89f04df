"""background-honored (the placeholder flag): every result is reported as a placeholder.

The reference's toolFinished says whether the turn goes on with a placeholder (the call was
sent to the background) or with the call's real result. Here the flag is set on every
result, as a runtime that reports the field from the wrong argument would: an approval that
ran the email reads, in the history and the report, as if the turn got a placeholder.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._observed import Misreporting

INVARIANT = "background-honored"


def _always(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    if kind == "tool.finished":
        fields["placeholder"] = True  # the bug
    return fields


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=Misreporting(ports.observer, _always)), version)


ADAPTER = SimAdapter("planted-placeholder-on-every-result",
                     "every toolFinished says its result is a placeholder", build)
