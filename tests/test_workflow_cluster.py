"""workflow/run-cluster stopped at any moment resumes with the same command, losing no finished round and leaving no
partial row: killed outright (SIGKILL of the whole run, its cluster left up with a Slurm job still running), and a
node lost mid-job (its slurmd killed: the run stops with a clear error and the cluster comes down), then resumed.

Needs root and Debian's Slurm (the emulated cluster): slow (CI runs it).
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ardlab.cluster import network
from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="the emulated cluster needs root")]

CONFIG = {
    "launcher": "srun", "link_rate": "none", "max_nodes": 2, "max_ranks": 2, "rounds": 2, "seed": 7,
    "libraries": ["mpich", "openmpi"],
    # a job of 13 launches: the killed run's job still runs when the same command starts again (its first launch is
    # where the run is killed), so there is one to cancel
    "microbench": {"algorithms": {"mpich": "all", "openmpi": ["default", "ring"]}, "own": False, "ranks": [2],
                   "nodes": [2], "sizes": "8,64K,1M", "iterations": 20},
    "train": {"enabled": False}, "horovod": {"enabled": False}, "tuned": {"enabled": False},
    "costmodel": {"enabled": False},
}


def _ranks() -> set[int]:
    """The ardlab rank processes running (a measurement job mid-launch)."""
    out = set()
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and b"ardlab.rank" in (p / "cmdline").read_bytes():
                out.add(int(p.name))
        except OSError:
            continue
    return out


def _jobs(state: Path) -> set[str]:
    """The ids of the Slurm jobs on the emulated cluster at `state`."""
    if not (state / "slurm.conf").exists():  # the cluster is down
        return set()
    proc = subprocess.run(["squeue", "-h", "-o", "%i"], env={**os.environ, "SLURM_CONF": str(state / "slurm.conf")},
                          capture_output=True, text=True, timeout=90)
    return set(proc.stdout.split()) if proc.returncode == 0 else set()


def _wait(cond, what: str, proc: subprocess.Popen, timeout: float = 900) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}:\n{out[-3000:]}")
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_killed_and_node_lost_runs_resume_with_the_same_command(tmp_path):
    results = tmp_path / "results"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "results": str(results)}))
    state = tmp_path / "cluster"
    env = {**os.environ, "ARDLAB_CLUSTER": str(state)}
    cmd = [str(ROOT / "workflow" / "run-cluster"), "--configfile", str(path)]
    raw = results / "raw" / "microbench" / "n2-r2"

    def start():
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def rounds() -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in raw.glob("round*.csv")}

    try:
        # 1. killed outright mid-job, after its first round: the cluster stays up and its Slurm job keeps running
        first = start()
        _wait(lambda: rounds() and _ranks(), "a finished round and a job mid-launch", first)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        kept = rounds()
        assert json.loads((state / "cluster.json").read_text())["pids"], "the cluster went down with the run"

        # 2. the same command: it cancels the job left running, clears the lock, resumes; mid-job a node is lost
        end = time.monotonic() + 30  # the killed run's job goes on launching (between launches no rank runs)
        while not _ranks() and time.monotonic() < end:
            time.sleep(0.2)
        assert _ranks(), "no rank of the killed run's job is running: nothing for the resumed run to cancel"
        orphans = _jobs(state)
        assert len(orphans) == 1, orphans
        second = start()
        _wait(lambda: (_jobs(state) - orphans) and _ranks(), "a job of the resumed run mid-launch", second)
        pids = json.loads((state / "cluster.json").read_text())["pids"]
        os.kill(pids["slurmd-n2"], signal.SIGKILL)
        out = second.communicate(timeout=600)[0]
        assert second.returncode != 0, out[-3000:]
        assert "ardlab: cancelled 1 Slurm job(s) left by an earlier run" in out, out[-3000:]
        assert "clearing a stale Snakemake lock" in out, out[-3000:]
        assert "the emulated cluster lost slurmd-n2 during the run" in out, out[-3000:]
        assert not network.ours()[0] and not (state / "cluster.json").exists()  # brought down
        for p, data in kept.items():
            assert p.read_bytes() == data  # finished rounds kept as they were
        kept = rounds()
        for p in kept:
            assert len(pd.read_csv(p)) > 0  # every round file whole (the driver writes it at the end, atomically)

        # 3. the same command again: the cluster comes up afresh and the run completes
        third = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
        assert sorted(p.name for p in raw.glob("round*.csv")) == ["round0.csv", "round1.csv"]
        for p, data in kept.items():
            assert p.read_bytes() == data
        sp = pd.read_csv(results / "tables" / "microbench_speedup.csv")
        assert set(sp.library) == {"mpich", "openmpi"} and (sp.rounds == 2).all()
    finally:
        subprocess.run([str(ROOT / ".envs" / "tools" / "bin" / "ardlab"), "cluster", "down", "--state", str(state)],
                       capture_output=True, timeout=300)
    assert not network.ours()[0] and not network.ours()[1]
