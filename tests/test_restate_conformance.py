"""The Restate adapters keep the adapter contract, as the pytest plugin checks before chaos.

Real components: skipped with the make target to run when missing, failed under CI=true.
"""

from __future__ import annotations

import pytest
from restate_fixtures import require_real_stack

from harness.adapters import load_adapter
from harness.conformance import check_adapter

pytestmark = pytest.mark.real


def test_reference_restate_keeps_the_adapter_contract() -> None:
    require_real_stack()
    # Raises AdapterContractError naming the broken promise otherwise. The work the contract
    # waits for takes real time on this runtime, so its patience is also counted in real
    # seconds.
    check_adapter(load_adapter("reference-restate"))
