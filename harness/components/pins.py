"""The pinned versions of the real components, in one place.

The Makefile reads these lines (`make restate toxiproxy` in a checkout) and
`durable-chaos doctor --install` uses them (an installed user's cache), so both install the
same versions; package.json repeats the restate-server pin for npm, and a test checks that
all three agree. Keep each pin a plain `NAME = "version"` line: the Makefile reads it with sed.
"""

from __future__ import annotations

RESTATE_SERVER = "1.7.12"
"""npm package @restatedev/restate-server (a static binary per platform)."""

TOXIPROXY = "v2.12.0"
"""Go module github.com/Shopify/toxiproxy/v2, built with `go install`."""
