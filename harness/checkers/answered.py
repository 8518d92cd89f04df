"""turn-answered: a turn that says it completed gave the person the model's answer, and no
turn spends more model steps than its bound.

A turn is a loop of model steps: each reply asks for a tool call or answers in text, and the
text is what the person gets. So a turn that ends `completed` (`turn.ended`) has a text reply
of the model billed for it, unless it stopped at the runtime's bound on model steps per turn
(`CheckConfig.max_steps_per_turn`), having spent every step of it. A turn that reports
completed without either ended on its own account: it skipped the model (a loop whose bound
check is wrong, a resumed turn that counts its earlier steps wrong and thinks it is spent),
and the person waits for an answer that never comes, while every rule about what its steps
did holds, because there were none.

The bound is judged from above too: a turn never bills more distinct model steps than the
bound (an agent stuck in a loop keeps spending). A retry of one step is the same step: the
world names each reply by its logical id TURN:STEP (`effect.delivered` of `model`), and the
distinct ids of a turn are its steps.

Read from the world's records of the model provider, which the runtime cannot write, and the
runtime's `turn.ended`. The bound is judged only when the adapter states one
(`max_steps_per_turn`, which the built-in adapters take from `contract.ports.Config`); an
adapter that states none is judged only in runs where the world's provider billed a reply (its
agent may ask a model of its own). Without a bound, a turn that completed without text is
judged only when it billed no model step at all: it may have stopped at a bound of its own.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS: Final = frozenset({"effect.delivered", "turn.ended"})


@final
class TurnAnswered:
    name: str = "turn-answered"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["turn-answered"]
    description: str = (
        "A turn that completed gave the person the model's answer (a text reply billed for "
        "it) or spent its bound on model steps, and no turn bills more model steps than that "
        "bound."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        steps: dict[str, dict[str, Record]] = {}  # turn -> logical step -> its first reply
        texts: dict[str, Record] = {}  # turn -> its first reply in text
        ends: dict[str, Record] = {}  # turn -> its first end
        billed = False
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            turn = attr(r, "turn")
            if r.kind == "turn.ended":
                if turn is not None:
                    ends.setdefault(str(turn), r)
                continue
            if r.data.get("effect") != "model":
                continue
            billed = True
            if turn is None:
                continue
            steps.setdefault(str(turn), {}).setdefault(str(r.data.get("logical", "")), r)
            if r.data.get("asked") is None:
                texts.setdefault(str(turn), r)
        bound = config.max_steps_per_turn
        if not billed and bound is None:
            # The agent may ask a model of its own; one that states its step bound counts its
            # steps as the world's model bills them, so a run with none is judged.
            return Result(self.name, True, reached=False,
                          note="the world's model provider billed no reply")
        violations: list[Violation] = []
        if bound is not None:
            for turn, billed_steps in steps.items():
                if len(billed_steps) > bound:
                    replies = list(billed_steps.values())
                    violations.append(Violation(
                        f"{turn} billed {len(billed_steps)} model steps, more than its bound of "
                        f"{bound}: the turn went on spending past it; the last at "
                        f"{at(replies[-1].time)}: {replies[-1].describe()}",
                        cite((replies[0], replies[-1])),
                    ))
        completed = 0
        for turn, end in ends.items():
            if end.data.get("reason") != "completed":
                continue
            completed += 1
            spent = len(steps.get(turn, {}))
            if turn in texts or (bound is not None and spent >= bound):
                continue
            if bound is None and spent:
                # It may have stopped at a bound of its own, which the harness does not know.
                continue
            limit = "" if bound is None else f" and it spent {spent} of its {bound} steps"
            violations.append(Violation(
                f"{turn} ended completed at {at(end.time)} without the model's answer: the "
                f"model billed no text reply for it{limit}; the person got no answer: "
                f"{end.describe()}",
                cite((end, *steps.get(turn, {}).values())),
            ))
        return verdict(
            self.name, violations, reached=completed > 0 or bool(violations),
            note="" if completed or violations else "no turn completed",
            stats={"completed": float(completed), "turns_billed": float(len(steps))},
        )
