"""The reference implementation of the system under test (see docs/design.md, section 1).

It never imports the harness: it gets endpoints (`contract.ports.Ports`) and a narrow engine
binding (`contract.binding.Context`).
"""

from reference_impl.app import build_app
from reference_impl.naive import build_naive_app

__all__ = ["build_app", "build_naive_app"]
