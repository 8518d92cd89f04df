"""access-rechecked (a call never handed off): a tool that needs no approval is checked for
nobody.

The reference checks the person's access before every run of a tool, whether the tool needs
an approval or not. Here the access check of a tool that needs none asks about an empty user
name, whom no revocation names: a person who lost access to `notify` still notifies the team
when the model asks for it.
"""

from __future__ import annotations

from dataclasses import replace

from contract.binding import App
from contract.ports import Identity, Ports, ToolCatalog
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "access-rechecked"


class _Nobody:
    def __init__(self, identity: Identity, catalog: ToolCatalog) -> None:
        self.identity = identity
        self.catalog = catalog

    async def has_access(self, user: str, tool: str) -> bool:
        spec = await self.catalog.lookup(tool)
        if spec is not None and not spec.needs_approval:
            user = ""  # the bug: the no-approval path passes no user
        return await self.identity.has_access(user, tool)


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, identity=_Nobody(ports.identity, ports.catalog)), version)


ADAPTER = SimAdapter("planted-unapproved-call-checked-for-nobody",
                     "a tool without approval is checked for no user", build)
