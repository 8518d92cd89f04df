"""An approval agent written directly with restate-sdk, and its durable-chaos adapter."""
