"""The linter's rules (pyproject.toml's [tool.ruff]: line length, import order, unused and undefined names) hold for
every Python file of the repository."""

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
