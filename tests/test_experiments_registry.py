"""The investigations' one registry (ardlab.experiments.EXPERIMENTS): every module of the package is in it, every name
in it is a module with main(argv), and `python -m ardlab.experiments` lists and runs them by name."""

import inspect
import subprocess
import sys
from importlib import import_module
from pathlib import Path

from ardlab.experiments import EXPERIMENTS

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ardlab" / "experiments"


def test_every_investigation_is_registered_once():
    modules = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")}
    assert modules == set(EXPERIMENTS)
    for name in EXPERIMENTS:
        main = import_module(f"ardlab.experiments.{name}").main
        assert list(inspect.signature(main).parameters) == ["argv"], name


def test_the_runner_lists_and_refuses_by_name():
    listed = subprocess.run([sys.executable, "-m", "ardlab.experiments"], capture_output=True, text=True, check=True)
    assert all(name in listed.stdout for name in EXPERIMENTS)
    bad = subprocess.run([sys.executable, "-m", "ardlab.experiments", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown investigation 'nope'; valid: own_vs_native" in bad.stderr
    helped = subprocess.run([sys.executable, "-m", "ardlab.experiments", "gaps", "--help"], capture_output=True,
                            text=True)
    assert helped.returncode == 0 and "python -m ardlab.experiments gaps" in helped.stdout
