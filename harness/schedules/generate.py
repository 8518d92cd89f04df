"""Generated schedules: random sessions, messages, answers at any time from 0 s to past 8
days, cancels, redeploys, pauses, crashes, service faults on every world service, network
faults, clock jumps and armed fault points: every kind of step a scenario file can hold
(`harness.schedules.model.STEP_KINDS`; a test pins the share of schedules holding each).

Uniform random steps reach the narrow windows of some invariants rarely (a crash between an
email and its journal entry, then a confirming answer; an answer after the hand-off to a
revoked user; an answer after `max_wait`). So exploration steers, two ways:

- swarm selection: each schedule enables a random subset of the fault kinds, so some
  schedules pile up crashes, others only provider faults (a fault kind that is always
  possible crowds out the combinations that need several of another);
- windows: each schedule draws a few templates, one per invariant window, that place steps
  relative to each other (a message with an approval tool, then an answer after the
  hand-off; an armed crash, the message, the answer and the confirming answer; ...). Every
  step of a template but its first is optional, so a failure found through a window still
  shrinks (`harness.schedules.shrink`) to its 1-3 step story.

Schedule `index` of seed `seed` is drawn from its own `random.Random`, seeded from (seed,
index) only: the seed alone fixes every schedule, whichever process draws it and whatever was
drawn before. Rejected: Hypothesis as the generator. It made two thirds of exploring (about
20 ms of its engine per schedule against well under a millisecond here), and its shrinker
only shrinks what it generated itself; a failure is shrunk by deleting and simplifying steps
instead, which gives the same 1-4 step stories.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from contract.services import FAULT_NAMES, SERVICES
from contract.thresholds import HAND_OFF_AFTER, MAX_WAIT
from harness.faults import FAULTS
from harness.schedules.model import Schedule, Step
from harness.world import MODEL_LATENCY

DAY = 86400
T = TypeVar("T")


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
# The swarm's choices: every fault kind the registry can draw, and the answer burst (a
# person's pattern, drawn among the faults) in sixth place. The order is the draw's: it fixes
# every generated schedule.
_ANSWER_BURST = "answer-burst"
_DRAWN = [name for name, kind in FAULTS.items() if kind.draw is not None]
_FAULT_KINDS = (*_DRAWN[:5], _ANSWER_BURST, *_DRAWN[5:])
# The tools that reach each world service (the provider and identity: any turn, any re-run).
_SERVICE_TOOLS = {"provider": _TOOLS, "email": ("send_email", "notify"),
                  "payments": ("charge_card",), "identity": _APPROVAL_TOOLS,
                  "cards": _APPROVAL_TOOLS}
# Window templates, by the invariant whose window each opens (see `_window`). Repeats weigh
# the draw toward the windows uniform steps reach least (measured by
# `benchmarks/exploration.py --reach`: recovery 3%, re-runs 14% of schedules without them).
WINDOWS = ("rerun", "recovery", "recovery", "recovery", "recovery", "recovery", "rerun",
           "busy", "late", "redeploy", "provider", "fencing", "card", "cancel", "cancel",
           "cancel", "cancel", "background", "background", "handoff")
# Fault points where a crash leaves an intent (or an effect) without a journaled result,
# with the tool that reaches each.
_RECOVERY_POINTS = (("effect.email.after_send", "send_email"),
                    ("effect.charge.after_charge", "charge_card"),
                    ("tool.after_intent", "send_email"), ("tool.after_intent", "charge_card"))
MINUTE, HOUR = 60, 3600
HAND_OFF = int(HAND_OFF_AFTER)
# Times at three scales, so that both "within 5 minutes" and "day 7" are likely.
_TIME_SCALES = (600, 3 * HOUR, 9 * DAY)


class Draw:
    """The random choices of one schedule (a thin face over `random.Random`).

    Every choice is one `random()` float scaled to the range: `randint` and `randrange`
    cost four times as much (a schedule makes about 150 choices)."""

    __slots__ = ("_float",)

    def __init__(self, rng: random.Random) -> None:
        self._float = rng.random

    def integer(self, lo: int, hi: int) -> int:
        return lo + int(self._float() * (hi - lo + 1))

    def pick(self, options: Sequence[T]) -> T:
        return options[int(self._float() * len(options))]

    def maybe(self, odds: int = 4) -> bool:
        """True `odds` times in `odds + 1` (a template's optional step is present)."""
        return int(self._float() * (odds + 1)) > 0

    def subset(self, options: Sequence[T]) -> list[T]:
        """A non-empty subset of `options`, in a random order."""
        pool = list(options)
        return [pool.pop(int(self._float() * len(pool)))
                for _ in range(self.integer(1, len(pool)))]

    def time(self) -> float:
        return float(self.integer(0, self.pick(_TIME_SCALES)))

    def tools(self, most: int) -> list[str]:
        return [self.pick(_TOOLS) for _ in range(self.integer(0, most))]


def schedule_seed(seed: int, index: int) -> str:
    """What seeds schedule `index` of seed `seed` (a string: `random.Random` hashes it with
    SHA-512, the same in every process, unlike `hash`)."""
    return f"durable-chaos/schedule/{seed}/{index}"


def generate(seed: int, index: int, size: Size = Size()) -> Schedule:
    """Schedule `index` of seed `seed`: the same schedule every time, in every process."""
    d = Draw(random.Random(schedule_seed(seed, index)))
    sessions = d.integer(1, size.sessions)

    def session() -> str:
        return f"s{d.integer(1, sessions)}"

    steps: list[Step] = []
    for i in range(d.integer(0, size.turns)):
        steps.append(Step(d.time(), "message", (("session", session()), ("text", f"m{i + 1}"),
                                                ("tools", d.tools(2)), ("user", "alice"))))
    for _ in range(d.integer(0, size.turns)):
        steps.append(_answer(d.time(), session(), d.pick(("approve", "approve", "deny"))))
    for _ in range(d.integer(0, 2)):
        person = d.pick(("background", "background", "revoke", "cancel", "grant"))
        if person in ("background", "cancel"):
            steps.append(Step(d.time(), person, (("session", session()),)))
        else:
            steps.append(Step(d.time(), person, (("user", "alice"), ("tool", "*"))))
    # Swarm: the fault kinds this schedule may use.
    enabled = d.subset(_FAULT_KINDS)
    for _ in range(d.integer(0, size.faults)):
        steps += _fault(d, d.time(), d.pick(enabled), session())
    # At least one window: most of them start with a message, and a schedule without one
    # would often have none at all.
    # Then one or two service windows besides: a fault on one of 5 services of 6 kinds is 30
    # combinations, which the windows above (and the swarm's faults) would reach in under 1%
    # of schedules each.
    kinds = [d.pick(WINDOWS) for _ in range(d.integer(1, size.windows) if size.windows else 0)]
    kinds += ["service"] * (d.integer(1, 2) if size.windows else 0)
    for k, kind in enumerate(kinds):
        # A window usually gets a session of its own: another card of its session would
        # take its answer (a person answers the oldest open card).
        own = d.maybe()
        opened = _window(d, kind, session(), d.time())
        renamed = {"text": f"w{k + 1}", **({"session": f"w{k + 1}"} if own else {})}
        steps += [Step(x.at, x.action, tuple((key, renamed.get(key, v))
                                             for key, v in x.params)) for x in opened]
    run_seed = d.integer(0, 2**16)
    # Steps added after the windows above were fixed, each from a stream of its own: the
    # schedule's other steps, its name and its seed stay the ones drawn without them (so a
    # seed's schedules, and their verdicts, compare across the change).
    steps += _malformed(Draw(random.Random(f"{schedule_seed(seed, index)}/malformed")),
                        steps)
    steps += _outlived(Draw(random.Random(f"{schedule_seed(seed, index)}/outlived")))
    # A stable sort: steps at the same time keep the order drawn (an arm before its message).
    ordered = tuple(sorted(steps, key=lambda s: s.at))
    return Schedule(name=f"generated-{run_seed}", steps=ordered, seed=run_seed,
                    hosts=size.hosts, source="generated")


def schedules(seed: int, count: int, size: Size = Size(), start: int = 0) -> Iterator[Schedule]:
    """Schedules `start` .. `start + count - 1` of seed `seed`."""
    for index in range(start, start + count):
        yield generate(seed, index, size)


# What a broken or hostile client sends: a message or a background request that names no id,
# an answer that is neither approve nor deny. MALFORMED_PERCENT of the schedules get one, a
# little after a message of its session (while a turn of it is likely in progress or
# waiting), drawn from a stream of its own: the schedule's other steps, its name and its
# seed are the ones drawn without it. A share above the 30% in which every invariant's window
# must open (`malformed-refused` opens only where a malformed request was sent).
MALFORMED_PERCENT = 60
_MALFORMED_DECISIONS = ("maybe", "Approve", "yes", "")


def _malformed(d: Draw, steps: Sequence[Step]) -> list[Step]:
    messages = [s for s in steps if s.action == "message"]
    if not messages or d.integer(0, 99) >= MALFORMED_PERCENT:
        return []
    after = d.pick(messages)
    at, session = after.at + d.integer(1, 2 * HOUR), after.get("session")
    kind = d.pick(("message", "message", "background", "background", "answer"))
    if kind == "message":
        params: tuple[tuple[str, object], ...] = (
            ("session", session), ("text", "m0"), ("tools", []), ("user", "alice"))
    elif kind == "background":
        params = (("session", session),)
    else:
        params = (("session", session), ("decision", d.pick(_MALFORMED_DECISIONS)),
                  ("user", "alice"))
    return [Step(float(at), kind, (*params, ("malformed", True)))]


# A call that outlives its turn (`result-told`): the person sends it to the background and
# approves it later, or approves it after the hand-off in the same instant as a new message
# ends its turn (the approved run may begin first: the approval wins the call, the message
# ends only the turn). In OUTLIVED_PERCENT of the schedules, in a session of its own.
OUTLIVED_PERCENT = 40


def _outlived(d: Draw) -> list[Step]:
    if d.integer(0, 99) >= OUTLIVED_PERCENT:
        return []
    session, t = "o1", float(d.time())
    steps = [_message(t, session, [d.pick(_APPROVAL_TOOLS)])]
    if d.maybe(1):
        aside = t + d.integer(3, HAND_OFF - 10)
        steps += [Step(float(aside), "background", (("session", session),)),
                  _answer(float(aside + d.integer(1, 2 * HOUR)), session)]
    else:
        at = float(t + d.integer(HAND_OFF + 60, DAY))
        steps += [_answer(at, session), _message(at, session, d.tools(1))]
    return steps


def _fault(d: Draw, at: float, kind: str, session: str) -> tuple[Step, ...]:
    host = d.pick(("owner", "any", "latest/1"))
    fault = FAULTS.get(kind)
    if fault is not None and fault.draw is not None:
        return (Step(at, kind, fault.draw(d, host)),)
    # A person who answers twice in quick succession (double click, two devices), the second
    # maybe the other way.
    return (_answer(at, session), _answer(at + d.integer(0, 30), session,
                                          d.pick(("approve", "deny"))))


def _service_fault(at: float, service: str, fault: str) -> Step:
    return Step(at, "service-fault", (("service", service), ("fault", fault), ("times", 1)))


def _message(at: float, session: str, tools: list[str]) -> Step:
    return Step(at, "message", (("session", session), ("text", ""), ("tools", tools),
                                ("user", "alice")))


def _answer(at: float, session: str, decision: str = "approve") -> Step:
    return Step(at, "answer", (("session", session), ("decision", decision),
                               ("user", "alice")))


def _either(d: Draw, *ranges: tuple[int, int]) -> int:
    lo, hi = d.pick(ranges)
    return d.integer(lo, hi)


def _window(d: Draw, kind: str, session: str, t: float) -> tuple[Step, ...]:
    """The steps that open one invariant's window, placed relative to `t`.

    The window hangs on one step (a message with an approval tool; for "provider", the
    fault), present 9 times in 10; every other step is present 4 times in 5, its offset drawn
    from the range where the window is open (after the hand-off, before `max_wait`, right
    after it, ...). Every step can shrink away, the one the window hangs on too: a minimal
    story may keep the answers of one window and the message of another.
    """
    tool = d.pick(_APPROVAL_TOOLS)
    steps: list[Step] = []
    if kind == "recovery":  # conservative-recovery, no-duplicate-effects
        point, tool = d.pick(_RECOVERY_POINTS)
        action = d.pick(("crash", "crash", "crash", "pause"))
        if d.maybe():  # armed before the message, at the same time (kept in this order)
            duration = float(d.pick((120, 30, 600)))
            steps.append(Step(t, "arm", (("point", point), ("action", action),
                                         ("duration", duration), ("times", 1))))
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        # The answer in-call (the executor runs the tool) or after the hand-off (the re-run).
        answer_at = t + _either(d, (10, HAND_OFF - 30), (HAND_OFF + 60, DAY))
        if d.maybe(9):  # without it, the tool never runs: no window
            steps.append(_answer(float(answer_at), session))
        if d.maybe():  # the confirmation the held turn asks for
            steps.append(_answer(float(answer_at + d.integer(60, 2 * HOUR)), session))
    elif kind == "rerun":  # access-rechecked, turn-outcome (one final outcome)
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        answer_at = t + d.integer(HAND_OFF + 60, 7 * DAY)
        if d.maybe():
            steps.append(Step(float(t + d.integer(HAND_OFF, int(answer_at - t))), "revoke",
                              (("user", "alice"), ("tool", d.pick(("*", tool))))))
        if d.maybe():
            steps.append(Step(float(t + d.integer(0, int(answer_at - t))), "deploy",
                              (("version", ""),)))
        if d.maybe():
            steps.append(_answer(float(answer_at), session,
                                 d.pick(("approve", "approve", "deny"))))
    elif kind == "busy":  # busy-rule: a message, a background result, while a turn is busy
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        if d.maybe():  # while the turn is active (in-call) or waits as state
            delay = _either(d, (1, HAND_OFF - 10), (HAND_OFF + 30, 2 * DAY))
            steps.append(_message(float(t + delay), session, d.tools(1)))
        if d.maybe():
            steps.append(Step(float(t + d.integer(30, 2 * HAND_OFF)), "background",
                              (("session", session),)))
        if d.maybe():
            steps.append(_answer(float(t + d.integer(60, DAY)), session))
    elif kind == "late":  # turn-outcome: an answer after max_wait must not be applied
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        if d.maybe():
            steps.append(Step(float(t + d.integer(30, 2 * HOUR)), "background",
                              (("session", session),)))
        if d.maybe():
            steps.append(_answer(float(t + MAX_WAIT + d.integer(2 * MINUTE, 3 * HOUR)), session))
    elif kind == "redeploy":  # pinning-bound: a release while a turn waits in-call, pinned
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        if d.maybe():
            steps.append(Step(float(t + d.integer(5, HAND_OFF - 30)), "deploy",
                              (("version", ""),)))
        if d.maybe():
            steps.append(_answer(float(t + d.integer(60, 3 * DAY)), session))
    elif kind == "provider":  # no-duplicate-effects: a lone billed-then-failed completion
        if d.maybe(9):
            steps.append(_service_fault(t, "provider", "500_after"))
        if d.maybe():
            steps.append(_message(t, session, d.tools(1)))
    elif kind == "service":  # a service fails the call of a tool that reaches it
        service = d.pick(SERVICES)
        tool = d.pick(_SERVICE_TOOLS[service])
        if d.maybe(9):
            steps.append(_service_fault(t, service, d.pick(FAULT_NAMES)))
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        if tool in _APPROVAL_TOOLS and d.maybe():  # in-call, or a re-run after the hand-off
            delay = _either(d, (10, HAND_OFF - 30), (HAND_OFF + 60, DAY))
            steps.append(_answer(float(t + delay), session))
    elif kind == "card":  # answer-fate: an answer the moment the card is up
        # The host that showed the card is paused (or crashes) before it hears back from the
        # card service, and the person answers meanwhile: the answer reaches the call before
        # the code that waits for it has heard its card is up.
        if d.maybe(9):
            action = d.pick(("pause", "pause", "crash"))
            steps.append(Step(t, "arm", (("point", "card.after_show"), ("action", action),
                                         ("duration", float(d.pick((30, 120, 600)))),
                                         ("times", 1))))
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        answer_at = t + d.integer(3, 4 * MINUTE)
        if d.maybe(9):
            steps.append(_answer(float(answer_at), session, d.pick(("approve", "approve",
                                                                    "deny"))))
        if d.maybe():  # the confirmation a held call asks for, or an answer too many
            steps.append(_answer(float(answer_at + d.integer(1, 2 * HOUR)), session))
    elif kind == "background":  # background-honored: go on without this call
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        # While the call waits in-call, or after its turn handed the wait off.
        delay = _either(d, (3, HAND_OFF - 10), (HAND_OFF + 30, 2 * DAY))
        if d.maybe(9):
            steps.append(Step(float(t + delay), "background", (("session", session),)))
        if d.maybe():
            steps.append(_answer(float(t + delay + d.integer(1, 3 * DAY)), session))
    elif kind == "handoff":  # races at the instant the turn hands its wait off
        # The card shows one model reply after the message, and the in-call wait ends
        # `HAND_OFF` later: the person acts at that very instant (the simulator runs the
        # handlers ready at one instant in a seeded order), so their answer, background,
        # cancel or new message races the hand-off, and the result of a re-run can overtake
        # the turn's own report that it waits.
        if d.maybe():  # the turn's host stops right after the hand-off, before it reports it
            duration = float(d.pick((30, 120, 600)))
            steps.append(Step(t, "arm", (("point", "turn.after_handoff"),
                                         ("action", d.pick(("pause", "pause", "crash"))),
                                         ("duration", duration), ("times", 1))))
            slack = d.pick((0, 1, 5, 20))
        else:
            slack = d.pick((0, 0, 0, 1))
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        at = float(t + MODEL_LATENCY + HAND_OFF + slack)
        for _ in range(d.integer(1, 2)):
            act = d.pick(("answer", "answer", "background", "message", "cancel"))
            if act == "answer":
                steps.append(_answer(at, session, d.pick(("approve", "approve", "deny"))))
            elif act == "message":
                steps.append(_message(at, session, d.tools(1)))
            else:
                steps.append(Step(at, act, (("session", session),)))
    elif kind == "cancel":  # cancel-honored: the person stops a turn that is still running
        # A turn of several steps (each model step takes seconds), cancelled while it runs
        # (between its steps, or during an in-call wait for the approval tool at its end),
        # or after it handed its wait off.
        if d.maybe(9):
            steps.append(_message(t, session, [*d.tools(2), "lookup", tool]))
        delay = _either(d, (1, 8), (1, 8), (10, HAND_OFF - 10), (HAND_OFF + 30, DAY))
        if d.maybe(9):
            steps.append(Step(float(t + delay), "cancel", (("session", session),)))
        if d.maybe():
            steps.append(_answer(float(t + delay + d.integer(1, HOUR)), session))
    else:  # fencing: the owner pauses mid-turn and the thread moves
        if d.maybe(9):
            steps.append(_message(t, session, [tool]))
        if d.maybe():
            point = d.pick(("threadlog.append.before_lock", "threadlog.append.locked"))
            steps.append(Step(t, "arm", (("point", point), ("action", "pause"),
                                         ("duration", 600.0), ("times", 1))))
        if d.maybe():
            steps.append(_answer(float(t + d.integer(60, DAY)), session))
    return tuple(steps)
