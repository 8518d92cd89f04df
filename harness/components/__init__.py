"""Real components the harness starts and stops itself, all on 127.0.0.1.

PostgreSQL, restate-server, Toxiproxy, the fake model provider and Chromium. Each is a
context manager that waits on readiness (a query that succeeds), never on a fixed sleep, and
stops what it started by process group.
"""

# Nothing is exported from the package itself: its modules are imported by their names.
__all__: list[str] = []
