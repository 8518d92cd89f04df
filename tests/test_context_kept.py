"""context-kept on small hand-made histories, and on the world that writes its records: the
model's replies ask for a turn's calls in order, one new call per step; a call asked for again
at a later step (its result left out) or a call skipped (a result it never asked for put in)
is caught; a retry of one step is not."""

from __future__ import annotations

import asyncio

from harness.checkers import CheckConfig, ContextKept, Result
from harness.history import History, Record
from harness.world import World

CONFIG = CheckConfig()


def reply(h: History, t: float, step: int, asked: str | None, turn: str = "s1.turn1",
          key: str | None = None) -> Record:
    data = {"effect": "model", "logical": f"{turn}:{step}"}
    if asked is not None:
        data["asked"] = asked
    return h.add("effect.delivered", "event", time=t, data=data, session="s1", turn=turn,
                 key=key if key is not None else f"model:{turn}:{step}")


def check(h: History) -> Result:
    h.add("run.end", time=max(r.time for r in h.records) + 1.0)
    return ContextKept().check(h, CONFIG)


def test_calls_asked_in_order_pass() -> None:
    h = History()
    reply(h, 2, 0, "s1.turn1.t1")
    reply(h, 60, 1, "s1.turn1.t2")
    reply(h, 62, 2, None)  # the text reply
    reply(h, 3, 0, "s1.turn2.t1", turn="s1.turn2")
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"turns": 2.0, "replies": 3.0, "planned_texts": 0.0}


def test_a_retried_step_is_the_same_call_and_passes() -> None:
    # A keyless retry of step 0 after a crash delivers again and asks for t1 again: the
    # same step, nothing was left out.
    h = History()
    reply(h, 2, 0, "s1.turn1.t1", key="")
    reply(h, 9, 0, "s1.turn1.t1", key="")
    reply(h, 60, 1, "s1.turn1.t2")
    assert check(h).valid is True


def test_a_call_asked_for_again_at_a_later_step_is_a_violation() -> None:
    h = History()
    first = reply(h, 2, 0, "s1.turn1.t1")
    again = reply(h, 120, 1, "s1.turn1.t1")
    r = check(h)
    assert r.valid is False
    assert "asked for s1.turn1.t1 at step 1 (t=2.0m) after asking for it at step 0" in (
        r.witness(limit=5))
    assert r.violations[0].records == (first.index, again.index)


def test_a_skipped_call_is_a_violation() -> None:
    h = History()
    reply(h, 2, 0, "s1.turn1.t1")
    skipped = reply(h, 60, 1, "s1.turn1.t3")
    r = check(h)
    assert r.valid is False
    assert "asked for s1.turn1.t3 at step 1 (t=60s) and never for s1.turn1.t2" in (
        r.witness(limit=5))
    assert r.violations[0].records == (skipped.index,)
    # The first reply of a turn asking for t2: t1 was never asked for.
    h = History()
    reply(h, 2, 0, "s1.turn1.t2")
    assert check(h).valid is False


def test_replies_without_a_call_or_of_another_format_are_not_judged() -> None:
    h = History()
    reply(h, 2, 0, None)
    reply(h, 3, 0, "s1.turn9.t1")  # names another turn's call: not this turn's numbering
    h.add("effect.delivered", "event", time=4, data={"effect": "model", "logical": "x",
                                                     "asked": "s1.turn1.t1"}, turn="s1.turn1")
    r = check(h)
    assert r.valid is True and r.reached is False


def message(h: History, t: float, planned: int, turn: str = "s1.turn1") -> None:
    h.add("op.message", "invoke", time=t, session="s1",
          data={"message_id": "s1.m1", "planned": planned})
    h.add("turn.started", "event", time=t, session="s1", turn=turn,
          data={"event_id": f"{turn}.started", "message": "s1.m1"})


def test_a_text_answer_before_every_planned_tool_was_asked_is_a_violation() -> None:
    # The message plans two tools; the model answers in text after asking for one: it was
    # not given the request (or its plan) whole.
    h = History()
    message(h, 0, 2)
    reply(h, 2, 0, "s1.turn1.t1")
    text = reply(h, 60, 1, None)
    r = check(h)
    assert r.valid is False
    assert ("s1.turn1: the model answered in text at t=60s and never asked for s1.turn1.t2 "
            "of the 2 tool(s) its message planned") in r.witness(limit=5)
    assert r.violations[0].records == (text.index,)
    # Every planned tool asked for, then text: holds; a turn handed off before its text
    # reply (no text yet) is not judged.
    h = History()
    message(h, 0, 2)
    reply(h, 2, 0, "s1.turn1.t1")
    reply(h, 60, 1, "s1.turn1.t2")
    reply(h, 62, 2, None)
    r = check(h)
    assert r.valid is True and r.stats["planned_texts"] == 1.0
    h = History()
    message(h, 0, 2)
    reply(h, 2, 0, "s1.turn1.t1")
    assert check(h).valid is True


def test_the_world_names_the_call_each_model_reply_asks_for() -> None:
    history = History()
    world = World(history, now=lambda: 0.0, sleep=_no_sleep)
    plan = [{"role": "user", "text": "m", "plan": ["send_email", "notify"]}]

    async def ask(step: int, messages: list[dict[str, object]]) -> dict[str, object]:
        return await world.provider.complete(session="s1", turn="s1.turn1", step=step,
                                             messages=messages, idempotency_key=f"k{step}")

    asyncio.run(ask(0, plan))
    asyncio.run(ask(1, [*plan, {"role": "tool", "id": "s1.turn1.t1"}]))
    asyncio.run(ask(2, [*plan, {"role": "tool"}, {"role": "tool"}]))
    delivered = history.of_kind("effect.delivered")
    assert [r.data.get("asked") for r in delivered] == ["s1.turn1.t1", "s1.turn1.t2", None]
    assert check(history).valid is True


async def _no_sleep(seconds: float) -> None:
    return None
