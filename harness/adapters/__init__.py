"""Adapters: built-in ones by name, a user's own as `module:attribute`."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from contract.thresholds import CheckConfig
from harness.adapters.base import (
    CAPABILITY_OF,
    ENDPOINT_OF,
    WORLD_ENDPOINTS,
    Adapter,
    Preflight,
    RunContext,
    Runtime,
    capability_of,
    claimed_invariants,
    lacking,
    world_endpoints,
)
from harness.adapters.opening import (
    deterministic,
    open_run,
    run_history,
    runtime_clock,
    runtime_config,
    suite_clock,
)
from harness.capabilities import (
    Backgroundable,
    Cancellable,
    ClockEffects,
    Crashable,
    FaultPoints,
    NetworkFaults,
    Pausable,
    Redeployable,
)
from harness.errors import AdapterNotFound, AdapterUnavailable, DurableChaosError, UsageError

__all__ = [
    "CAPABILITY_OF",
    "ENDPOINT_OF",
    "WORLD_ENDPOINTS",
    "Adapter",
    "Backgroundable",
    "Cancellable",
    "ClockEffects",
    "Crashable",
    "FaultPoints",
    "NetworkFaults",
    "Pausable",
    "Preflight",
    "Redeployable",
    "RunContext",
    "Runtime",
    "builtin_names",
    "capability_of",
    "claimed_invariants",
    "describe_builtin",
    "deterministic",
    "lacking",
    "load_adapter",
    "open_run",
    "preflight",
    "run_history",
    "runtime_clock",
    "runtime_config",
    "suite_clock",
    "world_endpoints",
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
    try:
        module = importlib.import_module("harness.adapters.restate")
    except ModuleNotFoundError as exc:  # an installed user without the extras
        raise AdapterNotFound(
            f"the Restate adapters need the module {exc.name!r}: pip install "
            "'durable-chaos[restate,postgres]' (`durable-chaos doctor --path restate` lists "
            "everything the real path needs)") from None
    adapter: Adapter = getattr(module, attribute)()
    return adapter


def _temporal(attribute: str) -> Adapter:
    try:
        module = importlib.import_module("harness.adapters.temporal")
    except ModuleNotFoundError as exc:
        raise AdapterNotFound(
            f"the Temporal adapters need the module {exc.name!r}: pip install "
            "'durable-chaos[temporal]'") from None
    adapter: Adapter = getattr(module, attribute)()
    return adapter


def _reference_restate() -> Adapter:
    return _restate("ReferenceRestateAdapter")


def _dbos(attribute: str) -> Adapter:
    try:
        module = importlib.import_module("harness.adapters.dbos")
    except ModuleNotFoundError as exc:
        raise AdapterNotFound(
            f"the DBOS adapters need the module {exc.name!r}: pip install "
            "'durable-chaos[dbos]'") from None
    adapter: Adapter = getattr(module, attribute)()
    return adapter


_BUILTIN: dict[str, tuple[str, Callable[[], Adapter]]] = {
    "reference": ("the reference implementation on the simulator (default)", _reference),
    "naive": ("the naive 'before' design (in-call wait, no hand-off) on the simulator", _naive),
    "reference-restate": ("the reference implementation on a real Restate server, with "
                          "PostgreSQL and Toxiproxy (virtual time)", _reference_restate),
    "naive-restate": ("the naive variant on a real Restate server (virtual time)",
                      lambda: _restate("NaiveRestateAdapter")),
    "reference-dbos": ("the reference implementation on DBOS with PostgreSQL (virtual time)",
                       lambda: _dbos("ReferenceDbosAdapter")),
    "naive-dbos": ("the naive variant on DBOS (in-workflow recv, virtual time)",
                   lambda: _dbos("NaiveDbosAdapter")),
    "reference-temporal": ("the reference implementation on a real Temporal dev server "
                           "(virtual time)", lambda: _temporal("ReferenceTemporalAdapter")),
    "naive-temporal": ("the naive variant on a real Temporal dev server (virtual time)",
                       lambda: _temporal("NaiveTemporalAdapter")),
}


def builtin_names() -> list[str]:
    return list(_BUILTIN)


def describe_builtin() -> list[tuple[str, str]]:
    return [(name, desc) for name, (desc, _) in _BUILTIN.items()]


def load_adapter(spec: str) -> Adapter:
    """`reference`, `naive`, `reference-restate`, or `package.module:attribute`.

    The attribute may be an adapter or a zero-argument callable returning one. Whatever goes
    wrong (an import error, a syntax error, a factory that raises) is an `AdapterNotFound`
    naming the adapter, the cause and the fix.
    """
    if spec in _BUILTIN:
        return _BUILTIN[spec][1]()
    if ":" not in spec:
        raise AdapterNotFound(
            f"unknown adapter {spec!r}: use one of {builtin_names()} or 'module:attribute' "
            "(see `durable-chaos adapters`)"
        )
    module_name, _, attr = spec.partition(":")
    if not module_name.strip() or not attr.strip():
        raise AdapterNotFound(f"adapter {spec!r}: expected 'package.module:attribute', both "
                              "parts named (see `durable-chaos adapters`)")
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
    except SyntaxError as exc:
        raise AdapterNotFound(
            f"adapter {spec!r}: module {module_name!r} has a syntax error ({exc.filename}, "
            f"line {exc.lineno}: {exc.msg}); fix the module"
        ) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's module raised while it was imported
        # Whatever it raised: a module that parses its command line at import (argparse)
        # raises SystemExit, which would otherwise end the suite with its status.
        raise AdapterNotFound(
            f"adapter {spec!r}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}; fix the module (run `python -c 'import "
            f"{module_name}'` to see the traceback)"
        ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise AdapterNotFound(
            f"adapter {spec!r}: module {module_name!r} has no attribute {attr!r}"
        ) from None
    # A class is a zero-argument factory too (`ADAPTER = MyAdapter`, the () forgotten): its
    # `open` is an unbound function, so "has open" cannot tell it from an instance.
    factory = isinstance(obj, type) or (callable(obj) and not hasattr(obj, "open"))
    try:
        adapter = obj() if factory else obj
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        fix = (f"make {attr} an instance ({attr} = {obj.__name__}(...)) or a class whose "
               "constructor takes no argument" if isinstance(obj, type) else
               "a factory must return an adapter without raising")
        raise AdapterNotFound(
            f"adapter {spec!r}: calling {attr}() raised {type(exc).__name__}: {exc}; {fix}"
        ) from None
    if not hasattr(adapter, "open") or not hasattr(adapter, "name"):
        raise AdapterNotFound(
            f"adapter {spec!r} is not an adapter: it needs `name`, `engine`, "
            "`check_config()` and `open(ctx)` (see harness.adapters.base.Adapter)"
        )
    return adapter  # type: ignore[no-any-return]


def preflight(spec: str, adapter: Adapter) -> None:
    """Check, before any run, that `adapter` can run here; `AdapterUnavailable` if not.

    Calls `check_config()` (every run needs it) and the adapter's optional `preflight()`
    (see `Preflight`): a missing binary or a URL that does not answer is a configuration
    error, found before the suite starts instead of as one unknown run after another.
    """
    name = getattr(adapter, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise AdapterUnavailable(f"adapter {spec!r}: name is {name!r}; give it a non-empty "
                                 "str name (the report and the run directories use it)")
    engine = getattr(adapter, "engine", None)
    if engine not in ("sim", "real"):
        raise AdapterUnavailable(f"adapter {spec!r}: engine is {engine!r}; use 'sim' "
                                 "(deterministic, virtual time) or 'real' (real processes)")
    try:
        config = adapter.check_config()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise AdapterUnavailable(f"adapter {spec!r}: check_config() raised "
                                 f"{type(exc).__name__}: {exc}; fix the adapter") from None
    # Every run judges by these thresholds: garbage here would make every run unknown.
    if not isinstance(config, CheckConfig):
        raise AdapterUnavailable(f"adapter {spec!r}: check_config() returned {config!r}; "
                                 "return a harness.checkers.base.CheckConfig")
    if not 0 < config.hand_off_after < config.max_wait:
        raise AdapterUnavailable(f"adapter {spec!r}: check_config() has hand_off_after="
                                 f"{config.hand_off_after} and max_wait={config.max_wait}; "
                                 "thresholds must satisfy 0 < hand_off_after < max_wait")
    if not isinstance(adapter, Preflight):
        return
    try:
        adapter.preflight()
    except UsageError as exc:
        raise AdapterUnavailable(f"adapter {spec!r} cannot run here: {exc}") from None
    except DurableChaosError as exc:  # ComponentUnavailable names the install target
        raise AdapterUnavailable(f"adapter {spec!r} cannot run here: {exc}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise AdapterUnavailable(f"adapter {spec!r}: preflight() raised "
                                 f"{type(exc).__name__}: {exc}") from None
