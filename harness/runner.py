"""Compatibility: the runner was split by role; its names are re-exported from here.

- `harness.run`: one schedule against an adapter (`run_schedule`, `RunOptions`).
- `harness.exploration`: generated schedules and shrinking (`explore`).
- `harness.suite`: a whole suite with its report (`run_suite`).
- `harness.progress`: the progress line.
"""

from __future__ import annotations

from harness.exploration import (
    Exploration,
    _schedule_from,
    _suite_freezer,
    explore,
)
from harness.progress import Progress
from harness.run import (
    CARD_PATIENCE,
    CARD_STEP,
    CLOSE_TIMEOUT,
    DEFAULT_RUN_TIMEOUT,
    LATE_AFTER,
    RESTART_AFTER,
    RunOptions,
    _alive,
    _apply,
    _close,
    _expected,
    _fault_points,
    _healed_at,
    _open_cards,
    _replay,
    _save,
    _slug,
    _step_label,
    follow_wall_clock,
    horizon_of,
    run_schedule,
    run_timeout,
    runtime_config,
    wall,
)
from harness.suite import _CannotOpen, _steps, environment, run_suite, write_outputs

__all__ = [
    "CARD_PATIENCE", "CARD_STEP", "CLOSE_TIMEOUT", "DEFAULT_RUN_TIMEOUT", "LATE_AFTER",
    "RESTART_AFTER", "Exploration", "Progress", "RunOptions",
    "_CannotOpen", "_alive", "_apply", "_close", "_expected",
    "_fault_points", "_healed_at", "_open_cards", "_replay", "_save", "_schedule_from",
    "_slug", "_step_label", "_steps", "_suite_freezer", "environment", "explore",
    "follow_wall_clock", "horizon_of", "run_schedule", "run_suite", "run_timeout",
    "runtime_config", "wall", "write_outputs",
]
