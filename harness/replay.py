"""Replay commands that rerun as printed, from any directory.

A failure's replay command (CLI summary, HTML report, JUnit, pytest failure text) must work
when pasted into a shell, wherever that shell is: so it names

- the program that ran (`durable-chaos` when that is the one on PATH, else its absolute path,
  or `python -m harness.cli` with the interpreter that ran),
- what is needed to import a user's adapter: `--adapter-path DIR` (the directory the adapter's
  module was imported from, unless it is installed in site-packages) and, when it was set,
  `PYTHONPATH` (the adapter's own imports may need it), both absolute,
- the schedule file by its absolute path (it holds the seed, the hosts and the steps: all
  that decides the schedule),
- the options of this process that change how the run goes: `--components`, a Restate
  server of the user's (`--restate-*-url`), a `--run-timeout` that was given.

Rejected: `cd DIR && durable-chaos replay ...`. It works from anywhere too, but the replay
would then write its report over the report of the run that printed the command.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import site
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

__all__ = ["adapter_paths", "adapter_root", "program", "replay_command", "use_adapter_paths"]

# The environment variables `--components` and `--restate-*-url` set (harness.components.stack,
# harness.adapters.restate); named here so that building a command imports neither.
_OPTION_ENV = (
    ("--components", "DURABLE_CHAOS_COMPONENTS"),
    ("--restate-ingress-url", "DURABLE_CHAOS_RESTATE_INGRESS_URL"),
    ("--restate-admin-url", "DURABLE_CHAOS_RESTATE_ADMIN_URL"),
)
PLACEHOLDER = "schedule.toml"
# The `--adapter-path` directories of this process, in the order given.
_adapter_paths: list[str] = []


def use_adapter_paths(paths: Sequence[str], option: str = "--adapter-path") -> None:
    """Make each directory importable (first on sys.path) and remember it for the replay
    commands; a UsageError names a path that is not a directory."""
    from harness.errors import UsageError

    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise UsageError(f"{option} {raw}: not a directory; give the directory your "
                             "adapter's module is imported from")
        resolved = str(path.resolve())
        if resolved not in sys.path:
            sys.path.insert(0, resolved)
        if resolved not in _adapter_paths:
            _adapter_paths.append(resolved)


def adapter_paths() -> list[str]:
    """The `--adapter-path` directories of this process, in the order given."""
    return list(_adapter_paths)


# `program()` per (interpreter, PATH): it stats the venv's script, walks PATH and resolves
# symlinks (about 100 us), and every run, quiet ones too, carries a replay command.
_programs: dict[tuple[str, str | None], str] = {}


def program() -> str:
    """How to start this very harness from a shell."""
    key = (sys.executable, os.environ.get("PATH"))
    found = _programs.get(key)
    if found is None:
        found = _programs[key] = _program()
    return found


def _program() -> str:
    beside = Path(sys.executable).parent / "durable-chaos"  # the venv's script, unresolved
    on_path = shutil.which("durable-chaos")
    if beside.is_file():
        if on_path is not None and Path(on_path).resolve() == beside.resolve():
            return "durable-chaos"
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m harness.cli"


@functools.cache  # site's directories do not move while the process runs
def _installed_dirs() -> frozenset[Path]:
    dirs = [*site.getsitepackages(), site.getusersitepackages(),
            sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    return frozenset(Path(d).resolve() for d in dirs if d)


def adapter_root(spec: str) -> Path | None:
    """The sys.path entry a `module:attribute` adapter was imported from, when a fresh process
    in another directory would not find it by itself (None for a built-in adapter, a module
    not imported yet, or one installed in site-packages)."""
    if ":" not in spec:
        return None
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    if path.name == "__init__.py":
        path = path.parent
    depth = len(module_name.split("."))
    if depth > len(path.parents):
        return None
    root = path.parents[depth - 1]
    if root in _installed_dirs():
        return None
    return root


def _pythonpath() -> str | None:
    raw = os.environ.get("PYTHONPATH", "")
    parts = [str(Path(p).resolve()) for p in raw.split(os.pathsep) if p]
    return os.pathsep.join(parts) if parts else None


def replay_command(spec: str, schedule_path: str | None, *,
                   run_timeout: float | None = None,
                   invariants: Sequence[str] | None = None) -> str:
    """The shell command that replays `schedule_path` against the adapter `spec`.

    With no path (the schedule was not saved), the command names `schedule.toml`: the text
    that prints it says to save the schedule there first.
    """
    words: list[str] = []
    pythonpath = _pythonpath() if ":" in spec else None
    if pythonpath:
        words.append(f"PYTHONPATH={shlex.quote(pythonpath)}")
    words += [program(), "replay"]
    root = adapter_root(spec)
    paths = list(_adapter_paths) if ":" in spec else []
    if root is not None and str(root) not in paths:
        paths.insert(0, str(root))
    for path in paths:
        words += ["--adapter-path", shlex.quote(path)]
    words += ["--adapter", shlex.quote(spec)]
    if invariants is not None:
        # The invariants the run was judged by: without them the replay judges the adapter's
        # own claims, and may pass what the run failed.
        words += ["--invariants", shlex.quote(",".join(invariants))]
    for option, env in _OPTION_ENV:
        value = os.environ.get(env)
        if value and not (option == "--components" and value == "processes"):
            words += [option, shlex.quote(value)]
    if run_timeout is not None:
        words += ["--run-timeout", "none" if run_timeout == float("inf") else f"{run_timeout:g}"]
    target = str(Path(schedule_path).resolve()) if schedule_path else PLACEHOLDER
    words.append(shlex.quote(target))
    return " ".join(words)
