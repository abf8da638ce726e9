"""Apptainer for real (issue 40): Debian's apptainer set up in a root of its own (containers/setup-apptainer), run
through containers/apptainer as an unprivileged user; a definition built by Apptainer itself with the debootstrap base
(its %post and %test run by Apptainer), `apptainer exec` of the SIF (squashfuse), and the image's Python started by
srun on 2 emulated nodes through `apptainer exec`, Open MPI's ranks inside it under `srun --mpi=pmix` included.

Fast: containers/build names bad input before anything is built. Slow (root, Debian's mirror): the rest. The tiny
definition here stands in for the three images, whose builds take minutes each (containers/build).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ardlab.images.rootfs import container_fact, debian_mirror  # what the container scripts use too
from conftest import ROOT

CONTAINERS = ROOT / "containers"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="Apptainer's root and its mount namespace need root")

TINY = """Bootstrap: debootstrap
OSVersion: bookworm
MirrorURL: {mirror}
Include: python3

%post
    echo ardlab-post-ran > /post-ran

%environment
    export ARDLAB_TINY=yes

%runscript
    exec python3 -c "import sys; print('runscript', *sys.argv[1:])" "$@"

%test
    test "$(cat /post-ran)" = ardlab-post-ran
    python3 -c "print('ardlab-test-ran')"
"""


def run(*argv, cwd=None, env=None, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--base", "quay"], "--base 'quay' is not one of: docker, debootstrap"),
    (["--frobnicate"], "unknown option '--frobnicate'"),
    (["--base", "debootstrap", "lam"], "'lam' is not a library of ardlab.comm's table"),
])
def test_build_names_bad_input_before_anything_is_built(args, message, tmp_path):
    proc = run(CONTAINERS / "build", *args, "--output", tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir())


def test_an_images_ranks_sharing_a_node_get_the_tables_container_peer_settings(monkeypatch):
    """Each rank of `srun ... apptainer exec` is a container of its own: at several ranks a node the driver adds the
    table's container_peer_env (MPICH: cross-memory attach off, measured to fail between two user namespaces); at one
    rank a node, or outside an image, nothing."""
    from ardlab import driver
    from ardlab.comm.libraries import library
    from ardlab.plan import RunPlan

    peers = library("mpich").container_peer_env
    assert peers == {"MPIR_CVAR_CH4_CMA_ENABLE": "0", "UCX_POSIX_USE_PROC_LINK": "n"}
    for name in peers:
        monkeypatch.delenv(name, raising=False)

    def env_of(ranks: int, image: str | None) -> dict:
        plan = RunPlan("microbench", "mpich", ranks, nodes=2, launcher="srun", image=image, srun_mpi="pmi2")
        return driver.command(plan, Path("/tmp/plan.json"))[1]

    assert all(env_of(4, "/images/ardlab-mpich.sif")[k] == v for k, v in peers.items())
    assert not set(peers) & set(env_of(2, "/images/ardlab-mpich.sif"))
    assert not set(peers) & set(env_of(4, None))
    monkeypatch.setenv("UCX_POSIX_USE_PROC_LINK", "y")  # the caller's own value wins
    assert env_of(4, "/images/ardlab-mpich.sif")["UCX_POSIX_USE_PROC_LINK"] == "y"


def test_a_clean_exec_keeps_what_the_ranks_need_and_nothing_else(tmp_path):
    """The selection of ardlab.images.clean's sh, run with a stand-in for `apptainer` that prints what it was given
    (the real `apptainer exec --cleanenv` is run by the slow tests: under srun --mpi=pmix with Open MPI, and the MPICH
    image's srun-check)."""
    import json

    from ardlab.images.clean import exec_argv

    show = tmp_path / "show"
    show.write_text(f"#!{sys.executable}\nimport json, os, sys\nprint(json.dumps([sys.argv[1:], "
                    "{k: v for k, v in os.environ.items() if k.startswith('APPTAINERENV_')}]))\n")
    show.chmod(0o755)
    argv = exec_argv("/images/x.sif", ["ardlab", "rank"], keep=["MY_SETTING"], apptainer=str(show),
                     options=["--bind", "/data"])
    env = {"PATH": os.environ["PATH"], "SLURM_PROCID": "3", "PMIX_RANK": "3", "OMPI_MCA_coll": "^han",
           "MY_SETTING": "a b\nc", "PYTHONPATH": "/site/python", "LD_PRELOAD": "/site/lib.so", "TMPDIR": "/scratch"}
    args, kept = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)
    assert args == ["exec", "--cleanenv", "--bind", "/data", "/images/x.sif", "ardlab", "rank"]
    assert kept == {f"APPTAINERENV_{k}": env[k] for k in ("SLURM_PROCID", "PMIX_RANK", "OMPI_MCA_coll", "MY_SETTING",
                                                         "TMPDIR")}, kept
    with pytest.raises(ValueError, match="not names of environment variables: 'A B'"):
        exec_argv("/images/x.sif", ["true"], keep=["A B"])


def test_srun_check_names_bad_input_before_anything_runs(tmp_path):
    from ardlab.images import srun_images

    with pytest.raises(ValueError, match="unknown MPI library 'lam'"):
        srun_images.check_ready(tmp_path, ["lam"])
    with pytest.raises(FileNotFoundError, match=f"no image {tmp_path}/ardlab-mpich.sif"):
        srun_images.check_ready(tmp_path, ["mpich"])


@pytest.fixture(scope="module")
def tiny_image():
    """The tiny definition built by Apptainer (through the wrapper, --fakeroot, as the build user) into a folder of its
    own that user can reach (pytest's own are root's alone); the build's output (with Apptainer's %test) returned
    beside the image; the folder removed afterwards."""
    import shutil
    import tempfile

    setup = run(CONTAINERS / "setup-apptainer", timeout=1200)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    folder = Path(tempfile.mkdtemp(prefix="ardlab-apptainer-test-", dir="/tmp"))
    try:
        uid = int(container_fact("echo $ARDLAB_BUILD_UID"))
        os.chown(folder, uid, uid)  # the build runs as that user
        os.chmod(folder, 0o755)  # images run as the caller (root in a user namespace, where that uid is nobody)
        (folder / "tiny.def").write_text(TINY.format(mirror=debian_mirror()))
        proc = run(CONTAINERS / "apptainer", "build", "--fakeroot", "--force", "tiny.sif", "tiny.def", cwd=folder)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield folder / "tiny.sif", proc.stdout + proc.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@ROOT_ONLY
def test_setup_is_idempotent_and_the_wrapper_runs_debians_apptainer():
    again = run(CONTAINERS / "setup-apptainer")
    assert again.returncode == 0 and "is set up in" in again.stdout, again.stdout + again.stderr
    version = run(CONTAINERS / "apptainer", "version")
    assert version.returncode == 0 and version.stdout.strip() == "1.4.5", version.stdout + version.stderr


@pytest.mark.slow
@ROOT_ONLY
def test_apptainer_builds_runs_post_and_test_and_execs_the_sif(tiny_image):
    image, log = tiny_image
    assert "Running post scriptlet" in log and "Running testscript" in log and "ardlab-test-ran" in log, log[-2000:]
    assert image.is_file() and image.stat().st_size > 10_000_000
    with open(image, "rb") as f:
        assert b"SIF_MAGIC" in f.read(64)
    proc = run(CONTAINERS / "apptainer", "exec", image, "sh", "-c", 'echo "$ARDLAB_TINY" $(cat /post-ran)',
               cwd=image.parent)
    assert proc.returncode == 0 and proc.stdout.split() == ["yes", "ardlab-post-ran"], proc.stdout + proc.stderr
    ran = run(CONTAINERS / "apptainer", "run", image, "a", "b", cwd=image.parent)
    assert ran.returncode == 0 and "runscript a b" in ran.stdout, ran.stdout + ran.stderr
    assert not list(Path("/dev/shm").glob("ardlab-fuse-*"))  # the wrapper's private FUSE node leaves no file


@pytest.mark.slow
@ROOT_ONLY
def test_srun_starts_apptainer_exec_on_two_emulated_nodes(tiny_image):
    """The hybrid launch's outer half: the host's srun starts `apptainer exec IMAGE` on each of 2 emulated nodes,
    each rank inside the image on its own node (hostname) with Slurm's task environment passed through, and the
    cluster's state folder and the machine's id bound in (what rows read their link rate and machine from)."""
    import shutil
    import tempfile

    from ardlab import cluster

    image, _ = tiny_image
    state = Path(tempfile.mkdtemp(prefix="ardlab-cluster-", dir="/tmp")) / "state"
    os.chmod(state.parent, 0o755)  # reachable by every user, as the image's user must stat it
    c = cluster.up(2, None, state=state)
    try:
        assert str(state) in c.env()["APPTAINER_BIND"].split(",")
        program = ("import os, socket; conf = os.environ['SLURM_CONF']; print('RANK', os.environ['SLURM_PROCID'], "
                   "socket.gethostname(), os.environ.get('ARDLAB_TINY'), "
                   "os.path.exists(conf.replace('slurm.conf', 'cluster.json')), "
                   "open('/etc/machine-id').read().strip() == " + repr(Path("/etc/machine-id").read_text().strip())
                   + ")")
        proc = run("srun", "-N", 2, "-n", 2, CONTAINERS / "apptainer", "exec", image, "python3", "-c", program,
                   cwd=image.parent, env={**os.environ, **c.env()}, timeout=600)
    finally:
        cluster.down(state)
        shutil.rmtree(state.parent, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = sorted(line.split() for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert lines == [["RANK", "0", "n1", "yes", "True", "True"], ["RANK", "1", "n2", "yes", "True", "True"]], \
        proc.stdout + proc.stderr


@pytest.mark.slow
@ROOT_ONLY
def test_pmix_ranks_inside_an_image_join_slurms_server_across_two_nodes(tiny_image):
    """The hybrid launch's inner half under `srun --mpi=pmix`: Open MPI ranks inside the image reach the PMIx server
    of their node's slurmstepd and sum across 2 nodes. PMIx accepts only the job's user: the wrapper runs images as the
    caller (`--userns`), and this failed (hung) while it ran them as another user. Open MPI and mpi4py come from the
    host's environment (.envs/openmpi, bound in) on the image's Python (both Debian bookworm's 3.11 ABI)."""
    import shutil
    import tempfile

    from ardlab import cluster
    from ardlab.comm.launch import require_env
    from ardlab.images.clean import exec_argv

    image, _ = tiny_image
    prefix = require_env("openmpi")
    (site,) = (prefix / "lib").glob("python3.*/site-packages")
    state = Path(tempfile.mkdtemp(prefix="ardlab-cluster-", dir="/tmp")) / "state"
    c = cluster.up(2, None, state=state)
    program = ("import os; from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
               "print('RANK', c.rank, c.size, socket.gethostname(), c.allreduce(c.rank + 1), "
               "os.environ.get('ARDLAB_STRAY'), os.environ.get('SITE_PYTHON_SETTING'), "
               "MPI.Get_library_version().split(',')[0])")
    try:
        # a clean environment (ardlab.images.clean): srun's and PMIx's per-rank settings pass, a stray one does not
        argv = exec_argv(str(image), ["python3", "-c", program], apptainer=str(CONTAINERS / "apptainer"),
                         options=["--bind", str(prefix), "--env",
                                  f"PYTHONPATH={site},LD_LIBRARY_PATH={prefix / 'lib'}"])
        proc = run("srun", "--mpi=pmix", "--kill-on-bad-exit=1", "-N", 2, "-n", 2, *argv, cwd=image.parent,
                   env={**os.environ, **c.env(), "ARDLAB_STRAY": "1", "SITE_PYTHON_SETTING": "x"}, timeout=300)
    finally:
        cluster.down(state)
        shutil.rmtree(state.parent, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = sorted(line.split(maxsplit=7) for line in proc.stdout.splitlines() if line.startswith("RANK"))
    assert [ln[:7] for ln in lines] == [["RANK", "0", "2", "n1", "3", "1", "None"],
                                        ["RANK", "1", "2", "n2", "3", "1", "None"]], proc.stdout + proc.stderr
    assert all(ln[7].startswith("Open MPI") for ln in lines), lines


@pytest.mark.slow
@ROOT_ONLY
def test_the_mpich_image_builds_passes_its_test_and_runs_under_srun_on_two_nodes(tmp_path, monkeypatch):
    """One of the three real images, as a site gets it: containers/build --base debootstrap (Apptainer's own build of
    the committed definition, its %test: a 2-rank validated Allreduce and a Horovod step), then its ranks under
    `srun --mpi=pmi2 -N 2 -n 4 apptainer exec` on 2 emulated nodes, 2 ranks a node (python -m ardlab.images srun-check
    --ranks-per-node 2). The image is kept
    in the cache folder outside the clone in its two layers (ardlab.images.provenance): the stack built again (about
    8 minutes) only when its definition or install scripts changed, ardlab's files on it (about 1.5 minutes with the
    %test) when they changed; its labels name both, rows made in it carry them, a stale one is refused."""
    import shutil
    import tempfile

    import pandas as pd

    from ardlab import cluster
    from ardlab.images import provenance, srun_images

    cache = Path(os.environ.get("ARDLAB_CACHE") or Path.home() / ".cache" / "ardlab") / "images"
    build = run(CONTAINERS / "build", "--base", "debootstrap", "--output", cache, "mpich", timeout=2400)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "up to date" in build.stdout or "ardlab: built" in build.stdout, build.stdout[-2000:]
    log = (cache / "ardlab-mpich.log").read_text()
    assert "containers/mpich.def's %test" in log and "framework=tensorflow, model=simplecnn" in log, log[-3000:]
    image = srun_images.image_path(cache, "mpich")
    # its labels, read by Apptainer, name this checkout's files; a checkout with one file changed refuses it
    labels = provenance.check(image, "mpich", apptainer=str(CONTAINERS / "apptainer"))
    assert labels[provenance.LABEL_STACK] == (cache / "ardlab-mpich-stack.key").read_text().strip()
    copy = tmp_path / "checkout"
    for name in provenance.files(provenance.SOURCE_PATHS):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    assert provenance.source_key(copy) == labels[provenance.LABEL_SOURCE]  # the same files outside git: the same key
    (copy / "src" / "ardlab" / "__init__.py").write_text("# changed\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ardlab-mpich.sif is stale: it holds ardlab's files"):
        provenance.check(image, "mpich", root=copy, apptainer=str(CONTAINERS / "apptainer"))
    state = Path(tempfile.mkdtemp(prefix="ardlab-cluster-", dir="/tmp")) / "state"
    os.chmod(state.parent, 0o755)
    c = cluster.up(2, "1gbit", state=state)
    for k, v in {**c.env(), "PATH": f"{ROOT / '.cache' / 'apptainer' / 'bin'}:{os.environ['PATH']}"}.items():
        monkeypatch.setenv(k, v)  # srun and apptainer read the cluster's settings from the environment
    try:
        # 2 ranks a node, each in a container of its own (the table's container_peer_env: cross-memory attach off)
        names = srun_images.check("mpich", image, tmp_path / "rows", ranks_per_node=2)
    finally:
        cluster.down(state)
        shutil.rmtree(state.parent, ignore_errors=True)
    assert sorted(names) == ["n1", "n1", "n2", "n2"]
    bench = pd.read_csv(tmp_path / "rows" / "mpich_allreduce.csv")
    assert set(bench.nodes) == {2} and set(bench.ranks) == {4} and set(bench.link_rate) == {"1gbit"}, bench
    assert len(bench) == 4, bench
    train = pd.read_csv(tmp_path / "rows" / "mpich_horovod.csv")
    assert len(train) == 1 and train.img_per_s.iloc[0] > 0 and train.nodes.iloc[0] == 2, train
    assert train.ranks.iloc[0] == 4, train
    for rows in (bench, train):  # every row says which image, by its labels, it was made in
        assert set(rows.image_source) == {labels[provenance.LABEL_SOURCE]}, rows
        assert set(rows.image_commit) == {labels[provenance.LABEL_COMMIT]}, rows
        # and what carried its bytes: probed in a launch of the same shape, handed to the --in-mpi ranks
        assert set(zip(rows.transport_intra_node, rows.transport_inter_node)) == {("shm:posix", "ucx:tcp")}, rows


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "--runslow", "-q"]))
