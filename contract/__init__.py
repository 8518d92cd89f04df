"""The contract between a durable runtime and the harness that tests it.

Everything a runtime and the harness must agree on, in one place, importing neither side:

- `contract.binding`: the narrow `Context` handlers are written against, and `App`.
- `contract.ports`: the endpoints a runtime gets from the world (model, mailer, payments,
  identity, tool catalog, approval UI, timers), `Config` and `Ports`.
- `contract.threadlog`: the thread log store protocol, its values and errors.
- `contract.invariants`: the names of the invariants a run is judged by.
- `contract.thresholds`: the design's two thresholds (5 minutes, 8 days), which both the
  runtime's `Config` and the checkers' `CheckConfig` default from.
- `contract.faultpoints`: the named fault points and the one hook that decides what happens
  when a runtime reaches one.

The reference implementation imports only this package; the harness imports this package and
loads a runtime only through an adapter.
"""

# The contract's names live in its modules, imported by their names (`contract.ports`).
__all__ = ["binding", "faultpoints", "invariants", "network", "ports", "records", "services",
           "threadlog", "thresholds"]
