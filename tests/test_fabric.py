"""The fabric's user space: which transport plugins of the real wheels cannot load, and what the images install.

This machine has no rdma-core, so the wheels' UCX InfiniBand transports and libfabric's verbs/EFA/PSM2 providers
cannot load here: `ardlab.comm.fabric.missing` must find that with the dynamic linker, and every library they miss
must be one the table maps to a Debian package that the library's image installs (the slow image proof then runs
`python -m ardlab.comm fabric` in the image's %test, where none may be missing).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from ardlab.comm import LIBRARIES, library
from ardlab.comm.fabric import missing, plugins
from ardlab.comm.launch import env_prefix
from ardlab.comm.libraries import FABRIC_PROVIDERS
from conftest import ROOT

HAVE_VERBS = any(Path(d, "libibverbs.so.1").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64"))


@pytest.mark.parametrize("lib", list(LIBRARIES))
def test_every_plugin_a_wheel_cannot_load_here_is_installed_in_its_image(lib):
    prefix = env_prefix(lib)
    names = {p.name for p in plugins(prefix)}
    assert any(n.startswith("libverbs") for n in names), names  # each wheel ships libfabric's verbs provider
    lost = missing(prefix)
    if not HAVE_VERBS:
        assert any("libibverbs.so.1" in libs for libs in lost.values()), lost
    sonames = {so for libs in lost.values() for so in libs}
    unknown = sonames - set(FABRIC_PROVIDERS)
    assert not unknown, f"{lib}: plugins load {unknown}, which the table maps to no package"
    needed = {FABRIC_PROVIDERS[so] for so in sonames}
    assert needed <= set(library(lib).fabric_debs), needed - set(library(lib).fabric_debs)
    post = (ROOT / "containers" / f"{lib}.def").read_text()
    assert all(deb in post for deb in library(lib).fabric_debs)


def test_the_image_check_names_each_plugin_and_what_it_misses():
    lib = "intelmpi"
    proc = subprocess.run([sys.executable, "-m", "ardlab.comm", "fabric", lib], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")})
    if HAVE_VERBS and not missing(env_prefix(lib)):
        assert proc.returncode == 0 and "loads" in proc.stdout
    else:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "intelmpi: libmlx-fi.so cannot load: libucp.so.0 not found" in proc.stderr


def test_an_unknown_library_is_named():
    proc = subprocess.run([sys.executable, "-m", "ardlab.comm", "fabric", "mvapich"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and "mvapich" in proc.stderr
