"""The Snakemake workflow: config validation, the matrix from the table, real runs (local and under Slurm).

Invalid configs must fail before any job runs, naming the offending key. A tiny config runs end to end with
the local profile (real mpiexec, real training, real Horovod, tables, figures, tuned files, cost models) and,
in CI, under a real single-node Slurm with the slurm profile. A job that fails leaves no CSV behind and the
report does not run.
"""

import copy
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ardlab.comm import library
from ardlab.comm.libraries import BUILT_IN, OWN_ALGORITHMS
from ardlab.study import commands, config as study
from conftest import ROOT

SNAKEMAKE = [sys.executable, "-m", "snakemake"]

TINY = {
    "results": "RESULTS",
    "launcher": "local",
    "max_ranks": 2,
    "rounds": 2,
    "libraries": ["mpich", "openmpi"],
    "microbench": {"algorithms": {"mpich": ["default", "ring", "recursive_doubling"],
                                  "openmpi": ["default", "ring", "recursive_doubling"],
                                  "intelmpi": ["default", "ring", "recursive_doubling"]},
                   "own": False, "ranks": [2], "sizes": "4,64,1K,16K,256K,1M"},
    "train": {"models": ["simplecnn"], "algorithms": "default", "ranks": [2], "batch_per_rank": 8, "steps": 3},
    "horovod": {"models": ["simplecnn"], "algorithms": "default", "ranks": [2], "batch_per_rank": 8,
                "warmup_batches": 1, "batches_per_iter": 1, "iterations": 2},
    "tuned": {"enabled": True, "ranks": 2, "rerun_train": False},
    "costmodel": {"predict_ranks": [64]},
}


def tiny(tmp_path, **changes):
    cfg = copy.deepcopy(TINY)
    cfg["results"] = str(tmp_path / "results")
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            cfg[section][field] = value
        else:
            cfg[section] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, cfg


def snakemake(*args, timeout=1800, env=None):
    return subprocess.run([*SNAKEMAKE, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("changes, message", [
    ({"libraries": ["mpich", "mpix"]}, "mpix"),
    ({"microbench__algorithms": {"openmpi": ["warp_drive"]}}, "config key 'microbench.algorithms.openmpi': "
                                                             "algorithm 'warp_drive'"),
    ({"microbench__algorithms": ["ring", "tree2"]}, "algorithm 'tree2' is in none of mpich, openmpi"),
    ({"train__models": ["resnet7"]}, "config key 'train.models[0]': unknown value 'resnet7'"),
    ({"horovod__models": ["resnet8"]}, "config key 'horovod.models[0]'"),
    ({"microbench__ranks": [2, 16]}, "config key 'microbench.ranks': 16 exceeds max_ranks = 2"),
    ({"microbench__nodes": [2]}, "exceeds max_nodes"),
    ({"microbench__sizes": "4,12Q"}, "config key 'microbench.sizes'"),
    ({"launcher": "srun", "images": {"mpich": "mpich.sif"}}, "config key 'images': 'openmpi' has no Apptainer image"),
    ({"max_nodes": 2, "train__nodes": [2]}, "config key 'train.nodes': launcher local runs on one node"),
    ({"launcher": "srun", "max_nodes": 2, "max_ranks": 4, "train__nodes": [2], "train__ranks": [3]},
     "config key 'train.ranks': 3 ranks do not divide over 2 nodes"),
    ({"link_rate": "fast"}, "config key 'link_rate': link rate 'fast' is not a rate"),
    ({"link_queue": "deep"}, "config key 'link_queue': link queue 'deep' is not one"),
    ({"launcher": "srun", "max_nodes": 2, "microbench__nodes": [2], "microbench__ranks_per_node": [3]},
     "config key 'microbench.ranks_per_node': [3] leaves no (nodes, ranks) pair"),
    ({"costmodel__also_fit": ["/nonexistent/run"]}, "config key 'costmodel.also_fit[0]': '/nonexistent/run' holds no"),
    ({"microbench__budget_mib": 0}, "budget_mib"),
    ({"tuned__ranks": 4}, "config key 'tuned.ranks'"),
    ({"microbench__enabled": False, "train__enabled": False, "horovod__enabled": False, "tuned__enabled": False},
     "selects no job"),
    ({"rounds": 0}, "rounds"),
    ({"library_env": {"intelmpi": {"I_MPI_DEBUG": 5}}},
     "config key 'library_env': 'intelmpi' is not among the run's libraries"),
    ({"library_env": {"openmpi": {"OMPI_MCA_coll_tuned_use_dynamic_rules": 0}}},
     "config key 'library_env.openmpi': OMPI_MCA_coll_tuned_use_dynamic_rules is how ardlab forces"),
    ({"library_env": {"openmpi": {"not-a-name": 1}}}, "not-a-name"),
    ({"reference": "/nonexistent/run"}, "config key 'reference'"),
    ({"train__picks": ["best"], "train__ranks": [1], "max_ranks": 2}, "config key 'train.picks': the algorithms are "
     "picked from the microbenchmark at the training's scale, which does not measure 1 node(s) x 1 ranks"),
    ({"horovod__picks": ["fastest"]}, "fastest"),
    ({"horovod__skip": [{"model": "vgg16"}]}, "config key 'horovod.skip[0].model': unknown value 'vgg16'"),
    ({"train__skip": [{"ranks": 4}]}, "config key 'train.skip[0]': {'ranks': 4} matches no training group"),
    ({"train__skip": [{"size": 4}]}, "size"),
    ({"microbench__rounds": 0}, "rounds"),
])
def test_bad_config_rejected_with_the_key(tmp_path, changes, message):
    _, cfg = tiny(tmp_path, **changes)
    with pytest.raises(Exception, match=None) as err:
        study.validate(cfg)
    assert message in str(err.value), str(err.value)


def test_null_on_the_command_line_is_null(tmp_path):
    """`--config reference=null` arrives as the text 'null': a nullable key takes it as null, not as a folder."""
    _, cfg = tiny(tmp_path, reference="null", microbench__iterations="null")
    study.validate(cfg)
    assert cfg["reference"] is None and cfg["microbench"]["iterations"] is None


def test_bad_config_fails_before_any_job(tmp_path):
    path, cfg = tiny(tmp_path, train__models=["resnet7"])
    proc = snakemake("--profile", "workflow/profiles/local", "--configfile", path, timeout=120)
    assert proc.returncode != 0
    assert "config key 'train.models[0]': unknown value 'resnet7'" in proc.stdout + proc.stderr
    assert not Path(cfg["results"]).exists(), "a job ran despite the invalid config"


def test_a_missing_image_fails_before_any_job_but_plans(tmp_path):
    """A config naming an image that is not there plans (a dry run, on a machine without the images) and fails
    before its first job when run."""
    path, cfg = tiny(tmp_path, launcher="srun", libraries=["mpich"], images={"mpich": "/nonexistent/mpich.sif"})
    assert snakemake("-n", "--quiet", "all", "--configfile", path, timeout=300).returncode == 0
    proc = snakemake("--cores", "1", "--configfile", path, timeout=300)
    assert proc.returncode != 0
    assert "config key 'images.mpich': '/nonexistent/mpich.sif' is not a file" in proc.stdout + proc.stderr
    made = [p for p in Path(cfg["results"]).rglob("*") if p.is_file() and ".plans" not in p.parts]
    assert not made, f"a job ran despite the missing image: {made}"  # planning writes only the plans


def test_ranks_beyond_the_profile_rejected(tmp_path):
    # The config file allows 64 ranks; the local profile (one machine) allows 8 and wins.
    path, cfg = tiny(tmp_path, max_ranks=64, microbench__ranks=[2, 16])
    proc = snakemake("-n", "--profile", "workflow/profiles/local", "--configfile", path, timeout=120)
    assert proc.returncode != 0
    assert "config key 'microbench.ranks': 16 exceeds max_ranks = 8" in proc.stdout + proc.stderr


def test_matrix_comes_from_the_table(tmp_path):
    _, cfg = tiny(tmp_path, microbench__algorithms="all", microbench__own=True)
    jobs = study.jobs(study.validate(cfg))
    (job,) = [j for j in jobs["microbench"] if j.round == 0]
    (tuned_job,) = [j for j in jobs["microbench_tuned"] if j.round == 0]
    for lib in ("mpich", "openmpi"):
        table = {n for n, a in library(lib).algorithms.items() if not a.multi_node_only}
        own = set(OWN_ALGORITHMS)
        assert set(commands.variant_names(job, cfg, lib)) == table | own
        assert commands.variant_names(tuned_job, cfg, lib) == ["default", "tuned"]
    # one group spans the libraries: every variant of every library is one launch of the same round
    labels = [v.label for v in commands.comparison(job, cfg, "x.csv").variants]
    assert len(labels) == len(set(labels)) and {lb.split("/")[0] for lb in labels} == {"mpich", "openmpi"}


def test_ranks_per_node_and_budget_shape_the_jobs(tmp_path):
    """1 rank per node on 2-4 nodes: no 2 x 2 group; the byte budget reaches the microbenchmark's plan."""
    _, cfg = tiny(tmp_path, launcher="srun", max_nodes=4, max_ranks=4, microbench__nodes=[2, 3, 4],
                  microbench__ranks=[2, 3, 4], microbench__ranks_per_node=[1], microbench__budget_mib=8,
                  microbench__max_iterations=50, train__enabled=False, horovod__enabled=False, tuned__enabled=False)
    jobs = study.jobs(study.validate(cfg))
    assert sorted({(j.nodes, j.ranks) for j in jobs["microbench"]}) == [(2, 2), (3, 3), (4, 4)]
    (variant, *_) = commands.comparison(jobs["microbench"][0], cfg, "x.csv").variants
    assert variant.options["budget_mib"] == 8 and variant.options["max_iterations"] == 50


def test_a_job_hands_its_comparison_to_the_driver_in_a_plan_file(tmp_path):
    """A job's command is one short line naming a plan file in the run's hidden .plans folder; the file holds the whole
    comparison, planning the job again names the same file, and a changed comparison names a new one (so Snakemake's
    params trigger reruns the job)."""
    from ardlab.plan import Comparison

    _, cfg = tiny(tmp_path)
    cfg = study.validate(cfg)
    job = study.jobs(cfg)["microbench"][0]
    out = f"{cfg['results']}/{job.path}"
    cmd = commands.command(job, cfg, out)
    argv = shlex.split(cmd)
    plan = Path(argv[argv.index("--comparison") + 1])
    assert len(cmd) < 400 and "{" not in cmd, cmd
    assert plan.parent == Path(cfg["results"]) / commands.PLANS
    assert Comparison.from_json(plan.read_text()) == commands.comparison(job, cfg, out)
    assert commands.command(job, cfg, out) == cmd
    changed = commands.command(job, {**cfg, "seed": cfg["seed"] + 1}, out)
    assert changed != cmd and len(list(plan.parent.glob("*.json"))) == 2


def test_library_env_reaches_that_librarys_ranks_only(tmp_path):
    """A library's own settings (a transport's tuning) go into every launch of that library, as strings, beside the
    algorithm's forcing settings, and into no other library's; the job's JSON carries them to the driver."""
    from ardlab import driver
    from ardlab.plan import Comparison

    _, cfg = tiny(tmp_path, library_env={"openmpi": {"OMPI_MCA_btl_tcp_eager_limit": 8388608}})
    jobs = study.jobs(study.validate(cfg))
    job = [j for j in jobs["microbench"] if j.round == 0][0]
    sent = Comparison.from_json(commands.comparison(job, cfg, "x.csv").to_json())
    for v in sent.variants:
        alg = v.options["algorithms"][0] if v.options.get("algorithms") else "default"
        env = driver.launch_env(v, alg)
        if v.library == "openmpi":
            assert env["OMPI_MCA_btl_tcp_eager_limit"] == "8388608"
        else:
            assert "OMPI_MCA_btl_tcp_eager_limit" not in env
        if v.library == "openmpi" and alg == "ring":
            assert env["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "4"
    train = [j for j in jobs["train"] if j.round == 0][0]
    (plan, *_) = [v for v in commands.comparison(train, cfg, "x.csv").variants if v.library == "openmpi"]
    assert plan.env == {"OMPI_MCA_btl_tcp_eager_limit": "8388608"}


def test_skips_switching_and_microbench_rounds_shape_the_jobs(tmp_path):
    """`skip` drops the training groups it matches; `switch_in_launch` reaches training comparisons;
    `microbench.rounds` sets the microbenchmark's rounds apart from the run's."""
    _, cfg = tiny(tmp_path, rounds=5, microbench__rounds=3, train__models=["simplecnn", "alexnet"],
                  train__skip=[{"model": "alexnet", "ranks": 2}], train__switch_in_launch=True)
    jobs = study.jobs(study.validate(cfg))
    assert {j.round for j in jobs["microbench"]} == {0, 1, 2}
    assert {j.round for j in jobs["train"]} == {0, 1, 2, 3, 4}
    assert {j.model for j in jobs["train"]} == {"simplecnn"}
    assert commands.comparison(jobs["train"][0], cfg, "x.csv").switch_in_launch
    assert not commands.comparison(jobs["horovod"][0], cfg, "x.csv").switch_in_launch
    assert not commands.comparison(jobs["microbench"][0], cfg, "x.csv").switch_in_launch


# site-debian.yaml names Debian's builds, known only with their registration: tests/test_site_libraries.py checks it
@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "workflow" / "config").glob("*.yaml")
                                        if p.name != "site-debian.yaml"))
def test_shipped_configs_are_valid(name):
    cfg = yaml.safe_load((ROOT / "workflow" / "config" / name).read_text())
    study.validate(cfg)


def test_the_slower_link_overlay_is_valid_on_the_cluster_study():
    """workflow/config/overlays/cluster-250mbit.yaml is merged onto cluster.yaml (as Snakemake merges --configfile
    A B): the same pipeline in its own folder at another rate."""
    base = yaml.safe_load((ROOT / "workflow" / "config" / "cluster.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "workflow" / "config" / "overlays" / "cluster-250mbit.yaml").read_text())
    cfg = study.validate({**base, **overlay})
    assert cfg["link_rate"] == "250mbit" and cfg["results"] != base["results"]


@pytest.mark.parametrize("overlay", ["onepernode-rerun.yaml", "onepernode-250mbit.yaml"])
def test_the_one_rank_a_node_study_and_its_overlays_are_valid(overlay):
    """workflow/config/cluster-onepernode.yaml: one rank a node, behind a switch port's queue; its overlays each in a
    folder of their own."""
    base = yaml.safe_load((ROOT / "workflow" / "config" / "cluster-onepernode.yaml").read_text())
    merged = {**base, **yaml.safe_load((ROOT / "workflow" / "config" / "overlays" / overlay).read_text())}
    cfg = study.validate(merged)
    assert cfg["link_queue"] == "switch-port" and cfg["results"] != base["results"]
    assert all(cfg[s]["ranks"] == [2] and cfg[s]["nodes"] == [2] for s in ("microbench", "train", "horovod"))


def test_lint_is_clean():
    proc = snakemake("--lint", "--profile", "workflow/profiles/local", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Lints for" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_a_training_group_reads_its_own_scales_selection():
    """The cluster pipeline: a training group across nodes measures the tuned file made from the microbenchmark at its
    own scale, and its picks come from that scale's rows and the calls one launch of the group made."""
    cfg = study.load(ROOT / "workflow" / "config" / "cluster.yaml")
    jobs = study.jobs(cfg)
    job = next(j for j in jobs["horovod"] if (j.nodes, j.ranks, j.model) == (2, 4, "alexnet"))
    results = Path(cfg["results"])
    assert commands.inputs(job, cfg) == [str(results / "tuned" / f"{lib}-n2-r4{library(lib).tuning_suffix}")
                                         for lib in cfg["libraries"]] + [
        str(results / "picks" / "horovod" / "alexnet-f64" / "n2-r4.csv")]
    assert commands.bench_files(cfg, jobs, 2, 4) == [str(results / f"raw/microbench/n2-r4/round{r}.csv")
                                                     for r in range(cfg["microbench"]["rounds"])]
    c = commands.comparison(job, cfg, "out.csv")
    assert c.picks == {lib: ["best", "worst"] for lib in cfg["libraries"]}
    assert {v.algorithm for v in c.variants} == {"default", "tuned"}
    assert not jobs["microbench_tuned"]  # no one-node tuned phase in the cluster study
    # every tuned file a training group measures is checked at its scale (a validated Allreduce through it) before
    # the report is made
    assert commands.tuned_checks(cfg, jobs) == [str(results / "tuned" / "validated" / f"{lib}-{scale}.csv")
                                                for scale in ("n2-r2", "n2-r4") for lib in cfg["libraries"]]
    plan = commands.tuned_check_plan(cfg, "mpich", "n2-r4", "t.json", "out.csv")
    assert plan.options["validate"] and plan.tuned == "t.json" and (plan.nodes, plan.ranks) == (2, 4)
    assert plan.launcher == "srun" and plan.options["sizes"][-1] == 16 << 20


def test_full_study_dag_builds(tmp_path):
    """The full study plans (a dry run); its plan files go under a folder of the test's, not the checkout's."""
    t0 = time.perf_counter()
    proc = snakemake("-n", "--quiet", "all", "--configfile", "workflow/config/full.yaml", "--config",
                     f"results={tmp_path / 'full'}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"full-study DAG: {time.perf_counter() - t0:.1f} s")


def _check_outputs(results: Path):
    tables = results / "tables"
    sp = pd.read_csv(tables / "microbench_speedup.csv")
    assert set(sp.library) == {"mpich", "openmpi"} and {"default", "ring"} <= set(sp.algorithm)
    assert (sp.rounds == 2).all() and (sp.ci_low_us <= sp.median_us).all() and (sp.median_us <= sp.ci_high_us).all()
    assert set(sp.speedup_vs_default_verdict) == {"too few rounds"}  # 2 rounds: no verdict is drawn
    tr = pd.read_csv(tables / "training_throughput.csv")
    assert set(tr.framework) == {"ardlab.nn", "tensorflow"}
    tu = pd.read_csv(tables / "tuned_speedup_points.csv")
    assert set(tu.library) == {"mpich", "openmpi"} and set(tu.versus) == {"default", "best single algorithm"}
    assert (tables / "tuned_speedup.md").exists() and (tables / "costmodel_fits.csv").exists()
    assert (tables / "claims.csv").exists() and (tables / "drift.csv").exists() and (results / "run.yaml").exists()
    # tuned and default measured in the same rounds: their time ranges overlap, library by library
    raw = pd.concat(pd.read_csv(p) for p in (results / "raw" / "microbench_tuned").glob("**/*.csv"))
    for lib, g in raw.groupby("library"):
        span = {alg: (a.started_at.min(), a.started_at.max()) for alg, a in g.groupby("algorithm")}
        assert span["tuned"][0] <= span["default"][1] and span["default"][0] <= span["tuned"][1], (lib, span)
        assert len(span) > 2, f"{lib}: the algorithms the tuned file selects were not measured beside it"
    assert (results / "tuned" / "openmpi-r2.rules").exists() and (results / "tuned" / "mpich-r2.json").exists()
    assert list((results / "figures" / "measured").glob("latency_bandwidth_mpich_n1_r2.png"))
    assert list((results / "figures" / "costmodel").glob("*.png"))


@pytest.mark.slow
def test_tiny_study_end_to_end_local(tmp_path):
    path, cfg = tiny(tmp_path)
    proc = snakemake("--profile", "workflow/profiles/local", "--configfile", path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    _check_outputs(Path(cfg["results"]))


def test_failed_job_leaves_nothing_to_aggregate(tmp_path):
    # TensorFlow cannot even start within 0.5 s: the job is killed, fails, and the report never runs.
    path, cfg = tiny(tmp_path, microbench__enabled=False, tuned__enabled=False, train__enabled=False,
                     horovod__timeout_s=0.5, costmodel={"enabled": False})
    proc = snakemake("--profile", "workflow/profiles/local", "--configfile", path, timeout=300)
    assert proc.returncode != 0
    results = Path(cfg["results"])
    assert not list(results.glob("raw/**/*.csv")), list(results.glob("raw/**/*"))
    assert not (results / "tables").exists()


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """A real Slurm on an emulated 2-node cluster (ardlab cluster: namespaces, one slurmd per node) at 1 Gbit/s."""
    from ardlab import cluster

    if os.geteuid() != 0:
        pytest.skip("the emulated cluster needs root")
    state = tmp_path_factory.mktemp("cluster") / "state"
    c = cluster.up(2, "1gbit", state=state)
    yield {**os.environ, **c.env()}
    cluster.down(state)


def _slurm_study(tmp_path, env, **changes):
    path, cfg = tiny(tmp_path, libraries=list(BUILT_IN), horovod__enabled=False,
                     costmodel={"enabled": False}, **changes)
    proc = subprocess.run(["timeout", "-k", "30", "1500", *SNAKEMAKE, "--profile", "workflow/profiles/slurm",
                           "--configfile", path, "--jobs", "2"], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=1600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "slurm" in (proc.stdout + proc.stderr).lower()
    results = Path(cfg["results"])
    assert (results / "tables" / "microbench_speedup.csv").exists()
    assert (results / "tables" / "training_throughput.csv").exists()
    return results


@pytest.mark.slow
def test_tiny_study_under_real_slurm(tmp_path, two_nodes):
    # every job a Slurm job; each starts its ranks with the library's mpiexec on its node (launcher local)
    results = _slurm_study(tmp_path, two_nodes)
    raw = pd.concat(pd.read_csv(p) for p in (results / "raw" / "microbench").glob("**/*.csv"))
    assert (raw.nodes == 1).all() and (raw.link_rate == "1gbit").all()


@pytest.mark.slow
def test_tiny_study_across_nodes_with_srun(tmp_path, two_nodes):
    # launcher srun without images: the environments' own ardlab on both nodes, each library with its PMI
    results = _slurm_study(tmp_path, two_nodes, launcher="srun", max_nodes=2, link_rate="1gbit",
                           microbench__nodes=[2], train__nodes=[2], train__picks=["best", "worst"],
                           tuned={"enabled": True, "ranks": 2, "microbench": False})
    raw = pd.concat(pd.read_csv(p) for p in (results / "raw" / "microbench").glob("**/*.csv"))
    assert set(raw.library) == set(BUILT_IN)
    assert (raw.nodes == 2).all() and (raw.link_rate == "1gbit").all()
    assert (raw.link_queue == "1ms").all()  # the cluster's default queue, recorded in every row
    big = raw[raw.size_bytes == raw.size_bytes.max()]
    assert (big.net_tx_max_node_bytes_per_call >= big.size_bytes).all(), big  # the bytes went over eth0
    train = pd.concat(pd.read_csv(p) for p in (results / "raw" / "train").glob("**/*.csv"))
    assert (train.nodes == 2).all() and set(train.library) == set(BUILT_IN)
    # the pipeline: the group's calls counted, the picks made from them and the microbenchmark, both measured
    # beside the default and the tuned file of this scale
    group = "simplecnn-bucketed"  # the schema's default mode: MPI_Iallreduce, counted too
    calls = pd.read_csv(results / "callsizes" / "train" / group / "n2-r2.csv")
    assert (calls.nodes == 2).all() and (calls[calls.op == "sum"].calls_per_step >= 1).any()  # the buckets, per step
    picked = pd.read_csv(results / "picks" / "train" / group / "n2-r2.csv", keep_default_na=False)
    assert (results / "tuned" / "mpich-n2-r2.json").exists()
    for lib, g in train.groupby("library"):
        mine = picked[picked.library == lib]
        chosen = set(mine.loc[mine.pick != "", "algorithm"])
        assert {"default", "tuned"} | chosen == set(g.algorithm), (lib, chosen, set(g.algorithm))
        # its tuned file, checked at its scale: every rank's result validated at every size
        check = pd.read_csv(results / "tuned" / "validated" / f"{lib}-n2-r2.csv")
        assert (check.nodes == 2).all() and set(check.size_bytes) == {4, 64, 1024, 16384, 262144, 1 << 20}
    # every picked algorithm validated across the nodes at the sizes of the group's calls
    validated = pd.read_csv(results / "validated" / "picks" / "train" / group / "n2-r2.csv")
    assert (validated.nodes == 2).all()
    sizes = {-(-b // 4) * 4 for b in calls.bytes}
    for lib, g in validated.groupby("library"):
        mine = picked[picked.library == lib]
        assert set(g.algorithm) == {"default"} | set(mine.loc[mine.pick != "", "algorithm"]), lib
        assert set(g.size_bytes) <= sizes and len(set(g.size_bytes)) >= 1, lib


@pytest.mark.slow
def test_killed_run_resumes_with_the_same_command(tmp_path):
    """`workflow/run` killed with SIGKILL mid-run leaves Snakemake's lock; the same command again clears it, says so,
    and completes the run without losing a finished round or reading a partial row."""
    import signal

    path, cfg = tiny(tmp_path, train__enabled=False, horovod__enabled=False, tuned__enabled=False,
                     costmodel={"enabled": False})
    raw = Path(cfg["results"]) / "raw"
    cmd = [str(ROOT / "workflow" / "run"), "--configfile", str(path)]
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 600
    while not list(raw.glob("**/*.csv")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, "the run ended before a round finished: nothing to kill"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    finished = {p: p.read_bytes() for p in raw.glob("**/*.csv")}
    assert finished and list((ROOT / ".snakemake" / "locks").iterdir()), "the killed run left no lock to clear"
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "clearing a stale Snakemake lock" in again.stdout, again.stdout[-2000:]
    assert all(p.read_bytes() == data for p, data in finished.items())  # finished rounds kept as they were
    sp = pd.read_csv(Path(cfg["results"]) / "tables" / "microbench_speedup.csv")
    assert set(sp.library) == {"mpich", "openmpi"} and (sp.rounds == 2).all()


def test_a_live_runs_lock_is_not_cleared(tmp_path):
    """clear-stale-lock leaves a lock alone while a Snakemake process runs in the folder, and clears it after."""
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    called = tmp_path / "called"
    # a stand-in for snakemake that records its call (`... --unlock --quiet` become its unused arguments)
    unlock = [str(ROOT / "workflow" / "clear-stale-lock"), "sh", "-c", 'touch "$0"', str(called)]
    (tmp_path / "snakemake").symlink_to("/bin/sleep")  # a live process named snakemake, running in the folder
    live = subprocess.Popen([str(tmp_path / "snakemake"), "60"], cwd=tmp_path)
    try:
        proc = subprocess.run(unlock, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    finally:
        live.kill()
        live.wait()
    assert proc.returncode == 0 and "held by a live Snakemake" in proc.stderr, proc.stderr
    assert not called.exists()
    proc = subprocess.run(unlock, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "clearing a stale Snakemake lock" in proc.stdout, proc.stdout + proc.stderr
    assert called.exists()


def test_every_picked_algorithm_is_checked_at_its_groups_sizes():
    """The cluster pipeline validates each algorithm a training group picked, at 2 and 4 ranks alike (no loss check
    applies at 4), at the sizes of that group's calls, before the report is made."""
    cfg = study.load(ROOT / "workflow" / "config" / "cluster.yaml")
    jobs = study.jobs(cfg)
    checks = commands.pick_checks(cfg, jobs)
    results = Path(cfg["results"])
    assert str(results / "validated" / "picks" / "train" / "vgg16-blocking" / "n2-r4.csv") in checks
    assert len(checks) == len({j.group for kind in ("train", "horovod") for j in jobs[kind]})
    job = next(j for j in jobs["train"] if (j.nodes, j.ranks, j.model) == (2, 4, "vgg16"))
    calls = ROOT / "results" / "runs" / "cluster" / "callsizes" / "train" / "vgg16-blocking" / "n2-r4.csv"
    c = commands.pick_check_comparison(cfg, job, "p.csv", str(calls), "out.csv")
    assert c.picks == {lib: ["best", "worst"] for lib in cfg["libraries"]} and c.picked_from == "p.csv"
    assert all(v.options["validate"] and (v.nodes, v.ranks) == (2, 4) for v in c.variants)
    sizes = pd.read_csv(calls).bytes
    assert c.variants[0].options["sizes"] == sorted(set(sizes)) and max(sizes) > 8 << 20  # VGG-16: 9 MiB


def test_a_pick_check_validates_the_picked_algorithms_for_real(tmp_path):
    """A group's pick check, run as the workflow runs it (the driver, real mpiexec, 2 ranks): every picked algorithm
    of every library measured with each rank's result checked against the exact sum, at the calls' sizes."""
    path, _ = tiny(tmp_path, train__picks=["best", "worst"])
    cfg = study.load(path)
    picks = tmp_path / "picks.csv"
    pd.DataFrame({"library": ["mpich", "mpich", "openmpi", "openmpi"],
                  "algorithm": ["ring", "recursive_doubling", "ring", "recursive_doubling"],
                  "predicted_us_per_step": [1.0, 2.0, 1.0, 2.0], "pick": ["best", "worst", "best", "worst"]}
                 ).to_csv(picks, index=False)
    calls = tmp_path / "calls.csv"
    pd.DataFrame({"bytes": [40, 4097, 1 << 20], "calls": [1, 1, 1], "calls_per_step": [1, 1, 1]}).to_csv(calls,
                                                                                                         index=False)
    job = study.Job("train", 0, 2, 1, "simplecnn", "blocking")
    out = tmp_path / "check.csv"
    cmd = commands.pick_check_command(cfg, job, str(picks), str(calls), str(out))
    proc = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = pd.read_csv(out)
    assert set(zip(rows.library, rows.algorithm)) == {(lib, alg) for lib in ("mpich", "openmpi")
                                                      for alg in ("default", "ring", "recursive_doubling")}
    assert set(rows.size_bytes) == {40, 4100, 1 << 20}  # 4097 B rounded up to whole float32 elements


def test_every_measuring_rule_asks_slurm_for_its_resources(tmp_path):
    """The resources block is declared once (common.smk's slurm_resources): every rule that launches ranks asks for
    one measurement at a time, the MPI launch and the five Slurm resources of its job."""
    proc = snakemake("-n", "all", "--configfile", ROOT / "workflow" / "config" / "cluster.yaml", "--config",
                     f"results={tmp_path / 'results'}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    asked: dict[str, set[str]] = {}
    rule = None
    for line in proc.stdout.splitlines():
        if line.startswith("rule "):
            rule = line.split()[1].rstrip(":")
        elif "resources:" in line and rule:
            asked.setdefault(rule, set()).update(k.split("=")[0].strip() for k in line.split(":", 1)[1].split(","))
    measuring = {"microbench", "train", "horovod", "callsizes", "pick_check"}
    assert measuring <= set(asked), asked
    for rule in measuring:
        assert {"measure", "mpi", "runtime", "nodes", "tasks", "cpus_per_task", "mem_mb"} <= asked[rule], rule


def test_measurement_kinds_and_their_files_are_declared_once():
    """ardlab.results.ROW_FILES: the study's path patterns are its, every kind's rows are read by the report as its
    class says, and the globs the report reads find what the patterns name."""
    from ardlab import results

    assert study.PATTERNS == {k: p for k, (p, _) in results.ROW_FILES.items()}
    assert set(results.kinds_of("bench")) | set(results.kinds_of("train")) == set(results.ROW_FILES)
    path = Path(results.ROW_FILES["train"][0].format(model="alexnet", mode="blocking", scale="n2-r2", round=3))
    assert path.match(results.rows_glob("train"))
    with pytest.raises(ValueError, match="'tables' is not a class of rows"):
        results.kinds_of("tables")


def test_the_filled_schema_and_a_config_check_are_printed(tmp_path):
    """`python -m ardlab.study schema` shows every kind's section as the workflow validates against it (a training
    kind's made from the shared keys, its axis and its options); `check` prints a config with its defaults filled in,
    or names the bad value and exits 1."""
    def study_cli(*args):
        return subprocess.run([sys.executable, "-m", "ardlab.study", *map(str, args)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    shown = yaml.safe_load(study_cli("schema").stdout)
    assert shown == study.schema()
    assert {"parallel_modes", "batch_per_rank", "picks"} <= set(shown["properties"]["train"]["properties"])
    assert {"fusion_threshold_mb", "warmup_batches", "picks"} <= set(shown["properties"]["horovod"]["properties"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"libraries": ["mpich"], "train": {"parallel_modes": ["sideways"]}}))
    good = ROOT / "workflow" / "config" / "local.yaml"
    proc = study_cli("check", good, bad)
    assert proc.returncode == 1 and "bad.yaml" in proc.stderr and "'sideways'" in proc.stderr, proc.stderr
    assert yaml.safe_load(proc.stdout) == study.load(good)
