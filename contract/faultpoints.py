"""Named fault points a runtime may reach, and the one hook that decides what happens there.

A fault point marks a narrow window (between taking the control row and committing, after an
effect and before its journal entry) where a chaos schedule may want to stop the world on
purpose. The reference implementation only *names* the points; whoever runs it may install a
hook that decides what happens there. Without a hook, reaching a point does nothing.

The hook may return an awaitable: on the simulator that is how a host pauses or crashes at
exactly this point (the awaitable is handed to the simulator's scheduler). In a real worker the
hook can simply stop its own process (SIGSTOP) and return None.

The reference implementation never imports the harness; the harness installs the hook. There
is one hook for the process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

# Every fault point the reference implementation reaches, with what it separates.
POINTS: Final[dict[str, str]] = {
    "threadlog.append.before_lock": "an append decided, before it takes the control row",
    "threadlog.append.locked": "control row taken FOR UPDATE, before COMMIT",
    "effect.email.after_send": "the email was sent, before its journal entry",
    "effect.charge.after_charge": "the charge was made, before its journal entry",
    "effect.model.after_call": "the model call returned, before its journal entry",
    "tool.after_intent": "a tool intent was recorded, before the tool runs",
    # The window in which a person answers the moment the card is up: an app that clears or
    # registers its wait only after it hears back from the card service drops that answer.
    "card.after_show": "an approval card is shown, before the code that showed it hears back",
    # The window in which the result of an answer's re-run overtakes the turn's own report
    # that it waits on the person.
    "turn.after_handoff": "a turn's wait was handed off, before it tells its controller it waits",
}

Hook = Callable[[str], "Awaitable[Any] | None"]

_hook: Hook | None = None


def install(hook: Hook | None) -> Hook | None:
    """Install `hook` (or remove it with None); returns the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


async def reach(name: str) -> None:
    """Mark that the running code reached fault point `name`."""
    if name not in POINTS:
        raise ValueError(f"unknown fault point {name!r}; known: {sorted(POINTS)}")
    hook = _hook
    if hook is None:
        return
    waiting = hook(name)
    if waiting is not None:
        await waiting
