"""benchmarks/golden.py: its check mode passes on the digest it wrote and lists every entry
that changed (the full digest is `make golden`, minutes long; here two schedules)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import golden


def test_check_mode_lists_every_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    digest = tmp_path / "digest.json"
    args = ["--adapters", "planted-duplicate-email", "--schedules", "2", "--jobs", "1",
            "--digest", str(digest)]
    assert golden.main([*args, "--write"]) == 0
    recorded = json.loads(digest.read_text())
    failing = sorted(k for k, v in recorded.items() if v.startswith("fail"))
    assert failing, "the planted bug fails some run: its witness is in the digest"
    assert golden.main(args) == 0
    capsys.readouterr()
    changed = dict(recorded)
    changed[failing[0]] = "pass | "
    del changed[sorted(recorded)[0]]
    golden.write(changed, digest)
    assert golden.main(args) == 1
    out = capsys.readouterr().out
    assert f"{failing[0]}\n  was: 'pass | '" in out
    assert f"{sorted(recorded)[0]}\n  was: None" in out
    assert "2 difference(s)" in out
