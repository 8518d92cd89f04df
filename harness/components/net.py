"""Small network helpers shared by the components."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.02,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Poll `probe` until it returns a value other than None (or stops raising).

    Readiness is a query that succeeds, so the probe is the query itself; the interval is a
    back-off between attempts, never the thing we wait for.
    """
    deadline = monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if value is not None:
                return value
        except Exception as exc:  # the component is not ready yet
            last_error = exc
        if monotonic() >= deadline:
            detail = f": last error {last_error!r}" if last_error else ""
            raise TimeoutError(f"{what} not ready after {timeout:.1f}s{detail}")
        sleep(interval)
        interval = min(interval * 1.5, 0.25)
