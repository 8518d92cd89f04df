"""Generated schedules (Hypothesis): random sessions, messages, answers at any time from 0 s
to past 8 days, redeploys, pauses, crashes, provider faults and armed fault points.

Hypothesis shrinks a failing schedule to a minimal one; it is printed as a scenario file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from harness.schedules.model import Schedule, Step
from harness.world import PROVIDER_FAULTS
from reference_impl.faultpoints import POINTS

DAY = 86400


@dataclass(frozen=True)
class Size:
    """Upper bounds of a generated schedule (the benchmark's fixed size: 3, 10, 5)."""

    sessions: int = 3
    turns: int = 10
    faults: int = 5
    hosts: int = 2


_TOOLS = ("send_email", "charge_card", "lookup", "notify")
_FAULT_KINDS = ("gc-pause", "crash", "deploy", "provider", "arm", "answer-burst")

# Times shrink toward 0; mixing scales makes both "within 5 minutes" and "day 7" likely.
_times = st.one_of(
    st.integers(0, 600),
    st.integers(0, 3 * 3600),
    st.integers(0, 9 * DAY),
).map(float)


def schedules(size: Size = Size()) -> st.SearchStrategy[Schedule]:
    # Each kind of step is a list Hypothesis can shrink element by element (a count drawn
    # first, then a loop, would leave it unable to delete one step at a time).
    @st.composite
    def build(draw: Any) -> Schedule:
        sessions = draw(st.integers(1, size.sessions))
        session = st.integers(1, sessions).map(lambda i: f"s{i}")

        @st.composite
        def message(d: Any) -> Step:
            tools = d(st.lists(st.sampled_from(_TOOLS), max_size=2))
            return Step(d(_times), "message", (("session", d(session)), ("text", ""),
                                               ("tools", tools), ("user", "alice")))

        @st.composite
        def answer(d: Any) -> Step:
            decision = d(st.sampled_from(("approve", "approve", "deny")))
            return Step(d(_times), "answer", (("session", d(session)),
                                              ("decision", decision), ("user", "alice")))

        @st.composite
        def person(d: Any) -> Step:
            if d(st.sampled_from(("background", "revoke"))) == "background":
                return Step(d(_times), "background", (("session", d(session)),))
            return Step(d(_times), "revoke", (("user", "alice"), ("tool", "*")))

        @st.composite
        def fault(d: Any) -> Step:
            return _fault(d, d(_times))

        messages = draw(st.lists(message(), min_size=1, max_size=size.turns))
        steps: list[Step] = [
            Step(m.at, m.action, tuple((k, f"m{i + 1}" if k == "text" else v)
                                       for k, v in m.params))
            for i, m in enumerate(messages)
        ]
        steps += draw(st.lists(answer(), max_size=size.turns))
        steps += draw(st.lists(person(), max_size=2))
        steps += draw(st.lists(fault(), max_size=size.faults))
        seed = draw(st.integers(0, 2**16))
        ordered = tuple(sorted(steps, key=lambda s: s.at))
        return Schedule(name=f"generated-{seed}", steps=ordered, seed=seed,
                        hosts=size.hosts, source="generated")

    return build()


def _fault(draw: Any, at: float) -> Step:
    kind = draw(st.sampled_from(_FAULT_KINDS))
    host = draw(st.sampled_from(("owner", "any", "latest/1")))
    if kind == "gc-pause":
        duration = float(draw(st.sampled_from((5, 30, 90, 300, 900))))
        return Step(at, "gc-pause", (("host", host), ("duration", duration)))
    if kind == "crash":
        return Step(at, "crash", (("host", host),))
    if kind == "deploy":
        return Step(at, "deploy", (("version", ""),))
    if kind == "provider":
        return Step(at, "provider", (("fault", draw(st.sampled_from(PROVIDER_FAULTS))),
                                     ("times", 1)))
    if kind == "arm":
        action = draw(st.sampled_from(("crash", "pause")))
        duration = float(draw(st.sampled_from((30, 120, 600))))
        return Step(at, "arm", (("point", draw(st.sampled_from(sorted(POINTS)))),
                                ("action", action), ("duration", duration), ("times", 1)))
    # A person who answers twice in quick succession (double click, two devices).
    return Step(at, "answer", (("session", "s1"), ("decision", "approve"), ("user", "alice")))


@contextmanager
def seed_only() -> Iterator[None]:
    """Inside this block, Hypothesis generates from the seed alone.

    Hypothesis (since 6.13x) also draws literals found in the source of the local modules
    loaded at the time (`hypothesis.internal.conjecture.providers._get_local_constants`): the
    schedules of one seed would then change with any edit of harness/ or reference_impl/, and
    with which of their modules happen to be imported, so `durable-chaos replay --seed S`
    would not rerun what `run --seed S` ran. Nothing changes if this Hypothesis has no such
    thing (the patch is guarded).
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
