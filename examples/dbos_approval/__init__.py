"""An approval agent on DBOS (`agent.py`) and its durable-chaos adapter (`chaos.py`:
`--adapter examples.dbos_approval.chaos:adapter`, from the repository root)."""
