"""pytest plugin (registered through `pytest11`); silent unless `--chaos-adapter` is given.

Installing durable-chaos changes no other project's test run: without `--chaos-adapter` (or
the ini key `chaos_adapter`) this module collects nothing, prints nothing and imports nothing
of the harness but the option parser (`harness.settings`, which imports only the error
hierarchy); only the `chaos_*` fixtures exist, for tests that ask for them. The hooks here
read one `ChaosSettings`, parsed by `harness.settings.from_pytest`.

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
import os
import signal
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.settings import CACHE_KEY, DEFAULT_SCHEDULES, WORKER_SEED, OptionSource

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from harness.adapters.base import Adapter
    from harness.outcome import RunOutcome
    from harness.run import RunOptions
    from harness.schedules.model import Schedule
    from harness.settings import ChaosSettings
    from harness.supervisor import Pool

# The fixtures live in their own module; pytest imports it with this plugin.
pytest_plugins = ["harness.fixtures"]

GROUP = "durable-chaos"
SUITE_NODE = "durable-chaos"
MARKER = "chaos"


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
        if self.spool is not None:
            from harness.outcome import spool_runs

            spool_runs(self.spool, runs, shrunk)

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
            from harness.jobs import check_contract

            self.contracts[spec] = check_contract(self.pool(), self.adapters[spec], spec,
                                                  self.options(spec))
        return self.contracts[spec]


STATE = pytest.StashKey[ChaosState]()


# ---------------------------------------------------------------------------- session


def pytest_configure(config: pytest.Config) -> None:
    from harness import settings as options
    from harness.errors import UsageError

    def warn(text: str) -> None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(text), stacklevel=2)

    try:
        settings = options.from_pytest(config, warn)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings is None:
        return
    from harness.adapters import load_adapter

    adapter_where = OptionSource(config, "--chaos-adapter", "chaos_adapter").value()[1]
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
    components, where = OptionSource(config, "--chaos-components", "chaos_components").value()
    if components is not None and str(components).strip():
        from harness.components.stack import use_components

        try:
            use_components(str(components).strip(), source=where)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    scenarios = _load_scenarios(config, settings.scenarios)
    config.stash[STATE] = ChaosState(settings, adapters, scenarios,
                                     not_selected=options.not_selected(config, settings))
    _lock_report_dir(config, config.stash[STATE])
    if getattr(config, "workerinput", None) is None:
        from harness.evidence import sweep_scratch

        sweep_scratch()  # a killed session's scratch directories
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and settings.report_dir is not None:
        from harness.outcome import spool_of

        config.stash[STATE].spool = spool_of(settings.report_dir,
                                             workerinput.get("workerid", os.getpid()))
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

    where = OptionSource(config, "--chaos-report", "chaos_report").value()[1]
    lock = ReportLock(report_dir, option=where)
    try:
        lock.acquire()
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    state.lock = lock
    fresh_runs_dir(report_dir)
    from harness.outcome import SPOOL_GLOB

    for stale in report_dir.glob(SPOOL_GLOB):  # a killed session's
        stale.unlink(missing_ok=True)


def _load_scenarios(config: pytest.Config, path: Path | None) -> list[Schedule]:
    if path is None:
        return []
    from harness.errors import UsageError
    from harness.schedules.scenario_file import load_scenario

    where = OptionSource(config, "--chaos-scenarios", "chaos_scenarios").value()[1]
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
    from harness.outcome import read_spools

    runs, shrunk = read_spools(state.settings.report_dir)
    state.runs += runs
    state.shrunk += shrunk
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
            node.workerinput[WORKER_SEED] = state.settings.seed



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
            from harness.report.failure import scenario

            raise ChaosFailure(scenario(outcome, self.schedule))
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
        from harness.report import failure

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
            raise ChaosFailure(failure.generated(self.invariant, self.spec, minimal[0], seed,
                                                 found.examples, self.rerun(self.invariant)))
        if any(r.error is not None for r in found.runs):
            raise ChaosFailure(failure.crashed(self.invariant, self.spec, found.runs, seed))


def _renamed(outcome: RunOutcome, name: str) -> Schedule:
    import tomllib

    from harness.schedules.scenario_file import parse_scenario

    schedule = parse_scenario(tomllib.loads(outcome.schedule_toml), "<shrunk>", name)
    return replace(schedule, name=name, source="generated", path=None)


def adapter_specs(config: pytest.Config) -> Sequence[str]:
    """The adapters of this session (the fixtures' default is the reference)."""
    state = chaos_state(config)
    return state.settings.adapters if state is not None else ("reference",)
