"""The definitions proven from a clean OS (ardlab.images): each .def's own sections run in a fresh Debian root.

Fast: the sections are read from the files themselves, with their lines; bad input is named before anything is made
(an unknown library, not root, no debootstrap, a base the proof cannot make). Slow (root, debootstrap, network to
Debian and PyPI): a section that fails is reported at its .def line and leaves nothing mounted; one library's
definition proven end to end (%post, %test), and its ranks started by srun inside the root on 2 emulated nodes.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ardlab.comm import LIBRARIES, library
from ardlab.images import definition, prove, rootfs
from conftest import ROOT, leftovers

CONTAINERS = ROOT / "containers"
CHROOT_PROOF = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apptainer") is not None,
                                  reason="the chroot proof, as root, where Apptainer does not prove the real build")


def cli(*args, env=None, timeout=3600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ardlab.images", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("lib", list(LIBRARIES))
def test_sections_are_read_from_the_file_with_their_lines(lib):
    path = CONTAINERS / f"{lib}.def"
    d = definition.read(path)
    lines = path.read_text().splitlines()
    assert (d.bootstrap, d.base) == ("docker", "debian:bookworm-slim")
    assert rootfs.suite_of(d.bootstrap, d.base) == "bookworm"
    for name in ("files", "post", "environment", "test", "runscript"):
        sec = d.section(name)
        assert lines[sec.first_line - 2].startswith(f"%{name}"), name
        assert sec.text.splitlines()[0] == lines[sec.first_line - 1], name
        assert sec.shell == "/bin/sh"
    assert ("src", "/opt/ardlab/src/src") in d.files()
    post = d.section("post").text
    assert f"install-env {lib} /opt/ardlab/envs/{lib}" in post
    for deb in library(lib).image_debs:  # what srun_env's paths need inside the image
        assert deb in post


def test_a_sections_shell_and_a_failing_line_are_found(tmp_path):
    path = tmp_path / "x.def"
    path.write_text("Bootstrap: docker\nFrom: debian:bookworm-slim\n\n%post -c /bin/bash\n    true\n    false\n"
                    "%test\n    true\n")
    d = definition.read(path)
    assert d.section("post").shell == "/bin/bash" and d.section("test").shell == "/bin/sh"
    assert d.section("post").def_line(2) == 6
    script = "    set -eu\n    echo ok > /ok  # first\n    ls /no-such-file\n    echo never\n"
    log = "+ set -eu\n+ echo ok\n+ ls /no-such-file\nls: cannot access '/no-such-file'\n"
    assert prove.failed_line(log, script) == (3, "ls /no-such-file")
    assert prove.failed_line("no trace", script) == (None, "(no command traced)")


def test_a_base_the_proof_cannot_make_is_named():
    with pytest.raises(ValueError, match="'From: python:3.11.11-slim-bookworm' has no debootstrap equivalent"):
        rootfs.suite_of("docker", "python:3.11.11-slim-bookworm")


def test_unknown_library_is_named_before_anything_is_made(tmp_path):
    proc = cli("prove", "lam", "--work", tmp_path / "w")
    assert proc.returncode == 2 and "unknown MPI library 'lam'" in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.skipif(shutil.which("apptainer") is not None, reason="with Apptainer the proof needs no root")
def test_not_root_gets_a_clear_error(tmp_path):
    src = Path(prove.__file__).resolve().parents[2]
    proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c",
                           "from ardlab.images.prove import check_can_prove; check_can_prove(['mpich'])"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(src)}, timeout=60)
    assert proc.returncode == 1 and "needs root" in proc.stderr, proc.stderr


@CHROOT_PROOF
def test_missing_debootstrap_is_named(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("unshare", "chroot"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    proc = cli("prove", "mpich", "--work", tmp_path / "w", env={**os.environ, "PATH": str(bin_)})
    assert proc.returncode == 2 and "debootstrap is missing: install Debian's debootstrap" in proc.stderr, proc.stderr
    assert not (tmp_path / "w").exists()


@pytest.fixture(scope="module")
def bookworm():
    """The cached base (debootstrap once: a few minutes, then reused from ~/.cache/ardlab/images; containers/setup-envs
    installs debootstrap)."""
    return rootfs.base("bookworm")


@pytest.mark.slow
@CHROOT_PROOF
def test_a_failing_section_names_its_line_and_leaves_nothing(tmp_path, bookworm):
    path = tmp_path / "bad.def"
    path.write_text("Bootstrap: docker\nFrom: debian:bookworm-slim\n\n%post\n    set -eu\n    echo ok > /ok\n"
                    "    ls /no-such-file\n    echo never > /never\n")
    d = definition.read(path)
    root = rootfs.fresh_root(bookworm, tmp_path / "root")
    with pytest.raises(prove.SectionFailed, match=rf"{path}:7: %post failed \(exit 2\) at `ls /no-such-file`"):
        prove.run_section(d, "post", root, env=prove.build_env(), binds=[], log_path=tmp_path / "post.log")
    assert (root / "ok").read_text() == "ok\n" and not (root / "never").exists()
    assert not rootfs.mounts_under(root)


@pytest.fixture(scope="module")
def proven_mpich(tmp_path_factory, bookworm):
    work = tmp_path_factory.mktemp("images")
    before = leftovers()
    p = prove.prove("mpich", work)
    yield p
    assert not rootfs.mounts_under(work)
    assert leftovers() <= before, leftovers() - before
    shutil.rmtree(work)  # about 3 GB


@pytest.mark.slow
@CHROOT_PROOF
def test_mpich_definition_proven_end_to_end(proven_mpich):
    p = proven_mpich
    assert set(p.seconds) == {"base", "files", "post", "test"}
    assert (p.root / "opt/ardlab/envs/mpich/bin/python").exists()
    assert p.root_bytes > 1 << 30  # TensorFlow and Horovod are in it
    # %test's fabric check ran: every UCX transport and libfabric provider of the wheel loads inside the image
    said = (p.root.parent / "test.log").read_text()
    assert "MPICH: every UCX transport and libfabric provider it ships loads" in said
    print(p.row())


@pytest.mark.slow
@CHROOT_PROOF
def test_mpich_ranks_inside_the_root_under_srun(proven_mpich, tmp_path):
    from ardlab import cluster
    from ardlab.images.srun import ranks_in_root

    state = tmp_path / "cluster"
    c = cluster.up(2, "1gbit", state=state)
    try:
        r = ranks_in_root("mpich", proven_mpich.root, c.env())
    finally:
        cluster.down(state)
    assert r.hosts == ["n1", "n2"]
    assert set(r.rows.size_bytes) == {4, 65536, 1 << 20} and (r.rows.nodes == 2).all()
