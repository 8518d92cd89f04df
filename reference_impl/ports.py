"""Re-export of `contract.ports`: the endpoints, `Config` and `Ports` a runtime gets.

Kept so that code importing `reference_impl.ports` keeps working; new code imports
`contract.ports`.
"""

from contract.ports import (
    EVENTS,
    ApprovalUI,
    Config,
    Identity,
    Mailer,
    ModelProvider,
    NullObserver,
    Observer,
    Payments,
    Ports,
    ProviderError,
    TimerPort,
    ToolCatalog,
    ToolSpec,
)

__all__ = [
    "EVENTS",
    "ApprovalUI",
    "Config",
    "Identity",
    "Mailer",
    "ModelProvider",
    "NullObserver",
    "Observer",
    "Payments",
    "Ports",
    "ProviderError",
    "TimerPort",
    "ToolCatalog",
    "ToolSpec",
]
