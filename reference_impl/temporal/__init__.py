"""The reference implementation on Temporal: the binding (`binding`) and a worker (`worker`).

The handler code is `reference_impl`'s own; only the binding knows Temporal."""
