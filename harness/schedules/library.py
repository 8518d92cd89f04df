"""Where scenario files come from: the user's own paths, and the library shipped in the package.

The library is the repository's top-level `scenarios/` directory. A wheel carries it as
`harness/scenarios/` (setup.py maps that package onto `scenarios/`, so the directory stays the
single source and nothing is copied by hand); a source checkout or an editable install reads
`scenarios/` next to `harness/`. `builtin` names its top level, `builtin:real` (any
subdirectory, in general) a subset.

A source is one `--scenarios` value: `builtin`, `builtin:SUBSET`, a `.toml` file or a directory
of them. An empty directory is a mistake, not an empty suite: a CI job pointed at the wrong
directory would otherwise pass having checked nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.schedules.model import Schedule

__all__ = [
    "BUILTIN",
    "NONE",
    "ScenarioSource",
    "builtin_dir",
    "default_sources",
    "describe_sets",
    "resolve",
    "resolve_all",
]

BUILTIN = "builtin"
NONE = "none"
_HARNESS = Path(__file__).resolve().parents[1]


def builtin_dir() -> Path:
    """The shipped scenario library: inside the installed package, else the checkout's."""
    for candidate in (_HARNESS / "scenarios", _HARNESS.parent / "scenarios"):
        if candidate.is_dir() and any(candidate.glob("*.toml")):
            return candidate
    # Only a broken installation gets here (a wheel built without its package data).
    raise UsageError(f"the built-in scenarios are missing from this installation "
                     f"(looked in {_HARNESS / 'scenarios'}); reinstall durable-chaos")


@dataclass(frozen=True)
class ScenarioSource:
    """One scenario set: how to name it in a summary, and its files in run order."""

    label: str
    files: tuple[Path, ...]


def resolve(spec: str, *, option: str = "--scenarios", base: Path | None = None
            ) -> ScenarioSource:
    """One `--scenarios` value as a set of files; a UsageError names the value and the fix."""
    text = spec.strip()
    if text == BUILTIN or text.startswith(BUILTIN + ":"):
        return _builtin(text, option)
    path = Path(text).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.exists():
        raise UsageError(f"{option}: {text} does not exist; give a .toml file, a directory of "
                         "them, 'builtin', 'builtin:real' or 'none'")
    if path.is_dir():
        files = tuple(sorted(path.glob("*.toml")))
        if not files:
            raise UsageError(f"{option}: {text} holds no *.toml scenario files; point it at a "
                             "directory of scenario files, or use 'builtin' or 'none'")
        return ScenarioSource(text, files)
    if path.suffix != ".toml":
        raise UsageError(f"{option}: {text} is not a .toml scenario file; give a .toml file "
                         "or a directory of them")
    return ScenarioSource(text, (path,))


def _builtin(text: str, option: str) -> ScenarioSource:
    root = builtin_dir()
    subset = text.partition(":")[2]
    if not subset:
        return ScenarioSource(BUILTIN, tuple(sorted(root.glob("*.toml"))))
    subsets = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.toml")))
    if subset not in subsets:
        names = ", ".join(f"{BUILTIN}:{s}" for s in subsets) or "none"
        raise UsageError(f"{option}: {text} is not a built-in scenario set; use {BUILTIN} or "
                         f"one of: {names}")
    return ScenarioSource(text, tuple(sorted((root / subset).glob("*.toml"))))


def resolve_all(specs: Sequence[str], *, option: str = "--scenarios",
                base: Path | None = None) -> list[ScenarioSource]:
    """Several values, in order; a file named twice (say `builtin` in a checkout, whose
    library is `./scenarios`, and `scenarios`) runs once, under the first name."""
    cleaned = [s.strip() for s in specs]
    if NONE in cleaned:
        if len(cleaned) > 1:
            raise UsageError(f"{option}: 'none' means no scenario files and cannot be combined "
                             f"with {', '.join(s for s in cleaned if s != NONE)}")
        return []
    seen: set[Path] = set()
    sources = []
    for spec in cleaned:
        source = resolve(spec, option=option, base=base)
        files = tuple(f for f in source.files if f.resolve() not in seen)
        seen.update(f.resolve() for f in files)
        if files:
            sources.append(ScenarioSource(source.label, files))
    return sources


def default_sources(project: Path) -> list[ScenarioSource]:
    """No `--scenarios`: the project's own `scenarios/` if it holds any, else the library."""
    own = project / "scenarios"
    if own.is_dir() and any(own.glob("*.toml")):
        return [ScenarioSource("scenarios", tuple(sorted(own.glob("*.toml"))))]
    return [resolve(BUILTIN)]


def describe_sets(schedules: Iterable[Schedule]) -> tuple[str, ...]:
    """Which scenario sets a run covered, e.g. `builtin (15)`, `my/scenarios (2)`, for the
    summary and the report. Derived from the files, so every caller agrees."""
    try:
        root: Path | None = builtin_dir().resolve()
    except UsageError:
        root = None
    counts: dict[str, int] = {}
    for schedule in schedules:
        if schedule.path is None:
            continue
        label = _label(Path(schedule.path).resolve().parent, root)
        counts[label] = counts.get(label, 0) + 1
    return tuple(f"{label} ({n})" for label, n in counts.items())


def _label(folder: Path, root: Path | None) -> str:
    if root is not None:
        if folder == root:
            return BUILTIN
        if folder.parent == root:
            return f"{BUILTIN}:{folder.name}"
    try:
        return str(folder.relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(folder)
