"""The Apptainer recipes, checked where Apptainer cannot run (no Apptainer on these machines).

The install script they run is the one that builds .envs/ (exercised by every test run). Here: the committed
.def files are what the template renders from the table; each parses with spython's Singularity recipe
parser; its base image is pinned; the files it copies exist; its %post calls the shared install script for its
library; its labels carry the versions; and every shell script passes shellcheck.
"""

import os
import shutil
import subprocess

import pytest

from ardlab.comm import LIBRARIES
from conftest import ROOT

CONTAINERS = ROOT / "containers"
SCRIPTS = [CONTAINERS / n for n in ("install-env", "install-horovod", "setup-envs", "render-defs", "build",
                                  "setup-apptainer", "apptainer", "common.sh")] + [
    ROOT / "tests/run", ROOT / "workflow/run", ROOT / "workflow/run-cluster", ROOT / ".ci/run"]


def test_definitions_are_rendered_from_the_template():
    proc = subprocess.run([CONTAINERS / "render-defs", "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("lib", list(LIBRARIES))
def test_definition_parses_and_uses_the_install_script(lib):
    from spython.main.parse.parsers import SingularityParser

    path = CONTAINERS / f"{lib}.def"
    stages = SingularityParser(str(path)).recipe
    assert list(stages) == ["spython-base"], stages  # one stage
    recipe = stages["spython-base"]
    assert recipe.fromHeader == "debian:bookworm-slim", recipe.fromHeader  # what the proof's debootstrap makes
    assert recipe.files
    for entry in recipe.files:
        src, _dest = entry.split()
        assert (ROOT / src).exists(), f"{path.name} copies {src}, which does not exist"
    post = "\n".join(recipe.install)
    assert f"/opt/ardlab/src/containers/install-env {lib} /opt/ardlab/envs/{lib}" in post
    labels = "\n".join(recipe.labels)
    for pkg in LIBRARIES[lib].pip_packages:
        assert pkg in labels
    assert "ardlab.horovod 0.28.1" in labels
    assert "ardlab" in str(recipe.cmd), recipe.cmd  # %runscript
    text = path.read_text()
    assert "%test" in text and "train-tf" in text and "bench allreduce" in text


def test_build_script_says_clearly_without_apptainer(tmp_path):
    """Without an apptainer on PATH and without root (Debian's, containers/apptainer, needs root), the build says so."""
    if shutil.which("apptainer"):
        pytest.skip("apptainer exists here")
    argv = [CONTAINERS / "build", "--output", tmp_path / "images"]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    proc = subprocess.run(list(map(str, argv)), capture_output=True, text=True, env={**os.environ, "HOME": "/tmp"})
    assert proc.returncode == 3 and "apptainer is not installed" in proc.stderr, proc.stderr


def test_shell_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is missing (containers/setup-envs installs it)"
    proc = subprocess.run([shellcheck, "-x", *map(str, SCRIPTS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
