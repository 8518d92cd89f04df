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


class AdapterUnavailable(UsageError):
    """An adapter cannot run here: a component it needs is missing, a URL it was given does
    not answer, its module or factory fails, or its `open()` failed on its first run. Nothing
    it would run could be judged, so the suite stops before (or at) its first run."""


class AdapterContractError(DurableChaosError):
    """An adapter breaks the adapter contract (found before the chaos starts)."""


class RecordError(DurableChaosError):
    """A record outside the vocabulary (`contract.records`, docs/events.md) was appended to a
    history: an unknown kind (the message names the nearest valid one) or a record without a
    required field. Raised at once, where the record enters, so the adapter's line that wrote
    it is in the traceback; a run it breaks ends "unknown" with this message."""


class ComponentUnavailable(DurableChaosError):
    """A real component (PostgreSQL, restate-server, Toxiproxy, Chromium) is not installed
    here; the message names the make target or package that installs it."""


class WorkerLost(DurableChaosError):
    """A fan-out worker process died (killed, out of memory, a crash in C code) while it held
    a batch of generated schedules: the suite cannot say what those runs found."""


class RunTimeout(BaseException):
    """Raised into a run that passed its wall-clock limit (see `harness.watchdog`).

    A BaseException, like KeyboardInterrupt: an adapter's own `except Exception` must not
    swallow it, or a blocked `advance()` would hang the suite anyway."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception in the main thread so that a suite stops the way it
    does on Ctrl-C: the open runtime is closed and the report of what ran is written. A
    KeyboardInterrupt so that every `except KeyboardInterrupt` cleanup path applies."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")


class SdkCallRefused(UsageError):
    """A user's restate-sdk handler called a context method the simulator does not model
    (`harness.sdk.api.REFUSED` lists them); the message names the call. The run stops with
    it rather than retrying the handler: no schedule could judge that code on the simulator."""


class ComponentError(DurableChaosError):
    """A real component answered with an error (an HTTP status, a failed page load)."""


class SimulationError(DurableChaosError):
    """The simulator was driven into a state it cannot represent."""


class IngressRefused(DurableChaosError):
    """The simulator's ingress refused a call from outside, as the real engine's does (a
    handler private to the app's own services: Restate answers 400, "the invoked service is
    not public"). The client sees `status_code`."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class ClockError(SimulationError):
    """A virtual clock was asked to go backwards."""


class JournalMismatch(SimulationError):
    """A journal was replayed against code that issues different commands."""


class OutputUnwritable(DurableChaosError):
    """A history, the report or a JUnit file could not be written (a full disk, a read-only
    directory): what ran cannot be shown, so the run could not be judged (exit 3). The message
    names the path; free space or give a directory you can write to."""

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"cannot write {path}: {problem}")

    def __reduce__(self) -> tuple[type[OutputUnwritable], tuple[str, str]]:
        return OutputUnwritable, (self.path, self.problem)
