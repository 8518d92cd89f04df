"""Write docs/events.md from the record vocabulary: `python -m contract.docs > docs/events.md`.

The page is generated, never edited by hand, so that it cannot drift from `contract.records`,
which the harness enforces when a record is appended; tests/test_contract.py fails when the
committed page differs from what this module writes.
"""

from __future__ import annotations

import sys

from contract.records import (
    FIELDS,
    JUDGED_ON,
    KINDS,
    RECORD_FIELDS,
    SOURCES,
    Kind,
)

COMMAND = "python -m contract.docs > docs/events.md"
_BAR = " \\| "  # a value separator inside a Markdown table cell

_TITLES = {
    "runtime": "The runtime's observations",
    "engine": "The engine",
    "world": "The world",
    "runner": "The runner: the schedule's steps",
    "final": "The final state",
}


def _code(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names) or "-"


def _values(kind: Kind) -> str:
    parts = [f"`{name}`: " + _BAR.join(f"`{v}`" for v in values) for name, values in kind.values]
    if parts and kind.open_values:
        parts[-1] += " (open: others allowed)"
    return "; ".join(parts) or "-"


def _optional(kind: Kind) -> str:
    extra = [name for name in kind.optional if name not in kind.expected]
    return _code(extra)


def render() -> str:
    """The whole of docs/events.md."""
    out: list[str] = [
        "# Record vocabulary",
        "",
        f"<!-- Generated from contract/records.py by `{COMMAND}`; do not edit by hand. -->",
        "",
        "Everything the checkers judge is a record in one history. This page lists every kind "
        "of record, who writes it, the fields it must carry and may carry, the values some "
        "fields take, and, at the end, which records each checker is judged on. It is "
        "generated from `contract/records.py`, the one copy the harness enforces.",
        "",
        "## How a record looks",
        "",
        "A record has a `kind`, a `type` (`event`, or `invoke` / `ok` / `fail` / `info` for an "
        "operation, Jepsen's model: `info` means outcome unknown), a time in scenario seconds, "
        f"the named fields {_code(list(RECORD_FIELDS))}, and a `data` dict for everything "
        "else. A field of the tables below may sit in its named slot or in `data` under the "
        "same name: the checkers read both.",
        "",
        "```python",
        'history.add("tool.result", session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",',
        '            data={"event_id": "s1.turn1.t1.result", "outcome": "answered"})',
        "```",
        "",
        "`History.add` checks each record as it is appended: a kind that is not on this page "
        "(in one of its namespaces) or a record without a required field raises `RecordError` "
        "at once, naming the nearest kind or the missing field. A run whose adapter appends "
        "such a record ends *unknown* with that message, and the conformance suite "
        "(`harness.check_adapter`) names the adapter call that appended it. An adapter's own "
        "diagnostics go under a namespace of its own (`myengine.started`): they are kept in the "
        "history and the report, and no checker reads them.",
        "",
        "*Required* fields are checked on every append. *Expected* fields are ones the "
        "conformance suite also asks of an adapter (the checkers do without them), and it "
        "checks each value of a closed value set (a misspelt `answerd` is named with the "
        "value it is closest to). The "
        "runtime's observations carry an `event_id` too: they are emitted from inside "
        "journaled steps, so a retried step repeats them, and consumers skip a repeated "
        "(`kind`, `event_id`).",
        "",
    ]
    for source, title in _TITLES.items():
        out += [f"## {title}", "", f"Written by {SOURCES[source]}.", "",
                "| kind | meaning | required | expected | optional | values |",
                "|---|---|---|---|---|---|"]
        for kind in KINDS.values():
            if kind.source != source:
                continue
            types = "" if kind.types == ("event",) else f" (type {' / '.join(kind.types)})"
            out.append(f"| `{kind.name}` | {kind.meaning}{types} | {_code(kind.required)} | "
                       f"{_code(kind.expected)} | {_optional(kind)} | {_values(kind)} |")
        out.append("")
    out += ["## Fields", "", "| field | meaning |", "|---|---|"]
    for name in sorted(FIELDS):
        slot = " (named slot)" if name in RECORD_FIELDS else ""
        out.append(f"| `{name}`{slot} | {FIELDS[name]} |")
    out += [
        "",
        "## What each checker is judged on",
        "",
        "Each checker reads only these records and, of them, only these fields (the checker "
        "class's `judged_on`); a record it needs that your adapter never writes makes it pass "
        "vacuously, which the report shows as *not reached*. Every checker also reads "
        "`clock.latency` (its tolerance) and most read `run.end`.",
        "",
    ]
    for name, readings in JUDGED_ON.items():
        out += [f"### `{name}`", ""]
        for reading in readings:
            if reading.kind in ("clock.latency", "run.end"):
                continue
            fields = f": {_code(reading.fields)}" if reading.fields else ""
            out.append(f"- `{reading.kind}`{fields}")
        out.append("")
    return "\n".join(out)


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
