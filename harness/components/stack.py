"""Which real components a run starts: processes (the default) or containers.

`component_stack()` reads `DURABLE_CHAOS_COMPONENTS` (what `--components` and
`--chaos-components` set, see `use_components`) and returns the factories the Restate runtime
starts its PostgreSQL, restate-server, Toxiproxy and worker hosts with. Both stacks give the
same interfaces, so faults, the operator and the checkers cannot tell them apart; only the
host-level faults differ in mechanism (SIGSTOP/SIGKILL of a process group, or `docker pause` /
`docker kill` of a container).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from harness.errors import ConfigError

if TYPE_CHECKING:
    # The components need the `restate` extra (httpx, psycopg); the CLI imports this module
    # for `--components` on every run, the simulator's included, so they load on first use.
    from harness.components.postgres import PostgresServer
    from harness.components.restate import RestateServer
    from harness.components.toxiproxy import ToxiproxyServer
    from harness.components.workers import WorkerProcess

__all__ = ["COMPONENTS", "COMPONENTS_ENV", "ComponentStack", "component_stack",
           "use_components"]

COMPONENTS_ENV = "DURABLE_CHAOS_COMPONENTS"
COMPONENTS = ("processes", "containers")
Components = Literal["processes", "containers"]


def _check(value: str, source: str) -> Components:
    if value == "processes":
        return "processes"
    if value == "containers":
        return "containers"
    raise ConfigError(f"unknown components {value!r}: use 'processes' (the default) or "
                      "'containers' (Docker, see `make docker images`)", source=source)


def use_components(value: str | None, *, source: str = "--components") -> None:
    """Choose the components of this process's real runs (`--components`). For containers,
    the engine and the images are checked now: a missing one is a ConfigError naming the
    make target, before anything runs."""
    if value is None:
        return
    choice = _check(value, source)
    os.environ[COMPONENTS_ENV] = choice
    if choice == "containers":
        from harness.components.containers import docker_client
        from harness.components.images import KINDS, find_image

        client = docker_client()
        for kind in KINDS:
            find_image(client, kind)


class ComponentStack(Protocol):
    name: str

    def postgres(self) -> PostgresServer: ...
    def toxiproxy(self, **kwargs: Any) -> ToxiproxyServer: ...
    def restate(self, **kwargs: Any) -> RestateServer: ...
    def worker(self, app: str, **kwargs: Any) -> WorkerProcess: ...
    def stop_workers(self, workers: Sequence[WorkerProcess]) -> None: ...


class ProcessStack:
    """Each component and worker host a process group of the harness."""

    name = "processes"

    def postgres(self) -> PostgresServer:
        from harness.components.postgres import PostgresServer

        return PostgresServer()

    def toxiproxy(self, **kwargs: Any) -> ToxiproxyServer:
        from harness.components.toxiproxy import ToxiproxyServer

        return ToxiproxyServer(**kwargs)

    def restate(self, **kwargs: Any) -> RestateServer:
        from harness.components.restate import RestateServer

        return RestateServer(**kwargs)

    def worker(self, app: str, **kwargs: Any) -> WorkerProcess:
        from harness.components.workers import WorkerProcess

        return WorkerProcess(app, **kwargs)

    def stop_workers(self, workers: Sequence[WorkerProcess]) -> None:
        from harness.components.procs import stop_groups

        stop_groups([w.process for w in workers if w._group is not None], 5.0, term_grace=0.3)


class ContainerStack:
    """Each component and worker host a container, all labelled with one run id."""

    name = "containers"

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:12]

    def postgres(self) -> PostgresServer:
        from harness.components.containers import ContainerPostgres

        return ContainerPostgres(run=self.run)

    def toxiproxy(self, **kwargs: Any) -> ToxiproxyServer:
        from harness.components.containers import ContainerToxiproxy

        return ContainerToxiproxy(run=self.run, **kwargs)

    def restate(self, **kwargs: Any) -> RestateServer:
        from harness.components.containers import ContainerRestate

        return ContainerRestate(run=self.run, **kwargs)

    def worker(self, app: str, **kwargs: Any) -> WorkerProcess:
        from harness.components.containers import ContainerWorker

        return ContainerWorker(app, run=self.run, **kwargs)

    def stop_workers(self, workers: Sequence[WorkerProcess]) -> None:
        from harness.components.containers import ContainerWorker, stop_workers

        stop_workers([w for w in workers if isinstance(w, ContainerWorker)])


def component_stack() -> ComponentStack:
    """The stack `DURABLE_CHAOS_COMPONENTS` names (processes when unset)."""
    value = os.environ.get(COMPONENTS_ENV) or "processes"
    if _check(value, f"${COMPONENTS_ENV}") == "containers":
        return ContainerStack()
    return ProcessStack()
