"""no-code-error: the report of a rejected write reads a field only a stale epoch has.

The reference reports every rejection of a thread-log write (`threadlog.rejected`) with the
facts its kind has: whom the fence found (a stale epoch), since when the holder held the row
(a lock timeout). Here the report reads the stale epoch's fields off every rejection, as code
written for the common case does: a lock timeout or an aborted transaction raises
`AttributeError` inside the handler of the rejection. The attempt fails as the re-raise would
have, so the engine retries it and the run goes on: only the report is lost, and the runtime
fails on its own defect each time a host pauses inside the thread log's transaction.
"""

from __future__ import annotations

from typing import Any

from harness.adapters.sim import SimAdapter
from reference_impl.effects import _rejection_facts
from tests.planted._plant import variant

INVARIANT = "no-code-error"


def _stale_epoch_facts(err: Exception) -> dict[str, Any]:
    # The bug: every rejection read as a stale epoch.
    return {"current_epoch": err.current_epoch,  # type: ignore[attr-defined]
            "current_owner": err.current_owner,  # type: ignore[attr-defined]
            **_rejection_facts(err)}


build = variant(effects={"_rejection_facts": _stale_epoch_facts})
ADAPTER = SimAdapter("planted-rejection-report-reads-the-wrong-field",
                     "the report of a rejected write reads a stale epoch's fields off every "
                     "rejection", build)
