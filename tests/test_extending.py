"""docs/extending.md's counts, proven where they can be: in a temporary copy of the package, the workflow, the tests and
the containers, an extension made by editing only the files the doc names reaches what the doc says follows from it
(the CLI, the config's parse, the jobs' plans, a dry run of the workflow; an own algorithm, a program and a library
also a real 2-rank run), and the copy's own fast tests of what it touched still pass (no test lists what an
extension adds to)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"


@pytest.fixture
def repo(tmp_path):
    """A copy of the package, the workflow and its Snakefile, the tests, the containers' files and the docs; the
    environments stay the checkout's."""
    dst = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", ".plans")
    for name in ("src", "workflow", "tests", "containers", ".ci", "docs"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    for name in ("Snakefile", "pyproject.toml", "README.md"):  # what the images' definitions copy, besides
        shutil.copy(ROOT / name, dst / name)
    return dst


def run(repo: Path, *args: str, timeout: int = 300, envs: Path = ROOT / ".envs") -> subprocess.CompletedProcess:
    """A Python command against the copy's package (the ranks a driver starts inherit the path), with the library
    environments at `envs`."""
    env = {**os.environ, "PYTHONPATH": str(repo / "src"), "ARDLAB_ENVS": str(envs)}
    proc = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def copied_tests(repo: Path, *files: str, envs: Path = ROOT / ".envs") -> None:
    """The copy's own tests `files` (its fast ones) pass against the copy's package."""
    run(repo, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files, timeout=900, envs=envs)


def edit(path: Path, after: str, text: str) -> None:
    """Put the lines `text` after the first line that starts with `after`."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(after))
    path.write_text("".join(lines[:at + 1]) + text + "".join(lines[at + 1:]))


def changed(repo: Path) -> list[str]:
    """The files of the copy that differ from the checkout's, or are new."""
    out = []
    for path in sorted(p for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(repo)
        if ".plans" in rel.parts or rel.parts[0] in ("results", ".snakemake") or rel.name == "config.yaml":
            continue
        orig = ROOT / rel
        if not orig.is_file() or orig.read_bytes() != path.read_bytes():
            out.append(str(rel))
    return out


def doc_files(extension: str) -> list[str]:
    """The files docs/extending.md's row for `extension` names in its files column (paths under src/ardlab/ unless
    they start elsewhere; ``<name>`` stands for the extension's own name)."""
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] == extension:
            found = re.findall(r"`([\w/.<>-]+\.(?:py|yaml|smk|def))`", cells[1])
            return list(dict.fromkeys(p if p.startswith(("workflow/", "containers/", "tests/")) else f"src/ardlab/{p}"
                                      for p in found))
    raise AssertionError(f"docs/extending.md has no row {extension!r}")


def check_count(repo: Path, extension: str, most: int) -> None:
    """The copy's changed files are among those the doc's row names, and no more than `most` (issue 42's target)."""
    named = [re.escape(p).replace(re.escape("<name>"), r"\w+") for p in doc_files(extension)]
    files = changed(repo)
    assert files and all(any(re.fullmatch(n, f) for n in named) for f in files), (files, doc_files(extension))
    assert len(files) <= most, files


TINY = {"results": "RESULTS", "launcher": "local", "max_ranks": 2, "rounds": 1, "libraries": ["mpich"],
        "microbench": {"ranks": [2], "sizes": "4,4K", "iterations": 2, "warmup": 1, "algorithms": "default",
                       "own": True},
        "train": {"models": ["simplecnn"], "algorithms": "default", "ranks": [2], "batch_per_rank": 8, "steps": 3},
        "horovod": {"enabled": False}, "tuned": {"enabled": False}, "costmodel": {"enabled": False}}


def config(repo: Path, **sections) -> Path:
    cfg = {**TINY, "results": str(repo / "results")}
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, dict) else value
    path = repo / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


PLANS = """
import json, sys
from dataclasses import asdict
from ardlab.study import commands, config as study
cfg = study.load(sys.argv[1])
for kind, jobs in study.jobs(cfg).items():
    for job in jobs:
        for v in commands.comparison(job, cfg, "out.csv").variants:
            print(json.dumps(asdict(v), sort_keys=True, default=str))
"""


def plans(repo: Path, cfg: Path) -> str:
    return run(repo, "-c", PLANS, str(cfg)).stdout


def dry_run(repo: Path, cfg: Path) -> str:
    return run(repo, "-m", "snakemake", "-n", "--quiet", "all", "--cores", "1", "--configfile", str(cfg)).stdout


def test_a_training_option_is_one_field(repo):
    """One field of TrainConfig (option(..., schema=True)): `ardlab train --the-option`, the config's
    `train.the_option` (type, default, bounds: a bad value refused by name before any job), every training job's
    plan, a dry run."""
    path = repo / "src/ardlab/nn/trainer.py"
    text = path.read_text()
    at = text.index("\n\n\ndef plan(")  # the end of TrainConfig
    path.write_text(text[:at] + '\n    throwaway_passes: int = option(3, "a throwaway option", schema=True, minimum=1)'
                    + text[at:])
    check_count(repo, "a training option (ardlab.nn or Horovod)", 1)

    assert "--throwaway-passes" in run(repo, "-c", "from ardlab.cli import main; main()", "train", "--help").stdout
    assert '"throwaway_passes": 3' in plans(repo, config(repo))
    assert '"throwaway_passes": 5' in plans(repo, config(repo, train={"throwaway_passes": 5}))
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    bad = subprocess.run([sys.executable, "-c", PLANS, str(config(repo, train={"throwaway_passes": 0}))], cwd=repo,
                         env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "throwaway_passes" in bad.stderr
    assert dry_run(repo, config(repo, train={"throwaway_passes": 5}))


OWN = '''\
"""A throwaway own algorithm for tests/test_extending.py: reduce to rank 0, then broadcast (MPI's own)."""

from mpi4py import MPI

from ardlab.comm.own._common import prepare


def allreduce(comm, sendbuf, recvbuf, op=MPI.SUM):
    buf = prepare(sendbuf, recvbuf)
    comm.Reduce(MPI.IN_PLACE if comm.Get_rank() == 0 else buf, buf if comm.Get_rank() == 0 else None, op=op,
                root=0)
    comm.Bcast(buf, root=0)
'''


def test_an_own_algorithm_is_a_row_and_its_module(repo):
    """A row of OWN_ALGORITHMS and its module under comm/own/: `ardlab info` lists it, the workflow's microbenchmark
    measures it on every library (a dry run plans it), and a real 2-rank run of MPICH validates its sums."""
    edit(repo / "src/ardlab/comm/libraries.py", "    for a in (",
         '        Algorithm("own_throwaway", "own", "reduce to rank 0 + broadcast", cost_model="binomial"),\n')
    (repo / "src/ardlab/comm/own/throwaway.py").write_text(OWN)
    check_count(repo, "an own Allreduce algorithm", 2)

    assert "own_throwaway" in run(repo, "-c", "from ardlab.cli import main; main()", "info").stdout
    cfg = config(repo, libraries=["mpich", "openmpi"])
    assert plans(repo, cfg).count('"own_throwaway"') >= 2
    assert dry_run(repo, cfg)
    out = repo / "bench.csv"
    run(repo, "-c", "from ardlab.cli import main; main()", "bench", "allreduce", "--library", "mpich", "--ranks", "2",
        "--algorithm", "own_throwaway", "--sizes", "4,64K", "--iterations", "3", "--validate",
        "--output", str(out), timeout=600)
    rows = out.read_text().splitlines()
    assert len(rows) == 3 and all(",own_throwaway," in r for r in rows[1:]), rows


PROGRAM = '''"""A throwaway measuring program: one summing Allreduce size, timed by the microbenchmark's loop."""

from ardlab.bench import allreduce
from ardlab.plan import RunPlan


def plan(library_name: str, *, ranks: int, **launch) -> RunPlan:
    base = allreduce.plan(library_name, ranks=ranks, sizes=[4096], iterations=3, validate=True, **launch)
    return RunPlan("throwaway", library_name, ranks, algorithm=base.algorithm, options=base.options, **launch)


def on_rank(plan: RunPlan, comm, label):
    return allreduce.on_rank(plan, comm, label)
'''


def test_a_measuring_program_is_its_module_and_its_record(repo):
    """A program of its own (ardlab.programs): its module with the interface (plan, on_rank) and one Program record.
    The driver launches it on 2 ranks, each rank runs it by the record, and its rows go to the columns the record
    names; nothing else changes, and the copy's tests of the registry and of the layers pass with it."""
    (repo / "src/ardlab/bench/throwaway.py").write_text(PROGRAM)
    edit(repo / "src/ardlab/programs.py", "PROGRAMS: dict[str, Program] = ",
         '    Program("throwaway", "throwaway", "ardlab.bench.throwaway", "bench"),\n')
    check_count(repo, "a measuring program", 2)

    out = repo / "throwaway.csv"
    run(repo, "-c", "import sys; from ardlab.bench import throwaway; from ardlab.driver import run_comparison; "
        "from ardlab.plan import Comparison; "
        "p = throwaway.plan('mpich', ranks=2); assert p.program == 'throwaway', p; "
        "run_comparison(Comparison('g', [p], output=sys.argv[1]))", str(out), timeout=600)
    rows = out.read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("library,") and ",4096," in rows[1], rows
    copied_tests(repo, "tests/test_programs.py", "tests/test_package_imports.py")  # its interface, its layer


def envs_with(tmp_path: Path, name: str, like: str) -> Path:
    """A folder of environments: the checkout's, and `name`'s, which is `like`'s installation under its own folder
    (its files linked), marked as built for `name` (libraries.SITE_MARKER: what ``detect`` reads before the version
    string, which cannot tell a library from the one it copies)."""
    from ardlab.comm.libraries import SITE_MARKER

    envs = tmp_path / "envs"
    envs.mkdir()
    for env in (ROOT / ".envs").iterdir():
        (envs / env.name).symlink_to(env)
    own = envs / name
    own.mkdir()
    for entry in (ROOT / ".envs" / like).iterdir():
        (own / entry.name).symlink_to(entry)
    (own / SITE_MARKER).write_text(f"{name}\n")
    return envs


def test_a_library_is_its_row(repo, tmp_path):
    """A fourth library that reuses a tuned-file writer is one row of the table (its image definition rendered from
    it by containers/render-defs): its environment's packages (`python -m ardlab.comm`), the config's library enum,
    its forcing settings in the jobs' plans, its knob prefixes, a dry run of the workflow with it, the copy's tests
    of the table and the containers, and a real 2-rank run of its ring. (This machine has no fourth MPI: the row is
    MPICH's under another name, its environment MPICH's installation in a folder of its own. A library with a new
    tuned-file format also needs its writer in analysis/tuned.py: the doc's other file.)"""
    path = repo / "src/ardlab/comm/libraries.py"
    edit(path, "from dataclasses import ", "from dataclasses import replace\n")
    edit(path, "BUILT_IN: dict[str, Library] = ",
         'BUILT_IN["throwaway"] = replace(MPICH, name="throwaway", display="Throwaway", '
         'knob_prefixes=(*MPICH.knob_prefixes, "THROW_"))\n')
    render = subprocess.run([repo / "containers" / "render-defs"], capture_output=True, text=True, timeout=300)
    assert render.returncode == 0 and "throwaway.def" in render.stdout, render.stdout + render.stderr
    check_count(repo, "a fourth MPI library", 2)
    assert (repo / "containers" / "throwaway.def").is_file()

    names = run(repo, "-m", "ardlab.comm", "names").stdout.split()
    assert "throwaway" in names
    assert "mpich==5.0.2" in run(repo, "-m", "ardlab.comm", "pip", "throwaway").stdout
    cfg = config(repo, libraries=["mpich", "throwaway"], microbench={"algorithms": ["ring"], "own": False})
    lines = [line for line in plans(repo, cfg).splitlines() if '"library": "throwaway"' in line]
    assert any('"program": "train"' in line for line in lines)
    bench = [line for line in lines if '"program": "microbench"' in line]
    assert bench and all('"ring"' in line for line in bench)
    facts = run(repo, "-c", "from ardlab.comm.libraries import knob_prefixes, run_env; "
                "print(knob_prefixes(), run_env('throwaway', 'ring'))").stdout
    assert "THROW_" in facts and "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM" in facts
    assert dry_run(repo, cfg)

    envs = envs_with(tmp_path, "throwaway", "mpich")
    # (all but the build script's run as another user, who cannot reach pytest's folders)
    copied_tests(repo, "tests/test_comm_libraries.py", "tests/test_containers.py", "--deselect",
                 "tests/test_containers.py::test_build_script_says_clearly_without_apptainer", envs=envs)
    out = repo / "bench.csv"
    run(repo, "-c", "from ardlab.cli import main; main()", "bench", "allreduce", "--library", "throwaway", "--ranks",
        "2", "--algorithm", "ring", "--sizes", "4,64K", "--iterations", "3", "--validate", "--no-progress",
        "--output", str(out), timeout=600, envs=envs)
    rows = pd.read_csv(out)
    assert (rows.library == "throwaway").all() and (rows.algorithm == "ring").all() and len(rows) == 2, rows
    assert rows.knobs.str.contains("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring", regex=False).all(), rows.knobs


KIND = '''\
    # a throwaway training kind for tests/test_extending.py: ardlab.nn at several batch sizes, one group each
    Kind("nnbatch", "train", "nnbatch", trainer.TrainConfig,
         lambda job, sec, lib, algorithm, tuned, launch: trainer.plan(
        lib, ranks=job.ranks, nodes=job.nodes, algorithm=algorithm, tuned=tuned, options={
            "model": job.model, "dataset": "synthetic", "parallel_mode": "bucketed",
            **config_options(trainer.TrainConfig, sec), "batch_per_rank": int(job.mode[1:])}, **launch),
         training_jobs, models=_nn_models, axis=Axis("batches", {"type": "integer", "minimum": 1}, [8],
                                                      name=lambda b: f"b{b}", value=lambda name: int(name[1:]))),
'''


KIND_PLANS = """
import json, sys
from dataclasses import asdict
from ardlab.study import commands, config as study
cfg = study.load(sys.argv[1])
for job in study.jobs(cfg)["nnbatch"]:
    for v in commands.comparison(job, cfg, "out.csv").variants:
        print(job.group, json.dumps(asdict(v), sort_keys=True, default=str))
"""


def test_a_measurement_kind_is_its_rows_and_its_kind(repo):
    """A training kind is its rows (ROW_FILES in results.py) and one Kind in study/kinds.py: the config's section
    (the training keys, its axis, its options; a bad value refused by name), its groups' plans, a workflow rule and
    its callsizes, picks and pick checks (a dry run plans them)."""
    edit(repo / "src/ardlab/results.py", '    "horovod": ("raw/horovod/',
         '    "nnbatch": ("raw/nnbatch/{model}-{mode}/{scale}/round{round}.csv", "train"),\n')
    edit(repo / "src/ardlab/study/kinds.py", "         models=_horovod_models, axis=FUSION, own=False),", KIND)
    check_count(repo, "a measurement kind in the workflow", 2)

    section = {"models": ["simplecnn"], "ranks": [2], "batches": [4, 16], "steps": 2, "algorithms": "default"}
    lines = run(repo, "-c", KIND_PLANS, str(config(repo, nnbatch=section))).stdout.splitlines()
    assert sorted({line.split()[0] for line in lines}) == ["nnbatch/simplecnn-b16/r2", "nnbatch/simplecnn-b4/r2"]
    assert {'"batch_per_rank": 4' in line for line in lines} == {True, False}
    assert all('"steps": 2' in line for line in lines) and len(lines) == 2, lines  # 1 library, 1 round
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    bad = subprocess.run([sys.executable, "-c", PLANS, str(config(repo, nnbatch={**section, "batches": [0]}))],
                         cwd=repo, env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "batches" in bad.stderr, bad.stderr[-2000:]
    picked = config(repo, nnbatch={**section, "picks": ["best"]}, microbench={"algorithms": "all"})
    planned = dry_run(repo, picked)
    for rule in ("nnbatch", "callsizes", "pick", "pick_check"):
        assert re.search(rf"^{rule}\s+\d+", planned, re.M), planned[-3000:]


BENCH_KIND = """\
    # a throwaway microbenchmark kind for tests/test_extending.py: its own section, off unless a config turns it on
    Kind("bench_pairs", "microbench", "bench_pairs", allreduce.Plan, bench_variant, bench_jobs, schema={
        "type": "object", "additionalProperties": False, "default": {}, "properties": {
            "enabled": {"type": "boolean", "default": False},
            "algorithms": {"$ref": "#/definitions/algorithms", "default": "all"},
            "ranks": {"$ref": "#/definitions/ranks", "default": [2]},
            "nodes": {"$ref": "#/definitions/ranks", "default": [1]},
            "sizes": {"type": "string", "default": "4,1M"},
            "timeout_s": {"$ref": "#/definitions/timeout", "default": 600}}}),
"""


def test_a_microbenchmark_kind_with_its_own_section_is_its_rows_and_its_kind(repo):
    """A kind that is not a training kind, with a config section of its own, is its rows and one Kind with that
    section's schema: the config's section (off by default; its options from the microbenchmark's Plan), its jobs'
    plans, a workflow rule (a dry run plans it)."""
    edit(repo / "src/ardlab/results.py", '    "horovod": ("raw/horovod/',
         '    "bench_pairs": ("raw/bench_pairs/n{nodes}-r{ranks}/round{round}.csv", "bench"),\n')
    edit(repo / "src/ardlab/study/kinds.py", "         models=_horovod_models, axis=FUSION, own=False),", BENCH_KIND)
    check_count(repo, "a measurement kind in the workflow", 2)

    assert '"microbench"' in plans(repo, config(repo)) and "bench_pairs" not in dry_run(repo, config(repo))
    cfg = config(repo, bench_pairs={"enabled": True, "algorithms": ["ring"], "sizes": "64,4K", "iterations": 2})
    lines = [line for line in plans(repo, cfg).splitlines() if '"sizes": [64, 4096]' in line]
    assert lines and all('"iterations": 2' in line and '"ring"' in line for line in lines), lines
    assert re.search(r"^bench_pairs\s+1$", dry_run(repo, cfg), re.M)
