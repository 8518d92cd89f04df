"""What an unknown record kind's error says: the kinds of its namespace, the closest verb
among them only when one is close, and a misspelt namespace caught as a typo.

An adapter's records are checked where they are appended (`History.add`); the message is
the adapter author's only guide to the vocabulary, so it must point at the kind they meant,
not at the kind whose name shares the most letters ('turn.begun' is not 'turn.ended').
"""

from __future__ import annotations

import pytest

from contract.records import KINDS, unknown_kind
from harness.errors import RecordError
from harness.history import History

TURN_KINDS = ", ".join(k.partition(".")[2] for k in KINDS if k.startswith("turn."))


@pytest.mark.parametrize(("kind", "says"), [
    # No verb of the namespace is close: list them, suggest none.
    ("turn.begun", f"unknown record kind 'turn.begun': turn.* kinds: {TURN_KINDS}. "),
    # A close verb: suggested first, then the namespace's kinds.
    ("turn.strated", "unknown record kind 'turn.strated': did you mean 'turn.started'? "
                     f"turn.* kinds: {TURN_KINDS}. "),
    ("turn.end", "unknown record kind 'turn.end': did you mean 'turn.ended'? turn.* kinds:"),
    ("op.mesage", "unknown record kind 'op.mesage': did you mean 'op.message'? op.* kinds: "
                  "message, answer, background, cancel. "),
    # A namespace one typo away from the vocabulary's, with one of its verbs.
    ("trun.started", "unknown record kind 'trun.started': did you mean 'turn.started'? 'trun' "
                     "is a typo of the vocabulary's namespace 'turn', not a namespace of your "
                     "own. "),
    ("tools.result", "unknown record kind 'tools.result': did you mean 'tool.result'? 'tools' "
                     "is a typo of the vocabulary's "
                     "namespace 'tool'"),
    # No namespace at all: the nearest whole kind.
    ("sendd", "unknown record kind 'sendd': did you mean 'send'? "),
])
def test_an_unknown_kind_points_at_the_kind_meant(kind: str, says: str) -> None:
    problem = unknown_kind(kind)
    assert problem is not None and problem.startswith(says), problem
    assert problem.endswith("an adapter's own records go under a namespace of its own, e.g. "
                            "'myengine.started'")
    history = History()
    with pytest.raises(RecordError) as raised:
        history.add(kind, session="s1")
    assert str(raised.value) == problem
    assert len(history) == 0


@pytest.mark.parametrize("kind", ["myengine.started", "restate.started", "temporal.failed",
                                  "dbos.recovered", "network.toxic", "tools.debug",
                                  "turn.started"])
def test_an_adapter_s_own_namespace_and_the_vocabulary_pass(kind: str) -> None:
    # 'tools.debug' is near the namespace 'tool' but names no tool.* verb: its own.
    assert unknown_kind(kind) is None
