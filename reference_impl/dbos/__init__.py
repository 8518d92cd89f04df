"""The reference implementation on DBOS: the `Context` binding (`binding`), the state of
virtual objects (`state`), the worker process (`worker`) and the names an outside driver
needs (`names`, which does not import DBOS)."""

# Nothing is exported from the package itself: its modules are imported by their names.
__all__: list[str] = []
