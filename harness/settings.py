"""The options the CLI and the pytest plugin share, parsed once, the same way.

`durable-chaos run --run-timeout 90` and `pytest --chaos-run-timeout 90` (or the ini key
`chaos_run_timeout`) mean one thing; so do the invariants to judge, the report directory and
the number of worker processes. Each parser takes the raw value and `where` it came from
("--run-timeout", "--chaos-run-timeout on the command line", "chaos_run_timeout in the ini
file pytest.ini") and raises a `UsageError` that starts with `where` and says the fix; the
plugin turns it into pytest's own usage error. A pytest session's options are read by
`from_pytest` (`OptionSource` tells where each came from) into one `ChaosSettings`.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import UsageError

if TYPE_CHECKING:
    from pytest import Config

__all__ = [
    "CACHE_KEY", "DEFAULT_SCHEDULES", "WORKER_SEED", "ChaosSettings", "OptionSource",
    "duration", "from_pytest", "invariant_names", "not_selected", "report_directory",
    "run_timeout", "workers",
]

DEFAULT_SCHEDULES = 25
# pytest's cache key of the last session seed (`--chaos-seed=last`), and the key of the
# session seed handed to xdist workers.
CACHE_KEY = "durable-chaos/seed"
WORKER_SEED = "durable_chaos_seed"


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


class OptionSource:
    """Where an option's value came from, for error messages that say so."""

    def __init__(self, config: Config, flag: str, ini: str) -> None:
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


def from_pytest(config: Config, warn: Callable[[str], None]) -> ChaosSettings | None:
    """The chaos options of a pytest session (None: no adapter, the suite is off), from the
    command line, PYTEST_ADDOPTS and the ini file; a `UsageError` says where a bad value came
    from. `warn` gets what is only worth a warning (more workers than cores)."""
    raw, where = OptionSource(config, "--chaos-adapter", "chaos_adapter").value()
    specs: list[str] = []
    for item in raw or []:
        for spec in str(item).split(","):
            spec = spec.strip()
            if spec and spec not in specs:
                specs.append(spec)
    if not specs or specs == ["none"]:
        return None
    if "none" in specs:
        raise UsageError(f"{where}: 'none' turns the suite off and cannot be combined "
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
        workers=_workers(config, warn),
        invariants=_invariants(config),
    )


def not_selected(config: Config, settings: ChaosSettings) -> str | None:
    """Why the paths on the command line leave the chaos suite out, or None to collect it.

    The rule: with no path (plain `pytest`, `-m chaos`, `-k NAME`, `testpaths` from the ini)
    or with `--chaos` the suite is collected; `pytest tests/test_one.py` (paths that are
    the project's tests) does not drag it in. A path selects it when it is the scenarios
    directory or inside it, or when it holds the scenarios or the rootdir (`pytest .`).
    Rejected: always collecting it (running one test file then ran every scenario and
    generated schedule), and never collecting it with paths (`pytest .` would lose it).
    """
    if config.getoption("chaos_suite") or config.args_source != type(config).ArgsSource.ARGS:
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


def _invariants(config: Config) -> tuple[str, ...] | None:
    raw, where = OptionSource(config, "--chaos-invariants", "chaos_invariants").value()
    return invariant_names(raw, where)


def _workers(config: Config, warn: Callable[[str], None]) -> int:
    raw, where = OptionSource(config, "--chaos-workers", "chaos_workers").value()
    if raw is None:
        return 1
    try:
        number = int(str(raw).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise UsageError(f"{where}: expected a number of worker processes >= 1, "
                                f"got {raw!r}")
    return workers(number, where, warn)


def _run_timeout(config: Config) -> float | None:
    raw, where = OptionSource(config, "--chaos-run-timeout", "chaos_run_timeout").value()
    return run_timeout(None if raw is None else str(raw), where)


def _schedules(config: Config) -> int:
    raw, where = OptionSource(config, "--chaos-schedules", "chaos_schedules").value()
    if raw is None:
        return DEFAULT_SCHEDULES
    try:
        number = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"{where}: expected a whole number of schedules such as 25, "
                                f"got {raw!r}") from None
    if number < 0:
        raise UsageError(f"{where}: expected a number >= 0, got {number}")
    return number


def _seed(config: Config) -> tuple[int, str]:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKER_SEED in workerinput:
        return int(workerinput[WORKER_SEED]), "from the xdist controller"
    raw, where = OptionSource(config, "--chaos-seed", "chaos_seed").value()
    if raw is None:
        return random.Random().randrange(1_000_000), "fresh"
    text = str(raw).strip()
    if text == "last":
        cache = getattr(config, "cache", None)
        if cache is None:
            raise UsageError(
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
        raise UsageError(f"{where}: expected an integer seed or 'last', got {raw!r}"
                                ) from None
    if seed < 0:
        raise UsageError(f"{where}: expected a seed >= 0, got {seed}")
    return seed, "given"


def _path_option(config: Config, flag: str, ini: str) -> Path | None:
    source = OptionSource(config, flag, ini)
    raw, where = source.value()
    if raw is None or str(raw).strip() == "":
        return None
    path = Path(str(raw).strip()).expanduser()
    return path if path.is_absolute() else source.base_dir(where) / path


def _report_dir(config: Config) -> Path | None:
    """`--chaos-report`, created and checked now (`report_directory`)."""
    path = _path_option(config, "--chaos-report", "chaos_report")
    if path is None:
        return None
    _, where = OptionSource(config, "--chaos-report", "chaos_report").value()
    return report_directory(path, where)


def _scenarios_path(config: Config) -> Path | None:
    """The scenario file or directory: the option, else <rootdir>/scenarios if it holds any,
    else the library shipped with durable-chaos (`builtin`, `builtin:real` name it)."""
    from harness.schedules.library import NONE, default_sources, resolve

    source = OptionSource(config, "--chaos-scenarios", "chaos_scenarios")
    raw, where = source.value()
    text = None if raw is None else str(raw).strip()
    if text == NONE:
        return None
    files = (default_sources(config.rootpath)[0].files if text is None
             else resolve(text, option=where, base=source.base_dir(where)).files)
    return files[0] if len(files) == 1 else files[0].parent


def duration(raw: str, where: str) -> float:
    """A positive, finite duration in seconds: '90', '1.5', '5m', '2h30m'."""
    from harness.schedules.model import parse_duration

    text = str(raw).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError as exc:  # it says which forms a duration takes
            raise UsageError(f"{where}: {exc}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{where}: expected a positive duration such as 60 or 5m, got "
                         f"{raw!r}")
    return seconds


def run_timeout(raw: str | None, where: str) -> float | None:
    """The wall-clock limit of one run: None, the engine's default; math.inf, none."""
    if raw is None:
        return None
    if str(raw).strip().lower() == "none":
        return math.inf
    return duration(raw, where)


def invariant_names(raw: str | Iterable[str] | None, where: str) -> tuple[str, ...] | None:
    """`a,b` (or several such items), each a known invariant (else the nearest is named);
    None: the adapters' own claims."""
    if raw is None:
        return None
    from harness.adapters.base import check_invariant_names
    from harness.checkers import ALL

    items = [raw] if isinstance(raw, str) else list(raw)
    names = tuple(dict.fromkeys(n.strip() for item in items for n in str(item).split(",")
                                if n.strip()))
    known = [c.name for c in ALL]
    if not names:
        raise UsageError(f"{where}: expected a comma list of invariant names such as "
                         f"{known[0]},{known[1]}")
    check_invariant_names(names, known, where)
    return names


def report_directory(path: Path, where: str) -> Path:
    """The report directory, created and written to now (found only at the end, a report
    that cannot be written would cost the whole run)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"is under the file {existing}"
        raise UsageError(f"{where}: {path} {what}, not a directory; give a directory")
    try:
        # Written to, not asked (os.access): root may write anywhere the kernel refuses.
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".durable-chaos-write-check"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{where}: cannot write there ({exc.strerror or exc}); give a "
                         "directory you can write to") from None
    return path


def workers(number: int, where: str, warn: Callable[[str], None]) -> int:
    """`number` worker processes, at most one per core (said through `warn`)."""
    cores = os.cpu_count() or 1
    if number > cores:
        # More processes than cores only adds switching and memory (each holds a runtime).
        warn(f"{where}: {number} is more than the {cores} core(s) here; using {cores}")
        return cores
    return number
