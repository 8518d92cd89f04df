"""Re-export of `contract.binding`, where the binding between handlers and an engine lives.

Kept so that code importing `reference_impl.binding` keeps working; new code imports
`contract.binding`.
"""

from contract.binding import (
    JSON,
    App,
    Context,
    DurableFuture,
    Handler,
    HandlerFn,
    HandlerRef,
    Service,
    TerminalError,
)

__all__ = [
    "JSON",
    "App",
    "Context",
    "DurableFuture",
    "Handler",
    "HandlerFn",
    "HandlerRef",
    "Service",
    "TerminalError",
]
