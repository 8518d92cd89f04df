"""The network links a `network` fault may degrade, and how.

Workers -> PostgreSQL ("pg") and workers -> the world ("world": the model provider, outbox,
ledger, identity, catalog and cards). A runtime with `NetworkFaults` exposes them (Toxiproxy
on the real path); the fault kind `network` (harness.faults) draws and validates them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LINKS", "TOXICS"]

LINKS: Final[tuple[str, ...]] = ("pg", "world")
TOXICS: Final[tuple[str, ...]] = ("latency", "timeout", "reset_peer", "down")
