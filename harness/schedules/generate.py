"""Generated schedules (Hypothesis): random sessions, messages, answers at any time from 0 s
to past 8 days, redeploys, pauses, crashes, provider faults and armed fault points.

Uniform random steps reach the narrow windows of some invariants rarely (a crash between an
email and its journal entry, then a confirming answer; an answer after the hand-off to a
revoked user; an answer after `max_wait`). So exploration steers, two ways:

- swarm selection: each schedule enables a random subset of the fault kinds, so some
  schedules pile up crashes, others only provider faults (a fault kind that is always
  possible crowds out the combinations that need several of another);
- windows: each schedule draws a few templates, one per invariant window, that place steps
  relative to each other (a message with an approval tool, then an answer after the
  hand-off; an armed crash, the message, the answer and the confirming answer; ...). Every
  step of a template but its first is optional, and optional steps shrink to absent, so a
  failure found through a window still shrinks to its 1-3 step story.

Everything is drawn from Hypothesis, so the seed alone fixes the schedules. Hypothesis shrinks a
failing schedule to a minimal one; it is printed as a scenario file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from contract.faultpoints import POINTS
from harness.schedules.model import Schedule, Step
from harness.world import PROVIDER_FAULTS

DAY = 86400


@dataclass(frozen=True)
class Size:
    """Upper bounds of a generated schedule (the benchmark's fixed size: 3, 10, 5)."""

    sessions: int = 3
    turns: int = 10
    faults: int = 5
    hosts: int = 2
    windows: int = 5  # templates that open an invariant's window (0: uniform steps only)


_TOOLS = ("send_email", "charge_card", "lookup", "notify")
_APPROVAL_TOOLS = ("send_email", "charge_card")
_FAULT_KINDS = ("gc-pause", "crash", "deploy", "provider", "arm", "answer-burst")
# Window templates, by the invariant whose window each opens (see `_window`). Repeats weigh
# the draw toward the windows uniform steps reach least (measured by
# `benchmarks/exploration.py --reach`: recovery 3%, re-runs 14% of schedules without them).
# The first is what a window shrinks to: "rerun" without its optional steps is one message
# with an approval tool, the smallest story there is.
WINDOWS = ("rerun", "recovery", "recovery", "recovery", "recovery", "recovery", "rerun",
           "busy", "late", "redeploy", "provider", "fencing")
# Fault points where a crash leaves an intent (or an effect) without a journaled result,
# with the tool that reaches each.
_RECOVERY_POINTS = (("effect.email.after_send", "send_email"),
                    ("effect.charge.after_charge", "charge_card"),
                    ("tool.after_intent", "send_email"), ("tool.after_intent", "charge_card"))
MINUTE, HOUR = 60, 3600
HAND_OFF = 5 * MINUTE
MAX_WAIT = 8 * DAY

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

        # Swarm: the fault kinds this schedule may use (shrinks toward the first kinds).
        enabled = draw(st.lists(st.sampled_from(_FAULT_KINDS), min_size=1, unique=True))

        @st.composite
        def fault(d: Any) -> Step:
            return _fault(d, d(_times), d(st.sampled_from(enabled)))

        @st.composite
        def window(d: Any) -> tuple[bool, tuple[Step, ...]]:
            # A window usually gets a session of its own: another card of its session would
            # take its answer (a person answers the oldest open card). Shrinks to shared.
            own = _maybe(d)
            return own, _window(d, d(st.sampled_from(WINDOWS)), d(session), d(_times))

        # Messages may be absent: every schedule opens at least one window (most of which
        # start with a message), and Hypothesis's short lists would otherwise leave half the
        # schedules without any window.
        messages = draw(st.lists(message(), max_size=size.turns))
        steps: list[Step] = [
            Step(m.at, m.action, tuple((k, f"m{i + 1}" if k == "text" else v)
                                       for k, v in m.params))
            for i, m in enumerate(messages)
        ]
        steps += draw(st.lists(answer(), max_size=size.turns))
        steps += draw(st.lists(person(), max_size=2))
        steps += draw(st.lists(fault(), max_size=size.faults))
        drawn = draw(st.lists(window(), max_size=size.windows))
        # At least one window, as a filter rather than `min_size=1`: a forced first element is
        # one Hypothesis cannot delete, so a failure found in the second window would keep
        # the first one's step in its minimal schedule.
        assume(drawn or not size.windows)
        for k, (own, opened) in enumerate(drawn):
            renamed = {"text": f"w{k + 1}", **({"session": f"w{k + 1}"} if own else {})}
            steps += [Step(x.at, x.action, tuple((key, renamed.get(key, v))
                                                 for key, v in x.params)) for x in opened]
        seed = draw(st.integers(0, 2**16))
        ordered = tuple(sorted(steps, key=lambda s: s.at))
        return Schedule(name=f"generated-{seed}", steps=ordered, seed=seed,
                        hosts=size.hosts, source="generated")

    return build()


def _fault(draw: Any, at: float, kind: str) -> Step:
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


def _maybe(draw: Any, odds: int = 4) -> bool:
    """A step present `odds` times in `odds + 1`, which shrinks to absent (0 -> False)."""
    return bool(draw(st.integers(0, odds)) > 0)


def _message(at: float, session: str, tools: list[str]) -> Step:
    return Step(at, "message", (("session", session), ("text", ""), ("tools", tools),
                                ("user", "alice")))


def _answer(at: float, session: str, decision: str = "approve") -> Step:
    return Step(at, "answer", (("session", session), ("decision", decision),
                               ("user", "alice")))


def _window(draw: Any, kind: str, session: str, t: float) -> tuple[Step, ...]:
    """The steps that open one invariant's window, placed relative to `t`.

    The window hangs on one step (a message with an approval tool; for "provider", the
    fault), present 9 times in 10; every other step is present 4 times in 5, its offset drawn
    from the range where the window is open (after the hand-off, before `max_wait`, right
    after it, ...). Every step can shrink away, the one the window hangs on too: a minimal
    story may keep the answers of one window and the message of another.
    """
    tool = draw(st.sampled_from(_APPROVAL_TOOLS))
    steps: list[Step] = []
    if kind == "recovery":  # conservative-recovery, no-duplicate-effects
        point, tool = draw(st.sampled_from(_RECOVERY_POINTS))
        action = draw(st.sampled_from(("crash", "crash", "crash", "pause")))
        if _maybe(draw):  # armed before the message, at the same time (kept in this order)
            duration = float(draw(st.sampled_from((120, 30, 600))))
            steps.append(Step(t, "arm", (("point", point), ("action", action),
                                         ("duration", duration), ("times", 1))))
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        # The answer in-call (the executor runs the tool) or after the hand-off (the re-run).
        answer_at = t + draw(st.one_of(st.integers(10, HAND_OFF - 30),
                                       st.integers(HAND_OFF + 60, DAY)))
        if _maybe(draw, 9):  # without it, the tool never runs: no window
            steps.append(_answer(float(answer_at), session))
        if _maybe(draw):  # the confirmation the held turn asks for
            steps.append(_answer(float(answer_at + draw(st.integers(60, 2 * HOUR))), session))
    elif kind == "rerun":  # access-rechecked, turn-outcome (one final outcome)
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        answer_at = t + draw(st.integers(HAND_OFF + 60, 7 * DAY))
        if _maybe(draw):
            steps.append(Step(float(t + draw(st.integers(HAND_OFF, answer_at - t))), "revoke",
                              (("user", "alice"), ("tool", draw(st.sampled_from(("*", tool)))))))
        if _maybe(draw):
            steps.append(Step(float(t + draw(st.integers(0, answer_at - t))), "deploy",
                              (("version", ""),)))
        if _maybe(draw):
            steps.append(_answer(float(answer_at), session,
                                 draw(st.sampled_from(("approve", "approve", "deny")))))
    elif kind == "busy":  # busy-rule: a message, a background result, while a turn is busy
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        if _maybe(draw):  # while the turn is active (in-call) or waits as state
            delay = draw(st.one_of(st.integers(1, HAND_OFF - 10),
                                   st.integers(HAND_OFF + 30, 2 * DAY)))
            steps.append(_message(float(t + delay), session,
                                  draw(st.lists(st.sampled_from(_TOOLS), max_size=1))))
        if _maybe(draw):
            steps.append(Step(float(t + draw(st.integers(30, 2 * HAND_OFF))), "background",
                              (("session", session),)))
        if _maybe(draw):
            steps.append(_answer(float(t + draw(st.integers(60, DAY))), session))
    elif kind == "late":  # turn-outcome: an answer after max_wait must not be applied
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        if _maybe(draw):
            steps.append(Step(float(t + draw(st.integers(30, 2 * HOUR))), "background",
                              (("session", session),)))
        if _maybe(draw):
            steps.append(_answer(float(t + MAX_WAIT + draw(st.integers(2 * MINUTE, 3 * HOUR))),
                                 session))
    elif kind == "redeploy":  # pinning-bound: a release while a turn waits in-call, pinned
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        if _maybe(draw):
            steps.append(Step(float(t + draw(st.integers(5, HAND_OFF - 30))), "deploy",
                              (("version", ""),)))
        if _maybe(draw):
            steps.append(_answer(float(t + draw(st.integers(60, 3 * DAY))), session))
    elif kind == "provider":  # no-duplicate-effects: a lone billed-then-failed completion
        if _maybe(draw, 9):
            steps.append(Step(t, "provider", (("fault", "500_after_billed"), ("times", 1))))
        if _maybe(draw):
            steps.append(_message(t, session, draw(st.lists(st.sampled_from(_TOOLS),
                                                            max_size=1))))
    else:  # fencing: the owner pauses mid-turn and the thread moves
        if _maybe(draw, 9):
            steps.append(_message(t, session, [tool]))
        if _maybe(draw):
            point = draw(st.sampled_from(("threadlog.append.before_lock",
                                          "threadlog.append.locked")))
            steps.append(Step(t, "arm", (("point", point), ("action", "pause"),
                                         ("duration", 600.0), ("times", 1))))
        if _maybe(draw):
            steps.append(_answer(float(t + draw(st.integers(60, DAY))), session))
    return tuple(steps)


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
