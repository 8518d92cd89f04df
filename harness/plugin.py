"""pytest plugin (registered through `pytest11`); silent unless `--chaos-adapter` is given.

Installing durable-chaos changes no other project's test run: without `--chaos-adapter` (or
the ini key `chaos_adapter`) this module collects nothing, prints nothing and imports nothing
of the harness; only the `chaos_*` fixtures exist, for tests that ask for them.

With an adapter, the built-in suite is collected after the project's own tests, under one
virtual node per adapter (`-m chaos` selects it, `-m "not chaos"` leaves it out):

    durable-chaos::ADAPTER::contract              the adapter contract (harness.conformance)
    durable-chaos::ADAPTER::scenario[NAME]        one scenario file, run once
    durable-chaos::ADAPTER::generated[INVARIANT]  generated schedules judged by one invariant,
                                                  the first failure shrunk to a minimal one

Selection: with no path on the command line (`pytest`, `pytest -m chaos`, `pytest -k NAME`,
`testpaths` from the ini) or with `--chaos`, the suite is collected; paths that are the
project's own tests (`pytest tests/test_one.py`) leave it out, and the header says so; the
scenarios directory, or a directory holding it or the rootdir (`pytest .`), selects it.

Seeds: one session seed (an integer, `last` from pytest's cache, or a fresh one), printed in
the report header and handed to xdist workers; each generated item derives its own seed
from the session seed and its node id, so reordering or selecting items changes nothing.
Scenario items keep the seed written in their file, so `durable-chaos replay FILE` repeats
them exactly.

Rejected: collecting through `pytest_collection_modifyitems`. Items added there bypass the
collection hooks (the "collected N items" count, `--collect-only`, xdist's collection
comparison); appending a collector to the session's own collect report keeps them ordinary.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from harness.adapters.base import Adapter
    from harness.outcome import RunOutcome
    from harness.run import RunOptions
    from harness.schedules.model import Schedule
    from harness.supervisor import Pool

# The fixtures live in their own module; pytest imports it with this plugin.
pytest_plugins = ["harness.fixtures"]

_T = TypeVar("_T")
GROUP = "durable-chaos"
SUITE_NODE = "durable-chaos"
MARKER = "chaos"
DEFAULT_SCHEDULES = 25
CACHE_KEY = "durable-chaos/seed"
_WORKER_SEED = "durable_chaos_seed"


# ---------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "durable-chaos: chaos suite for durable agent runtimes")
    group.addoption(
        "--chaos-adapter", action="append", dest="chaos_adapter", default=None,
        metavar="NAME|module:attr",
        help="run the chaos suite against this adapter (repeatable, or a comma list): "
        "reference, naive, reference-restate or module:attribute; 'none' turns the suite off. "
        "Without it the plugin collects nothing. ini: chaos_adapter",
    )
    group.addoption(
        "--chaos-seed", dest="chaos_seed", default=None, metavar="N|last",
        help="session seed of the generated schedules: an integer, or 'last' to reuse the "
        "previous run's seed (needs pytest's cache plugin); default: a fresh seed, printed "
        "in the header. ini: chaos_seed",
    )
    group.addoption(
        "--chaos-schedules", dest="chaos_schedules", default=None, metavar="N",
        help=f"generated schedules per invariant item (default: {DEFAULT_SCHEDULES}; 0 "
        "collects no generated items). ini: chaos_schedules",
    )
    group.addoption(
        "--chaos-workers", dest="chaos_workers", default=None, metavar="N",
        help="fan each generated item's schedules out over N processes (default: 1, in the "
        "test process); the seed alone decides schedules and verdicts. ini: chaos_workers",
    )
    group.addoption(
        "--chaos-report", dest="chaos_report", default=None, metavar="DIR",
        help="at the end, write DIR/index.html and DIR/junit.xml (and the histories of "
        "scenarios and failures under DIR/runs). ini: chaos_report",
    )
    group.addoption(
        "--chaos-scenarios", dest="chaos_scenarios", default=None, metavar="PATH",
        help="a scenario file, a directory of *.toml, 'builtin' (the library shipped with "
        "durable-chaos), 'builtin:real', or 'none' (default: <rootdir>/scenarios if it holds "
        "*.toml, else builtin). ini: chaos_scenarios",
    )
    group.addoption(
        "--chaos-run-timeout", dest="chaos_run_timeout", default=None, metavar="SECONDS",
        help="wall-clock limit of one run (e.g. 90 or 10m; 'none' for no limit); a run past "
        "it ends unknown and its runtime is closed (default: 60s on the simulator, 10m on "
        "a real engine). ini: chaos_run_timeout",
    )
    parser.addini("chaos_run_timeout", "default of --chaos-run-timeout", default="")
    group.addoption(
        "--chaos", dest="chaos_suite", action="store_true", default=False,
        help="collect the whole chaos suite even when the command line selects paths (by "
        "default a path selects it only if it is the scenarios directory, or holds it or "
        "the rootdir; with no path it is always collected)",
    )
    group.addoption(
        "--chaos-components", dest="chaos_components", default=None,
        metavar="processes|containers",
        help="real adapters run their components and worker hosts as processes (default) or "
        "Docker containers. ini: chaos_components",
    )
    parser.addini("chaos_components", "default of --chaos-components", default="")
    group.addoption(
        "--chaos-invariants", dest="chaos_invariants", default=None, metavar="NAME,...",
        help="judge only these invariants (comma list), overriding each adapter's `claims`; "
        "the others are shown 'not claimed' and their generated items are skipped. ini: "
        "chaos_invariants",
    )
    parser.addini("chaos_invariants", "default of --chaos-invariants (whitespace or comma "
                  "list)", type="args", default=[])
    parser.addini("chaos_adapter", "default of --chaos-adapter (whitespace or comma list)",
                  type="args", default=[])
    parser.addini("chaos_seed", "default of --chaos-seed", default="")
    parser.addini("chaos_schedules", "default of --chaos-schedules", default="")
    parser.addini("chaos_workers", "default of --chaos-workers", default="")
    parser.addini("chaos_report", "default of --chaos-report (relative to the ini file)",
                  default="")
    parser.addini("chaos_scenarios", "default of --chaos-scenarios (relative to the ini "
                  "file)", default="")


@dataclass(frozen=True)
class ChaosSettings:
    """The resolved chaos options of one session (the same in every xdist worker)."""

    adapters: tuple[str, ...]
    seed: int
    schedules: int
    report_dir: Path | None
    scenarios: Path | None
    seed_note: str = ""  # how the seed was chosen, for the header
    run_timeout: float | None = None  # None: the engine's default; math.inf: no limit
    workers: int = 1  # processes each generated item fans out over (harness.fanout)
    # --chaos-invariants: overrides the adapters' `claims`; None keeps them.
    invariants: tuple[str, ...] | None = None


@dataclass
class ChaosState:
    """Plugin state of one session, kept under `STATE` in `config.stash`."""

    settings: ChaosSettings
    adapters: dict[str, Adapter]  # spec -> loaded adapter
    scenarios: list[Schedule]
    contracts: dict[str, str | None] = field(default_factory=dict)  # spec -> failure or None
    runs: list[RunOutcome] = field(default_factory=list)
    shrunk: list[RunOutcome] = field(default_factory=list)
    started: float = 0.0
    report: str | None = None  # where the report went, or why it did not
    # Why the suite is not collected in this session (paths that do not select it), or None.
    not_selected: str | None = None
    # SIGTERM received (see _stop_on_sigterm), and the handler it replaced.
    terminated: bool = False
    previous_sigterm: Any = None
    workers: Pool | None = None  # see pool()
    lock: Any = None  # the report directory's lock (harness.evidence), held by the controller

    def options(self, spec: str) -> RunOptions:
        from harness.run import RunOptions

        return RunOptions(adapter_spec=spec, report_dir=self.settings.report_dir,
                          run_timeout=self.settings.run_timeout,
                          invariants=self.settings.invariants)

    def claimed(self, spec: str) -> tuple[str, ...]:
        """The invariants the runs of adapter `spec` are judged by."""
        from harness.adapters.base import claimed_invariants
        from harness.checkers import ALL

        return claimed_invariants(self.adapters[spec], self.settings.invariants,
                                  [c.name for c in ALL])

    # Under xdist, where a worker spools each finished run (`record`) for the controller.
    spool: Path | None = None

    def record(self, runs: Sequence[RunOutcome], shrunk: Sequence[RunOutcome] = ()) -> None:
        """Keep finished runs for the report. An xdist worker also appends them to its spool
        file in the report directory at once: a SIGTERM or Ctrl-C that ends the session, or
        a worker killed, still leaves every finished run to the controller's report."""
        self.runs.extend(runs)
        self.shrunk.extend(shrunk)
        if self.spool is None:
            return
        lines = [json.dumps({"shrunk": False, "run": r.to_json()}) for r in runs]
        lines += [json.dumps({"shrunk": True, "run": r.to_json()}) for r in shrunk]
        try:
            with open(self.spool, "a", encoding="utf-8") as handle:
                handle.write("".join(line + "\n" for line in lines))
        except OSError:
            pass  # the controller reports what it finds; the report says incomplete

    def pool(self) -> Pool:
        """The session's supervised worker processes (harness.supervisor): every collected
        item runs its adapter there, so an adapter that ends or kills its process fails
        its item as unknown instead of ending pytest."""
        if self.workers is None:
            from harness.supervisor import Pool

            self.workers = Pool(self.settings.workers)
        return self.workers

    def contract(self, spec: str) -> str | None:
        """Check the adapter contract once per process; the failure message, or None."""
        if spec not in self.contracts:
            from harness.jobs import contract_job
            from harness.run import run_timeout
            from harness.supervisor import silence_for

            adapter = self.adapters[spec]
            limit = run_timeout(adapter, self.options(spec))
            # The check is a run too: an adapter that hangs in it must not hang pytest.
            event = self.pool().run(contract_job, spec, limit, silence=silence_for(limit))
            if event.kind == "done":
                self.contracts[spec] = event.payload
            elif event.kind == "lost":
                self.contracts[spec] = (f"adapter {adapter.name!r}: the contract check "
                                        f"ended its worker: {event.payload}")
            else:
                self.contracts[spec] = f"adapter {adapter.name!r}: {event.payload[1]!s}"
        return self.contracts[spec]


STATE = pytest.StashKey[ChaosState]()


class _Source:
    """Where an option's value came from, for error messages that say so."""

    def __init__(self, config: pytest.Config, flag: str, ini: str) -> None:
        self.config, self.flag, self.ini = config, flag, ini

    def value(self) -> tuple[Any, str]:
        config = self.config
        cli = config.getoption(self.flag.lstrip("-").replace("-", "_"))
        if cli is not None:
            return cli, self._cli()
        ini = config.getini(self.ini)
        if ini not in ("", [], None):
            return ini, self._ini()
        return None, f"the default of {self.flag}"

    def _cli(self) -> str:
        args = [str(a) for a in self.config.invocation_params.args]
        if any(a == self.flag or a.startswith(self.flag + "=") for a in args):
            return f"{self.flag} on the command line"
        if self.flag in os.environ.get("PYTEST_ADDOPTS", ""):
            return f"{self.flag} in PYTEST_ADDOPTS"
        if self.config.inipath is not None:
            return f"{self.flag} in addopts of the ini file {self.config.inipath.name}"
        return f"{self.flag} on the command line"

    def _ini(self) -> str:
        args = [str(a) for a in self.config.invocation_params.args]
        if any(f"{self.ini}=" in a for a in args):
            return f"{self.ini} in -o/--override-ini on the command line"
        inipath = self.config.inipath
        return f"{self.ini} in the ini file {inipath.name if inipath else '(none)'}"

    def base_dir(self, source: str) -> Path:
        """Relative paths: from the ini file's directory for ini values, else the cwd."""
        inipath = self.config.inipath
        if source.startswith(self.ini) and inipath is not None:
            return inipath.parent
        return self.config.invocation_params.dir


def _resolve(config: pytest.Config) -> ChaosSettings | None:
    raw, where = _Source(config, "--chaos-adapter", "chaos_adapter").value()
    specs: list[str] = []
    for item in raw or []:
        for spec in str(item).split(","):
            spec = spec.strip()
            if spec and spec not in specs:
                specs.append(spec)
    if not specs or specs == ["none"]:
        return None
    if "none" in specs:
        raise pytest.UsageError(f"{where}: 'none' turns the suite off and cannot be combined "
                                f"with adapters ({', '.join(specs)})")
    schedules = _schedules(config)
    seed, note = _seed(config)
    return ChaosSettings(
        adapters=tuple(specs),
        seed=seed,
        schedules=schedules,
        report_dir=_report_dir(config),
        scenarios=_scenarios_path(config),
        seed_note=note,
        run_timeout=_run_timeout(config),
        workers=_workers(config),
        invariants=_invariants(config),
    )


def _invariants(config: pytest.Config) -> tuple[str, ...] | None:
    raw, where = _Source(config, "--chaos-invariants", "chaos_invariants").value()
    from harness import settings

    return _usage(settings.invariant_names, raw, where)


def _usage(parse: Callable[[Any, str], _T], raw: Any, where: str) -> _T:
    """`parse(raw, where)` (harness.settings), its usage error pytest's own."""
    from harness.errors import UsageError

    try:
        return parse(raw, where)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _workers(config: pytest.Config) -> int:
    raw, where = _Source(config, "--chaos-workers", "chaos_workers").value()
    if raw is None:
        return 1
    try:
        number = int(str(raw).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise pytest.UsageError(f"{where}: expected a number of worker processes >= 1, "
                                f"got {raw!r}")
    from harness import settings

    def warn(text: str) -> None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(text), stacklevel=2)

    return settings.workers(number, where, warn)


def _run_timeout(config: pytest.Config) -> float | None:
    raw, where = _Source(config, "--chaos-run-timeout", "chaos_run_timeout").value()
    from harness import settings

    return _usage(settings.run_timeout, None if raw is None else str(raw), where)


def _schedules(config: pytest.Config) -> int:
    raw, where = _Source(config, "--chaos-schedules", "chaos_schedules").value()
    if raw is None:
        return DEFAULT_SCHEDULES
    try:
        number = int(str(raw).strip())
    except ValueError:
        raise pytest.UsageError(f"{where}: expected a whole number of schedules such as 25, "
                                f"got {raw!r}") from None
    if number < 0:
        raise pytest.UsageError(f"{where}: expected a number >= 0, got {number}")
    return number


def _seed(config: pytest.Config) -> tuple[int, str]:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _WORKER_SEED in workerinput:
        return int(workerinput[_WORKER_SEED]), "from the xdist controller"
    raw, where = _Source(config, "--chaos-seed", "chaos_seed").value()
    if raw is None:
        return random.Random().randrange(1_000_000), "fresh"
    text = str(raw).strip()
    if text == "last":
        cache = getattr(config, "cache", None)
        if cache is None:
            raise pytest.UsageError(
                f"{where}: 'last' reads the previous seed from pytest's cache, which is "
                "disabled here (-p no:cacheprovider); pass the seed printed in the previous "
                "run's header, or add -p cacheprovider"
            )
        last = cache.get(CACHE_KEY, None)
        if isinstance(last, int):
            return last, "reused with --chaos-seed=last"
        return random.Random().randrange(1_000_000), "fresh: the cache held no previous seed"
    try:
        seed = int(text)
    except ValueError:
        raise pytest.UsageError(f"{where}: expected an integer seed or 'last', got {raw!r}"
                                ) from None
    if seed < 0:
        raise pytest.UsageError(f"{where}: expected a seed >= 0, got {seed}")
    return seed, "given"


def _path_option(config: pytest.Config, flag: str, ini: str) -> Path | None:
    source = _Source(config, flag, ini)
    raw, where = source.value()
    if raw is None or str(raw).strip() == "":
        return None
    path = Path(str(raw).strip()).expanduser()
    return path if path.is_absolute() else source.base_dir(where) / path


def _report_dir(config: pytest.Config) -> Path | None:
    """`--chaos-report`, created and checked now (harness.settings.report_directory)."""
    path = _path_option(config, "--chaos-report", "chaos_report")
    if path is None:
        return None
    _, where = _Source(config, "--chaos-report", "chaos_report").value()
    from harness import settings

    return _usage(settings.report_directory, path, where)


def _scenarios_path(config: pytest.Config) -> Path | None:
    """The scenario file or directory: the option, else <rootdir>/scenarios if it holds any,
    else the library shipped with durable-chaos (`builtin`, `builtin:real` name it)."""
    from harness.errors import UsageError
    from harness.schedules.library import NONE, default_sources, resolve

    source = _Source(config, "--chaos-scenarios", "chaos_scenarios")
    raw, where = source.value()
    text = None if raw is None else str(raw).strip()
    if text == NONE:
        return None
    try:
        files = (default_sources(config.rootpath)[0].files if text is None
                 else resolve(text, option=where, base=source.base_dir(where)).files)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    return files[0] if len(files) == 1 else files[0].parent


# ---------------------------------------------------------------------------- session


def pytest_configure(config: pytest.Config) -> None:
    settings = _resolve(config)
    if settings is None:
        return
    from harness.adapters import load_adapter
    from harness.errors import UsageError

    adapter_where = _Source(config, "--chaos-adapter", "chaos_adapter").value()[1]
    adapters: dict[str, Adapter] = {}
    if getattr(config, "workerinput", None) is None:
        from harness.jobs import probe_adapters

        try:
            # In a worker first: an adapter module that ends its process ends that worker.
            probe_adapters(settings.adapters, settings.invariants)
        except UsageError as exc:
            raise pytest.UsageError(f"{adapter_where}: {_one_line(str(exc))}") from None
    for spec in settings.adapters:
        try:
            # Checked by the probe (preflight: a missing component is a configuration
            # error, found before any item runs; its claims), in a worker.
            adapters[spec] = load_adapter(spec)
        except UsageError as exc:
            # One line, as every usage error: an adapter's own message may have several.
            raise pytest.UsageError(f"{adapter_where}: {_one_line(str(exc))}") from None
        except Exception as exc:  # an adapter whose module or constructor fails
            raise pytest.UsageError(f"{adapter_where}: adapter {spec!r} failed to load: "
                                    f"{type(exc).__name__}: {_one_line(str(exc))}") from None
    components, where = _Source(config, "--chaos-components", "chaos_components").value()
    if components is not None and str(components).strip():
        from harness.components.stack import use_components

        try:
            use_components(str(components).strip(), source=where)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    scenarios = _load_scenarios(config, settings.scenarios)
    config.stash[STATE] = ChaosState(settings, adapters, scenarios,
                                     not_selected=_not_selected(config, settings))
    _lock_report_dir(config, config.stash[STATE])
    if getattr(config, "workerinput", None) is None:
        from harness.evidence import sweep_scratch

        sweep_scratch()  # a killed session's scratch directories
    config.stash[STATE].spool = _spool_of(config, settings.report_dir)
    config.addinivalue_line("markers", f"{MARKER}: an item of the durable-chaos suite")
    _stop_on_sigterm(config.stash[STATE])
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "durable-chaos-xdist")
    cache = getattr(config, "cache", None)
    if cache is not None and getattr(config, "workerinput", None) is None:
        cache.set(CACHE_KEY, settings.seed)


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def _stop_on_sigterm(state: ChaosState) -> None:
    """SIGTERM (a cancelled CI job) stops the session the way Ctrl-C does, as under the CLI:
    the open runtime is closed, the report of what ran is written marked incomplete, and
    pytest exits 143. By default SIGTERM kills pytest at once: no report, nothing closed.

    Only in place of the default disposition (a project's own handler is left alone), and
    only on the main thread, where Python delivers signals.
    """
    from harness.errors import Terminated

    def stop(signum: int, frame: object) -> None:
        state.terminated = True
        raise Terminated(signum)

    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        state.previous_sigterm = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        return


def pytest_unconfigure(config: pytest.Config) -> None:
    state = chaos_state(config)
    if state is not None:
        _close_pool(state, abort=True)
        if state.lock is not None:
            state.lock.release()
            state.lock = None
    if state is not None and state.previous_sigterm is not None:
        try:
            signal.signal(signal.SIGTERM, state.previous_sigterm)
        except ValueError:  # pragma: no cover - configured on the main thread
            pass
        state.previous_sigterm = None


def _close_pool(state: ChaosState, abort: bool = False) -> None:
    if state.workers is not None:
        state.workers.close(abort=abort)
        state.workers = None


def _lock_report_dir(config: pytest.Config, state: ChaosState) -> None:
    """The controller holds the report directory for the session (harness.evidence); a
    second session writing there is a usage error naming the holder."""
    report_dir = state.settings.report_dir
    if report_dir is None or getattr(config, "workerinput", None) is not None:
        return
    from harness.errors import UsageError
    from harness.evidence import ReportLock
    from harness.suite import fresh_runs_dir

    where = _Source(config, "--chaos-report", "chaos_report").value()[1]
    lock = ReportLock(report_dir, option=where)
    try:
        lock.acquire()
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    state.lock = lock
    fresh_runs_dir(report_dir)
    for stale in report_dir.glob(SPOOL_GLOB):  # a killed session's
        stale.unlink(missing_ok=True)


def _not_selected(config: pytest.Config, settings: ChaosSettings) -> str | None:
    """Why the paths on the command line leave the chaos suite out, or None to collect it.

    The rule: with no path (plain `pytest`, `-m chaos`, `-k NAME`, `testpaths` from the ini)
    or with `--chaos` the suite is collected; `pytest tests/test_one.py` (paths that are
    the project's tests) does not drag it in. A path selects it when it is the scenarios
    directory or inside it, or when it holds the scenarios or the rootdir (`pytest .`).
    Rejected: always collecting it (running one test file then ran every scenario and
    generated schedule), and never collecting it with paths (`pytest .` would lose it).
    """
    if config.getoption("chaos_suite") or config.args_source != pytest.Config.ArgsSource.ARGS:
        return None
    holders = [config.rootpath.resolve()]  # a path that is or holds one of these selects
    scenario_dir = None
    if settings.scenarios is not None:
        scenarios = settings.scenarios.resolve()
        scenario_dir = scenarios if scenarios.is_dir() else scenarios.parent
        holders.append(scenario_dir)
    base = config.invocation_params.dir
    for arg in config.args:
        path = (base / str(arg).split("::", 1)[0]).resolve()
        if any(path == h or path in h.parents for h in holders):
            return None
        if scenario_dir is not None and scenario_dir in path.parents:
            return None
    return ("the command line selects paths that hold no chaos scenarios; add --chaos to "
            "run the chaos suite too, or select it with no path (-m chaos, -k NAME)")


def _load_scenarios(config: pytest.Config, path: Path | None) -> list[Schedule]:
    if path is None:
        return []
    from harness.errors import UsageError
    from harness.schedules.scenario_file import load_scenario

    where = _Source(config, "--chaos-scenarios", "chaos_scenarios").value()[1]
    files = sorted(path.glob("*.toml")) if path.is_dir() else [path]
    try:
        return [load_scenario(f) for f in files]
    except UsageError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def chaos_state(config: pytest.Config) -> ChaosState | None:
    """The plugin state, or None when the suite is off."""
    return config.stash.get(STATE, None)


def session_seed(config: pytest.Config) -> int:
    """The session seed; 0 when the suite is off (the fixtures stay deterministic)."""
    state = chaos_state(config)
    return state.settings.seed if state is not None else 0


def item_seed(seed: int, nodeid: str) -> int:
    """A per-test seed from the session seed and a node id, stable across processes."""
    digest = hashlib.blake2b(f"{seed}\0{nodeid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**32


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = chaos_state(config)
    if state is None:
        return None
    s = state.settings
    cached = "" if getattr(config, "cache", None) is not None else \
        " (not cached: the cache plugin is disabled, so --chaos-seed=last cannot reuse it)"
    scenarios = "none"
    if s.scenarios is not None:
        scenarios = f"{len(state.scenarios)} from {_show(config, s.scenarios)}"
    lines = [
        f"durable-chaos: seed {s.seed} ({s.seed_note}; rerun with --chaos-seed={s.seed})"
        f"{cached}",
        f"durable-chaos: adapters {', '.join(s.adapters)}; scenarios {scenarios}; "
        f"{s.schedules} generated schedule(s) per invariant"
        + (f"; report {_show(config, s.report_dir)}" if s.report_dir else ""),
    ]
    if state.not_selected is not None:
        lines.append(f"durable-chaos: chaos suite not collected: {state.not_selected}")
    return lines


def _show(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.relative_to(config.invocation_params.dir))
    except ValueError:
        return str(path)


def pytest_sessionstart(session: pytest.Session) -> None:
    state = chaos_state(session.config)
    if state is not None:
        state.started = time.perf_counter()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    if isinstance(collector, pytest.Session) and report.passed:
        state = chaos_state(collector.config)
        if state is not None and state.not_selected is None:
            suite = ChaosSuite.from_parent(collector, name=SUITE_NODE, nodeid=SUITE_NODE)
            suite.add_marker(MARKER)
            report.result.append(suite)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = chaos_state(config)
    if state is not None:
        _close_pool(state)
    if state is not None and state.terminated:
        # As the CLI: 128 + SIGTERM, not pytest's 2 for Ctrl-C.
        session.exitstatus = 128 + signal.SIGTERM
    if state is None or state.settings.report_dir is None:
        return
    if getattr(config, "workerinput", None) is not None:
        return  # its runs are in its spool file, for the controller
    _read_spools(state)
    from harness.outcome import SuiteOutcome
    from harness.schedules.library import describe_sets
    from harness.suite import environment

    names = tuple(dict.fromkeys(a.name for a in state.adapters.values()))
    suite = SuiteOutcome(
        adapters=names,
        seed=state.settings.seed,
        runs=tuple(state.runs),
        wall_time=time.perf_counter() - state.started,
        complete=exitstatus != pytest.ExitCode.INTERRUPTED and not state.terminated,
        interrupted=("SIGTERM" if state.terminated else
                     "SIGINT" if exitstatus == pytest.ExitCode.INTERRUPTED else None),
        environment=environment(),
        shrunk=tuple(state.shrunk),
        scenario_sets=describe_sets(state.scenarios),
    )
    from harness.suite import write_guarded

    report_dir = state.settings.report_dir
    written = write_guarded(suite, report_dir)
    if written.output_error is not None:
        # The tests ran; the evidence could not be written: could not judge, one line.
        state.report = f"could not judge: {written.output_error}"
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = 3
    else:
        state.report = (f"report {_show(config, report_dir / 'index.html')}, junit "
                        f"{_show(config, report_dir / 'junit.xml')}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    state = chaos_state(terminalreporter.config)
    if state is None:
        return
    if state.not_selected is None and not state.scenarios and not state.settings.schedules:
        # The suite was asked for and has nothing to judge: said, never read as a pass.
        terminalreporter.write_line("durable-chaos: nothing judged: no scenario file and "
                                    "--chaos-schedules 0 (only the adapter contract ran); give "
                                    "--chaos-scenarios or --chaos-schedules N")
    if state.report is not None:
        terminalreporter.write_line(f"durable-chaos: {state.report}")


class _XdistHooks:
    """Same seed in every worker; the workers' runs come back for the one report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_configure_node(self, node: Any) -> None:
        state = chaos_state(self.config)
        if state is not None:
            node.workerinput[_WORKER_SEED] = state.settings.seed



SPOOL_GLOB = ".xdist-runs-*.jsonl"


def _spool_of(config: pytest.Config, report_dir: Path | None) -> Path | None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or report_dir is None:
        return None
    return report_dir / f".xdist-runs-{workerinput.get('workerid', os.getpid())}.jsonl"


def _read_spools(state: ChaosState) -> None:
    """The xdist workers' finished runs, from their spool files (removed once read); a line
    cut short by a kill is skipped."""
    from harness.outcome import RunOutcome

    report_dir = state.settings.report_dir
    if report_dir is None:
        return
    for spool in sorted(report_dir.glob(SPOOL_GLOB)):
        try:
            lines = spool.read_text(encoding="utf-8").splitlines()
            spool.unlink()
        except OSError:
            continue
        for line in lines:
            try:
                data = json.loads(line)
                outcome = RunOutcome.from_json(data["run"])
            except (ValueError, KeyError, TypeError):
                continue
            (state.shrunk if data.get("shrunk") else state.runs).append(outcome)


# ---------------------------------------------------------------------------- collection


class ChaosSuite(pytest.Collector):
    """The virtual root of the built-in suite: one child per adapter."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        state = chaos_state(self.config)
        assert state is not None
        for spec in state.settings.adapters:
            yield AdapterSuite.from_parent(self, name=spec)


class AdapterSuite(pytest.Collector):
    """The contract, the scenario files and one generated item per invariant."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        state = chaos_state(self.config)
        assert state is not None
        spec = self.name
        yield ContractItem.from_parent(self, name="contract", spec=spec)
        for schedule in state.scenarios:
            stem = Path(schedule.path).stem if schedule.path else schedule.name
            yield ScenarioItem.from_parent(self, name=f"scenario[{stem}]", spec=spec,
                                           schedule=schedule)
        if state.settings.schedules > 0:
            from harness.checkers import ALL

            for checker in ALL:
                yield InvariantItem.from_parent(self, name=f"generated[{checker.name}]",
                                                spec=spec, invariant=checker.name)


class ChaosFailure(Exception):
    """An item's verdict: the text `repr_failure` shows, without a traceback."""


class _ChaosItem(pytest.Item):
    def __init__(self, *, spec: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    @property
    def state(self) -> ChaosState:
        state = chaos_state(self.config)
        assert state is not None
        return state

    def adapter(self) -> Adapter:
        """The adapter, once its contract holds (else this item is skipped)."""
        broken = self.state.contract(self.spec)
        if broken is not None:
            pytest.skip(f"adapter {self.spec} breaks the adapter contract (see "
                        f"{SUITE_NODE}::{self.spec}::contract)")
        return self.state.adapters[self.spec]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, ChaosFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        return self.path, None, f"{SUITE_NODE}: {self.spec} {self.name}"

    def rerun(self, invariant: str) -> str:
        settings = self.state.settings
        claims = ("" if settings.invariants is None
                  else f"--chaos-invariants {','.join(settings.invariants)} ")
        return (f"pytest --chaos-adapter {self.spec} --chaos-seed {settings.seed} "
                f"--chaos-schedules {settings.schedules} {claims}-m {MARKER} "
                f"-k \"generated and {invariant}\"")


class ContractItem(_ChaosItem):
    """`harness.conformance.check_adapter`: the adapter keeps its contract."""

    def runtest(self) -> None:
        broken = self.state.contract(self.spec)
        if broken is not None:
            raise ChaosFailure(f"AdapterContractError: {broken}")


class ScenarioItem(_ChaosItem):
    """One scenario file run once; fails listing every violated invariant."""

    def __init__(self, *, schedule: Schedule, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schedule = schedule

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        return (self.schedule.path or self.path), None, f"{SUITE_NODE}: {self.spec} {self.name}"

    def runtest(self) -> None:
        from harness.jobs import run_one

        adapter = self.adapter()
        outcome = run_one(self.state.pool(), adapter, self.spec, self.schedule,
                          self.state.options(self.spec))
        self.state.record([outcome])
        if outcome.failed or outcome.unknown:
            raise ChaosFailure(_scenario_failure(outcome, self.schedule))
        if outcome.expected_violations:
            names = ", ".join(r.checker for r in outcome.expected_violations)
            pytest.xfail(f"{names} violated, as the scenario's [expect] fails says (a known "
                         "bug it pins)")


class InvariantItem(_ChaosItem):
    """Generated schedules judged by one invariant, shrunk on failure."""

    def __init__(self, *, invariant: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.invariant = invariant

    def runtest(self) -> None:
        from harness.fanout import explore_fanned
        from harness.jobs import run_one

        adapter = self.adapter()
        if self.invariant not in self.state.claimed(self.spec):
            from harness.report.summary import not_claimed_note

            pytest.skip(not_claimed_note(self.spec))
        settings = self.state.settings
        seed = item_seed(settings.seed, self.nodeid)
        options = self.state.options(self.spec)
        # As `durable-chaos run`: seed-derived batches, the same schedules for any number of
        # workers; outside the frozen clock, since the parent waits on workers in real time.
        pool = self.state.pool()
        found = explore_fanned(adapter, self.spec, settings.schedules, seed,
                               replace(options, report_dir=None), workers=settings.workers,
                               invariant=self.invariant, pool=pool)
        # Named after this item: every item's shrinking restarts the names at
        # "shrunk-generated-0".
        minimal = [run_one(pool, adapter, self.spec,
                           _renamed(m, f"{self.invariant}-{m.name}"), options)
                   for m in found.shrunk]
        self.state.record(found.runs, minimal)
        if minimal:
            raise ChaosFailure(_generated_failure(self, minimal[0], seed, found.examples))
        crashed = [r for r in found.runs if r.error is not None]
        if crashed:
            first = crashed[0]
            raise ChaosFailure(
                f"{self.invariant}: unknown: the adapter crashed on {len(crashed)} of "
                f"{len(found.runs)} generated schedule(s) (seed {seed}); first: {first.error}"
                f"\n\nschedule:\n\n{first.schedule_toml}\n{_replay(first, self.spec)}"
            )


def _renamed(outcome: RunOutcome, name: str) -> Schedule:
    import tomllib

    from harness.schedules.scenario_file import parse_scenario

    schedule = parse_scenario(tomllib.loads(outcome.schedule_toml), "<shrunk>", name)
    return replace(schedule, name=name, source="generated", path=None)


def _scenario_failure(outcome: RunOutcome, schedule: Schedule) -> str:
    lines = []
    if outcome.error is not None:
        lines.append(f"unknown: the adapter crashed: {outcome.error}")
    for name in outcome.unmet_expectations:
        lines.append(f"{name}: held, but the scenario expects it to fail ([expect] fails): "
                     f"the known bug it pins did not show; if it was fixed, remove {name} "
                     "from [expect] fails")
    for result in outcome.results:
        if result.valid is False:
            expected = (" (expected: [expect] fails)"
                        if result.checker in outcome.expected_failures else "")
            lines.append(f"{result.checker}{expected}: {_indent(result.witness(3))}")
        elif result.valid is None and outcome.error is None:
            lines.append(f"{result.checker}: unknown: {result.note}")
    lines.append("")
    lines.append(f"scenario {schedule.name} ({schedule.path}, seed {schedule.seed})"
                 + (f", expected {outcome.expected}" if outcome.expected else ""))
    lines.append(f"replay: {outcome.replay_command}")
    return "\n".join(lines)


def _generated_failure(item: InvariantItem, minimal: RunOutcome, seed: int,
                       examples: int) -> str:
    by_name = {r.checker: r for r in minimal.results}
    result = by_name.get(item.invariant)
    if result is not None and result.valid is False:
        head = f"{item.invariant}: {_indent(result.witness(3))}"
    else:
        head = (f"{item.invariant}: failed while exploring, but the minimal schedule did not "
                f"fail again when replayed ({result.outcome if result else 'not checked'})")
    others = sorted(r.checker for r in minimal.results
                    if r.valid is False and r.checker != item.invariant)
    steps = minimal.steps
    lines = [head]
    if others:
        lines.append(f"(this schedule also breaks: {', '.join(others)})")
    lines += [
        "",
        f"minimal failing schedule ({steps} step(s), shrunk from the failure found after "
        f"{examples} generated schedule(s), item seed {seed}):",
        "",
        minimal.schedule_toml.rstrip("\n"),
        "",
        _replay(minimal, item.spec),
        f"rerun this item: {item.rerun(item.invariant)}",
    ]
    return "\n".join(lines)


def _replay(outcome: RunOutcome, spec: str) -> str:
    if outcome.history_path is not None:
        return f"replay: {outcome.replay_command}"
    from harness.replay import replay_command

    return ("replay: save the schedule above as schedule.toml, then: "
            + replay_command(spec, None))


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


def adapter_specs(config: pytest.Config) -> Sequence[str]:
    """The adapters of this session (the fixtures' default is the reference)."""
    state = chaos_state(config)
    return state.settings.adapters if state is not None else ("reference",)
