"""Names shared by the DBOS binding and whoever drives it from outside (no DBOS import here).

Every handler invocation is one DBOS workflow, `WORKFLOW(service, handler, key, arg)`:

- a virtual object's exclusive handler goes through `OBJECTS_QUEUE`, a partitioned queue with
  one workflow at a time per partition, and the partition is `partition(service, key)`: the
  one-handler-at-a-time-per-key rule of a virtual object, kept by DBOS itself;
- a service handler (doTurn) goes through `SERVICES_QUEUE`, without a partition.

An enqueue that names no application version is taken only by a process of the latest
version: new work goes to the newest release, as on Restate, while a workflow already
started stays with the version that started it (DBOS recovers it only there).

Durable futures (awakeables, timers) are messages on one topic, `INBOX`, of the workflow
that waits: `{"id": <awakeable id>, "value": ...}` (or `"error"`). An awakeable id is
`<workflow id>::<n>`, so a resolver knows where to send.
"""

from __future__ import annotations

from typing import Final

__all__ = ["APP_NAME", "INBOX", "OBJECTS_QUEUE", "SERVICES_QUEUE", "STATE_TABLE", "WORKFLOW",
           "inbox_message", "partition", "workflow_of"]

APP_NAME: Final = "durable-chaos-reference"
WORKFLOW: Final = "durable_chaos_invoke"
OBJECTS_QUEUE: Final = "durable_chaos_objects"
SERVICES_QUEUE: Final = "durable_chaos_services"
INBOX: Final = "durable_chaos_inbox"
# Virtual-object state (service, key, name -> JSON), kept in DBOS's system database.
STATE_TABLE: Final = "durable_chaos_object_state"


def partition(service: str, key: str) -> str:
    return f"{service}/{key}"


def workflow_of(awakeable_id: str) -> str:
    """The workflow that waits on `awakeable_id`."""
    workflow, sep, _ = awakeable_id.rpartition("::")
    if not sep:
        raise ValueError(f"not an awakeable id of the DBOS binding: {awakeable_id!r}")
    return workflow


def inbox_message(awakeable_id: str, value: object = None,
                  error: str | None = None) -> dict[str, object]:
    message: dict[str, object] = {"id": awakeable_id, "value": value}
    if error is not None:
        message["error"] = error
    return message
