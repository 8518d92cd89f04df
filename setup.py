"""Packaging: everything else is in pyproject.toml.

The scenario library lives in the top-level `scenarios/` directory, the one place where
scenario files are written and reviewed. The wheel carries it as the package
`harness.scenarios` (and one subpackage per subdirectory, e.g. `harness.scenarios.real`)
by mapping those packages onto the directories, so nothing is copied by hand and a file
added to `scenarios/` is in the next wheel. tests/test_package.py checks that the wheel holds
every file.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"

library = {"harness.scenarios": "scenarios"}
for sub in sorted(p for p in SCENARIOS.iterdir() if p.is_dir() and not p.name.startswith(".")):
    library[f"harness.scenarios.{sub.name}"] = f"scenarios/{sub.name}"

# Namespace discovery: harness.schedules has no __init__.py.
code = find_namespace_packages(include=["harness*", "reference_impl*", "contract*"],
                               exclude=["*__pycache__*", "harness.scenarios*"])

setup(
    packages=code + list(library),
    package_dir=library,
    package_data={
        "harness": ["py.typed", "report/*.css", "report/*.js"],
        "reference_impl": ["py.typed"],
        "contract": ["py.typed"],
        # Every file: the library is data, whatever its extension.
        **{name: ["*"] for name in library},
    },
)
