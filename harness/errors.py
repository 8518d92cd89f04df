"""One error hierarchy for the harness.

The user's mistakes (a malformed scenario, an unknown adapter, a bad duration) are
`UsageError`s: the CLI prints their one-line message and exits 2. The system's own failures
are `SimulationError`s. Invariant violations are never exceptions: checkers return results.
"""

from __future__ import annotations


class DurableChaosError(Exception):
    """Base of every error the harness raises on purpose."""


class UsageError(DurableChaosError):
    """The user asked for something that cannot work; the message says how to fix it."""


class ConfigError(UsageError):
    """A bad option or configuration value. `source` says where it came from."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


class ScenarioError(UsageError):
    """A malformed scenario file: names the file, the field and the fix."""

    def __init__(self, path: str, field: str, problem: str, fix: str) -> None:
        self.path, self.field, self.problem, self.fix = path, field, problem, fix
        super().__init__(f"{path}: field '{field}': {problem}; {fix}")


class AdapterNotFound(UsageError):
    """`--adapter` names nothing loadable."""


class AdapterContractError(DurableChaosError):
    """An adapter breaks the adapter contract (found before the chaos starts)."""


class ComponentUnavailable(DurableChaosError):
    """A real component (PostgreSQL, restate-server, Toxiproxy, Chromium) is not installed
    here; the message names the make target or package that installs it."""


class ComponentError(DurableChaosError):
    """A real component answered with an error (an HTTP status, a failed page load)."""


class SimulationError(DurableChaosError):
    """The simulator was driven into a state it cannot represent."""


class ClockError(SimulationError):
    """A virtual clock was asked to go backwards."""


class JournalMismatch(SimulationError):
    """A journal was replayed against code that issues different commands."""
