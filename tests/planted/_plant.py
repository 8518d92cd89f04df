"""How the planted bugs change the reference implementation without editing it.

Every planted bug is the reference app with one small thing changed, inside the bug's own
builder, so that nothing global moves: the unmodified `reference` adapter runs in the same
process (it is the control of every test) and must stay the reference.

- `rebind(fn, name=value)`: a copy of one function whose global `name` is `value`.
- `variant(executor={...}, turn={...})`: a builder of the reference app in which some
  module-level names of `reference_impl.<module>` are replaced. The module's functions (and
  the methods of ChatToolExecutor and SessionLog) are the reference's own code objects,
  re-created over a private copy of the module's globals; the modules that import from it
  are re-created the same way to call those copies. Modules with nothing to change stay
  the reference's.
- `replace_handler(app, service, handler, wrap)`: the app with one handler wrapped.
- `CtxProxy`: a handler's `Context` with some methods overridden (in a subclass).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from contract.binding import App, Context, Handler, HandlerFn, Service
from harness.adapters.sim import AppBuilder
from reference_impl import app as app_module
from reference_impl import controller as controller_module
from reference_impl import effects as effects_module
from reference_impl import executor as executor_module
from reference_impl import pending as pending_module
from reference_impl import turn as turn_module

__all__ = ["CtxProxy", "phase_read_as", "rebind", "replace_handler", "variant", "with_ctx"]


def _copy(fn: types.FunctionType, scope: dict[str, Any]) -> types.FunctionType:
    new = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def rebind(fn: Callable[..., Any], **names: Any) -> Any:
    """A copy of the function `fn` whose module-level `names` resolve to the given values."""
    missing = sorted(set(names) - set(fn.__globals__))
    if missing:
        raise NameError(f"{fn.__qualname__} has no global(s) {missing}: nothing to rebind")
    assert isinstance(fn, types.FunctionType)
    return _copy(fn, {**fn.__globals__, **names})


def _shadow(module: types.ModuleType, overrides: Mapping[str, Any],
            classes: tuple[str, ...] = ()) -> dict[str, Any]:
    """A copy of `module`'s globals where `overrides` replace names and every function defined
    in the module (and the named classes' methods) resolves globals in that copy."""
    unknown = sorted(set(overrides) - set(vars(module)))
    if unknown:
        raise NameError(f"{module.__name__} has no global(s) {unknown}: nothing to replace")
    scope: dict[str, Any] = dict(vars(module))
    for name, obj in vars(module).items():
        if name in overrides:
            continue
        if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
            scope[name] = _copy(obj, scope)
    for name in classes:
        cls = vars(module)[name]
        methods = {k: _copy(v, scope) for k, v in vars(cls).items()
                   if isinstance(v, types.FunctionType)}
        scope[name] = type(name, (cls,), {**methods, "__module__": __name__})
    scope.update(overrides)
    return scope


def _imports(module: types.ModuleType, copies: Mapping[str, Mapping[str, Any]],
             originals: Mapping[str, types.ModuleType]) -> dict[str, Any]:
    """The names `module` imported from already shadowed modules, mapped to their copies."""
    found: dict[str, Any] = {}
    for short, scope in copies.items():
        source = vars(originals[short])
        for name, obj in vars(module).items():
            if name in scope and source.get(name) is obj and scope[name] is not obj:
                found[name] = scope[name]
    return found


# Dependency order: a module is shadowed after every module it imports from.
_MODULES: dict[str, types.ModuleType] = {
    "effects": effects_module,
    "executor": executor_module,
    "turn": turn_module,
    "pending": pending_module,
    "controller": controller_module,
}
_CLASSES: dict[str, tuple[str, ...]] = {"executor": ("ChatToolExecutor",),
                                        "effects": ("SessionLog",)}


def variant(**overrides: Mapping[str, Any]) -> AppBuilder:
    """`build_app` where, per module (`effects`, `executor`, `turn`, `pending`,
    `controller`), the given module-level names are replaced. Modules that import a replaced
    name (or a function that calls one) get copies that call the replacement."""
    unknown = sorted(set(overrides) - set(_MODULES))
    if unknown:
        raise KeyError(f"unknown module(s) {unknown}; use {sorted(_MODULES)}")
    copies: dict[str, dict[str, Any]] = {}
    for short, module in _MODULES.items():
        mine = {**_imports(module, copies, _MODULES), **overrides.get(short, {})}
        if mine:
            copies[short] = _shadow(module, mine, _CLASSES.get(short, ()))
    builders = {name: copies[short][name] for short, name in (
        ("turn", "build_turn_service"), ("pending", "build_pending_service"),
        ("controller", "build_controller_service")) if short in copies}
    if not builders:
        raise ValueError("variant() without a change is the reference itself")
    build: AppBuilder = _copy(app_module.build_app, {**vars(app_module), **builders})
    return build


def replace_handler(app: App, service: str, handler: str,
                    wrap: Callable[[HandlerFn], HandlerFn]) -> App:
    """`app` where `service/handler` runs `wrap(original)` instead of the original."""
    found = False
    services: list[Service] = []
    for svc in app.services:
        if svc.name == service:
            handlers = []
            for h in svc.handlers:
                if h.name == handler:
                    found = True
                    h = Handler(h.name, wrap(h.fn), h.kind, h.private)
                handlers.append(h)
            svc = replace(svc, handlers=tuple(handlers))
        services.append(svc)
    if not found:
        raise KeyError(f"app {app.version} has no handler {service}/{handler}")
    return App(app.version, tuple(services))


class CtxProxy:
    """Delegates everything to the real context; subclasses override what the bug changes."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def phase_read_as(actual: str, read_as: str) -> Callable[[Context], Any]:
    """A PendingToolCall context whose wait row in phase `actual` reads as phase `read_as`:
    the bugs of a handler that misjudges where the wait stands (`with_ctx` takes it)."""

    class _PhaseMisread(CtxProxy):
        async def get(self, key: str) -> Any:
            raw = await self._ctx.get(key)
            if key == "row" and isinstance(raw, dict) and raw.get("phase") == actual:
                return {**raw, "phase": read_as}  # the bug
            return raw

    return _PhaseMisread


def with_ctx(proxy: Callable[[Context], Any]) -> Callable[[HandlerFn], HandlerFn]:
    """A `replace_handler` wrapper: the original handler, run on `proxy(ctx)`."""

    def wrap(fn: HandlerFn) -> HandlerFn:
        async def handler(ctx: Context, arg: Any) -> Any:
            return await fn(proxy(ctx), arg)

        return handler

    return wrap


def store_seen_as(store: Any, view: type, planted_in: str) -> Any:
    """The same in-memory thread log (same state) seen through `view`, a subclass of
    `InMemoryThreadLogStore` that plants a store's bug; `planted_in` names the bug for the
    error when the run's store is another."""
    from reference_impl.threadlog import InMemoryThreadLogStore

    if not isinstance(store, InMemoryThreadLogStore):
        raise TypeError(f"{planted_in} plants its bug in InMemoryThreadLogStore, not {store!r}")
    seen = object.__new__(view)
    seen.__dict__ = store.__dict__
    return seen
