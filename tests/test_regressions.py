"""Minimal schedules that once broke the reference implementation, kept as they were shrunk.

Each one failed an invariant on the unmodified reference and is pinned here so the fix stays.
"""

from __future__ import annotations

import tomllib

from harness.adapters import load_adapter
from harness.runner import RunOptions, run_schedule
from harness.schedules.scenario_file import parse_scenario

# Found by `durable-chaos run --scenarios none --schedules 100 --seed 1`: s2's call is sent to
# the background in the same instant as a new message ends its waiting turn, while the owner
# is paused. The turn wrote "ended_by_message"; PendingToolCall, which had moved the call to
# the background and never heard of the ending, still expired it on day 8: two final results
# for one tool call in the thread log.
BACKGROUND_AND_NEW_MESSAGE_AT_ONCE = """
name = "background-and-new-message-at-once"
seed = 0
hosts = 2

[[step]]
at = "0s"
do = "message"
session = "s1"
text = "m2"
tools = ["send_email"]
user = "alice"

[[step]]
at = "0s"
do = "arm"
point = "effect.charge.after_charge"
action = "crash"
duration = "30s"
times = 1

[[step]]
at = "0s"
do = "arm"
point = "effect.email.after_send"
action = "pause"
duration = "10m"
times = 1

[[step]]
at = "0s"
do = "message"
session = "s2"
text = "w5"
tools = ["send_email"]
user = "alice"

[[step]]
at = "2s"
do = "gc-pause"
host = "owner"
duration = "5m"

[[step]]
at = "3s"
do = "answer"
session = "s1"
decision = "approve"
user = "alice"

[[step]]
at = "64s"
do = "message"
session = "s2"
text = "m1"
tools = []
user = "alice"

[[step]]
at = "64s"
do = "background"
session = "s2"
"""


def test_an_expiry_after_the_turn_ended_by_a_new_message_writes_no_second_result() -> None:
    schedule = parse_scenario(tomllib.loads(BACKGROUND_AND_NEW_MESSAGE_AT_ONCE), "<test>",
                              "background-and-new-message-at-once")
    outcome = run_schedule(load_adapter("reference"), schedule, RunOptions(report_dir=None))
    verdicts = {r.checker: r.valid for r in outcome.results}
    assert outcome.error is None
    assert verdicts["turn-outcome"] is True, [
        v.message for r in outcome.results for v in r.violations]
    assert all(v is True or v is None for v in verdicts.values()), verdicts
    # The window was really reached: s2's call went to the background and its turn ended by
    # the new message.
    reached = {r.checker: r.reached for r in outcome.results}
    assert reached["turn-outcome"]
