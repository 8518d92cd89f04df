"""Which public calls of restate-sdk's context the simulator supports, and which it refuses.

`tests/test_sdk_api.py` enumerates the installed SDK's public context classes and fails on
a method in neither table, so a new SDK version's new call is noticed, not met mid-run.
docs/restate-sdk.md shows the same tables.
"""

from __future__ import annotations

from typing import Final

# Context classes whose public methods a handler may call.
CONTEXT_CLASSES: Final = ("Context", "ObjectContext", "ObjectSharedContext",
                          "WorkflowContext", "WorkflowSharedContext")

# method -> how the simulator gives it.
SUPPORTED: Final[dict[str, str]] = {
    "run": "journaled side effect (deprecated in the SDK; same as run_typed)",
    "run_typed": "journaled side effect; completed ones never re-run on replay; "
                 "RunOptions.max_attempts turns the last failure terminal",
    "sleep": "durable timer on the virtual clock",
    "awakeable": "journaled awakeable; resolved by the harness or another handler",
    "resolve_awakeable": "journaled",
    "reject_awakeable": "journaled; the awaiting handler gets TerminalError",
    "service_call": "call by handler reference, result through the target's serde",
    "object_call": "call of a virtual object handler (queued per key if exclusive)",
    "workflow_call": "call of a workflow handler (`run` once per key)",
    "generic_call": "call by service and handler name, bytes in and out",
    "service_send": "one-way send, `send_delay` on the virtual clock; "
                    "idempotency_key deduplicates",
    "object_send": "as service_send, to a virtual object",
    "workflow_send": "as service_send, to a workflow",
    "generic_send": "as service_send, by name",
    "get": "journaled state read (virtual objects, workflows)",
    "set": "journaled state write",
    "clear": "journaled",
    "clear_all": "journaled",
    "state_keys": "journaled",
    "key": "the object's or workflow's key",
    "request": "id, headers the caller passed, body; attempt_headers empty",
    "random": "random.Random seeded by the run's seed and the invocation id",
    "uuid": "drawn from ctx.random(): stable across replays",
    "time": "journaled virtual wall time (the run's epoch + virtual seconds)",
    "promise": "workflow durable promise: value, resolve, reject, peek",
}

# method -> why it is refused (the error a handler gets names the call and this reason).
REFUSED: Final[dict[str, str]] = {
    "scope": "flow-control scopes (a restate-server 1.7 preview) are not modelled",
    "signal": "named signals between invocations are not modelled",
    "resolve_signal": "named signals are not modelled",
    "reject_signal": "named signals are not modelled",
    "cancel_invocation": "cancelling an invocation is not modelled",
    "attach_invocation": "attaching to another invocation is not modelled",
}

# Module-level helpers of restate-sdk that take the context's futures, unchanged.
HELPERS: Final = ("select", "gather", "wait_completed", "as_completed")
