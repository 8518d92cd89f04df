"""Finding the executables of real components.

Lookup order: an environment override, this repository's own install (`make restate
toxiproxy` fills `node_modules/` and `.tools/`), the per-user components cache that
`durable-chaos doctor --install` fills (for an installed user, who has no repository), then
PATH. `locate` says which one answered, so `durable-chaos doctor` can show it.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.components import pins
from harness.errors import ComponentUnavailable

__all__ = [
    "RESTATE_SERVER",
    "TOOLS",
    "TOXIPROXY_SERVER",
    "Found",
    "Tool",
    "cache_dir",
    "find_executable",
]

CACHE_ENV = "XDG_CACHE_HOME"
_REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/durable-chaos`, else `~/.cache/durable-chaos`.

    Outside any repository on purpose: one install serves every project of the user, and a
    wheel's site-packages is no place to write into.
    """
    base = os.environ.get(CACHE_ENV, "")
    # The XDG spec says to ignore a relative value.
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "durable-chaos"


def _checkout() -> bool:
    """Whether the harness runs from a checkout of durable-chaos (editable or not), where
    `make restate toxiproxy` installs into the repository; an installed wheel sits in
    site-packages, where `node_modules/` would mean nothing."""
    return (_REPO_ROOT / "pyproject.toml").is_file() and (_REPO_ROOT / "harness").is_dir()


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True)
class Found:
    path: Path
    source: str  # "$ENV_VAR", "repository", "cache" or "PATH"


def _npm_platform() -> str:
    """The suffix of restate-server's per-platform npm package, e.g. linux-x64."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine)
    return f"{platform.system().lower()}-{arch}"


@dataclass(frozen=True)
class Tool:
    """A component binary the harness starts, and how a user gets it."""

    name: str  # the executable's name, e.g. "restate-server"
    component: str  # what `durable-chaos doctor --install` takes, e.g. "restate"
    version: str
    env_var: str
    repository: tuple[Path, ...]  # relative to the repository root
    cached: Path  # relative to cache_dir()
    on_path: tuple[str, ...]
    how: str  # what the install does, for the doctor and error messages
    make_target: str  # the same install in a checkout of durable-chaos

    @property
    def install_command(self) -> str:
        return f"durable-chaos doctor --install {self.component}"

    def cache_path(self) -> Path:
        return cache_dir() / self.cached

    def locate(self) -> Found | None:
        """Where the binary is, by the lookup order; None when nowhere. A set environment
        variable that is not an executable is an error, not a fall-through: the user asked
        for that file."""
        from_env = os.environ.get(self.env_var)
        if from_env:
            if not _executable(Path(from_env)):
                raise ComponentUnavailable(
                    f"${self.env_var}={from_env} is not an executable file; unset it, or "
                    f"run `{self.install_command}` ({self.how})")
            return Found(Path(from_env), f"${self.env_var}")
        for candidate in self.repository if _checkout() else ():
            if _executable(_REPO_ROOT / candidate):
                return Found(_REPO_ROOT / candidate, "repository")
        if _executable(self.cache_path()):
            return Found(self.cache_path(), "cache")
        for name in self.on_path:
            found = shutil.which(name)
            if found:
                return Found(Path(found), "PATH")
        return None

    def looked(self) -> str:
        places = [f"${self.env_var} (unset)"]
        places += [str(_REPO_ROOT / c) for c in self.repository if _checkout()]
        places.append(str(self.cache_path()))
        places += [f"{n} on PATH" for n in self.on_path]
        return ", ".join(places)

    def find(self, error: type[ComponentUnavailable] = ComponentUnavailable) -> Path:
        """The binary, or `error` saying where it looked and the one command to install it."""
        try:
            found = self.locate()
        except ComponentUnavailable as exc:
            raise error(str(exc)) from None
        if found is None:
            raise error(f"{self.name} {self.version} not found (looked in {self.looked()}); "
                        f"run `{self.install_command}` ({self.how}; in a checkout of "
                        f"durable-chaos, `make {self.make_target}`), or set ${self.env_var}; "
                        "`durable-chaos doctor` lists every component")
        return found.path


RESTATE_SERVER = Tool(
    name="restate-server",
    component="restate",
    version=pins.RESTATE_SERVER,
    env_var="DURABLE_CHAOS_RESTATE_BIN",
    # The static binary inside the npm package: node_modules/.bin has only a node wrapper,
    # which would add a node process to the group the harness signals.
    repository=(Path(f"node_modules/@restatedev/restate-server-{_npm_platform()}/bin/"
                     "restate-server"),),
    cached=Path(f"restate-server-{pins.RESTATE_SERVER}/node_modules/@restatedev/"
                f"restate-server-{_npm_platform()}/bin/restate-server"),
    on_path=("restate-server",),
    how=f"npm install of @restatedev/restate-server@{pins.RESTATE_SERVER} into the cache",
    make_target="restate",
)

TOXIPROXY_SERVER = Tool(
    name="toxiproxy-server",
    component="toxiproxy",
    version=pins.TOXIPROXY,
    env_var="DURABLE_CHAOS_TOXIPROXY_BIN",
    # `make toxiproxy` renames go install's "server"; the old name is still accepted.
    repository=(Path(".tools/bin/toxiproxy-server"), Path(".tools/bin/server")),
    cached=Path(f"toxiproxy-{pins.TOXIPROXY}/bin/toxiproxy-server"),
    on_path=("toxiproxy-server",),
    how=f"go install of github.com/Shopify/toxiproxy/v2/cmd/server@{pins.TOXIPROXY} into "
        "the cache",
    make_target="toxiproxy",
)

TOOLS = {tool.component: tool for tool in (RESTATE_SERVER, TOXIPROXY_SERVER)}


def find_executable(
    what: str,
    *,
    env_var: str,
    candidates: Iterable[Path] = (),
    on_path: Iterable[str] = (),
    install_hint: str,
    error: type[ComponentUnavailable] = ComponentUnavailable,
) -> Path:
    """`$env_var` if set (it must be executable), else the first executable candidate, else
    the first name found on PATH; otherwise `error` saying where it looked and how to install.
    For binaries without a cached install (Chromium comes from the system's packages).
    """
    from_env = os.environ.get(env_var)
    if from_env:
        path = Path(from_env)
        if not _executable(path):
            raise error(
                f"${env_var}={from_env} is not an executable file; unset it or {install_hint}"
            )
        return path
    looked: list[str] = []
    for candidate in candidates:
        looked.append(str(candidate))
        if _executable(candidate):
            return candidate
    for name in on_path:
        found = shutil.which(name)
        if found:
            return Path(found)
        looked.append(f"{name} on PATH")
    raise error(f"{what} not found ({', '.join(looked) or 'nowhere to look'}); {install_hint}")
