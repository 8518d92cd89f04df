"""Headless Chromium for report pages: screenshot a local HTML file and collect console errors.

Debian's chromium logs console messages to stderr (`--enable-logging=stderr`) without their
level (`console.log` and `console.error` both print as `INFO:CONSOLE`), so instead the page is
driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: fd 3 carries commands
in, fd 4 replies and events out, NUL-terminated JSON). That needs no extra Python package and
no port, and it reports each message's level, uncaught exceptions and failed resource loads.

The flags keep the browser off the network (the machines here have none, and without them it
floods the closed network) and let it run as root (`--no-sandbox`).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.components.binaries import find_executable
from harness.components.procs import ProcessGroup
from harness.errors import ComponentError, ComponentUnavailable

__all__ = [
    "CHROMIUM_FLAGS",
    "ChromiumError",
    "ChromiumUnavailable",
    "ConsoleMessage",
    "PageLoad",
    "console_errors",
    "find_chromium",
    "load_page",
    "screenshot",
]

BIN_ENV = "DURABLE_CHAOS_CHROMIUM_BIN"
_INSTALL_HINT = "run `make chromium` (apt-get install chromium)"
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
)
# Levels that count as errors: console.error / console.assert, uncaught exceptions, and
# browser-side log entries (failed loads, blocked requests) at level "error".
_ERROR_LEVELS = frozenset({"error", "assert", "exception"})
# Lets timers and the first animation frame after `load` run, with a fallback in case the
# headless compositor produces no frame.
_SETTLE_JS = (
    "new Promise(r => { requestAnimationFrame(() => setTimeout(r, 0)); setTimeout(r, 250); })"
)


class ChromiumUnavailable(ComponentUnavailable):
    """No chromium binary here; the message says how to install it."""


class ChromiumError(ComponentError):
    """Chromium failed to load or render the page."""


def find_chromium() -> Path:
    """$DURABLE_CHAOS_CHROMIUM_BIN, else /usr/bin/chromium, else chromium on PATH."""
    return find_executable("chromium", env_var=BIN_ENV, candidates=[Path("/usr/bin/chromium")],
                           on_path=["chromium", "chromium-browser"],
                           install_hint=_INSTALL_HINT, error=ChromiumUnavailable)


@dataclass(frozen=True)
class ConsoleMessage:
    level: str
    """console API type ("log", "error", "warning", ...), "exception", or a log entry level."""
    text: str
    url: str | None = None
    line: int | None = None

    @property
    def is_error(self) -> bool:
        return self.level in _ERROR_LEVELS

    def format(self) -> str:
        where = f" ({self.url}:{self.line})" if self.url else ""
        return f"[{self.level}] {self.text}{where}"


@dataclass
class PageLoad:
    url: str
    console: list[ConsoleMessage] = field(default_factory=list)
    screenshot_path: Path | None = None
    seconds: float = 0.0
    browser_pgid: int | None = None
    """The browser's process group (gone once `load_page` returns)."""

    @property
    def errors(self) -> list[ConsoleMessage]:
        return [m for m in self.console if m.is_error]

    @property
    def error_texts(self) -> list[str]:
        return [m.format() for m in self.errors]


def load_page(
    html_path: str | os.PathLike[str],
    *,
    screenshot_path: str | os.PathLike[str] | None = None,
    console_log_path: str | os.PathLike[str] | None = None,
    width: int = 1280,
    height: int = 800,
    full_page: bool = False,
    timeout: float = 30.0,
    binary: Path | None = None,
) -> PageLoad:
    """Open a local file in a fresh headless Chromium, wait for `load`, collect the console.

    Optionally write a PNG screenshot (the viewport, or the whole page with `full_page`) and
    a console log (one message a line). The browser and its temporary profile are gone when
    this returns.
    """
    page_file = Path(html_path).resolve()
    if not page_file.is_file():
        raise FileNotFoundError(page_file)
    chromium = binary or find_chromium()
    work_dir = Path(tempfile.mkdtemp(prefix="durable-chaos-chromium-"))
    started = time.monotonic()
    deadline = started + timeout
    group: ProcessGroup | None = None
    pipe: _CdpPipe | None = None
    try:
        pipe, child_in, child_out = _CdpPipe.open()
        argv = [
            "/bin/bash",
            "-c",
            # Puts our pipe ends on fds 3 and 4, where --remote-debugging-pipe expects them.
            f'exec "$0" "$@" 3<&{child_in} 4>&{child_out} {child_in}<&- {child_out}>&-',
            str(chromium),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={work_dir / 'profile'}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        group = ProcessGroup(
            argv, name="chromium", log_dir=work_dir, pass_fds=(child_in, child_out)
        )
        os.close(child_in)
        os.close(child_out)
        result = _drive(
            pipe,
            page_file.as_uri(),
            deadline=deadline,
            width=width,
            height=height,
            full_page=full_page,
            screenshot_path=Path(screenshot_path) if screenshot_path is not None else None,
        )
        result.seconds = time.monotonic() - started
        result.browser_pgid = group.pgid
        pipe.send("Browser.close")
        _close_browser(group, deadline)
    except (OSError, TimeoutError, ChromiumError) as exc:
        tail = group.log_tail() if group is not None else ""
        raise ChromiumError(f"chromium could not load {page_file}: {exc}\n{tail}") from exc
    finally:
        if pipe is not None:
            pipe.close()
        if group is not None and group.alive:
            group.kill()
        shutil.rmtree(work_dir, ignore_errors=True)
    if console_log_path is not None:
        Path(console_log_path).write_text("".join(m.format() + "\n" for m in result.console))
    return result


def screenshot(
    html_path: str | os.PathLike[str],
    png_path: str | os.PathLike[str],
    *,
    console_log_path: str | os.PathLike[str] | None = None,
    width: int = 1280,
    height: int = 800,
    full_page: bool = True,
    timeout: float = 30.0,
) -> list[str]:
    """Screenshot a local HTML file to `png_path`; returns the page's console errors."""
    result = load_page(
        html_path,
        screenshot_path=png_path,
        console_log_path=console_log_path,
        width=width,
        height=height,
        full_page=full_page,
        timeout=timeout,
    )
    return result.error_texts


def console_errors(html_path: str | os.PathLike[str], *, timeout: float = 30.0) -> list[str]:
    """The console errors (and uncaught exceptions) of a local HTML file, loaded headless."""
    return load_page(html_path, timeout=timeout).error_texts


def _close_browser(group: ProcessGroup, deadline: float) -> None:
    try:
        group.wait(max(deadline - time.monotonic(), 0.5))
    except subprocess.TimeoutExpired:
        pass
    if group.alive:
        # The browser's helpers (zygote, renderers) share its group.
        group.stop(timeout=2.0)


def _drive(
    pipe: _CdpPipe,
    url: str,
    *,
    deadline: float,
    width: int,
    height: int,
    full_page: bool,
    screenshot_path: Path | None,
) -> PageLoad:
    result = PageLoad(url=url)
    # The first answer doubles as the readiness wait: it comes once the browser is up.
    targets = pipe.call("Target.getTargets", deadline=deadline)["targetInfos"]
    pages = [t for t in targets if t.get("type") == "page"]
    if pages:
        target_id = pages[0]["targetId"]
    else:
        target_id = pipe.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)[
            "targetId"
        ]
    session = pipe.call(
        "Target.attachToTarget", {"targetId": target_id, "flatten": True}, deadline=deadline
    )["sessionId"]
    pipe.on_event = lambda msg: _collect(msg, session, result.console)
    for method in ("Runtime.enable", "Log.enable", "Page.enable"):
        pipe.call(method, session=session, deadline=deadline)
    pipe.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session=session,
        deadline=deadline,
    )
    navigation = pipe.call("Page.navigate", {"url": url}, session=session, deadline=deadline)
    if navigation.get("errorText"):
        raise ChromiumError(f"navigation failed: {navigation['errorText']}")
    pipe.wait_event("Page.loadEventFired", session=session, deadline=deadline)
    pipe.call(
        "Runtime.evaluate",
        {"expression": _SETTLE_JS, "awaitPromise": True},
        session=session,
        deadline=deadline,
    )
    if screenshot_path is not None:
        shot = pipe.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": full_page},
            session=session,
            deadline=deadline,
        )
        screenshot_path.parent.mkdir(parents=True, exist_ok=True)
        screenshot_path.write_bytes(base64.b64decode(shot["data"]))
        result.screenshot_path = screenshot_path
    pipe.on_event = None
    return result


def _collect(msg: dict[str, Any], session: str, sink: list[ConsoleMessage]) -> None:
    if msg.get("sessionId") != session:
        return
    method = msg.get("method")
    params: dict[str, Any] = msg.get("params", {})
    if method == "Runtime.consoleAPICalled":
        frames = (params.get("stackTrace") or {}).get("callFrames") or [{}]
        sink.append(
            ConsoleMessage(
                level=str(params.get("type", "log")),
                text=" ".join(_remote_object_text(a) for a in params.get("args", [])),
                url=frames[0].get("url") or None,
                line=_one_based(frames[0].get("lineNumber")),
            )
        )
    elif method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        exception = details.get("exception") or {}
        text = exception.get("description") or details.get("text", "exception")
        sink.append(
            ConsoleMessage(
                level="exception",
                text=str(text).splitlines()[0],
                url=details.get("url") or None,
                line=_one_based(details.get("lineNumber")),
            )
        )
    elif method == "Log.entryAdded":
        entry = params.get("entry", {})
        sink.append(
            ConsoleMessage(
                level=str(entry.get("level", "info")),
                text=str(entry.get("text", "")),
                url=entry.get("url") or None,
                line=_one_based(entry.get("lineNumber")),
            )
        )


def _one_based(line: Any) -> int | None:
    return int(line) + 1 if isinstance(line, int) else None


def _remote_object_text(obj: dict[str, Any]) -> str:
    if "value" in obj:
        value = obj["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(obj.get("description") or obj.get("unserializableValue") or obj.get("type", ""))


class _CdpPipe:
    """The parent's ends of the two DevTools pipes, with a blocking request/response call."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._write_fd = write_fd
        self._read_fd = read_fd
        self._buffer = b""
        self._next_id = 0
        self._pending: list[dict[str, Any]] = []
        self.on_event: Callable[[dict[str, Any]], None] | None = None

    @classmethod
    def open(cls) -> tuple[_CdpPipe, int, int]:
        """The pipe, and the child's read and write ends (fds >= 10, off 3 and 4)."""
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()
        # Moved above 9 so that the shell's `3<&N 4>&M` never collides with N or M.
        child_in = _above_nine(commands_r)
        child_out = _above_nine(replies_w)
        return cls(commands_w, replies_r), child_in, child_out

    def close(self) -> None:
        for fd in (self._write_fd, self._read_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write_fd, data) :]
        return self._next_id

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        deadline: float,
    ) -> dict[str, Any]:
        request_id = self.send(method, params, session=session)
        reply = self._receive(lambda m: m.get("id") == request_id, deadline, method)
        if "error" in reply:
            raise ChromiumError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def wait_event(self, method: str, *, session: str | None, deadline: float) -> dict[str, Any]:
        return self._receive(
            lambda m: m.get("method") == method and m.get("sessionId") == session,
            deadline,
            method,
        )

    def _receive(
        self, wanted: Callable[[dict[str, Any]], bool], deadline: float, what: str
    ) -> dict[str, Any]:
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message: dict[str, Any] = json.loads(raw)
                if "method" in message and self.on_event is not None:
                    self.on_event(message)
                if wanted(message):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer to {what} from chromium")
            readable, _, _ = select.select([self._read_fd], [], [], remaining)
            if readable:
                chunk = os.read(self._read_fd, 1 << 16)
                if not chunk:
                    raise ChromiumError(f"chromium closed the DevTools pipe (waiting for {what})")
                self._buffer += chunk


def _above_nine(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved
