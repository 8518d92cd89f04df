"""Re-export of `contract.faultpoints`: the same POINTS and the same hook (one per process).

Kept so that code importing `reference_impl.faultpoints` keeps working; new code imports
`contract.faultpoints`. `install` here installs the hook `contract.faultpoints.reach` calls.
"""

from contract.faultpoints import POINTS, Hook, install, reach

__all__ = ["POINTS", "Hook", "install", "reach"]
