"""Test-session setup shared by every test module."""

from __future__ import annotations

import signal

# Whoever started the tests may have left SIGINT ignored (a background job of a
# non-interactive shell, `nohup`); an ignored signal stays ignored across exec, so every child
# process the tests start (the CLI that a test interrupts with Ctrl-C, a worker meant to stop on
# SIGINT) would ignore it too. A user's terminal has it at its default: so do the tests.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
