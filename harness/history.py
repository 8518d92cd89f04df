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


# Fast construction of Records in History.add (see there): one setter per slot.
_new = object.__new__
_FIELD_NAMES: Final = frozenset(_OPTIONAL) - {"wall"}


def _setter(name: str) -> Callable[[Record, Any], None]:
    setter: Callable[[Record, Any], None] = getattr(Record, name).__set__
    return setter


_set_index = _setter("index")
_set_time = _setter("time")
_set_type = _setter("type")
_set_kind = _setter("kind")
_set_process = _setter("process")
_set_host = _setter("host")
_set_deployment = _setter("deployment")
_set_invocation = _setter("invocation")
_set_session = _setter("session")
_set_turn = _setter("turn")
_set_tool_call = _setter("tool_call")
_set_epoch = _setter("epoch")
_set_key = _setter("key")
_set_wall = _setter("wall")
_set_data = _setter("data")
# History.add sets exactly these slots: a field added to Record must be added there too.
_BUILT: Final = ("index", "time", "type", "kind", *_OPTIONAL, "data")
if tuple(f.name for f in fields(Record)) != _BUILT:  # pragma: no cover - a guard for editors
    raise ImportError("harness.history: Record's fields changed; update History.add")


_REQUIRED: Final = dict(_vocabulary.REQUIRED)  # a plain dict: the fastest lookup


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
        **fields: Any,
    ) -> Record:
        # The hottest call of a simulated run: the same Record as
        # `Record(index, time, type, kind, wall=..., data=data or {}, **fields)`, built through
        # the slot descriptors (about twice as fast as the frozen dataclass's __init__).
        if fields and not _FIELD_NAMES.issuperset(fields):
            unknown = sorted(set(fields) - _FIELD_NAMES)
            raise TypeError(f"History.add() got unexpected record fields {unknown}")
        check_record(kind, fields, data)
        records = self._records
        record = _new(Record)
        _set_type(record, type)
        _set_kind(record, kind)
        get = fields.get
        _set_process(record, get("process"))
        _set_host(record, get("host"))
        _set_deployment(record, get("deployment"))
        _set_invocation(record, get("invocation"))
        _set_session(record, get("session"))
        _set_turn(record, get("turn"))
        _set_tool_call(record, get("tool_call"))
        _set_epoch(record, get("epoch"))
        _set_key(record, get("key"))
        _set_data(record, data or {})
        # The real path records from the world server's threads too: clock reads, index and
        # append are one step, so indexes stay unique and times never go backwards (a clock
        # read before the lock let a slower thread append an earlier time after a later one).
        with self._lock:
            _set_time(record, self._clock() if time is None else time)
            _set_wall(record, self._wall() if self._wall is not None else None)
            _set_index(record, len(records))
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
