"""Benchmark: ardlab's Allreduce microbenchmark against Intel MPI Benchmarks' IMB-MPI1 Allreduce, side by side.

    python -m ardlab.bench.vs_imb [--rounds 5] [--sizes 4:16M:x4] [--ranks 2] [--output results/benchmarks/vs_imb.csv]

IMB-MPI1 comes with the impi-rt wheel. It runs under Intel MPI natively and under MPICH through the MPICH ABI:
MPICH's lib first on LD_LIBRARY_PATH and MPICH's mpiexec (checked before anything runs: the libmpi.so.12 the
dynamic loader resolves for it is MPICH's). Both tools get the same forcing settings, the table's. Open MPI has
no IMB here: its variants are ardlab's two timers (``--timer c`` and ``python``), as for the others.

Variants: per library, the default and forced algorithms (ALGORITHMS), each timed by IMB and by ardlab's three
timers: compiled with a barrier before each call (``c``, the default), compiled back to back as IMB (``c-loop``)
and Python (``python``); every variant once per round, each round in a seeded shuffled order
(ardlab.rounds), one launch per variant. Per (library, algorithm, size) it prints the median of the per-round
ratios ardlab(c) / IMB, ardlab(c-loop) / IMB, ardlab(python) / ardlab(c) and ardlab(c) at thread level multiple
over single, with their min and max over the rounds. ardlab runs at IMB's thread level (single: IMB-MPI1 calls
MPI_Init) except in the last.
Noisy machine: only ratios measured in this one run mean anything.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ardlab.bench import add_round_arguments, save_rows, spread

# Per library, the default and three forced algorithms that run as themselves at 2 ranks on one node (Intel MPI's
# rabenseifner, shumilin_ring and knomial fall back to recursive doubling there: README, "Algorithm table").
ALGORITHMS = {
    "intelmpi": ("default", "recursive_doubling", "ring", "reduce_bcast"),
    "mpich": ("default", "recursive_doubling", "ring", "reduce_scatter_allgather"),
    "openmpi": ("default", "recursive_doubling", "ring", "rabenseifner"),
}
IMB_LIBRARIES = ("intelmpi", "mpich")  # IMB-MPI1 is an MPICH-ABI binary
# IMB's own method and limits, with its repetitions per size made ardlab's (iterations_for: at most 1000, and 256 MiB
# reduced per size: "-iter 1000,256") and its largest size raised from 4 MiB to 16 MiB (-msglog).
IMB_ARGS = ("-npmin", "{ranks}", "-iter", "1000,256", "-msglog", "2:24", "-time", "10", "-sync", "1")
# IMB, then ardlab's timers (ardlab.bench.timeloop.TIMERS) at IMB's thread level (IMB-MPI1 calls MPI_Init: single),
# and ardlab's default timer at mpi4py's default level (multiple, as the study's runs and Horovod)
TOOLS = ("imb", "c", "c-loop", "python", "c@multiple")
_IMB_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def imb_binary() -> Path:
    from ardlab.comm.launch import require_env

    path = require_env("intelmpi") / "bin" / "IMB-MPI1"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the impi-rt wheel ships it (containers/setup-envs)")
    return path


def imb_env(library_name: str, algorithm: str) -> dict[str, str]:
    """The environment IMB runs in under `library_name`: the table's launcher and forcing settings, and for MPICH
    its lib first on LD_LIBRARY_PATH (checked: the loader resolves libmpi.so.12 there)."""
    from ardlab.comm.launch import require_env
    from ardlab.comm.libraries import run_env

    prefix = require_env(library_name)
    env = {**os.environ, **run_env(library_name, algorithm), "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}"}
    env["LD_LIBRARY_PATH"] = f"{prefix / 'lib'}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") \
        else str(prefix / "lib")
    ldd = subprocess.run(["ldd", str(imb_binary())], capture_output=True, text=True, env=env).stdout
    found = re.search(r"libmpi\.so\.12 => (\S+)", ldd)
    if not found or not Path(found.group(1)).resolve().is_relative_to(prefix.resolve()):
        raise RuntimeError(f"IMB-MPI1 would load {found.group(1) if found else 'no libmpi.so.12'}, not "
                           f"{library_name}'s from {prefix / 'lib'}")
    return env


def run_imb(library_name: str, algorithm: str, sizes: list[int], ranks: int) -> list[dict]:
    """One IMB-MPI1 Allreduce launch: a row per size (IMB's t_avg: the mean over ranks of each rank's mean)."""
    from ardlab.comm import launch
    from ardlab.comm.libraries import library

    env = imb_env(library_name, algorithm)
    with tempfile.NamedTemporaryFile("w", suffix=".msglen", delete=False) as f:
        f.write("\n".join(map(str, sizes)) + "\n")
    try:
        argv = [*library(library_name).launcher(launch.require_env(library_name), ranks), str(imb_binary()),
                "Allreduce", "-msglen", f.name, *(a.format(ranks=ranks) for a in IMB_ARGS)]
        proc = launch.execute(argv, env, timeout=900)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise RuntimeError(f"IMB-MPI1 under {library_name} {algorithm} failed: {proc.stderr[-1500:]}")
    rows = []
    for line in proc.stdout.splitlines():
        m = _IMB_ROW.match(line)
        if m and int(m.group(1)) in sizes:
            rows.append({"size_bytes": int(m.group(1)), "iterations": int(m.group(2)),
                         "avg_us": float(m.group(5))})
    if sorted(r["size_bytes"] for r in rows) != sorted(sizes):
        raise RuntimeError(f"IMB-MPI1 printed sizes {[r['size_bytes'] for r in rows]}, asked {sizes}:\n"
                           f"{proc.stdout[-1500:]}")
    return rows


def run_ardlab(library_name: str, algorithm: str, sizes: list[int], ranks: int, tool: str) -> list[dict]:
    """One launch of ardlab's microbenchmark: `tool` is a timer, at thread level single, or timer@level."""
    from ardlab.bench.allreduce import comparison, run_plan
    from ardlab.comm.startup import THREAD_LEVEL_VAR
    from ardlab.driver import run_comparison

    timer, _, level = tool.partition("@")
    plan = run_plan(library_name, ranks=ranks, sizes=sizes, algorithms=[algorithm], timer=timer, progress=False,
                    env={THREAD_LEVEL_VAR: level or "single"})
    return [{"size_bytes": int(r["size_bytes"]), "iterations": int(r["iterations"]), "avg_us": float(r["avg_us"])}
            for r in run_comparison(comparison(plan))]


def applicable_sizes(library_name: str, algorithm: str, sizes: list[int], ranks: int) -> list[int]:
    """The sizes (float32) at which `algorithm` runs as itself (ardlab.bench.allreduce.why_inapplicable): both tools
    measure only those."""
    from ardlab.bench.allreduce import why_inapplicable
    from ardlab.comm.libraries import algorithm as entry

    alg = entry(library_name, algorithm)
    return [s for s in sizes if why_inapplicable(alg, ranks=ranks, nodes=1, count=s // 4) is None]


def measure(libraries: list[str], sizes: list[int], ranks: int, rounds: int, seed: int) -> list[dict]:
    from ardlab.rounds import schedule

    variants = [(lib, alg, tool) for lib in libraries for alg in ALGORITHMS[lib] for tool in TOOLS
                if tool != "imb" or lib in IMB_LIBRARIES]
    for lib in libraries:
        if lib in IMB_LIBRARIES:
            imb_env(lib, "default")  # fails before anything runs where IMB would load another library
    rows = []
    for r, order in enumerate(schedule(variants, rounds=rounds, seed=seed, group="vs_imb")):
        for position, (lib, alg, tool) in enumerate(order):
            mine = applicable_sizes(lib, alg, sizes, ranks)
            got = run_imb(lib, alg, mine, ranks) if tool == "imb" else run_ardlab(lib, alg, mine, ranks, tool)
            rows += [{"library": lib, "algorithm": alg, "tool": tool, "round": r, "position": position, **g}
                     for g in got]
            print(f"round {r + 1}/{rounds}: {lib} {alg} {tool}", flush=True)
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Per (library, algorithm, size): the medians of each tool and the per-round ratios c/IMB and python/c."""
    import pandas as pd

    df = pd.DataFrame(rows)
    wide = df.pivot_table(index=["library", "algorithm", "size_bytes", "round"], columns="tool", values="avg_us")
    out = []
    for (lib, alg, size), g in wide.groupby(level=[0, 1, 2], sort=False):
        row = {"library": lib, "algorithm": alg, "size_bytes": size, "rounds": len(g),
               "imb_us": g["imb"].median() if "imb" in g else float("nan"), "ardlab_c_us": g["c"].median(),
               "ardlab_c_loop_us": g["c-loop"].median(), "ardlab_python_us": g["python"].median(),
               "ardlab_c_multiple_us": g["c@multiple"].median()}
        for name, over in (("c_over_imb", "c"), ("c_loop_over_imb", "c-loop")):
            if "imb" in g and g["imb"].notna().all():
                row |= spread(name, g[over] / g["imb"])
            else:
                row |= {name: float("nan"), f"{name}_min": float("nan"), f"{name}_max": float("nan")}
        out.append(row | spread("python_over_c", g["python"] / g["c"])
                   | spread("multiple_over_single", g["c@multiple"] / g["c"]))
    return out


def main(argv: list[str] | None = None) -> int:
    from ardlab.bench.sizes import parse_sizes

    p = argparse.ArgumentParser(prog="python -m ardlab.bench.vs_imb", description=__doc__.splitlines()[0])
    p.add_argument("--libraries", default=",".join(ALGORITHMS))
    p.add_argument("--sizes", default="4:16M:x4")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--raw", metavar="CSV", help="also write every measured row there")
    add_round_arguments(p, rounds=5)
    a = p.parse_args(argv)
    libraries = a.libraries.split(",")
    bad = [lib for lib in libraries if lib not in ALGORITHMS]
    if bad:
        p.error(f"unknown libraries {bad}; valid: {', '.join(ALGORITHMS)}")
    rows = measure(libraries, parse_sizes(a.sizes), a.ranks, a.rounds, a.seed)
    if a.raw:
        save_rows(rows, a.raw)
    table = summarize(rows)
    import pandas as pd

    print(pd.DataFrame(table).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    save_rows(table, a.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
