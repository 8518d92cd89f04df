"""context-kept: the agent tells the model what came of every tool call it made.

A turn is a loop: the model answers with a tool call or with text; the agent runs the call
(asking the person first when it needs approval) and asks the model again with the call's
result added to the conversation. The model of the world is scripted (`harness.world`): it
calls the tools of the message's plan in order, one per reply, and counts the results it is
given. So what the model asked for, step after step, shows what it was told:

- a call asked for again at a later step means the agent left the call's result out of the
  conversation (a transcript rebuilt after a resume without it, a result filed elsewhere): the
  model does not know it ran, and asks for it again;
- a call skipped (the reply asks for call k+2 when no reply of the turn asked for k+1) means
  the conversation held a result the model never asked for (a result of another turn, or one
  call's result told twice);
- a model that answers with text before asking for every tool the turn's message planned was
  not given the person's request (the message left out of the conversation, or its plan
  lost): the runner says how many tools each message plans (`op.message`, `planned`), and
  the turn names its message (`turn.started`).

Read from the world's records of the model provider, which the runtime cannot write: each
delivered reply (`effect.delivered` of `model`, `logical` TURN:STEP) names the call it asked
for (`asked`, TURN.tK). A retry of one step is the same step (same `logical`), never a
violation. Judged for turns whose model replies name their calls, at the end of the run.

It rests on the world's turn having one user message, as the world's model numbers a turn's
calls from it: an agent that adds a second user message to a running turn starts that
numbering again (and the world's call ids of that turn collide), which reads here as results
left out.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS: Final = frozenset({"effect.delivered", "op.message", "turn.started"})


def _step(logical: str, turn: str) -> int | None:
    """The step of a model call from its logical id TURN:STEP, None if it is not one."""
    head, sep, step = logical.rpartition(":")
    if not sep or head != turn:
        return None
    try:
        return int(step)
    except ValueError:
        return None


def _number(asked: str, turn: str) -> int | None:
    """K of a tool call id TURN.tK, None if it is not one of this turn's."""
    head, sep, k = asked.rpartition(".t")
    if not sep or head != turn or not k.isdigit():
        return None
    return int(k)


@final
class ContextKept:
    name: str = "context-kept"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["context-kept"]
    description: str = (
        "The model is told what came of every tool call it made in the turn: no call is "
        "asked for again at a later step (its result was left out), none is skipped (a "
        "result it never asked for was put in)."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        # turn -> (step, call number, the reply's record), in the order the world saw them.
        replies: dict[str, list[tuple[int, int, Record]]] = {}
        planned: dict[str, int] = {}  # message id -> how many tools it plans
        message_of: dict[str, str] = {}  # turn -> its message id
        texts: dict[str, Record] = {}  # turn -> the first reply in text (no call asked)
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            if r.kind == "op.message":
                n = r.data.get("planned")
                if r.type == "invoke" and isinstance(n, int) and r.data.get("message_id"):
                    planned[str(r.data["message_id"])] = n
                continue
            if r.kind == "turn.started":
                turn, message = attr(r, "turn"), r.data.get("message")
                if turn is not None and message is not None:
                    message_of.setdefault(str(turn), str(message))
                continue
            if r.data.get("effect") != "model":
                continue
            turn, asked = attr(r, "turn"), r.data.get("asked")
            if turn is not None and asked is None:
                texts.setdefault(str(turn), r)
            if turn is None or not isinstance(asked, str):
                continue
            step = _step(str(r.data.get("logical", "")), str(turn))
            k = _number(asked, str(turn))
            if step is not None and k is not None:
                replies.setdefault(str(turn), []).append((step, k, r))
        violations: list[Violation] = []
        for turn, seen in replies.items():
            first: dict[int, tuple[int, Record]] = {}  # call number -> (step, reply)
            for step, k, r in sorted(seen, key=lambda item: (item[0], item[2].index)):
                if k in first:
                    was, before = first[k]
                    if step != was:
                        violations.append(Violation(
                            f"{turn}: the model asked for {turn}.t{k} at step {step} "
                            f"({at(r.time)}) after asking for it at step {was} "
                            f"({at(before.time)}): the agent left that call's result out of "
                            f"what it told the model: {before.describe()}; {r.describe()}",
                            cite((before, r)),
                        ))
                    continue
                highest = max(first, default=0)
                if k > highest + 1:
                    missing = ", ".join(f"{turn}.t{n}" for n in range(highest + 1, k)
                                        if n not in first)
                    violations.append(Violation(
                        f"{turn}: the model asked for {turn}.t{k} at step {step} "
                        f"({at(r.time)}) and never for {missing}: the agent told it of a "
                        f"result it had not asked for: {r.describe()}",
                        cite((r,)),
                    ))
                first[k] = (step, r)
        planned_texts = 0  # turns answered in text whose message planned tools
        for turn, text in texts.items():
            n = planned.get(message_of.get(turn, ""), 0)
            planned_texts += n > 0
            asked = {k for _, k, _ in replies.get(turn, ())}
            never = [f"{turn}.t{k}" for k in range(1, n + 1) if k not in asked]
            if never:
                violations.append(Violation(
                    f"{turn}: the model answered in text at {at(text.time)} and never asked "
                    f"for {', '.join(never)} of the {n} tool(s) its message planned: it was "
                    f"not given the person's request: {text.describe()}",
                    cite((text,)),
                ))
        judged = sum(len(seen) for seen in replies.values())
        return verdict(
            self.name, violations, reached=judged + planned_texts > 0,
            note="" if judged + planned_texts else "no model reply asked for a tool call",
            stats={"turns": float(len(replies)), "replies": float(judged),
                   "planned_texts": float(planned_texts)},
        )
