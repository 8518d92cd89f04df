"""Rules of the reference implementation that need no simulator."""

from __future__ import annotations

import ast
from pathlib import Path

from contract.threadlog import LogEntry
from reference_impl.executor import unresolved_intents
from reference_impl.turn import transcript

ROOT = Path(__file__).resolve().parent.parent / "reference_impl"


def test_reference_impl_never_imports_the_harness() -> None:
    for path in sorted(ROOT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "harness" or n.startswith("harness.") for n in names), path


def _entry(seq: int, kind: str, **payload: object) -> LogEntry:
    return LogEntry("s1", seq, 1, "h1", kind, dict(payload))


def test_an_intent_is_resolved_only_by_a_later_result() -> None:
    placeholder = _entry(1, "tool_result", tool_call="t1", outcome="background")
    intent = _entry(2, "tool_intent", tool_call="t1", id="intent:t1#1")
    other = _entry(3, "tool_result", tool_call="t2", outcome="answered")
    assert unresolved_intents([placeholder, intent, other], "t1") == [intent]
    result = _entry(4, "tool_result", tool_call="t1", outcome="answered")
    assert unresolved_intents([placeholder, intent, other, result], "t1") == []
    assert unresolved_intents([intent], "t2") == []


def test_transcript_skips_the_real_result_of_a_background_call() -> None:
    entries = [
        _entry(1, "user", turn="x", text="hi", plan=["send_email"], message_id="m1"),
        _entry(2, "model", turn="x", response={"tool_call": {"id": "x.t1", "name": "n"}}),
        _entry(3, "tool_result", tool_call="x.t1", outcome="background",
               result={"placeholder": "later"}, background=False),
        _entry(4, "tool_intent", tool_call="x.t1"),
        _entry(5, "tool_result", tool_call="x.t1", outcome="answered", result={},
               background=True),
        _entry(6, "model", turn="x", response={"text": "ok"}),
        _entry(7, "turn_end", turn="x", reason="completed"),
    ]
    assert [(m["role"], m.get("outcome")) for m in transcript(entries)] == [
        ("user", None), ("assistant", None), ("tool", "background"), ("assistant", None),
    ]
