"""message-logged: the message a turn answered is in the session's thread log.

The thread log is the session's transcript: a resumed turn, a later turn and the person all
read it. A turn starts from a message (the person's, or a background result brought in as
one) and writes it to the log before its first model step. So a turn that ended must have
its message appended (`threadlog.appended` of an entry of kind `user` filed under that turn)
before it ended. A runtime that answers messages it never logs passes every rule about what
it did, and loses the conversation.

Judged only for runtimes that report their thread log (`threadlog.assigned` for the session):
a runtime without one has nothing to hold to this. An append whose outcome the worker never
learnt (the connection reset after PostgreSQL committed it) has no `threadlog.appended`; the
log read back at the end (`threadlog.committed` of a `user` entry filed under the turn) shows
it landed, and then the message was logged.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS: Final = frozenset({"threadlog.assigned", "threadlog.appended", "threadlog.committed",
                           "turn.started", "turn.ended"})


@final
class MessageLogged:
    name: str = "message-logged"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["message-logged"]
    description: str = (
        "A turn that ended had its message appended to the session's thread log before it "
        "ended (for runtimes that report a thread log)."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        logged: set[str] = set()  # sessions that report a thread log
        written: set[str] = set()  # turns whose message entry was appended
        started: set[str] = set()
        ended: set[str] = set()
        unlogged: list[tuple[str, Record]] = []  # (turn, its end) with no append seen
        committed: set[str] = set()  # turns with a user entry in the log at the end
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            session, turn = attr(r, "session"), attr(r, "turn")
            if r.kind == "threadlog.assigned":
                if session is not None:
                    logged.add(str(session))
            elif r.kind == "threadlog.appended":
                if r.data.get("entry_kind") == "user" and turn is not None:
                    written.add(str(turn))
            elif r.kind == "threadlog.committed":
                if r.data.get("kind") == "user" and turn is not None:
                    committed.add(str(turn))
            elif r.kind == "turn.started":
                if turn is not None:
                    started.add(str(turn))
            elif (turn is not None and str(turn) in started and str(turn) not in ended
                  and str(session) in logged):
                ended.add(str(turn))
                if str(turn) not in written:
                    unlogged.append((str(turn), r))
        violations = [
            Violation(f"{turn} ended at {at(r.time)} ({r.data.get('reason')}) and its message "
                      f"was never appended to the thread log of {attr(r, 'session')}: "
                      f"{r.describe()}", cite((r,)))
            for turn, r in unlogged if turn not in committed]
        return verdict(
            self.name, violations, reached=bool(ended),
            note="" if ended else "no turn of a session with a thread log ended",
            stats={"turns": float(len(ended))},
        )
