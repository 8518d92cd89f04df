"""Reading `scenarios/*.toml`: every mistake is one line naming the file, field and fix."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Final

from contract.invariants import INVARIANTS
from harness.errors import ScenarioError
from harness.faults import FAULTS
from harness.schedules.model import (
    ACTIONS,
    LEGACY_ACTIONS,
    Schedule,
    Step,
    format_duration,
    parse_duration,
)
from harness.world import DEFAULT_TOOLS

_TOP = {"name", "description", "seed", "hosts", "horizon", "expect", "step"}
_OUTCOMES = ("pass", "fail")
FAILS = "fails"  # the value of a name listed in [expect] fails (see Schedule.expect)
MAX_NAME = 100


def load_scenario(path: str | Path) -> Schedule:
    path = Path(path)
    where = str(path)
    _regular_file(path, where)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(where, "-", f"cannot read the file ({exc.strerror})",
                            "check the path") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(where, "-", f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                            f"offset {exc.start})", "a scenario is a TOML text file; save it "
                            "as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(where, "-", f"not valid TOML ({exc})",
                            "see scenarios/README.md for the format") from None
    except RecursionError:
        raise ScenarioError(where, "-", "nested too deeply for the TOML parser",
                            "a scenario is a flat table with [[step]] blocks") from None
    return parse_scenario(data, where, path.stem)


# Larger than any scenario a person writes (the library's largest is a few kilobytes); a
# file past it is not a scenario, and reading it whole would cost its size in memory.
MAX_BYTES = 10 * 1024 * 1024


def _regular_file(path: Path, where: str) -> None:
    """A ScenarioError unless `path` is a regular file of a sane size: a FIFO would block
    the read forever, a directory named x.toml or a device is not a scenario."""
    import os
    import stat

    try:
        info = os.stat(path)
    except OSError as exc:
        raise ScenarioError(where, "-", f"cannot read the file ({exc.strerror})",
                            "check the path") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else
                "a FIFO" if stat.S_ISFIFO(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "a device")
        raise ScenarioError(where, "-", f"is {kind}, not a regular file",
                            "give a scenario file (*.toml)")
    if info.st_size > MAX_BYTES:
        raise ScenarioError(where, "-", f"{info.st_size} bytes, more than {MAX_BYTES}",
                            "a scenario file is a few kilobytes")


def parse_scenario(data: dict[str, Any], where: str, default_name: str) -> Schedule:
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise ScenarioError(where, unknown[0], "unknown field",
                            f"use one of {sorted(_TOP)}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ScenarioError(where, "name", f"expected a non-empty string, got {name!r}",
                            'write name = "my-scenario"')
    if len(name) > MAX_NAME:
        raise ScenarioError(where, "name", f"{len(name)} characters long, more than {MAX_NAME}",
                            "give a shorter name (it names the run's directory)")
    if not name.isprintable():
        raise ScenarioError(where, "name", f"contains control characters ({name!r})",
                            "use letters, digits, spaces and punctuation")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ScenarioError(where, "seed", f"expected an integer, got {seed!r}",
                            "write seed = 1")
    hosts = data.get("hosts", 2)
    if not isinstance(hosts, int) or isinstance(hosts, bool) or not 1 <= hosts <= 16:
        raise ScenarioError(where, "hosts", f"expected an integer from 1 to 16, got {hosts!r}",
                            "write hosts = 2")
    horizon = None
    if "horizon" in data:
        horizon = _duration(data["horizon"], where, "horizon")
    expect = _expect(data.get("expect", {}), where)
    raw_steps = data.get("step", [])
    if not isinstance(raw_steps, list):
        raise ScenarioError(where, "step", f"expected [[step]] tables, got {raw_steps!r}",
                            'write each step as a [[step]] block with at = "0s" and do = ...')
    if not raw_steps:
        raise ScenarioError(where, "step", "a scenario needs at least one [[step]]",
                            'add [[step]] with at = "0s" and do = "message"')
    steps = tuple(_step(raw, where, i) for i, raw in enumerate(raw_steps))
    _hosts_exist(steps, hosts, where)
    if horizon is not None:
        # The runner applies every step, then runs to the horizon: a step after it would run
        # past the end the file sets, and a checker's bound (liveness) would not cover it.
        late = max(range(len(steps)), key=lambda i: steps[i].at)
        if steps[late].at > horizon:
            raise ScenarioError(where, "horizon", f"{format_duration(horizon)!r} ends the run "
                                f"before step[{late}] at {format_duration(steps[late].at)!r}",
                                "set the horizon after the last step, or leave it out")
    return Schedule(
        name=name,
        steps=tuple(sorted(steps, key=lambda s: s.at)),
        seed=seed,
        description=str(data.get("description", "")),
        hosts=hosts,
        horizon=horizon,
        expect=expect,
        source="scenario",
        path=where,
    )


def _hosts_exist(steps: tuple[Step, ...], hosts: int, where: str) -> None:
    """Every `host` a step names can exist: 'owner', 'any', 'latest/N' or 'depK.hN' with N
    at most `hosts` and K at most the deployments there are (the first, one per deploy
    step). Found at load time, naming the field, not as an unknown run minutes later."""
    import re

    deployments = 1 + sum(1 for step in steps if step.action == "deploy")
    for index, step in enumerate(steps):
        host = step.get("host")
        if not isinstance(host, str) or host in ("owner", "any"):
            continue
        latest = re.fullmatch(r"latest/(\d+)", host)
        named = re.fullmatch(r"dep(\d+)\.h(\d+)", host)
        if latest and 1 <= int(latest[1]) <= hosts:
            continue
        if named and 1 <= int(named[1]) <= deployments and 1 <= int(named[2]) <= hosts:
            continue
        raise ScenarioError(where, f"step[{index}].host", f"no host {host!r} here "
                            f"(hosts = {hosts}, {deployments} deployment(s))",
                            f"use 'owner', 'any', 'latest/N' or 'depK.hN' (N from 1 to "
                            f"{hosts})")


def _expect(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    """`[expect]`: `fails = [NAMES]`, and notes `all = "pass"`, `NAME = "pass"|"fail"`.

    `fails` pins a known bug: the run passes only when each named invariant is violated and
    every other one holds, and fails saying so when one holds (harness.outcome). The notes
    only say what the run should show (the report prints them): a demonstration such as
    examples/temporal_approval writes `pinning-bound = "fail"` and its run is red when it
    shows. Normalized to (name, value) pairs, value "fails" for the names in `fails`.
    """
    if not isinstance(raw, dict):
        raise ScenarioError(where, "expect", "expected a table",
                            'write [expect] then all = "pass"')
    invariants = list(INVARIANTS)
    out: dict[str, str] = {}
    if "fails" in raw:
        fails = raw["fails"]
        if not isinstance(fails, list) or not fails or not all(isinstance(f, str)
                                                               for f in fails):
            raise ScenarioError(where, "expect.fails", f"expected a non-empty list of "
                                f"invariant names, got {fails!r}",
                                'write fails = ["busy-rule"]')
        for name in fails:
            _known(name, invariants, where, "expect.fails")
            out[name] = FAILS
    for key, value in raw.items():
        if key == "fails":
            continue
        if key != "all":
            _known(key, [*invariants, "all", "fails"], where, f"expect.{key}")
        if value not in _OUTCOMES:
            raise ScenarioError(where, f"expect.{key}", f"expected 'pass' or 'fail', got "
                                f"{value!r}", f'write {key} = "pass"')
        if out.get(key) == FAILS:
            if value == "pass":
                raise ScenarioError(where, f"expect.{key}", "is in fails and says 'pass'",
                                    f"keep one of the two for {key}")
            continue
        out[key] = value
    return tuple(out.items())


def _known(name: str, names: list[str], where: str, field: str) -> None:
    if name in names:
        return
    import difflib

    near = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    listed = sorted(n for n in names if n not in ("all", "fails"))
    raise ScenarioError(where, field, f"unknown invariant {name!r}",
                        f"{hint}use one of {listed}")


def _duration(value: Any, where: str, field: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ScenarioError(where, field, str(exc), "write a duration like \"5m\"") from None


def _step(raw: Any, where: str, index: int) -> Step:
    here = f"step[{index}]"
    if not isinstance(raw, dict):
        raise ScenarioError(where, here, "expected a table", "write [[step]] blocks")
    action = raw.get("do")
    if action == "provider":
        # The step of before service faults: a fault on the model provider.
        if "service" in raw:
            raise ScenarioError(where, f"{here}.service", "'provider' takes no service",
                                'write do = "service-fault" with service = "..."')
        raw = {**raw, "service": "provider"}
    action = LEGACY_ACTIONS.get(str(action), action)
    if action not in ACTIONS:
        raise ScenarioError(where, f"{here}.do", f"unknown action {action!r}",
                            f"use one of {sorted(ACTIONS)}")
    if "at" not in raw:
        raise ScenarioError(where, f"{here}.at", "missing", 'add at = "0s"')
    at = _duration(raw["at"], where, f"{here}.at")
    required, optional = ACTIONS[action]
    params: dict[str, Any] = {}
    for key in required:
        if key not in raw:
            raise ScenarioError(where, f"{here}.{key}", f"'{action}' needs {key}",
                                f"add {key} = ...")
        params[key] = raw[key]
    for key, default in optional.items():
        params[key] = raw.get(key, default)
    # Given only when written (`_WHEN_WRITTEN`): a schedule without them reads, prints and
    # runs as before.
    written = set(_WHEN_WRITTEN.get(action, ())) & set(raw)
    for key in sorted(written):
        params[key] = raw[key]
    extra = sorted(set(raw) - {"at", "do"} - set(required) - set(optional) - written)
    if extra:
        raise ScenarioError(where, f"{here}.{extra[0]}", f"'{action}' takes no {extra[0]}",
                            f"its fields are "
                            f"{sorted({*required, *optional, *_WHEN_WRITTEN.get(action, ())})}")
    for key in ("duration",):
        if key in params:
            params[key] = _duration(params[key], where, f"{here}.{key}")
    _validate(action, params, where, here)
    return Step(at, action, tuple(params.items()))


# Fields a step holds only when its file writes them, by action. `of`: a background request
# from one session naming another session's call, what a client that guessed or leaked a
# call's id would send (the runtime must change nothing). `call`: an answer naming its tool
# call itself (`{turn}.t{k}`), sent whether or not a card is open, as a client that races
# the card does. `malformed`: an answer whose decision is neither approve nor deny, sent as
# is, as a hostile or broken client does (the runtime must not apply it); an explicit
# opt-in, so that a misspelt decision stays an error. A malformed background request names
# no call (its `tool_call` is null), and a malformed message no id (its `message_id` is null),
# as a client that lost the id sends them.
_WHEN_WRITTEN: Final[dict[str, frozenset[str]]] = {
    "message": frozenset({"malformed"}),
    "background": frozenset({"of", "malformed"}),
    "answer": frozenset({"call", "malformed"}),
}
# A tool call id, `{turn}.t{k}`: its turn's id begins with the session's (the reference's
# `s1.turn1`, another runtime's `s1.s1.m1`), its call K counts from 1 (`s1.turn1.t1`).
_CALL_ID: Final = re.compile(r"(?P<turn>.+)\.t[1-9][0-9]*")


def _validate(action: str, params: dict[str, Any], where: str, here: str) -> None:
    fault = FAULTS.get(action)
    if fault is not None:  # what a fault accepts is its kind's (harness.faults)
        problem = fault.check(params)
        if problem is not None:
            key, what, fix = problem
            raise ScenarioError(where, f"{here}.{key}", what, fix)
    if action == "message":
        tools = params["tools"]
        if not isinstance(tools, list) or any(t not in DEFAULT_TOOLS for t in tools):
            raise ScenarioError(where, f"{here}.tools", f"expected a list of tool names, got "
                                f"{tools!r}", f"use tools from {sorted(DEFAULT_TOOLS)}")
    if action == "answer":
        _answer(params, where, here)
    if action == "message" and _malformed_flag(params, where, here) and params["tools"]:
        raise ScenarioError(where, f"{here}.tools", "a malformed message asks for no tools "
                            "(a runtime that accepts it anyway runs a turn the run does not "
                            "follow)", "write tools = []")
    if action == "background":
        _malformed_flag(params, where, here)
        if params.get("malformed") and "of" in params:
            raise ScenarioError(where, f"{here}.of", "a malformed background request names "
                                "no call, so it has no owner", "leave `of` out, or malformed")
    for key in ("session", "host", "user", "tool", "version", "text", "of", "call"):
        if key in params and not isinstance(params[key], str):
            raise ScenarioError(where, f"{here}.{key}", f"expected a string, got "
                                f"{params[key]!r}", f'write {key} = "..."')
    if not isinstance(params.get("times", 1), int) or params.get("times", 1) < 1:
        raise ScenarioError(where, f"{here}.times", "expected a positive integer",
                            "write times = 1")


def _malformed_flag(params: dict[str, Any], where: str, here: str) -> bool:
    """The step's `malformed` (true or false; false says nothing: the step then reads as
    without it)."""
    malformed = params.get("malformed", False)
    if not isinstance(malformed, bool):
        raise ScenarioError(where, f"{here}.malformed", f"expected true or false, got "
                            f"{malformed!r}", "write malformed = true")
    if not malformed:
        params.pop("malformed", None)
    return malformed


def _answer(params: dict[str, Any], where: str, here: str) -> None:
    """An answer's decision, and the fields it holds only when written (`call`,
    `malformed`)."""
    malformed = _malformed_flag(params, where, here)
    decision = params["decision"]
    if malformed:
        # Any string goes out as is; approve and deny are not malformed, and a runtime that
        # applied them would be judged as applying a malformed answer.
        if not isinstance(decision, str):
            raise ScenarioError(where, f"{here}.decision", f"expected a string, got "
                                f"{decision!r}", 'write decision = "maybe"')
        if decision in ("approve", "deny"):
            raise ScenarioError(where, f"{here}.decision", f"{decision!r} with malformed = "
                                "true", "write a decision that is neither 'approve' nor "
                                "'deny' (e.g. \"maybe\"), or leave malformed out")
    elif decision not in ("approve", "deny"):
        raise ScenarioError(where, f"{here}.decision", f"unknown decision {decision!r}",
                            "use 'approve' or 'deny' (or malformed = true to send it as is)")
    call = params.get("call")
    if call is None or not isinstance(call, str) or not isinstance(params["session"], str):
        return  # a call that is not a string is named by the type check that follows
    session = params["session"]
    found = _CALL_ID.fullmatch(call)
    turn = found["turn"] if found is not None else ""
    if not turn.startswith(f"{session}.") or turn == f"{session}.":
        raise ScenarioError(where, f"{here}.call", f"{call!r} is not a tool call of session "
                            f"{session!r}", f'write call = "{session}.turn1.t1" (a call id '
                            "is its turn's id and .tK; the reference's turn N of the session "
                            "is SESSION.turnN)")
