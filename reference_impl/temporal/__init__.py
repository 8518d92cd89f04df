"""The reference implementation on Temporal: the binding (`binding`) and a worker (`worker`).

The handler code is `reference_impl`'s own; only the binding knows Temporal."""

# Nothing is exported from the package itself: its modules are imported by their names.
__all__: list[str] = []
