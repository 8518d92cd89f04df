"""Fixtures for writing one's own chaos tests; loaded with the plugin, cheap until used.

    def test_answer_after_a_week(chaos_run):
        run = chaos_run('''
            [[step]]
            at = "0s"
            do = "message"
            session = "s1"
            tools = ["send_email"]

            [[step]]
            at = "7d"
            do = "answer"
            session = "s1"
        ''')
        assert run["pinning-bound"].valid, run["pinning-bound"].witness()

    def test_card_is_shown(chaos_runtime, chaos_world, chaos_clock):
        chaos_runtime.send_message("s1", {"message_id": "s1.m1", "text": "hi",
                                          "user": "alice", "plan": ["send_email"]})
        chaos_clock.advance(60)
        assert chaos_world.cards.open_cards("s1")

The adapter is `--chaos-adapter` (every one given: tests are parametrized over them) or the
reference. Seeds derive from the session seed and the test's node id.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness import plugin

if TYPE_CHECKING:
    from harness.adapters.base import Adapter, Runtime
    from harness.checkers.base import Checker, Result
    from harness.history import History
    from harness.outcome import RunOutcome
    from harness.schedules.model import Schedule
    from harness.world import World

_LOADED = pytest.StashKey[dict[str, "Adapter"]]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "chaos_adapter_spec" not in metafunc.fixturenames:
        return
    specs = plugin.adapter_specs(metafunc.config)
    mine = [m for m in metafunc.definition.iter_markers("parametrize")
            if "chaos_adapter_spec" in str(m.args[0] if m.args else "")]
    if len(specs) > 1 and not mine:
        metafunc.parametrize("chaos_adapter_spec", list(specs), indirect=True)


@pytest.fixture
def chaos_adapter_spec(request: pytest.FixtureRequest) -> str:
    """The adapter spec of this test: a --chaos-adapter value, or 'reference'."""
    param = getattr(request, "param", None)
    return str(param) if param is not None else plugin.adapter_specs(request.config)[0]


def _load(config: pytest.Config, spec: str) -> Adapter:
    state = plugin.chaos_state(config)
    if state is not None and spec in state.adapters:
        return state.adapters[spec]
    loaded = config.stash.setdefault(_LOADED, {})
    if spec not in loaded:
        from harness.adapters import load_adapter

        loaded[spec] = load_adapter(spec)
    return loaded[spec]


@pytest.fixture
def chaos_adapter(request: pytest.FixtureRequest, chaos_adapter_spec: str) -> Adapter:
    """The loaded adapter (see `harness.adapters.base.Adapter`)."""
    return _load(request.config, chaos_adapter_spec)


@pytest.fixture
def chaos_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed: derived from the session seed and the test's node id."""
    return plugin.item_seed(plugin.session_seed(request.config), request.node.nodeid)


@pytest.fixture
def chaos_history(chaos_adapter: Adapter) -> History:
    """The fresh history `chaos_runtime` records into."""
    from harness.adapters.opening import run_history

    return run_history(chaos_adapter)


@pytest.fixture
def chaos_runtime(chaos_adapter: Adapter, chaos_seed: int,
                  chaos_history: History) -> Iterator[Runtime]:
    """A runtime opened for a fresh history (`chaos_history`), closed at teardown.

    Drive it yourself; call `finish()` before judging the history with checkers.
    """
    from harness.adapters.opening import open_run

    opened: list[Runtime] = []
    try:
        with open_run(chaos_adapter, chaos_seed, chaos_history, opened=opened.append,
                      check=False) as runtime:
            yield runtime
    finally:
        if opened:
            opened[0].close()


@pytest.fixture
def chaos_world(chaos_runtime: Runtime) -> World:
    """The world of `chaos_runtime`: cards, outbox, ledger, provider faults, identity."""
    return chaos_runtime.world


class ChaosClock:
    """The runtime's clock: virtual on the simulator; on a real runtime, real time that
    jumps when the engine is quiescent."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def now(self) -> float:
        """Seconds since the run started."""
        return self._runtime.now()

    def advance(self, seconds: float) -> float:
        """Let the runtime run `seconds` more; returns the new time."""
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative amount ({seconds})")
        self._runtime.advance(self._runtime.now() + seconds)
        return self._runtime.now()

    def advance_to(self, at: float) -> float:
        """Let the runtime run until time `at` (never backwards); returns the new time."""
        self._runtime.advance(max(at, self._runtime.now()))
        return self._runtime.now()


@pytest.fixture
def chaos_clock(chaos_runtime: Runtime) -> ChaosClock:
    """`now()`, `advance(seconds)` and `advance_to(at)` on `chaos_runtime`."""
    return ChaosClock(chaos_runtime)


@dataclass(frozen=True)
class ChaosRun:
    """One schedule run by `chaos_run`: the outcome, its history and results by name."""

    outcome: RunOutcome
    history: History

    @property
    def results(self) -> Mapping[str, Result]:
        return {r.checker: r for r in self.outcome.results}

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def violated(self) -> list[str]:
        return [r.checker for r in self.outcome.results if r.valid is False]

    def __getitem__(self, invariant: str) -> Result:
        """The result of `invariant`, claimed by the adapter or not (see `unclaimed`)."""
        judged = {**{r.checker: r for r in self.outcome.unclaimed}, **self.results}
        try:
            return judged[invariant]
        except KeyError:
            raise KeyError(f"no result for {invariant!r}; results: {sorted(judged)}"
                           ) from None

    @property
    def unclaimed(self) -> list[str]:
        """Invariants the adapter does not claim: judged, never failing the run."""
        return [r.checker for r in self.outcome.unclaimed]


class ChaosRunner:
    """`chaos_run(schedule)`: run a Schedule, a scenario TOML text or a scenario file."""

    def __init__(self, config: pytest.Config, spec: str) -> None:
        self._config = config
        self._spec = spec

    def __call__(
        self,
        schedule: Schedule | str | os.PathLike[str],
        *,
        adapter: str | None = None,
        seed: int | None = None,
        checkers: Sequence[Checker] | None = None,
    ) -> ChaosRun:
        from dataclasses import replace

        from harness.run import RunOptions, run_schedule

        spec = adapter or self._spec
        recording = _Recording(_load(self._config, spec))
        plan = _schedule(schedule)
        if seed is not None:
            plan = replace(plan, seed=seed)
        from harness.plugin import chaos_state

        state = chaos_state(self._config)
        options = RunOptions(adapter_spec=spec, report_dir=None,
                             run_timeout=state.settings.run_timeout if state else None)
        if checkers is not None:
            options = replace(options, checkers=checkers)
        outcome = run_schedule(recording, plan, options)
        if recording.history is None:
            raise RuntimeError(f"adapter {spec!r} did not open a runtime: "
                               f"{outcome.error or 'no error recorded'}")
        return ChaosRun(outcome, recording.history)


@pytest.fixture
def chaos_run(request: pytest.FixtureRequest, chaos_adapter_spec: str) -> ChaosRunner:
    """A function: run a Schedule, a scenario TOML string or a path; get a `ChaosRun`."""
    return ChaosRunner(request.config, chaos_adapter_spec)


def _schedule(value: Schedule | str | os.PathLike[str]) -> Schedule:
    from harness.schedules.model import Schedule
    from harness.schedules.scenario_file import load_scenario, parse_scenario

    if isinstance(value, Schedule):
        return value
    if isinstance(value, str) and ("\n" in value or "[[step]]" in value):
        import textwrap

        text = textwrap.dedent(value)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            from harness.errors import ScenarioError

            raise ScenarioError("<chaos_run text>", "-", f"not valid TOML ({exc})",
                                "see scenarios/README.md for the format") from None
        return parse_scenario(data, "<chaos_run text>", "chaos-run")
    if isinstance(value, str | os.PathLike):
        return load_scenario(Path(value))
    raise TypeError(f"Expected a Schedule, scenario TOML text or a path but got "
                    f"schedule={value!r} (type={type(value).__name__})")


class _Recording:
    """An adapter that keeps the history of the runtime it opens (`chaos_run`)."""

    def __init__(self, adapter: Adapter) -> None:
        self._adapter = adapter
        self.history: History | None = None

    @property
    def name(self) -> str:
        return self._adapter.name

    @property
    def description(self) -> str:
        return self._adapter.description

    @property
    def engine(self) -> str:
        return self._adapter.engine

    def check_config(self) -> Any:
        return self._adapter.check_config()

    def open(self, ctx: Any) -> Runtime:
        self.history = ctx.history
        return self._adapter.open(ctx)

    def __getattr__(self, name: str) -> Any:  # `config` and whatever else the runner reads
        return getattr(self._adapter, name)


__all__ = ["ChaosClock", "ChaosRun", "ChaosRunner"]
