"""pytest plugin (registered through `pytest11`); silent unless `--chaos-adapter` is given."""
