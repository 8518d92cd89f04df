"""no-duplicate-effects: the world saw each effect at most once.

Judged on the world's own records, not on what the runtime says it did: `effect.delivered` is
written by the outbox, the ledger or the model provider on the first delivery for a key. Two
deliveries under one key mean the world's idempotency failed; two deliveries of one logical
effect (one tool call, one model step) under different keys, or without a key, mean the
runtime re-executed it without its key, which is the failure idempotency keys exist to
prevent. A delivery without a key is never deduplicated against another keyless one.
"""

from __future__ import annotations

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import Redelivery, model_of
from harness.history import History


@final
class NoDuplicateEffects:
    name: str = "no-duplicate-effects"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["no-duplicate-effects"]
    description: str = (
        "Every external effect (email, charge, model call) is delivered to the world at most "
        "once: once per idempotency key and once per logical effect."
    )

    # The record kinds it reads, from the run's model (harness.checkers.model: the effects,
    # built once over the whole history): run_checkers gives it only these
    # (harness.checkers.base.dispatch), so the model of its view alone says the same.
    reads: frozenset[str] = frozenset(
        {"effect.attempted", "effect.deduplicated", "effect.delivered"})

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        effects = model_of(history).effects
        violations = [_violation(again) for again in effects.redeliveries]
        delivered = effects.delivered
        return verdict(
            self.name, violations, reached=delivered > 0,
            note="" if delivered else "no effect was delivered",
            stats={"attempted": effects.attempted, "delivered": delivered,
                   "deduplicated": effects.deduplicated},
        )


def _violation(again: Redelivery) -> Violation:
    first, r = again.first, again.again
    effect = str(r.data.get("effect", "effect"))
    key = attr(r, "key") or None
    if again.by_key:
        sentence = f"{effect} with idempotency key {key} was delivered twice"
    else:
        sentence = (f"{effect} {r.data.get('logical')} was delivered twice "
                    f"{_keys(attr(first, 'key'), key)}")
    return Violation(f"{sentence}: {first.describe()}, then {r.describe()}", cite((first, r)))


def _keys(first: str | None, second: str | None) -> str:
    """How the two deliveries were keyed, in words: a missing key is not a key called None."""
    if first is None and second is None:
        return "without an idempotency key"
    if first is None or second is None:
        return f"once under idempotency key {first or second} and once without a key"
    return f"under different idempotency keys ({first} and {second})"
