"""What a run folder records about itself (run.yaml): the machine, the software, the code and the config.

Readers of a run take its recorded config from ``ardlab.results.recorded_config`` (the leaf, so analysis can read it).

A run is a unit: one folder (``results/runs/<name>``) holds its raw rows, tuned files, tables, figures, logs and
this record, and nothing in it comes from another run.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import yaml

from ardlab.comm.launch import repo_root
from ardlab.comm.startup import cpu
from ardlab.results import atomic_open, utc_now


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return None


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo_root(), capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def describe(config: dict) -> dict:
    processor = cpu()
    return {
        "recorded_at": utc_now(),
        # the CPU's vendor, family and model decide Intel MPI's tuning file (each row names the file it loaded)
        "machine": {"hostname": platform.node(), "cpu": processor["model"], "cpu_id": processor,
                    "cores": os.cpu_count(), "memory_gib": _memory_gib(), "os": platform.platform()},
        "software": {"python": sys.version.split()[0],
                     "ardlab_commit": _git("rev-parse", "HEAD"),
                     "ardlab_uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no"))},
        "seed": config["seed"],
        "rounds": config["rounds"],
        # a site's own builds (ardlab.comm.sites) are known by name only through their registration: what it said
        "site_libraries": _sites(config),
        "config": config,
    }


def _sites(config: dict) -> dict:
    from ardlab.comm.libraries import library

    return {name: {"family": lib.family, "display": lib.display, "mpicc": lib.site.mpicc,
                   "mpiexec": lib.site.mpiexec, "registered_in": lib.site.source}
            for name in config["libraries"] if (lib := library(name)).site is not None}


def write(path: str | Path, config: dict) -> Path:
    path = Path(path)
    with atomic_open(path) as f:
        yaml.safe_dump(describe(config), f, sort_keys=False)
    return path


if __name__ == "__main__":  # the workflow's run_info rule: OUTPUT CONFIG_JSON
    import json

    print(f"recorded {write(sys.argv[1], json.loads(sys.argv[2]))}")
