"""fencing (the rejection's truth): a stale append's rejection names the writer as current.

The reference's `threadlog.rejected` names whom the fence found in the writer's place: the
thread's current epoch and owner. Here it names the writer's own epoch and owner, as a
runtime that fills the fields from the request instead of the control row would: the report
says the thread's owner was refused, and whoever investigates it looks for the wrong host.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._observed import Misreporting

INVARIANT = "fencing"


def _writer(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    if kind == "threadlog.rejected" and "current_epoch" in fields:
        # The bug: the request's epoch and owner, not the control row's.
        fields["current_epoch"], fields["current_owner"] = fields["epoch"], fields["owner"]
    return fields


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=Misreporting(ports.observer, _writer)), version)


ADAPTER = SimAdapter("planted-rejection-names-the-writer",
                     "a stale append's rejection names the writer as the current owner", build)
