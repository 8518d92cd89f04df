"""Adapters: built-in ones by name, a user's own as `module:attribute`."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from harness.adapters.base import (
    CAPABILITY_OF,
    Adapter,
    ClockEffects,
    Crashable,
    FaultPoints,
    Pausable,
    Redeployable,
    RunContext,
    Runtime,
)
from harness.errors import AdapterNotFound

__all__ = [
    "CAPABILITY_OF",
    "Adapter",
    "ClockEffects",
    "Crashable",
    "FaultPoints",
    "Pausable",
    "Redeployable",
    "RunContext",
    "Runtime",
    "builtin_names",
    "describe_builtin",
    "load_adapter",
]


def _reference() -> Adapter:
    from harness.adapters.sim import SimAdapter
    from reference_impl.app import build_app

    return SimAdapter("reference", "the reference implementation on the simulator (default)",
                      build_app)


def _naive() -> Adapter:
    from harness.adapters.sim import SimAdapter
    from reference_impl.naive import build_naive_app

    return SimAdapter("naive", "the naive 'before' design (in-call wait up to 8 days, no "
                      "hand-off) on the simulator", build_naive_app)


def _restate(attribute: str) -> Adapter:
    # Imported on demand: the real path pulls in httpx and psycopg, which the default
    # simulator path does not need.
    module = importlib.import_module("harness.adapters.restate")
    adapter: Adapter = getattr(module, attribute)()
    return adapter


def _reference_restate() -> Adapter:
    return _restate("ReferenceRestateAdapter")


_BUILTIN: dict[str, tuple[str, Callable[[], Adapter]]] = {
    "reference": ("the reference implementation on the simulator (default)", _reference),
    "naive": ("the naive 'before' design (in-call wait, no hand-off) on the simulator", _naive),
    "reference-restate": ("the reference implementation on a real Restate server, with "
                          "PostgreSQL and Toxiproxy (virtual time)", _reference_restate),
    "naive-restate": ("the naive variant on a real Restate server (virtual time)",
                      lambda: _restate("NaiveRestateAdapter")),
}


def builtin_names() -> list[str]:
    return list(_BUILTIN)


def describe_builtin() -> list[tuple[str, str]]:
    return [(name, desc) for name, (desc, _) in _BUILTIN.items()]


def load_adapter(spec: str) -> Adapter:
    """`reference`, `naive`, `reference-restate`, or `package.module:attribute`.

    The attribute may be an adapter or a zero-argument callable returning one.
    """
    if spec in _BUILTIN:
        return _BUILTIN[spec][1]()
    if ":" not in spec:
        raise AdapterNotFound(
            f"unknown adapter {spec!r}: use one of {builtin_names()} or 'module:attribute' "
            "(see `durable-chaos adapters`)"
        )
    module_name, _, attr = spec.partition(":")
    # Like uvicorn or pytest, a user's adapter module is found from the directory they run in.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterNotFound(
            f"adapter {spec!r}: cannot import module {module_name!r} ({exc}); check the "
            "module path and that it is importable from the current directory"
        ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise AdapterNotFound(
            f"adapter {spec!r}: module {module_name!r} has no attribute {attr!r}"
        ) from None
    adapter = obj() if callable(obj) and not hasattr(obj, "open") else obj
    if not hasattr(adapter, "open") or not hasattr(adapter, "name"):
        raise AdapterNotFound(
            f"adapter {spec!r} is not an adapter: it needs `name`, `engine`, "
            "`check_config()` and `open(ctx)` (see harness.adapters.base.Adapter)"
        )
    return adapter  # type: ignore[no-any-return]
