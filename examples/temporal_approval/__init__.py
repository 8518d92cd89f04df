"""An approval agent on Temporal (`agent.py`, `worker.py`) and its durable-chaos adapter
(`chaos.py`: `--adapter examples.temporal_approval.chaos:adapter`, from the repository root).

Nothing is imported here: Temporal's workflow sandbox re-imports this package with the
workflow, and must not meet the harness there.
"""
