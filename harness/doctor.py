"""`durable-chaos doctor`: what each engine path needs, what is found here, and how to get
the rest.

Paths: `simulator` (always runs), `restate` (restate-server, toxiproxy-server, PostgreSQL's
server binaries and the `restate`/`postgres` extras), `temporal`, `dbos` and `containers`
(a Docker engine). For every component the doctor says found or missing, where (and which
lookup answered: environment variable, repository, components cache, PATH), which version,
and the one command that installs it. `--path P` exits 0 only when P can run, so a CI job can
gate on it.

With `--adapter SPEC` the doctor checks what that adapter needs instead of what the built-in
path needs: for each `--path`, only the engine itself (restate-server and restate-sdk, not
the reference's PostgreSQL and Toxiproxy; temporalio; dbos), then the adapter's own
`requires` (`harness.kit.KitAdapter`) and its `preflight()`.

`--install restate toxiproxy` fills the per-user components cache (see
`harness.components.binaries.cache_dir`) with the versions pinned in
`harness.components.pins`, the same pins the repository's Makefile installs. It installs into
a scratch directory beside the cache entry and renames it into place, so an interrupted
install never leaves a half-filled entry that the lookup would then trust.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness.components import pins
from harness.components.binaries import TOOLS, Tool, cache_dir
from harness.errors import ComponentUnavailable, DurableChaosError

__all__ = [
    "INSTALLABLE",
    "PATHS",
    "Check",
    "InstallError",
    "PathReport",
    "check_adapter_needs",
    "check_path",
    "install",
    "render",
    "run_doctor",
]

PATHS = ("simulator", "restate", "temporal", "dbos", "containers")
INSTALLABLE = tuple(TOOLS)
_PROBE_TIMEOUT = 15.0
# Installs fetch from npm's registry or build Go; generous, but never unbounded.
_INSTALL_TIMEOUT = 900.0
_PIP = "pip install 'durable-chaos[{}]'"


class InstallError(DurableChaosError):
    """`doctor --install` could not install a component; the message says what to do."""


@dataclass(frozen=True)
class Check:
    """One component of a path, as found on this machine."""

    name: str
    found: bool
    where: str = ""
    version: str = ""
    source: str = ""  # which lookup answered, for binaries
    install: str = ""  # the one command that installs it
    note: str = ""
    required: bool = True

    @property
    def blocking(self) -> bool:
        return self.required and not self.found


@dataclass(frozen=True)
class PathReport:
    path: str
    summary: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return not any(c.blocking for c in self.checks)


# ---------------------------------------------------------------------------- probes


def _first_line(argv: Sequence[str]) -> str:
    """The first output line of a version command; "" when it does not answer."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    out = (done.stdout or done.stderr).strip().splitlines()
    return out[0].strip() if out else ""


def _package(dist: str, module: str, install: str, *, required: bool = True) -> Check:
    """A Python distribution, found without importing it (importing temporalio or dbos costs
    seconds, and the doctor should answer at once)."""
    try:
        version = importlib.metadata.version(dist)
        spec = importlib.util.find_spec(module)
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return Check(dist, False, install=install, required=required)
    if spec is None:
        return Check(dist, False, install=install, required=required,
                     note=f"installed, but module {module!r} does not import")
    origin = spec.origin or next(iter(spec.submodule_search_locations or [""]))
    where = str(Path(origin).parent) if origin.endswith("__init__.py") else origin
    return Check(dist, True, where=where, version=version, install=install, required=required)


def _tool(tool: Tool) -> Check:
    install = f"{tool.install_command}  ({tool.how})"
    try:
        found = tool.locate()
    except ComponentUnavailable as exc:
        return Check(tool.name, False, install=install, note=str(exc))
    if found is None:
        return Check(tool.name, False, install=install,
                     note=f"pinned {tool.version}; looked in {tool.looked()}")
    flag = "-version" if tool.component == "toxiproxy" else "--version"
    version = _first_line([str(found.path), flag])
    note = "" if tool.version in version else f"pinned {tool.version}"
    return Check(tool.name, True, where=str(found.path), version=version, source=found.source,
                 install=install, note=note)


def _venv_executable(name: str, install: str, *, required: bool = True) -> Check:
    """A native executable that a PyPI package puts next to the interpreter."""
    beside = Path(sys.executable).parent / name
    path = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else \
        shutil.which(name)
    if path is None:
        return Check(name, False, install=install, required=required)
    return Check(name, True, where=path, install=install, required=required,
                 source="beside the interpreter" if path == str(beside) else "PATH")


def _postgres() -> Check:
    from harness.components.postgres import PostgresUnavailable, find_binaries, server_user

    install = "apt-get install postgresql  (Debian/Ubuntu; the server binaries initdb, pg_ctl)"
    try:
        binaries = find_binaries()
        server_user()  # as root, the server needs a user to run as
    except PostgresUnavailable as exc:
        return Check("postgresql server", False, install=install, note=str(exc))
    return Check("postgresql server", True, where=str(binaries.initdb.parent),
                 version=_first_line([str(binaries.postgres), "--version"]), install=install)


def _docker_hosts() -> list[str]:
    """Where the container path looks for an engine: $DOCKER_HOST, else the machine's socket,
    else the one a checkout's `make docker` starts under .scratch/docker."""
    if os.environ.get("DOCKER_HOST"):
        return [os.environ["DOCKER_HOST"]]
    project = Path(__file__).resolve().parents[1] / ".scratch" / "docker" / "docker.sock"
    return [f"unix://{s}" for s in (Path("/var/run/docker.sock"), project) if s.exists()]


def _docker_engine() -> Check:
    install = "apt-get install docker.io  (then start dockerd, or set DOCKER_HOST)"
    cli = shutil.which("docker")
    if cli is None:
        return Check("docker engine", False, install=install, note="no `docker` on PATH")
    hosts = _docker_hosts()
    for host in hosts:
        version = _first_line([cli, "-H", host, "version", "--format", "{{.Server.Version}}"])
        if version[:1].isdigit():
            return Check("docker engine", True, where=host, version=version, install=install)
    return Check("docker engine", False, where=cli, install=install,
                 note="the docker CLI is here but no engine answers at "
                 + (", ".join(hosts) or "$DOCKER_HOST (unset) nor /var/run/docker.sock"))


def _simulator() -> PathReport:
    try:
        version = importlib.metadata.version("durable-chaos")
    except importlib.metadata.PackageNotFoundError:
        version = "not installed (running from a checkout)"
    here = Path(__file__).resolve().parent
    return PathReport("simulator", "the embedded deterministic simulator (default)", (
        Check("python", True, where=sys.executable, version=sys.version.split()[0]),
        Check("durable-chaos", True, where=str(here), version=version),
        _package("freezegun", "freezegun", "pip install durable-chaos"),
    ))


def _restate() -> PathReport:
    extras = _PIP.format("restate,postgres")
    return PathReport("restate", "adapters reference-restate, naive-restate: a real Restate "
                      "server, PostgreSQL and Toxiproxy", (
        _tool(TOOLS["restate"]),
        _tool(TOOLS["toxiproxy"]),
        _postgres(),
        _package("restate-sdk", "restate", extras),
        _package("hypercorn", "hypercorn", extras),
        _package("httpx", "httpx", extras),
        _package("toxiproxy-python", "toxiproxy", extras),
        _package("psycopg", "psycopg", extras),
    ))


def _temporal() -> PathReport:
    extras = _PIP.format("temporal")
    return PathReport("temporal", "Temporal: temporalio with its native test server "
                      "(time skipping) and dev server (worker versioning)", (
        _package("temporalio", "temporalio", extras),
        _venv_executable("temporal-test-server", extras),
        _venv_executable("temporal", extras, required=False),
    ))


def _dbos() -> PathReport:
    return PathReport("dbos", "DBOS (SQLite or PostgreSQL)", (
        _package("dbos", "dbos", _PIP.format("dbos")),
    ))


def _containers() -> PathReport:
    extras = _PIP.format("docker")
    return PathReport("containers", "components and worker hosts as Docker containers", (
        _docker_engine(),
        _package("docker", "docker", extras),
        _package("testcontainers", "testcontainers", extras),
    ))


_CHECKS: dict[str, Callable[[], PathReport]] = {
    "simulator": _simulator,
    "restate": _restate,
    "temporal": _temporal,
    "dbos": _dbos,
    "containers": _containers,
}


def _engine_only(path: str) -> PathReport:
    """What an adapter of its own on `path` needs from the engine: not the reference's."""
    extras = _PIP.format(path)
    if path == "restate":
        return PathReport("restate", "the Restate server and SDK (for your adapter)", (
            _tool(TOOLS["restate"]), _package("restate-sdk", "restate", extras)))
    if path == "temporal":
        return PathReport("temporal", "temporalio (for your adapter)", (
            _package("temporalio", "temporalio", extras),))
    return check_path(path)


def check_adapter_needs(spec: str) -> PathReport:
    """What adapter `spec` says it needs (`requires`), and whether its `preflight()` passes;
    never raises for a missing part."""
    from harness.adapters import load_adapter

    try:
        adapter = load_adapter(spec)
    except DurableChaosError as exc:
        return PathReport(f"adapter {spec}", "cannot be loaded", (
            Check(spec, False, install="fix the adapter", note=str(exc)),))
    checks: list[Check] = []
    for need in getattr(adapter, "requires", ()):
        if need.startswith("module:"):
            module = need.removeprefix("module:")
            found = importlib.util.find_spec(module) is not None
            checks.append(Check(module, found, install=f"pip install {module}"))
        else:
            where = shutil.which(need) or (need if Path(need).is_file() else None)
            checks.append(Check(need, where is not None, where=where or "",
                                install=f"install {Path(need).name}"))
    preflight = getattr(adapter, "preflight", None)
    if callable(preflight):
        try:
            preflight()
            checks.append(Check("preflight", True, note="the adapter's preflight() passed"))
        except DurableChaosError as exc:
            checks.append(Check("preflight", False, install="see the note", note=str(exc)))
    return PathReport(f"adapter {spec}", getattr(adapter, "description", "") or spec,
                      tuple(checks))


def check_path(path: str) -> PathReport:
    """What `path` (one of PATHS) needs and what is found; never raises for a missing part."""
    return _CHECKS[path]()


def render(reports: Sequence[PathReport]) -> str:
    lines = []
    for report in reports:
        state = "ready" if report.ok else "NOT READY"
        lines.append(f"{report.path}: {state} - {report.summary}")
        for c in report.checks:
            if c.found:
                detail = " ".join(x for x in (c.version, f"at {c.where}" if c.where else "",
                                              f"(from {c.source})" if c.source else "") if x)
                lines.append(f"  ok       {c.name}: {detail}"
                             + (f"  [{c.note}]" if c.note else ""))
            else:
                mark = "missing " if c.required else "optional"
                lines.append(f"  {mark} {c.name}" + (f": {c.note}" if c.note else ""))
                lines.append(f"           install: {c.install}")
    lines.append(f"components cache: {cache_dir()}")
    return "\n".join(lines)


def run_doctor(paths: Sequence[str] | None, components: Sequence[str] | None,
               out: TextIO | None = None, err: TextIO | None = None, *,
               adapter: str | None = None) -> int:
    """The `doctor` command. Exit 0 when every path asked for with --path can run (without
    --path the doctor only reports, and exits 0); 1 when one cannot or an install failed.
    With `adapter`, the paths are checked for what that adapter needs (see the module
    docstring), and the adapter's own needs must be met too."""
    out = out or sys.stdout
    err = err or sys.stderr
    if components:
        try:
            install(list(dict.fromkeys(components)), out=out)
        except InstallError as exc:
            print(f"durable-chaos: error: {exc}", file=err)
            return 1
    if adapter is not None:
        reports = [_engine_only(p) for p in dict.fromkeys(paths or ())]
        reports.append(check_adapter_needs(adapter))
        paths = [r.path for r in reports]
    else:
        chosen = list(dict.fromkeys(paths or (["restate"] if components else PATHS)))
        reports = [check_path(p) for p in chosen]
    print(render(reports), file=out)
    if paths and not all(r.ok for r in reports):
        blocked = ", ".join(r.path for r in reports if not r.ok)
        print(f"durable-chaos: {blocked} cannot run here: install what is missing above",
              file=err)
        return 1
    return 0


# ---------------------------------------------------------------------------- install


def install(components: Sequence[str], *, out: TextIO) -> None:
    """Install each component (restate, toxiproxy) into the cache, unless it is there."""
    for component in components:
        tool = TOOLS[component]
        target = tool.cache_path()
        if target.is_file() and os.access(target, os.X_OK):
            print(f"{tool.name} {tool.version}: already in the cache at {target}", file=out)
            continue
        started = time.monotonic()
        entry = cache_dir() / tool.cached.parts[0]
        entry.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
        try:
            _INSTALLERS[component](scratch)
            built = scratch / Path(*tool.cached.parts[1:])
            if not (built.is_file() and os.access(built, os.X_OK)):
                raise InstallError(f"{tool.name}: the install finished but {built} is not an "
                                   "executable; please report this as a bug")
            if entry.exists():
                shutil.rmtree(entry)
            scratch.rename(entry)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"{tool.name} {tool.version}: installed at {target} "
              f"({time.monotonic() - started:.1f} s)", file=out)


def _run(argv: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env,
                              timeout=_INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{what}: `{' '.join(argv)}` did not finish in "
                           f"{_INSTALL_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise InstallError(f"{what}: `{' '.join(argv)}` failed (exit {done.returncode}): "
                           f"{tail}")


def _need(program: str, why: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise InstallError(why)
    return found


def _install_restate(into: Path) -> None:
    npm = _need("npm", "restate: npm is not on PATH; install Node.js with npm (e.g. `apt-get "
                "install npm`), or download restate-server yourself and set "
                "$DURABLE_CHAOS_RESTATE_BIN")
    _run([npm, "install", "--prefix", str(into), "--no-audit", "--no-fund",
          "--loglevel=error", f"@restatedev/restate-server@{pins.RESTATE_SERVER}"],
         "restate")


def _install_toxiproxy(into: Path) -> None:
    go = _need("go", "toxiproxy: go is not on PATH; install Go >= 1.22 (https://go.dev/dl/), "
               "or build the Toxiproxy server yourself and set $DURABLE_CHAOS_TOXIPROXY_BIN")
    bin_dir = into / "bin"
    bin_dir.mkdir()
    env = {**os.environ, "GOBIN": str(bin_dir), "GOFLAGS": "-mod=mod"}
    module = "github.com/Shopify/toxiproxy/v2"
    # The -X stamp makes `GET /version` report the pin instead of "git", as `make toxiproxy`.
    _run([go, "install", "-ldflags", f"-X {module}.Version={pins.TOXIPROXY}",
          f"{module}/cmd/server@{pins.TOXIPROXY}"], "toxiproxy", env)
    # go install names the binary after its package directory; say what it is.
    if (bin_dir / "server").is_file():
        (bin_dir / "server").rename(bin_dir / "toxiproxy-server")


_INSTALLERS: dict[str, Callable[[Path], None]] = {
    "restate": _install_restate,
    "toxiproxy": _install_toxiproxy,
}
