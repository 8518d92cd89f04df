"""The adapter kit (`harness.kit`), the world API for apps that keep their own effects, and
the example adapters built on it.

The end-to-end tests drive tests/outside_adapters/kit_app: a toy durable engine (files, one
worker process per version) and its app, which logs its own cards and emails to a JSONL file
and asks the harness at a fault point of its own; its adapter is written outside the package
with the public API only, as a user writes one. They wait on readiness (the kit waits for the
engine to show each version current), never on fixed sleeps, and the kit stops every process
group it started.
"""

from __future__ import annotations

import io
import json
import tokenize
from dataclasses import replace
from pathlib import Path

import pytest

from harness import History, RunOptions, load_scenario, run_schedule
from harness.checkers.base import CheckConfig, limit_at, measured, run_checkers
from harness.checkers.pinning import PinningBound
from harness.components.procs import live_groups
from harness.effects import EffectsFile, apply_effect
from harness.errors import ConfigError
from harness.kit import AnchoredScale, TimeScale, Timing
from harness.scaling import Scale
from harness.world import World

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ROOT / "tests" / "outside_adapters"
DAY = 86400.0


def _world() -> tuple[World, History]:
    history = History(lambda: 0.0)

    async def sleep(seconds: float) -> None:
        return None

    return World(history, now=lambda: 0.0, sleep=sleep), history


# -- timing --------------------------------------------------------------------------------

def test_tolerances_in_real_seconds_become_the_checkers_scenario_seconds() -> None:
    scale = AnchoredScale(((300.0, 3.0), (8 * DAY, 30.0)))
    timing = Timing(scale, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0, liveness=5.0)
    config = timing.check_config()
    assert (config.hand_off_after, config.max_wait) == (300.0, 8 * DAY)  # production's
    # One real second of slack is widest at the 8-day bound (about 7 hours), not days.
    assert config.tolerance == pytest.approx(scale.span(1.0, at=8 * DAY))
    assert config.tolerance < 8 * 3600
    assert config.liveness_bound == pytest.approx(8 * DAY + 5 * scale.steepest)
    # The guard band after 5 minutes (one real second at 100 per second) moves 8 days from
    # 30 real seconds to just under 31.
    assert timing.real(300.0) == pytest.approx(3.0)
    assert timing.real(8 * DAY) == pytest.approx(31.0, abs=0.01)
    linear = Timing(TimeScale(10.0), hand_off_after=10.0, max_wait=60.0, tolerance=0.5)
    assert linear.check_config().tolerance == pytest.approx(5.0)


ANCHORED = AnchoredScale(((300.0, 3.0), (8 * DAY, 30.0)))  # the examples' scale


def test_an_agents_step_bound_is_stated_to_the_checkers_when_given() -> None:
    assert Timing(ANCHORED).check_config().max_steps_per_turn is None
    assert Timing(ANCHORED, max_steps_per_turn=5).check_config().max_steps_per_turn == 5
    for bad in (0, 2.5, True, "8"):
        with pytest.raises(ConfigError, match=r"max_steps_per_turn >= 1 \(model steps\) or "
                                              rf"None but got max_steps_per_turn={bad!r}"):
            Timing(ANCHORED, max_steps_per_turn=bad)  # type: ignore[arg-type]


def test_each_bound_gets_its_own_tolerance_at_the_scales_rate_leading_up_to_it() -> None:
    config = Timing(ANCHORED, hand_off_after=300.0, max_wait=8 * DAY,
                    tolerance=1.0).check_config()
    # One real second is 100 scenario seconds before 5 minutes (300 s in 3 real s) and about
    # 7.1 hours before 8 days ((8 days - 5 minutes) in 27 real s).
    assert config.hand_off_tolerance == pytest.approx(100.0)
    assert config.max_wait_tolerance == pytest.approx((8 * DAY - 300.0) / 27.0)
    assert config.slack("hand_off") == pytest.approx(100.0)
    assert config.slack("max_wait") == pytest.approx(25588.9, abs=0.1)
    # The rules tied to no bound keep the widest, as before.
    assert config.tolerance == pytest.approx(config.max_wait_tolerance)
    assert limit_at(config, "hand_off") == "5.0m + 100s (the tolerance at hand-off)"
    assert limit_at(config, "max_wait") == "8.00d + 7.1h (the tolerance at max_wait)"
    # Without per-bound figures (the simulator's CheckConfig), every bound gets `tolerance`.
    plain = CheckConfig(tolerance=60.0)
    assert (plain.slack("hand_off"), plain.slack("max_wait")) == (60.0, 60.0)
    assert limit_at(plain, "hand_off") == "5.0m + 60s"


def _pinned(seconds: float) -> History:
    history = History()
    history.add("deployment.registered", time=0.0, deployment="d1", data={"version": "v1"})
    history.add("invocation.started", time=0.0, invocation="inv1", deployment="d1")
    history.add("invocation.suspended", time=1.0, invocation="inv1", deployment="d1")
    history.add("invocation.resumed", time=1.0 + seconds, invocation="inv1", deployment="d1")
    history.add("invocation.completed", time=2.0 + seconds, invocation="inv1")
    history.add("run.end", time=10.0 + seconds)
    return history


def test_a_ten_minute_pin_on_an_anchored_scale_is_a_violation() -> None:
    config = Timing(ANCHORED, hand_off_after=300.0, max_wait=8 * DAY,
                    tolerance=1.0).check_config()
    [result] = run_checkers([PinningBound()], _pinned(600.0), config)
    assert result.valid is False
    assert "(limit 5.0m + 100s (the tolerance at hand-off))" in result.witness()
    # Judged with the one widest tolerance, the 10-minute pin passed ("5.0m + 7.1h").
    [widest] = run_checkers([PinningBound()], _pinned(600.0),
                            replace(config, hand_off_tolerance=None))
    assert widest.valid is True
    # Within its own tolerance, a pin passes.
    [within] = run_checkers([PinningBound()], _pinned(390.0), config)
    assert within.valid is True, within.witness()


def _handed_off(scale: Scale, late: float) -> History:
    """A turn suspended from time 0 whose deployment is let go `late` real seconds after the
    5-minute bound, with record times read through `scale` as a run's clock reads them."""
    history = History()
    resumed = scale.scenario(scale.real(300.0) + late)
    history.add("deployment.registered", time=0.0, deployment="d1", data={"version": "v1"})
    history.add("invocation.started", time=0.0, invocation="inv1", deployment="d1")
    history.add("invocation.suspended", time=0.0, invocation="inv1", deployment="d1")
    history.add("invocation.resumed", time=resumed, invocation="inv1", deployment="d1")
    history.add("invocation.completed", time=resumed + 1.0, invocation="inv1")
    history.add("run.end", time=resumed + 10.0)
    return history


@pytest.mark.parametrize(("late", "valid"), [
    (0.004, True), (0.5, True), (0.9, True), (1.1, False), (1.5, False), (3.0, False)])
def test_late_at_the_anchor_by_less_than_the_tolerance_holds_and_by_more_does_not(
        late: float, valid: bool) -> None:
    timing = Timing(ANCHORED, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0)
    [result] = run_checkers([PinningBound()], _handed_off(timing.run_scale, late),
                            timing.check_config())
    assert result.valid is valid, result.witness()


def test_on_the_users_own_scale_a_few_real_ms_past_the_anchor_read_as_minutes() -> None:
    # Why the run uses `run_scale`: on the anchors as given, 4 real ms after 5 minutes are
    # 102 scenario seconds (7.1 hours per real second), past the 100 s of slack, although
    # the engine was 4 ms late; the guard band reads them as 0.4 s.
    timing = Timing(ANCHORED, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0)
    [raw] = run_checkers([PinningBound()], _handed_off(ANCHORED, 0.004), timing.check_config())
    assert raw.valid is False
    assert timing.run_scale.scenario(3.004) == pytest.approx(300.4)
    # And the slack is the same on both sides of the bound: 100 s, not the 7.1 hours one
    # real second is right after the anchor on the user's scale.
    assert timing.slack_at(300.0) == pytest.approx(100.0)
    after = timing.run_scale.scenario(timing.run_scale.real(300.0) + 1.0) - 300.0
    assert after == pytest.approx(100.0)


def test_ten_minutes_of_pin_on_the_run_scale_is_caught() -> None:
    timing = Timing(ANCHORED, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0)
    config = timing.check_config()
    [result] = run_checkers([PinningBound()], _pinned(600.0), config)
    assert result.valid is False
    assert "(limit 5.0m + 100s (the tolerance at hand-off))" in result.witness()
    # 10 minutes are 1 + 2 ms real seconds past the bound on the run's scale: past the
    # band of one real second, where a real millisecond is 26 scenario seconds.
    late = timing.run_scale.real(600.0) - timing.run_scale.real(300.0)
    assert 1.0 < late < 1.02


def test_the_engines_measured_latency_is_added_to_every_bounds_tolerance() -> None:
    config = Timing(ANCHORED, tolerance=1.0).check_config()
    [plain] = run_checkers([PinningBound()], _pinned(420.0), config)
    assert plain.valid is False  # 7 minutes: past 5.0m + 100s
    latent = _pinned(420.0)
    latent.add("clock.latency", time=latent[-1].time, data={"seconds": 30.0})
    assert measured(config, latent).slack("hand_off") == pytest.approx(130.0)
    assert measured(config, latent).slack("max_wait") == pytest.approx(
        config.slack("max_wait") + 30.0)
    [result] = run_checkers([PinningBound()], latent, config)
    assert result.valid is True, result.witness()
    longer = _pinned(600.0)
    longer.add("clock.latency", time=longer[-1].time, data={"seconds": 30.0})
    [late] = run_checkers([PinningBound()], longer, config)
    assert ("(limit 5.0m + 2.2m (the tolerance at hand-off), of which 30s is the engine's "
            "measured latency (clock.latency))") in late.witness()


class _Scaled:
    def __init__(self, scale: object) -> None:
        self.time_scale = scale


def test_a_step_on_a_scaled_clock_is_late_by_real_seconds() -> None:
    from harness.run import _lateness

    scaled = _Scaled(ANCHORED)
    # 2 scenario hours after a step at 1 day are 0.28 real seconds on this scale: on time.
    assert _lateness(scaled, DAY, DAY + 7200.0) is None  # type: ignore[arg-type]
    # 2 real seconds late are, and the note gives both figures.
    at = ANCHORED.scenario(ANCHORED.real(DAY) + 2.0)
    assert _lateness(scaled, DAY, at) == "14.2h (real 2s)"  # type: ignore[arg-type]
    # A runtime without a scale (the simulator) is late by scenario seconds, as before.
    assert _lateness(object(), DAY, DAY + 2.0) == "2s"  # type: ignore[arg-type]
    assert _lateness(object(), DAY, DAY + 0.5) is None  # type: ignore[arg-type]
    # A `time_scale` that is no Scale (a bare factor) is not used.
    assert _lateness(_Scaled(10.0), DAY, DAY + 2.0) == "2s"  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [
    ("tolerance", 0), ("liveness", -1.0), ("downtime", float("nan")), ("max_wait", "8d"),
    ("card_patience", True), ("scale", 10.0),
])
def test_bad_timing_is_one_config_error(field: str, value: object) -> None:
    args: dict[str, object] = {"scale": TimeScale(10.0), field: value}
    with pytest.raises(ConfigError, match=field if field != "scale" else "scale"):
        Timing(**args)  # type: ignore[arg-type]


# -- the world API for apps that keep their own effects -------------------------------------

def test_an_app_delivers_effects_and_shows_and_closes_cards_through_the_world() -> None:
    world, history = _world()
    assert world.deliver("email", "k1", tool_call="s1.turn1.t1", turn="s1.turn1") is True
    assert world.deliver("email", "k1", tool_call="s1.turn1.t1") is False  # a retry
    world.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1", tool="send_email")
    world.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1", tool="send_email")
    assert [c.tool_call for c in world.cards.open_cards("s1")] == ["s1.turn1.t1"]
    assert world.close_card("s1.turn1.t1", "answered") is True
    assert world.close_card("s1.turn1.t1", "expired") is False
    assert [r.kind for r in history.records] == [
        "effect.attempted", "effect.delivered", "effect.attempted", "effect.deduplicated"]


def test_an_effects_line_says_what_its_card_showed_and_what_its_effect_carried() -> None:
    """What the person approved (the card's `args`) and what was done (an email's `to`, a
    charge's `amount`): effect-authorized compares them; a line without them says nothing."""
    world, history = _world()
    apply_effect(world, {"card": "show", "session": "s1", "turn": "s1.turn1",
                         "tool_call": "s1.turn1.t1", "tool": "send_email",
                         "args": {"to": "bob@example.com"}})
    apply_effect(world, {"card": "show", "session": "s1", "turn": "s1.turn1",
                         "tool_call": "s1.turn1.t2", "tool": "charge_card"})
    apply_effect(world, {"effect": "email", "key": "k1", "tool_call": "s1.turn1.t1",
                         "to": "eve@example.com"})
    apply_effect(world, {"effect": "charge", "key": "k2", "tool_call": "s1.turn1.t2"})
    assert world.cards.shown() == {"s1.turn1.t1": {"to": "bob@example.com"}}
    email, charge = history.of_kind("effect.delivered")
    assert email.data["to"] == "eve@example.com" and "amount" not in charge.data


def test_the_effects_file_hands_over_complete_lines_only_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "effects.jsonl"
    seen: list[dict[str, object]] = []
    reader = EffectsFile(path, seen.append)
    assert reader.read() == 0  # the app has not written yet
    with open(path, "w") as f:
        f.write(json.dumps({"effect": "email", "key": "a"}) + "\n" + '{"effect": "ema')
    assert reader.read() == 1
    with open(path, "a") as f:
        f.write('il", "key": "b"}\n')
    assert reader.read() == 1
    assert [s["key"] for s in seen] == ["a", "b"]


# -- end to end, with an adapter written outside the package --------------------------------

@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(OUTSIDE))
    from kit_app.chaos import adapter

    before = {g.pid for g in live_groups()}
    yield adapter
    # Every worker the kit started is gone, its process group included.
    assert [g for g in live_groups() if g.pid not in before and g.alive] == []


def _scenario(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\ndescription = "{name}"\n{body}')
    return path


MESSAGE = '[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\ntext = "email bob"\n' \
          'tools = ["send_email"]\n'


def _run(adapter: object, path: Path, tmp_path: Path) -> tuple[object, History]:
    run = run_schedule(adapter, load_scenario(path),  # type: ignore[arg-type]
                       RunOptions(adapter_spec="kit_app.chaos:adapter", report_dir=tmp_path))
    assert run.error is None, run.error
    assert run.history_path is not None
    return run, History.load(run.history_path)


def test_an_app_with_its_own_effects_log_is_judged_by_what_it_logged(
        toy: object, tmp_path: Path) -> None:
    path = _scenario(tmp_path, "answered", 'horizon = "10m"\n' + MESSAGE +
                     '[[step]]\nat = "1m"\ndo = "answer"\nsession = "s1"\n'
                     'decision = "approve"\n')
    run, history = _run(toy, path, tmp_path)
    kinds = [r.kind for r in history.records
             if r.kind.startswith(("turn.", "tool.", "op.answer", "effect.delivered"))]
    # The turn starts before its card, the card before the answer that finds it.
    assert kinds == ["turn.started", "tool.awaiting", "op.answer", "op.answer", "tool.result",
                     "effect.delivered", "turn.ended"]
    [email] = history.of_kind("effect.delivered")
    assert email.tool_call == "s1.turn1.t1"
    verdicts = {r.checker: r.valid for r in run.results}  # type: ignore[attr-defined]
    assert verdicts["no-duplicate-effects"] is True
    assert verdicts["turn-outcome"] is True


def test_cards_are_closed_from_the_engines_result(toy: object, tmp_path: Path) -> None:
    # The toy's clock puts 8 days at 3 real seconds and a day at 0.3: a 9-day horizon left
    # the worker 0.3 s to report the expiry, which a loaded machine once overran. 30 days
    # leave it 7 s; the run's end does not depend on it.
    path = _scenario(tmp_path, "expires", 'horizon = "30d"\n' + MESSAGE)
    run, history = _run(toy, path, tmp_path)
    [result] = history.of_kind("tool.result")
    assert result.data["outcome"] == "expired"
    [ended] = history.of_kind("turn.ended")
    assert history.records.index(result) < history.records.index(ended)
    verdicts = {r.checker: r.valid for r in run.results}  # type: ignore[attr-defined]
    assert verdicts["turn-outcome"] is True


def test_steps_on_the_kits_scaled_clock_are_not_late_by_scenario_seconds(
        toy: object, tmp_path: Path) -> None:
    """After 5 minutes one real millisecond is minutes of the toy's scenario time: a step
    applied on time in real terms came scenario seconds after its `at`, and was noted late."""
    path = _scenario(tmp_path, "days", 'horizon = "3d"\n' + MESSAGE +
                     '[[step]]\nat = "1d"\ndo = "answer"\nsession = "s1"\n'
                     'decision = "approve"\n'
                     '[[step]]\nat = "2d"\ndo = "message"\nsession = "s2"\n'
                     'text = "email ann"\ntools = ["send_email"]\n')
    run, _ = _run(toy, path, tmp_path)
    assert [n.text for n in run.notes if n.kind == "late"] == []  # type: ignore[attr-defined]


def test_a_kill_at_the_apps_own_fault_point_lands_in_its_window(
        toy: object, tmp_path: Path) -> None:
    path = _scenario(tmp_path, "crash", 'horizon = "3d"\n'
                     '[[step]]\nat = "0s"\ndo = "arm"\npoint = "effect.email.after_send"\n'
                     'action = "crash"\n' + MESSAGE +
                     '[[step]]\nat = "1m"\ndo = "answer"\nsession = "s1"\n'
                     'decision = "approve"\n')
    run, history = _run(toy, path, tmp_path)
    order = [r.kind for r in history.records
             if r.kind in ("effect.delivered", "host.crashed", "faultpoint.reached",
                           "host.restarted")]
    # Killed while it waited at the point: after its email, before the engine recorded the
    # turn done; the restarted worker ran the turn again and sent a second email.
    assert order[:4] == ["effect.delivered", "host.crashed", "faultpoint.reached",
                         "host.restarted"]
    assert "host.restarted" in order and order.count("effect.delivered") == 2
    # The world server records each arrival: armed once, the second one (the rerun) is let by.
    assert [r.data for r in history.of_kind("faultpoint.reached")] == [
        {"point": "effect.email.after_send", "action": "crash"},
        {"point": "effect.email.after_send", "action": None}]
    verdicts = {r.checker: r.valid for r in run.results}  # type: ignore[attr-defined]
    assert verdicts["no-duplicate-effects"] is False


# -- the examples on the kit ----------------------------------------------------------------

def code_lines(path: Path) -> int:
    """Lines holding code: not blank, not only a comment (docstrings count)."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                              tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines)


@pytest.mark.parametrize("adapter", ["temporal_approval/chaos.py", "dbos_approval/chaos.py",
                                     "restate_sdk_agent/adapter.py"])
def test_the_example_adapters_are_at_most_60_code_lines(adapter: str) -> None:
    lines = code_lines(ROOT / "examples" / adapter)
    assert lines <= 60, f"examples/{adapter} has {lines} code lines"


def test_code_lines_leave_out_blanks_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text('"""Doc\nstring."""\n\n# a comment\nx = 1  # why\n\ndef f() -> None:\n'
                    '    return None\n')
    assert code_lines(path) == 5


def test_the_kit_is_public() -> None:
    import harness
    import harness.kit

    assert sorted(harness.kit.__all__) == [
        "AnchoredScale", "KitAdapter", "KitRuntime", "TimeScale", "Timing", "Turn",
        "free_port", "wait_until"]
    for name in ("AnchoredScale", "KitAdapter", "KitRuntime", "Timing", "Turn"):
        assert getattr(harness, name) is getattr(harness.kit, name)


def test_doctor_checks_what_an_adapter_needs_not_the_builtin_path(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.doctor import run_doctor

    monkeypatch.syspath_prepend(str(OUTSIDE))
    run_doctor(["restate"], None, adapter="kit_app.chaos:adapter")
    out = capsys.readouterr().out
    # The restate path's own engine is checked; the reference's PostgreSQL and Toxiproxy,
    # which this adapter never uses, are not.
    assert "restate-server" in out
    assert "toxiproxy" not in out.lower() and "postgresql" not in out.lower()
    assert "adapter kit_app.chaos:adapter: ready" in out
    assert run_doctor(None, None, adapter="kit_app.nowhere:adapter") == 1


def test_hosts_are_keyed_by_the_id_the_engine_gave_the_deployment() -> None:
    # Restate names a deployment only when a running worker registers: the kit starts the
    # workers under the version, then keys them by the engine's id, as the observer records.
    from harness.observers import WorkerHosts
    from harness.observers.base import EngineObserver, Snapshot

    class Quiet(EngineObserver):
        def snapshot(self) -> Snapshot:
            return Snapshot()

    class Alive:
        alive = True

    history = History(lambda: 0.0)
    hosts = WorkerHosts(history, now=lambda: 0.0, start=lambda dep: Alive(),  # type: ignore[arg-type, return-value]
                        downtime=1.0, observer=Quiet(history))
    host = hosts.add("v1")
    hosts.rename("v1", "dp_7f3")
    assert hosts.hosts[host][0] == "dp_7f3"
    assert hosts.select("latest/1") == host


def test_a_subclass_cancel_reads_the_engine_first() -> None:
    """The kit wraps the subclass's `cancel`: one fresh read of the engine, then the cancel,
    so the turns running by then are recorded started before the runner records the cancel
    (`cancel-honored` judges the turns in progress at the cancel)."""
    from harness.kit import KitRuntime

    calls: list[str] = []

    class Observer:
        def refresh(self, timeout: float = 10.0) -> bool:
            calls.append(f"refresh {timeout:g}")
            return True

    class App(KitRuntime):
        def cancel(self, session: str) -> None:
            calls.append(f"cancel {session}")

    class Again(App):  # inherited, not wrapped twice
        pass

    app = object.__new__(Again)
    app.observer = Observer()  # type: ignore[assignment]
    app.cancel("s1")
    assert calls == ["refresh 2", "cancel s1"]
    assert App.cancel.__name__ == "cancel" and "cancel" not in vars(KitRuntime)


def test_a_message_with_no_id_is_refused_by_the_kit_before_it_becomes_a_turn(
        toy: object, tmp_path: Path) -> None:
    """A broken client's message (`malformed`: no `message_id`) never reaches the user's
    app: the kit refuses it (the runner records the refusal as the message's `fail`), and the
    run goes on and is judged."""
    path = _scenario(tmp_path, "no-id", 'horizon = "10m"\n' + MESSAGE +
                     '[[step]]\nat = "30s"\ndo = "message"\nsession = "s1"\ntext = "and"\n'
                     'tools = []\nmalformed = true\n'
                     '[[step]]\nat = "1m"\ndo = "answer"\nsession = "s1"\n'
                     'decision = "approve"\n')
    run, history = _run(toy, path, tmp_path)
    [refusal] = [r for r in history.of_kind("op.message") if r.type == "fail"]
    assert refusal.data["reason"].startswith("ValueError: a message needs a string message_id")
    assert [r.turn for r in history.of_kind("turn.started")] == ["s1.turn1"]
    verdicts = {r.checker: r for r in run.results}  # type: ignore[attr-defined]
    assert verdicts["turn-outcome"].valid is True
    assert verdicts["malformed-refused"].reached is False  # no status: not judged
