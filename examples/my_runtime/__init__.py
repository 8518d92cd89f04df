"""My runtime, wired into durable-chaos from outside: `--chaos-adapter my_runtime:adapter`."""

from my_runtime.adapter import MyRuntime, MyRuntimeAdapter

# The design before the fix (in-call wait): the chaos suite finds pinning-bound.
adapter = MyRuntimeAdapter()
# The design after the fix (hand-off after 5 minutes): the chaos suite passes.
adapter_with_handoff = MyRuntimeAdapter(hand_off=True)

__all__ = ["MyRuntime", "MyRuntimeAdapter", "adapter", "adapter_with_handoff"]
