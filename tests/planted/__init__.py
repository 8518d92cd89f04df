"""Planted bugs: variants of the reference implementation that the harness must catch.

One module per bug, each exposing `ADAPTER` (a `SimAdapter`, usable as
`--adapter tests.planted.<module>:ADAPTER`) and `INVARIANT` (the checker that must catch it).
Each is the reference app with the smallest change that breaks its invariant; see the
module's docstring for what changed. They live with the tests, never in a shipped package.
"""

from __future__ import annotations

import importlib
from types import ModuleType

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
    "expiry_after_answer",
    "background_never_expires",
    "drained_at_face_value",
    "keyless_model_call",
    "rerun_ignores_end",
    "answer_dropped",
    "result_filed_under_next_turn",
    "hold_on_own_intent",
    "run_numbered_from_its_card",
    "email_never_sent",
    "permitted_call_rejected",
    "message_not_logged",
    "approval_not_asked",
    "result_left_out_of_context",
    "busy_refuses_message",
    "background_only_in_call",
    "cancel_ignored_while_running",
    "approval_after_cancel",
    "turn_stops_short",
    "card_left_open",
    "intent_records_another_key",
    "unapproved_call_checked_for_nobody",
    "approval_checked_for_the_requester",
    "background_for_any_session",
    "placeholder_on_every_result",
    "waited_in_minutes",
    "rejection_names_the_writer",
    "charge_intent_without_key",
    "queued_results_only",
    "closed_results_never_written",
    "first_run_told_as_rerun",
    "turn_acts_for_the_first_writer",
    "end_wait_after_answer",
    "approval_taken_as_the_deed",
    "background_keeps_its_card",
    "idle_holder_waited_for",
    "held_call_outlives_a_cancel",
    "rejection_report_reads_the_wrong_field",
    "malformed_requests_refused_as_failures",
    "late_result_kept_from_the_agent",
    "args_lost_in_the_hand_off",
)


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def all_bugs() -> list[ModuleType]:
    return [load(name) for name in MODULES]
