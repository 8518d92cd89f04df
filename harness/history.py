"""One append-only history of operations and events.

Jepsen's model: a client operation is an `invoke` followed by `ok`, `fail` or `info` (outcome
unknown); faults, simulator events and world deliveries go into the same history with type
`event`. Every record carries virtual time and, where known, host, deployment, invocation,
session, turn, tool call, epoch and effect key. Saved as JSONL with sorted keys and no wall
time on the simulator, so the same seed gives the same file byte for byte.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final, Literal

from contract import records as _vocabulary
from harness.errors import RecordError
from harness.scaling import fmt_real

RecordType = Literal["invoke", "ok", "fail", "info", "event"]
_EPOCH_WALL: Final = 1e8  # real seconds: more than three years of one run
TYPES: Final = ("invoke", "ok", "fail", "info", "event")

_OPTIONAL: Final = (
    "process",
    "host",
    "deployment",
    "invocation",
    "session",
    "turn",
    "tool_call",
    "epoch",
    "key",
    "wall",
)


@dataclass(frozen=True, slots=True)
class Record:
    index: int
    time: float
    type: RecordType
    kind: str
    process: str | None = None
    host: str | None = None
    deployment: str | None = None
    invocation: str | None = None
    session: str | None = None
    turn: str | None = None
    tool_call: str | None = None
    epoch: int | None = None
    key: str | None = None
    wall: float | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "i": self.index,
            "t": round(self.time, 6),
            "type": self.type,
            "kind": self.kind,
        }
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.data:
            out["data"] = self.data
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Record:
        kwargs = {name: obj.get(name) for name in _OPTIONAL}
        return cls(
            index=int(obj["i"]),
            time=float(obj["t"]),
            type=obj["type"],
            kind=str(obj["kind"]),
            data=dict(obj.get("data") or {}),
            **kwargs,
        )

    def describe(self) -> str:
        """One line a person can read in a witness: `#12 t=300.0s invocation.suspended ...`;
        on a real engine with the real seconds since the run began: `#12 t=5.0m (real 3.21s)`."""
        parts = [f"#{self.index}", f"t={_fmt_time(self.time)}", self.kind]
        # A real engine ran: its real second beside scenario time. (Histories written before
        # `wall` counted from the run's start hold epoch seconds: not a duration, not shown.)
        if self.wall is not None and self.wall < _EPOCH_WALL:
            parts.insert(2, f"({fmt_real(self.wall)})")
        if self.type != "event":
            parts.append(f"[{self.type}]")
        for name in ("session", "turn", "tool_call", "invocation", "deployment", "host"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        if self.epoch is not None:
            parts.append(f"epoch={self.epoch}")
        if self.key is not None:
            parts.append(f"key={self.key}")
        return " ".join(parts)


def _fmt_time(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.2f}d"


fmt_duration = _fmt_time


# Fast construction of Records in History.add. A frozen dataclass's __init__ sets each of
# its 15 fields through object.__setattr__ (about 5 us a record, measured, the most of a
# record's cost), and History.add makes about a thousand records a generated run. `_Built`
# has Record's exact slots and a plain __init__; its instance then becomes a Record (same
# layout, so CPython allows assigning __class__): the same frozen value, about twice as fast
# as setting the slots one by one through their descriptors, and four times as fast as
# Record(...).
# History.add sets exactly these slots: a field added to Record must be added there too.
_BUILT: Final = ("index", "time", "type", "kind", *_OPTIONAL, "data")
if tuple(f.name for f in fields(Record)) != _BUILT:  # pragma: no cover - a guard for editors
    raise ImportError("harness.history: Record's fields changed; update History.add")


class _Built:
    __slots__ = _BUILT
    # Assigned one by one in History.add_simulated (mypy reads the slots as these).
    index: int
    time: float
    type: RecordType
    kind: str
    process: str | None
    host: str | None
    deployment: str | None
    invocation: str | None
    session: str | None
    turn: str | None
    tool_call: str | None
    epoch: int | None
    key: str | None
    wall: float | None
    data: dict[str, Any]

    def __init__(self, index: int, time: float, type: RecordType, kind: str,
                 process: str | None, host: str | None, deployment: str | None,
                 invocation: str | None, session: str | None, turn: str | None,
                 tool_call: str | None, epoch: int | None, key: str | None,
                 wall: float | None, data: dict[str, Any]) -> None:
        self.index = index
        self.time = time
        self.type = type
        self.kind = kind
        self.process = process
        self.host = host
        self.deployment = deployment
        self.invocation = invocation
        self.session = session
        self.turn = turn
        self.tool_call = tool_call
        self.epoch = epoch
        self.key = key
        self.wall = wall
        self.data = data


_new: Final = object.__new__
_REQUIRED: Final = dict(_vocabulary.REQUIRED)  # a plain dict: the fastest lookup
# History.add's named fields, in order; a required name that is not one of them is looked up
# in `data`. Per kind: (position in that order or -1, name), so that add checks without
# building a dict of its fields.
_NAMED: Final = ("process", "host", "deployment", "invocation", "session", "turn",
                 "tool_call", "epoch", "key")
_REQUIRED_AT: Final = {
    kind: tuple((_NAMED.index(n) if n in _NAMED else -1, n) for n in names)
    for kind, names in _REQUIRED.items()
}


def check_record(kind: str, fields: dict[str, Any], data: dict[str, Any] | None) -> None:
    """Raise `RecordError` if a `kind` record with these fields may not enter a history.

    The vocabulary is `contract.records`: a kind outside it (in its namespaces) or a required
    field missing fails here, where an adapter appends the record, instead of passing every
    checker vacuously. One dict lookup for a known kind, then one per required field.
    """
    required = _REQUIRED.get(kind)
    if required is None:
        problem = _vocabulary.unknown_kind(kind)
        if problem is not None:
            raise RecordError(problem)
        return
    for name in required:
        if fields.get(name) is None and (data is None or data.get(name) is None):
            raise RecordError(_vocabulary.missing_field(kind, fields, data) or name)


class History:
    """The append-only record of one run."""

    __slots__ = ("_clock", "_listeners", "_lock", "_records", "_wall")

    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        *,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self._records: list[Record] = []
        self._clock = clock or (lambda: 0.0)
        self._wall = wall
        self._listeners: list[Callable[[Record], None]] = []
        # The real path records from the world server's threads too; indexes must stay unique.
        self._lock = threading.Lock()

    def bind_clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock

    def add(
        self,
        kind: str,
        type: RecordType = "event",
        *,
        time: float | None = None,
        data: dict[str, Any] | None = None,
        process: str | None = None,
        host: str | None = None,
        deployment: str | None = None,
        invocation: str | None = None,
        session: str | None = None,
        turn: str | None = None,
        tool_call: str | None = None,
        epoch: int | None = None,
        key: str | None = None,
    ) -> Record:
        # The hottest call of a simulated run: the same Record as
        # `Record(index, time, type, kind, wall=..., data=data or {}, **fields)`, built as a
        # `_Built` (see there). The fields are named parameters, not `**fields`: Python binds
        # them without building a dict, and an unknown one is a TypeError naming it.
        # The vocabulary check (see check_record) is one dict lookup, then one per required
        # field read from a tuple.
        required = _REQUIRED_AT.get(kind)
        if required != ():
            values = (process, host, deployment, invocation, session, turn, tool_call, epoch,
                      key)
            if required is None:  # not in the vocabulary: fine only in an open namespace
                check_record(kind, dict(zip(_NAMED, values, strict=True)), data)
            else:
                for at, name in required:
                    if (values[at] if at >= 0 else (data or {}).get(name)) is None:
                        check_record(kind, dict(zip(_NAMED, values, strict=True)), data)
        records = self._records
        # The real path records from the world server's threads too: clock reads, index and
        # append are one step, so indexes stay unique and times never go backwards (a clock
        # read before the lock let a slower thread append an earlier time after a later one).
        with self._lock:
            built = _Built(
                len(records), self._clock() if time is None else time, type, kind, process,
                host, deployment, invocation, session, turn, tool_call, epoch, key,
                self._wall() if self._wall is not None else None, data or {})
            built.__class__ = Record  # type: ignore[assignment]
            record: Record = built  # type: ignore[assignment]
            records.append(record)
        for listener in self._listeners:
            listener(record)
        return record

    def add_simulated(
        self,
        kind: str,
        type: RecordType = "event",
        *,
        data: dict[str, Any] | None = None,
        host: str | None = None,
        deployment: str | None = None,
        invocation: str | None = None,
    ) -> Record:
        """`add` for the simulator's own records: attempts, journal entries, timers, faults.

        The same Record, without the lock and the vocabulary check: the simulator runs on
        one thread, and its code fixes each kind it records and the fields it gives (tests
        pass every record of simulated runs through `check_record`). Those two were a third
        of `add`'s cost, and these records most of a simulated run's (measured: callgrind).
        """
        records = self._records
        # `_Built`'s slots set here rather than through its __init__: no call of a function
        # of 15 parameters (a tenth of this method's instructions, callgrind).
        built = _new(_Built)
        built.index = len(records)
        built.time = self._clock()
        built.type = type
        built.kind = kind
        built.process = None
        built.host = host
        built.deployment = deployment
        built.invocation = invocation
        built.session = built.turn = built.tool_call = built.epoch = built.key = None
        built.wall = self._wall() if self._wall is not None else None
        built.data = data or {}
        built.__class__ = Record  # type: ignore[assignment]
        record: Record = built  # type: ignore[assignment]
        records.append(record)
        for listener in self._listeners:
            listener(record)
        return record

    def subscribe(self, listener: Callable[[Record], None]) -> None:
        self._listeners.append(listener)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __getitem__(self, index: int) -> Record:
        return self._records[index]

    @property
    def records(self) -> list[Record]:
        return self._records

    def of_kind(self, *kinds: str) -> list[Record]:
        wanted = set(kinds)
        return [r for r in self._records if r.kind in wanted]

    def to_jsonl(self) -> str:
        return "".join(
            json.dumps(r.to_json(), sort_keys=True, separators=(",", ":"), default=str) + "\n"
            for r in self._records
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_jsonl(), encoding="utf-8")
        return path

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> History:
        history = cls()
        history._records.extend(records)
        return history

    @classmethod
    def load(cls, path: str | Path) -> History:
        records = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    records.append(Record.from_json(json.loads(line)))
        return cls.from_records(records)
