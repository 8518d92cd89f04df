"""A kit for real-engine adapters: a user's own agent under test, on any engine.

Every adapter for an agent on a real engine repeats the same parts: the harness's world on
HTTP, an engine observer wired to the agent's turns and cards, one process group per worker
of each version with crash, pause and fault points, a clock that maps scenario time onto the
real time of an engine without time skipping, an event loop for async engine clients, and the
lifecycle (start, deploy v1, finish, close in reverse). `KitRuntime` owns all of that; a
subclass writes only what its app alone knows:

- `observe(**wiring)`: the engine observer (`TemporalObserver(...)`, `DbosObserver(...)`,
  `RestateObserver(...)`), passing the kit's `wiring` on;
- `worker(version)`: the command that starts one worker of a version;
- `release(version, deployment)`: route new work to a version (the kit started its workers);
- `send(turn)`: start a turn (a user message) in the engine;
- `reply(turn, tool_call, decision)`: answer a turn's card through the engine;
- optionally `start_engine()` (the engine's own server, started with `spawn`),
  `deployment(version)` (the engine's
  name for a version), `invocation(turn)` (the engine's id of a turn's invocation),
  `card_outcome(turn, state)` (close cards from the engine's result), `effects_file` and
  `effect(line)` (an app that keeps its own effects), `fault_points` (the app's own fault
  points) and `cancel(session)`.

`KitAdapter` is the adapter: its name, the runtime class, and the `Timing` (the scale and the
thresholds; tolerances in real seconds, converted through the scale into the checkers'
scenario seconds). See docs/adapter-kit.md.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from contract.thresholds import CheckConfig
from harness.adapters.base import RunContext
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.effects import EffectsFile, Line, apply_effect
from harness.errors import ComponentUnavailable, ConfigError
from harness.observers.base import EngineObserver, InvocationState
from harness.observers.hosts import POINTS, WorkerHosts
from harness.scaling import TICK, AnchoredScale, Scale, ScaledClock, TimeScale, guarded
from harness.world import World
from harness.world_server import WorldServer

__all__ = [
    "AnchoredScale",
    "KitAdapter",
    "KitRuntime",
    "TimeScale",
    "Timing",
    "Turn",
    "free_port",
    "wait_until",
]

T = TypeVar("T")
KEEP_LOGS_ENV = "DURABLE_CHAOS_KEEP_LOGS"
# How engines name an invocation ended by a cancel (the observer's `detail`).
_ENDED_BY_CANCEL = frozenset({"canceled", "cancelled", "terminated"})


def _positive(value: object, name: str, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ConfigError(f"Expected {name} > 0 ({unit}) but got {name}={value!r} "
                          f"(type={type(value).__name__})")


@dataclass(frozen=True, slots=True)
class Timing:
    """How a run maps time, and the bounds the checkers judge it by.

    `hand_off_after` (the pinning bound) and `max_wait` (how long a card waits for its
    answer) are scenario seconds, as in production; the app waits `real(max_wait)` real
    seconds. Slack is given in real seconds, where the engine's latency lives, and converted
    through the scale: `tolerance` at each bound it is added to (`slack_at`), `liveness` (how
    long after the last fault the engine may take to settle) at the scale's steepest rate,
    `downtime` (a crashed worker's) at the moment of the crash. `card_patience` is how long
    an answer waits for its card to show, in real seconds (the runner's default is 30, days
    on such a scale). `max_steps_per_turn` is your agent's bound on model steps per turn, if
    it has one: `turn-answered` then judges it (None: not judged from above).

    The run does not use `scale` as given but `run_scale`: `scale` with a guard band of
    `tolerance` real seconds after each bound (`harness.scaling.guarded`), so that a bound's
    slack is the same just after it as just before it. Without it, a bound on an anchor
    (5 minutes at 3 real s, then 7.1 hours per real second) would read a hand-off 4 real ms
    late as 100 scenario seconds late; with the rate after the anchor instead, a second of
    slack would excuse 7 hours of pinning. Everything the run times goes through
    `run_scale`: the clock, `real()`, the slack, the steps' lateness.
    """

    scale: Scale
    hand_off_after: float = 300.0
    max_wait: float = 8 * 86400.0
    tolerance: float = 1.0
    liveness: float = 5.0
    downtime: float = 1.0
    card_patience: float = 3.0
    max_steps_per_turn: int | None = None
    run_scale: Scale = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scale, Scale):
            raise ConfigError(f"Expected a scale (AnchoredScale, TimeScale) but got "
                              f"scale={self.scale!r}; e.g. AnchoredScale(((300, 3), "
                              "(8 * 86400, 30)))")
        for name in ("hand_off_after", "max_wait"):
            _positive(getattr(self, name), name, "scenario seconds")
        for name in ("tolerance", "liveness", "downtime", "card_patience"):
            _positive(getattr(self, name), name, "real seconds")
        steps = self.max_steps_per_turn
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or steps < 1):
            raise ConfigError(f"Expected max_steps_per_turn >= 1 (model steps) or None but got "
                              f"max_steps_per_turn={steps!r} (type={type(steps).__name__})")
        object.__setattr__(self, "run_scale", guarded(
            self.scale, (self.hand_off_after, self.max_wait), self.tolerance))

    def real(self, scenario_seconds: float) -> float:
        """The real seconds the app waits for what takes `scenario_seconds` from time 0."""
        return self.run_scale.real(scenario_seconds)

    def slack_at(self, bound: float) -> float:
        """`tolerance` real seconds in scenario seconds, just before scenario time `bound`
        (on `run_scale`, the same just after it)."""
        real = self.run_scale.real(bound)
        return bound - self.run_scale.scenario(max(0.0, real - self.tolerance))

    def check_config(self) -> CheckConfig:
        """The checkers' thresholds, in scenario seconds.

        Each bound gets `tolerance` real seconds at `run_scale`'s rate around it
        (`hand_off_tolerance`, `max_wait_tolerance`): on 5 minutes at 3 real s and 8 days at
        30, a second is 100 scenario seconds at 5 minutes and 7.1 hours at 8 days, and the
        hours must not excuse a pin of 10 minutes. The guard band keeps the rate before an
        anchor for `tolerance` real seconds after it, so a bound late by less than that in
        real time holds and late by more does not, whichever side of an anchor it falls.
        The rules not tied to a bound (a queued message resumed, a retired deployment let
        go) get the widest of the two, so none rests on where on the scale the engine was
        late. A waiting turn holds its session up to `max_wait`, so liveness adds to it.
        """
        hand_off, max_wait = self.slack_at(self.hand_off_after), self.slack_at(self.max_wait)
        return CheckConfig(hand_off_after=self.hand_off_after, max_wait=self.max_wait,
                           tolerance=max(hand_off, max_wait), hand_off_tolerance=hand_off,
                           max_wait_tolerance=max_wait,
                           liveness_bound=self.max_wait + self.run_scale.steepest * self.liveness,
                           max_steps_per_turn=self.max_steps_per_turn)


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message, run as one turn: what `send` starts and `reply` answers."""

    session: str
    id: str  # SESSION.turnN
    message_id: str
    text: str
    user: str
    plan: tuple[Any, ...]
    max_wait: float  # real seconds the app waits for an answer


def _reading_engine_first(cancel: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    """The subclass's `cancel`, after one fresh read of the engine: the turns already running
    are recorded started before the runner records the cancel (`cancel-honored` judges the
    turns in progress at the cancel). On the scaled clock the observer's next poll would come
    a minute of scenario time later, and a cancel a few seconds after a message found no turn
    in progress."""
    @functools.wraps(cancel)
    def wrapped(self: KitRuntime, session: str) -> None:
        if self.observer is not None:
            self.observer.refresh(timeout=2.0)
        cancel(self, session)

    wrapped._reads_engine_first = True  # type: ignore[attr-defined]
    return wrapped


class KitRuntime:
    """One run of a user's app on a real engine; subclass it (see the module docstring).

    Lifecycle: `__init__` starts the world server, `start_engine()`, the observer
    (`observe`), v1 (`deploy`), then the clock (scenario time 0 once all is up); the runner
    drives `advance`, `send_message`, `answer` and the faults; `finish` lets the observer
    read the engine's last state; `close` stops everything in reverse, process groups and
    all. Capabilities: Redeployable, Crashable, Pausable, FaultPoints (the world's delivery
    points and the app's own `fault_points`); Cancellable when the subclass has `cancel`.
    """

    world_endpoints: ClassVar[tuple[str, ...]] = ("provider",)
    # The fault points the app asks about itself (names of `contract.faultpoints`, as scenario
    # files arm them): it calls the world server's `POST /faultpoint` at each and the kit acts
    # while it waits. A name here is no longer judged at the world's deliveries.
    fault_points: ClassVar[tuple[str, ...]] = ()
    workers_per_version: ClassVar[int] = 1
    # Where workers run and import from (cwd, head of PYTHONPATH); None: the current directory.
    app_dir: ClassVar[Path | None] = None
    # A JSONL file the app writes its effects to, when it keeps its own (see `effect`).
    effects_file: Path | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("cancel")
        if callable(own) and not getattr(own, "_reads_engine_first", False):
            cls.cancel = _reading_engine_first(own)  # type: ignore[attr-defined]

    def __init__(self, ctx: RunContext, timing: Timing) -> None:
        self.ctx, self.timing, self.history = ctx, timing, ctx.history
        self.points = tuple(dict.fromkeys((*POINTS, *self.fault_points)))
        self.card_patience = timing.card_patience
        self.clock = ScaledClock(timing.run_scale)
        # The runner measures a step's lateness through it, in real seconds (harness.run).
        self.time_scale: Scale = timing.run_scale
        self.scratch = Path(tempfile.mkdtemp(prefix="durable-chaos-kit-"))
        self.turns: dict[str, Turn] = {}  # the engine's invocation id -> its turn
        self._versions: dict[str, str] = {}  # deployment -> version
        self._runner: asyncio.Runner | None = None
        self._spawned: list[ProcessGroup] = []
        self._effects: EffectsFile | None = None
        self.observer: EngineObserver | None = None
        self.hosts: WorkerHosts | None = None
        self.server = WorldServer(self.history, now=self.now, on_fault_point=self._fault_point)
        self.world: World = self.server.world
        self.history.bind_clock(lambda: 0.0)  # start-up happens "before" time 0
        try:
            self.server.start()
            self.start_engine()
            self.observer = self.observe(world=self.world, turn_of=self._turn_of,
                                         on_turn_end=self._turn_end)
            self.hosts = WorkerHosts(self.history, now=self.now, start=self._start_worker,
                                     downtime=0.0, observer=self.observer,
                                     invocation_of=self._invocation_of,
                                     app_points=self.fault_points, tick_every=TICK)
            if self.effects_file is not None:
                self._effects = EffectsFile(self.effects_file, self.effect).start()
            self.observer.start()
            self.deploy("v1")
            self.clock.start()
            self.history.bind_clock(self.now)
        except BaseException:
            self.close()
            raise

    # -- what the app's adapter writes ------------------------------------------------------

    def start_engine(self) -> None:
        """Start the engine's own server, if the adapter runs one (with `spawn`), and connect
        to it once it answers (`wait_until`)."""
        return None

    def observe(self, **wiring: Any) -> EngineObserver:
        """The engine observer, given `**wiring` (world, turn_of, on_turn_end)."""
        raise NotImplementedError(f"{type(self).__name__}.observe(**wiring) must return an "
                                  "engine observer, e.g. DbosObserver(self.history, "
                                  "database_url=..., **wiring)")

    def worker(self, version: str) -> Sequence[str]:
        """The command that starts one worker of `version` (its environment:
        `worker_env`)."""
        raise NotImplementedError(f"{type(self).__name__}.worker(version) must return the "
                                  "command of one worker, e.g. [sys.executable, '-m', 'app']")

    def worker_env(self, version: str) -> dict[str, str]:
        """What every worker reads: WORLD_URL (the world, also DURABLE_CHAOS_WORLD_URL),
        APP_VERSION, and PYTHONPATH led by `app_dir`."""
        path = os.pathsep.join(p for p in (str(self._app_dir()), os.environ.get("PYTHONPATH"))
                               if p)
        return {"WORLD_URL": self.server.url, "DURABLE_CHAOS_WORLD_URL": self.server.url,
                "APP_VERSION": version, "PYTHONPATH": path}

    def deployment(self, version: str) -> str:
        """The engine's name for `version` (what the observer records)."""
        return version

    def release(self, version: str, deployment: str) -> str | None:
        """Route new work to `deployment` (its workers are up); by default wait until the
        engine says it is current. Return the engine's own id of the deployment when the
        engine assigns one only now (Restate, on registration): the kit keys its hosts by it,
        as the observer records it; None keeps `deployment`."""
        observer = self._observer()
        wait_until(lambda: observer.current() == deployment or None, timeout=60,
                   what=f"deployment {deployment} current", interval=0.05)
        return None

    def invocation(self, turn: Turn) -> str:
        """The engine's id of the invocation that runs `turn` (default: the turn id)."""
        return turn.id

    def send(self, turn: Turn) -> None:
        raise NotImplementedError(f"{type(self).__name__}.send(turn) must start the turn")

    def reply(self, turn: Turn, tool_call: str, decision: str) -> None:
        raise NotImplementedError(f"{type(self).__name__}.reply(turn, tool_call, decision) "
                                  "must answer the card")

    def card_outcome(self, turn: Turn, state: InvocationState) -> str | None:
        """The outcome to close `turn`'s still open cards with once its invocation completed
        (`state`: how), or None to leave them open."""
        return None

    def effect(self, line: Line) -> None:
        """One line of `effects_file` into the world (default: the harness's own shape,
        `harness.effects.apply_effect`)."""
        apply_effect(self.world, line)

    # -- helpers for the adapter ------------------------------------------------------------

    def spawn(self, argv: Sequence[str], name: str) -> ProcessGroup:
        """Start a process group of the run's own (an engine's server); `close` stops it,
        its logs go to `scratch`."""
        group = ProcessGroup(list(argv), name=name, log_dir=self.scratch)
        self._spawned.append(group)
        return group

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of an async engine client on the runtime's own event loop."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coro)

    def turns_of(self, session: str) -> list[Turn]:
        return [t for t in self.turns.values() if t.session == session]

    # -- the Runtime protocol ---------------------------------------------------------------

    def now(self) -> float:
        return self.clock.now()

    def advance(self, until: float) -> None:
        self.clock.sleep_until(until, tick=self._hosts().tick)

    def send_message(self, session: str, message: dict[str, Any]) -> None:
        if not isinstance(message.get("message_id"), str):
            # A message with no id (a broken client's): refused here, as the runtime's API
            # would refuse it, before it becomes a turn the kit could not name.
            raise ValueError(f"a message needs a string message_id, got {message!r}")
        turn = Turn(session, f"{session}.turn{len(self.turns_of(session)) + 1}",
                    str(message["message_id"]), str(message["text"]), str(message["user"]),
                    tuple(message["plan"]), self.timing.real(self.timing.max_wait))
        self.turns[self.invocation(turn)] = turn
        self.send(turn)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        card = self.world.state.cards[tool_call]
        turn = next((t for t in self.turns.values() if t.id == card.turn), None)
        if turn is None:
            raise KeyError(f"card {tool_call} names turn {card.turn!r}, which this runtime "
                           "never started: cards must name the turn ids `send` was given")
        try:
            self.reply(turn, tool_call, decision)
        except Exception:
            # The engine may refuse an answer to a turn whose invocation already ended (a
            # Temporal signal to a cancelled workflow raises): a refusal the person is told
            # of, not a crash of the run. Anything else is the adapter's error.
            # The refusal's reason is `ended`: the turn's invocation has (its `turn.ended` is
            # recorded by the refresh that found it), whatever ended it.
            ended = self._ended_as(turn)
            if ended is None:
                raise
            cancelled = {"outcome": "cancelled"} if ended in _ENDED_BY_CANCEL else {}
            self.history.add("answer.refused", session=turn.session, turn=turn.id,
                             tool_call=tool_call, data={
                                 "event_id": f"{tool_call}.refused#{len(self.history)}",
                                 "reason": "ended", "decision": decision, **cancelled})

    def _ended_as(self, turn: Turn) -> str | None:
        """How the invocation of `turn` ended, as the engine says now (`canceled`,
        `succeeded`, ...); None while it has not."""
        observer = self._observer()
        observer.refresh()
        state = observer.invocations().get(self.invocation(turn))
        if state is None or state.status != "completed":
            return None
        return state.detail or "succeeded"

    def deploy(self, version: str) -> str:
        hosts = self._hosts()
        version = version or f"v{len({d for d, _ in hosts.hosts.values()}) + 1}"
        dep = self.deployment(version)
        self._versions[dep] = version
        for _ in range(self.workers_per_version):
            hosts.add(dep)
        engine_id = self.release(version, dep)
        if engine_id is not None and engine_id != dep:
            hosts.rename(dep, engine_id)
            self._versions[engine_id] = version
            dep = engine_id
        return dep

    def crash_host(self, host: str) -> str:
        hosts = self._hosts()
        return hosts.crash(hosts.select(host),
                           downtime=self.timing.run_scale.span(self.timing.downtime, self.now()))

    def pause_host(self, host: str, duration: float) -> str:
        hosts = self._hosts()
        return hosts.pause(hosts.select(host), duration)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self._hosts().arm(point, action, duration, times)

    def finish(self) -> None:
        # The engine may still be applying the last step at the horizon: wait until it has
        # nothing left to run (bounded), then take in what it wrote.
        self._observer().settle(timeout=self.timing.liveness + self.timing.tolerance)
        if self._effects is not None:
            self._effects.read()
        self._observer().wait_polls(2)

    def close(self) -> None:
        if self._effects is not None:
            self._effects.stop()
        if self.observer is not None:
            self.observer.stop()
        if self.hosts is not None:
            self.hosts.close()
        for group in reversed(self._spawned):
            group.stop()
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        self.server.stop()
        if not os.environ.get(KEEP_LOGS_ENV):
            shutil.rmtree(self.scratch, ignore_errors=True)

    # -- inside ---------------------------------------------------------------------------

    def _app_dir(self) -> Path:
        return self.app_dir or Path.cwd()

    def _observer(self) -> EngineObserver:
        assert self.observer is not None, "the observer starts in __init__"
        return self.observer

    def _hosts(self) -> WorkerHosts:
        assert self.hosts is not None, "the hosts start in __init__"
        return self.hosts

    def _start_worker(self, deployment: str) -> ProcessGroup:
        version = self._versions.get(deployment, deployment)
        count = sum(1 for d, _ in self._hosts().hosts.values() if d == deployment)
        return ProcessGroup(list(self.worker(version)), name=f"worker-{version}-{count + 1}",
                            cwd=self._app_dir(), log_dir=self.scratch,
                            env=self.worker_env(version))

    def _turn_of(self, state: InvocationState) -> tuple[str, str, str] | None:
        turn = self.turns.get(state.id)
        return None if turn is None else (turn.session, turn.id, turn.message_id)

    def _invocation_of(self, delivery: Any) -> str | None:
        from harness.observers.hosts import turn_of_delivery

        turn_id = turn_of_delivery(delivery)
        return next((inv for inv, t in self.turns.items() if t.id == turn_id), turn_id)

    def _turn_end(self, turn: tuple[str, str, str], state: InvocationState) -> None:
        mine = next((t for t in self.turns.values() if t.id == turn[1]), None)
        outcome = None if mine is None else self.card_outcome(mine, state)
        if outcome is not None:
            for card in self.world.cards.open_cards(turn[0]):
                if card.turn == turn[1]:
                    self.world.close_card(card.tool_call, outcome)

    def _fault_point(self, point: str, host: str, pid: int) -> str | None:
        # The app asks at its own fault point and waits for the answer: take in the effects
        # it logged before the point, then act before replying.
        if self._effects is not None:
            self._effects.read()
        return self._hosts().reach(point, pid) if self.hosts is not None else None


@dataclass(frozen=True)
class KitAdapter:
    """The adapter of a `KitRuntime`: `open(ctx)` returns `runtime(ctx, timing)`.

    `requires` names what a run needs here: executables (a name on PATH or a path) and
    Python modules (`module:NAME`); `preflight` (and `durable-chaos doctor`) checks those,
    and nothing the built-in engine path needs.
    """

    name: str
    runtime: type[KitRuntime]
    timing: Timing
    description: str = ""
    engine: str = "real"
    requires: tuple[str, ...] = ()

    def check_config(self) -> CheckConfig:
        return self.timing.check_config()

    def preflight(self) -> None:
        for need in self.requires:
            if need.startswith("module:"):
                module = need.removeprefix("module:")
                if importlib.util.find_spec(module) is None:
                    raise ComponentUnavailable(f"adapter {self.name!r} needs the Python module "
                                               f"{module!r}: pip install it")
            elif shutil.which(need) is None and not Path(need).is_file():
                raise ComponentUnavailable(f"adapter {self.name!r} needs {need!r}, which is "
                                           "neither a file nor on PATH: install it")

    def open(self, ctx: RunContext) -> KitRuntime:
        return self.runtime(ctx, self.timing)
