"""Planted bugs: variants of the reference implementation that the harness must catch.

One module per bug, each exposing `ADAPTER` (a `SimAdapter`, usable as
`--adapter tests.planted.<module>:ADAPTER`) and `INVARIANT` (the checker that must catch it).
Each is the reference app with the smallest change that breaks its invariant; see the
module's docstring for what changed. They live with the tests, never in a shipped package.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

MODULES: tuple[str, ...] = (
    "duplicate_model_call",
    "duplicate_email",
    "pinning_minutes",
    "busy_ignores_waiting",
    "unfenced_append",
    "expiry_not_scheduled",
    "rerun_skips_access",
    "recovery_fresh_key",
    "queue_in_memory",
)


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def all_bugs() -> list[ModuleType]:
    return [load(name) for name in MODULES]


@contextmanager
def seed_only_generation() -> Iterator[None]:
    """Inside this block, Hypothesis generates from the seed alone.

    Hypothesis (since 6.13x) also draws literals found in the source of the local modules
    loaded at the time (`hypothesis.internal.conjecture.providers._get_local_constants`): the
    schedules of one seed then change with any edit of harness/ or reference_impl/, and with
    which of their modules happen to be imported. The tests and the benchmark of the planted
    bugs pin "seed S finds bug B within N schedules", so they switch that source off. Nothing
    changes if this Hypothesis has no such thing.
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:  # pragma: no cover - another Hypothesis
        yield
        return
    original: Any = getattr(providers, "_get_local_constants", None)
    cache: Any = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or cache is None:  # pragma: no cover - another Hypothesis
        yield
        return
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()
