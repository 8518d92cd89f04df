"""The world transport's quick JSON response is the response `httpx.Response(json=...)` builds."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from harness.sdk import transport


@pytest.mark.parametrize(("status", "payload"), [
    (200, {"text": "h\u00e9llo \u2603", "n": [1, 2.5, None, True]}),
    (429, {"error": "slow down", "retry_after": 2.0}),
    (200, {}),
    (500, ["x"]),
    (404, {"error": "no endpoint /x"}),
])
def test_the_quick_response_is_the_one_httpx_builds(status: int, payload: Any) -> None:
    fast = transport._json_response_fast(status, payload)
    slow = transport._json_response_slow(status, payload)
    assert transport._state(fast) == transport._state(slow)
    assert fast.json() == slow.json() == payload
    assert fast.headers.multi_items() == slow.headers.multi_items()
    assert fast.text == slow.text and fast.is_closed and fast.is_stream_consumed


def test_the_installed_httpx_takes_the_quick_response() -> None:
    # If an httpx upgrade changed what a Response holds, the check falls back to the plain
    # constructor; this says so instead of silently losing the speed.
    assert transport._same_response()
    assert transport._json_response is transport._json_response_fast


def test_a_response_with_nan_is_refused_as_httpx_refuses_it() -> None:
    with pytest.raises(ValueError):
        httpx.Response(200, json={"x": float("nan")})
    with pytest.raises(ValueError):
        transport._json_response_fast(200, {"x": float("nan")})
