"""A toy app on a toy durable engine, with its durable-chaos adapter on `harness.kit`: written
the way a user writes one, outside the package, public API only (see `chaos.py`)."""
