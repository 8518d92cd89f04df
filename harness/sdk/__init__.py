"""A user's own restate-sdk services on the deterministic simulator, unchanged.

- `SdkSimRuntime`: the runtime kit an adapter builds on (register the user's
  `restate.Service` / `VirtualObject` / `Workflow` objects, drive them, fault them);
- `sdk_app`: those objects as an app the simulator registers;
- `SdkContext`: restate-sdk's context implemented over the simulator's journal;
- `world_transport`, `SIM_WORLD_URL`: the world over an in-process httpx transport (requests
  and `httpx.Client` reach it too; other clients are refused by name: `harness.sdk.transport`);
- `SUPPORTED`, `REFUSED`: the context API table (docs/restate-sdk.md).
"""

from harness.sdk.api import REFUSED, SUPPORTED
from harness.sdk.context import SdkContext
from harness.sdk.runtime import InvocationView, SdkSimRuntime, Services, TurnOf
from harness.sdk.services import sdk_app
from harness.sdk.transport import SIM_WORLD_URL, world_transport

__all__ = [
    "REFUSED",
    "SIM_WORLD_URL",
    "SUPPORTED",
    "InvocationView",
    "SdkContext",
    "SdkSimRuntime",
    "Services",
    "TurnOf",
    "sdk_app",
    "world_transport",
]
