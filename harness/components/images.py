"""Container images for `--components containers`, built from this machine's own files.

Where a registry is reachable a user can run the official images (`DURABLE_CHAOS_IMAGES=
official`: `OFFICIAL` says which tags). Without one (and by default, so that both paths run
the very same pinned binaries) each image is a small root filesystem made from files already
here and turned into an image with `docker import`:

- `restate`: the static restate-server of the npm package (`make restate`), a temp dir and the
  CA bundle (the server panics at start without one);
- `toxiproxy`: the `go install`ed toxiproxy-server (`make toxiproxy`) and the C library it
  links;
- `postgres`: the machine's PostgreSQL server binary with its libraries, share directory and
  modules, the time zone data, and a passwd file naming the `postgres` user (initdb runs on the
  host, as on the process path; the data directory is mounted);
- `worker`: the venv's Python interpreter, its standard library and every shared library that
  the interpreter, its extension modules and the venv's extension modules link. The checkout
  and its venv are mounted read-only at their own paths when a worker starts, so a code change
  needs no rebuild.

Each image is tagged by the SHA-256 of its content (`durable-chaos/KIND:HASH12`), so a build is
skipped when an image with that tag exists (`make images` is idempotent). A run does not build:
it finds the image by a cheap fingerprint (sizes and modification times of the sources) kept as
a label, and a missing one is a configuration error naming `make images`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError, DurableChaosError

if TYPE_CHECKING:
    import docker

__all__ = [
    "IMAGES_ENV",
    "KINDS",
    "OFFICIAL",
    "Entry",
    "Recipe",
    "build",
    "find_image",
    "main",
    "recipe",
]

KINDS = ("restate", "postgres", "toxiproxy", "worker")
IMAGES_ENV = "DURABLE_CHAOS_IMAGES"
# The official images a user with a registry would run instead of the local ones. There is
# none for the worker: it is this project's own code.
OFFICIAL = {
    "restate": "docker.io/restatedev/restate:1.7.12",
    "postgres": "docker.io/library/postgres:15",
    "toxiproxy": "ghcr.io/shopify/toxiproxy:2.12.0",
}
REPOSITORY = "durable-chaos"
LABEL_KIND = "durable-chaos.image"
LABEL_FINGERPRINT = "durable-chaos.fingerprint"
_MAKE_HINT = "run `make images` (builds the container images from this machine's files)"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_ZONEINFO = Path("/usr/share/zoneinfo")
# Standard-library parts a worker never imports: they are most of its size.
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                "site-packages", "__phello__"}
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


@dataclass(frozen=True)
class Entry:
    """One member of an image's root filesystem: a copy of a host file, a directory, or
    literal bytes."""

    path: str  # absolute path inside the image
    source: Path | None = None
    data: bytes | None = None
    mode: int = 0o755


@dataclass(frozen=True)
class Recipe:
    """What goes into one image, and how to run it."""

    kind: str
    roots: tuple[Path, ...]
    """The files and directories whose sizes and times make the cheap fingerprint."""
    members: Callable[[], list[Entry]]
    entrypoint: tuple[str, ...]

    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.kind.encode())
        for root in self.roots:
            for path in _walk_stats(root):
                st = path.stat()
                digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()[:16]


def _walk_stats(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    # A directory's own time changes when entries come or go; its files' when they change.
    yield root
    for sub in sorted(root.iterdir()):
        if sub.is_file() and not sub.is_symlink():
            yield sub


def _libraries(binaries: Iterable[Path]) -> list[Path]:
    """The shared libraries (and the dynamic loader) that `binaries` link, by ldd."""
    found: dict[str, None] = {}
    for binary in binaries:
        result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True,
                                check=False)
        for line in result.stdout.splitlines():
            match = _LDD_LINE.search(line)
            if match:
                found[match.group(1)] = None
    return [Path(p) for p in found]


def _files(root: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not skip(here / d))
        out.extend(here / f for f in sorted(filenames) if not skip(here / f))
    return out


def _copies(paths: Iterable[Path]) -> list[Entry]:
    return [Entry(str(p), source=p, mode=p.stat().st_mode & 0o7777) for p in paths]


_TMP = Entry("/tmp", mode=0o1777)


def _restate_recipe() -> Recipe:
    from harness.components.restate import find_restate_server

    binary = find_restate_server()

    def members() -> list[Entry]:
        return [Entry("/usr/local/bin/restate-server", source=binary), _TMP,
                Entry(str(_CA_BUNDLE), source=_CA_BUNDLE, mode=0o644)]

    return Recipe("restate", (binary, _CA_BUNDLE), members,
                  ("/usr/local/bin/restate-server",))


def _toxiproxy_recipe() -> Recipe:
    from harness.components.toxiproxy import find_toxiproxy_server

    binary = find_toxiproxy_server()

    def members() -> list[Entry]:
        return [Entry("/usr/local/bin/toxiproxy-server", source=binary), _TMP,
                *_copies(_libraries([binary]))]

    return Recipe("toxiproxy", (binary,), members, ("/usr/local/bin/toxiproxy-server",))


def _postgres_recipe() -> Recipe:
    import pwd

    from harness.components.postgres import find_binaries

    postgres = find_binaries().postgres.resolve()
    version_dir = postgres.parents[1]  # /usr/lib/postgresql/15
    share = Path("/usr/share/postgresql") / version_dir.name
    lib = version_dir / "lib"

    def members() -> list[Entry]:
        # The JIT module links all of LLVM; runs switch JIT off instead (`jit=off`).
        modules = _files(lib, skip=lambda p: p.name.startswith("llvmjit"))
        user = pwd.getpwnam("postgres") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        passwd = (f"root:x:0:0:root:/root:/bin/sh\n{user.pw_name}:x:{user.pw_uid}:"
                  f"{user.pw_gid}::/tmp:/bin/sh\n").encode()
        group = f"root:x:0:\n{user.pw_name}:x:{user.pw_gid}:\n".encode()
        sos = [m for m in modules if m.suffix == ".so"]
        return [Entry(str(postgres), source=postgres), _TMP,
                Entry("/etc/passwd", data=passwd, mode=0o644),
                Entry("/etc/group", data=group, mode=0o644),
                *_copies(_libraries([postgres, *sos])), *_copies(modules),
                *_copies(_files(share)), *_copies(_files(_ZONEINFO))]

    return Recipe("postgres", (postgres, share, lib), members, (str(postgres),))


def _worker_recipe() -> Recipe:
    # The venv's interpreter is a symlink to the base installation: the image holds the
    # base, the venv is mounted.
    base = Path(os.path.realpath(sys.executable))
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = prefix / "lib" / version
    venv_site = Path(sys.prefix) / "lib" / version / "site-packages"

    def skip(path: Path) -> bool:
        return (path.parent == stdlib and path.name in _STDLIB_SKIP) or (
            path.name.startswith("config-") and path.parent == stdlib)

    def members() -> list[Entry]:
        libpython = sorted((prefix / "lib").glob("libpython*.so*"))
        std = _files(stdlib, skip=skip)
        extensions = [p for p in std if p.suffix == ".so"]
        venv_exts = [p for p in _files(venv_site) if p.suffix == ".so"]
        libs = [p for p in _libraries([base, *extensions, *venv_exts])
                if not str(p).startswith(str(venv_site)) and not str(p).startswith(str(prefix))]
        return [Entry(str(base), source=base), _TMP,
                Entry(str(base.parent / "python3"), data=base.name.encode(), mode=0o120777),
                Entry(str(_CA_BUNDLE), source=_CA_BUNDLE, mode=0o644),
                *_copies(libpython), *_copies(std), *_copies(libs)]

    return Recipe("worker", (base, stdlib, *sorted((prefix / "lib").glob("libpython*.so*"))),
                  members, (str(base),))


_RECIPES: dict[str, Callable[[], Recipe]] = {
    "restate": _restate_recipe,
    "postgres": _postgres_recipe,
    "toxiproxy": _toxiproxy_recipe,
    "worker": _worker_recipe,
}


def recipe(kind: str) -> Recipe:
    if kind not in _RECIPES:
        raise ConfigError(f"unknown image {kind!r}: use one of {list(KINDS)}")
    return _RECIPES[kind]()


def _write_tar(entries: list[Entry], out: Path) -> str:
    """The root filesystem as a tarball at `out`; returns the SHA-256 of its content
    (member names, modes and bytes, in a fixed order: the same files give the same hash)."""
    digest = hashlib.sha256()
    seen: set[str] = set()
    with tarfile.open(out, "w") as tar:
        for entry in sorted(entries, key=lambda e: e.path):
            name = entry.path.lstrip("/")
            if name in seen:
                continue
            seen.add(name)
            for parent in reversed(Path(name).parents[:-1]):
                if str(parent) not in seen:
                    seen.add(str(parent))
                    tar.addfile(_info(str(parent), tarfile.DIRTYPE, 0o755))
            digest.update(f"{name}\0{entry.mode:o}\0".encode())
            if entry.mode & 0o170000 == 0o120000 and entry.data is not None:
                info = _info(name, tarfile.SYMTYPE, 0o777)
                info.linkname = entry.data.decode()
                digest.update(entry.data)
                tar.addfile(info)
            elif entry.data is not None:
                info = _info(name, tarfile.REGTYPE, entry.mode)
                info.size = len(entry.data)
                digest.update(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            elif entry.source is not None:
                real = entry.source.resolve()
                info = _info(name, tarfile.REGTYPE, entry.mode)
                info.size = real.stat().st_size
                with real.open("rb") as fh:
                    while chunk := fh.read(1 << 20):
                        digest.update(chunk)
                with real.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(_info(name, tarfile.DIRTYPE, entry.mode))
    return digest.hexdigest()


def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode & 0o7777
    info.mtime = 0
    return info


def find_image(client: docker.DockerClient, kind: str) -> str:
    """The image to run for `kind`: an official tag (`DURABLE_CHAOS_IMAGES=official`) or the
    local image built from the current sources, which must exist."""
    mode = os.environ.get(IMAGES_ENV, "local")
    if mode not in ("local", "official"):
        raise ConfigError(f"{IMAGES_ENV}={mode!r}: use 'local' (built by `make images`) or "
                          "'official' (pulled from a registry)")
    if mode == "official" and kind in OFFICIAL:
        return OFFICIAL[kind]
    fingerprint = recipe(kind).fingerprint()
    found = client.images.list(filters={"label": [f"{LABEL_KIND}={kind}",
                                                  f"{LABEL_FINGERPRINT}={fingerprint}"]})
    if not found or not found[0].tags:
        raise ConfigError(f"no {kind} image for the current sources "
                          f"({LABEL_FINGERPRINT}={fingerprint}); {_MAKE_HINT}")
    tag: str = found[0].tags[0]
    return tag


def build(client: docker.DockerClient, kind: str, *, log: Callable[[str], None] = print
          ) -> str:
    """Build (or find) the local image for `kind`; returns its tag."""
    spec = recipe(kind)
    fingerprint = spec.fingerprint()
    started = time.monotonic()
    # Sources unchanged since the last build: no need to read them all again.
    current = client.images.list(filters={"label": [f"{LABEL_KIND}={kind}",
                                                    f"{LABEL_FINGERPRINT}={fingerprint}"]})
    if current and current[0].tags:
        log(f"{kind}: {current[0].tags[0]} is up to date")
        return str(current[0].tags[0])
    scratch = _REPO_ROOT / ".scratch" / "images"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        tarball = Path(tmp) / f"{kind}.tar"
        content = _write_tar(spec.members(), tarball)
        tag = f"{REPOSITORY}/{kind}:{content[:12]}"
        existing = _image(client, tag)
        if existing is not None and existing.labels.get(LABEL_FINGERPRINT) == fingerprint:
            log(f"{kind}: {tag} is up to date")
            return tag
        entrypoint = ", ".join(f'"{part}"' for part in spec.entrypoint)
        changes = [f"ENTRYPOINT [{entrypoint}]", f"LABEL {LABEL_KIND}={kind}",
                   f"LABEL {LABEL_FINGERPRINT}={fingerprint}", "LABEL durable-chaos.content="
                   f"{content}"]
        client.api.import_image_from_file(str(tarball), repository=f"{REPOSITORY}/{kind}",
                                          tag=content[:12], changes=changes)
    image = _image(client, tag)
    # Same content, sources touched since (a reinstall): the old image lost its tag to the
    # new one and would stay behind untagged.
    if existing is not None and image is not None and existing.id != image.id:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(existing.id, noprune=False)
    megabytes = 0.0 if image is None else float(image.attrs.get("Size", 0)) / 1e6
    log(f"{kind}: built {tag} ({megabytes:.0f} MB) in {time.monotonic() - started:.1f}s")
    return tag


def _image(client: docker.DockerClient, tag: str) -> Any:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.components.images build [KIND...]` (what `make images` runs)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "build":
        print("usage: python -m harness.components.images build [KIND...]", file=sys.stderr)
        return 2
    kinds = args[1:] or list(KINDS)
    from harness.components.containers import docker_client

    try:
        client = docker_client()
        for kind in kinds:
            build(client, kind)
    except DurableChaosError as exc:
        print(f"images: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
