"""Finding the executables of real components: an environment override, then candidates."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from harness.errors import ComponentUnavailable


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_executable(
    what: str,
    *,
    env_var: str,
    candidates: Iterable[Path] = (),
    on_path: Iterable[str] = (),
    install_hint: str,
    error: type[ComponentUnavailable] = ComponentUnavailable,
) -> Path:
    """`$env_var` if set (it must be executable), else the first executable candidate, else
    the first name found on PATH; otherwise `error` saying where it looked and how to install.
    """
    from_env = os.environ.get(env_var)
    if from_env:
        path = Path(from_env)
        if not _executable(path):
            raise error(
                f"${env_var}={from_env} is not an executable file; unset it or {install_hint}"
            )
        return path
    looked: list[str] = []
    for candidate in candidates:
        looked.append(str(candidate))
        if _executable(candidate):
            return candidate
    for name in on_path:
        found = shutil.which(name)
        if found:
            return Path(found)
        looked.append(f"{name} on PATH")
    raise error(f"{what} not found ({', '.join(looked) or 'nowhere to look'}); {install_hint}")
