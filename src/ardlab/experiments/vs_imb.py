"""Benchmark: ardlab's Allreduce microbenchmark against Intel MPI Benchmarks' IMB-MPI1 Allreduce, side by side.

    python -m ardlab.experiments.vs_imb [--rounds 5] [--sizes 4:16M:x4] [--ranks 2] [--tools imb,c,...]
                                  [--probe-cpus 0,1]
                                  [--output results/experiments/vs_imb/vs_imb.csv]
                                  [--raw results/experiments/vs_imb/vs_imb_rounds.csv]

IMB-MPI1 comes with the impi-rt wheel. It runs under Intel MPI natively and under MPICH through the MPICH ABI:
MPICH's lib first on LD_LIBRARY_PATH and MPICH's mpiexec (checked before anything runs: the libmpi.so.12 the
dynamic loader resolves for it is MPICH's). Both tools get the same forcing settings, the table's. Open MPI has
no IMB here: its reference is ardlab's compiled loop (`c`), against which its other timers are compared.

Tools (TOOLS; `--tools` picks them): IMB as ardlab runs it (`imb`, a barrier after every call), IMB flushing the
cache (`imb-off_cache`), back to back (`imb-sync0`) and with 10 times the calls per size (`imb-x10`); ardlab's
compiled loop (`c`, the default timer, a barrier before every call; `c-x10` with 10 times the calls per size), its
back-to-back variant (`c-loop`), the Python loop (`python`), the compiled loop at thread level multiple (`c@multiple`)
and with NumPy's huge pages behind its buffers (`c-huge`). ardlab runs at IMB's thread level (single: IMB-MPI1 calls
MPI_Init) unless the tool says otherwise.

Rounds: every (library, algorithm) block once per round in a seeded shuffled order, its tools next to each other
in a shuffled order too (ardlab.rounds), one launch each. Per (library, algorithm, size) it prints each tool's
median time and each tool's time over the reference's (IMB, or `c` for Open MPI): the paired ratio (the
geometric mean of the per-round ratios) with a 95% bootstrap interval over rounds (ardlab.stats.speedup_ci), and
whether `c` agrees with IMB within 10% (`agreement`). Noisy machine: only ratios measured in this one run mean anything.

The machine's windows: before and after every launch the cache-line round trip between the ranks' two CPUs is
measured (ardlab.experiments.corelatency; `--probe-cpus`), and the same ratios are made again over the rounds in which
both launches ran in a fast window and in a slow one (`*_fast`, `*_slow`): on this virtual machine the cost of
moving a cache line between the two vCPUs changes about 4x in windows of many seconds, and the spin-based
shared-memory defaults (MPICH's release_gather above all) follow it, whichever tool times them.

`--summarize RAW [RAW ...]` measures nothing: it makes the table from --raw files, several runs' rounds pooled
(each file's rounds kept apart), for points whose per-round ratios spread too wide for one run to resolve.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ardlab.experiments import add_round_arguments, save_rows

# Per library, the default and forced algorithms that run as themselves at 2 ranks on one node (Intel MPI's
# rabenseifner, shumilin_ring and knomial fall back to recursive doubling there: docs/usage.md, "Algorithm table");
# Intel MPI's last two were added after its recursive doubling stayed an exception at small sizes (docs/usage.md).
ALGORITHMS = {
    "intelmpi": ("default", "recursive_doubling", "ring", "reduce_bcast", "binomial_gather_scatter", "nreduce"),
    "mpich": ("default", "recursive_doubling", "ring", "reduce_scatter_allgather"),
    "openmpi": ("default", "recursive_doubling", "ring", "rabenseifner"),
}
IMB_LIBRARIES = ("intelmpi", "mpich")  # IMB-MPI1 is an MPICH-ABI binary
# IMB's own method and limits, with its repetitions per size made ardlab's (iterations_for: at most 1000, and 256 MiB
# reduced per size: "-iter 1000,256") and its largest size raised from 4 MiB to 16 MiB (-msglog). `-sync 1`: a
# barrier after every timed call, so that calls do not overlap (IMB_allreduce.c), ardlab's `c` method.
IMB_ARGS = ("-npmin", "{ranks}", "-iter", "1000,256", "-msglog", "2:24", "-time", "10", "-sync", "1")
# The tools, each a launch per (library, algorithm) and round: (what runs, IMB's extra arguments or ardlab's timer
# and plan options, extra environment). ardlab runs at IMB's thread level (single: IMB-MPI1 calls MPI_Init) but in
# `c@multiple`.
TOOLS = {
    "imb": ("imb", (), {}),
    # IMB with its cache flushing: each call on another part of a buffer larger than the last-level cache
    "imb-off_cache": ("imb", ("-off_cache", "-1"), {}),
    # IMB without its per-call barrier: back to back, ardlab's c-loop method
    "imb-sync0": ("imb", ("-sync", "0"), {}),
    # IMB with 10 times the timed calls per size: IMB warms up only before its first size (IMB_warm_up.c), so a
    # slow start after each size change weighs 10 times less in its mean
    "imb-x10": ("imb", ("-iter", "10000,2560"), {}),
    "c": ("ardlab", {"timer": "c"}, {}),
    # ardlab's compiled loop with 10 times the timed calls per size, IMB's imb-x10
    "c-x10": ("ardlab", {"timer": "c", "max_iterations": 10000}, {}),
    "c-loop": ("ardlab", {"timer": "c-loop"}, {}),
    "python": ("ardlab", {"timer": "python"}, {}),
    "c@multiple": ("ardlab", {"timer": "c"}, {"MPI4PY_RC_THREAD_LEVEL": "multiple"}),
    # ardlab's buffers with NumPy's huge-page advice (arrays of 4 MiB and more), which the microbenchmark turns off
    # to allocate as IMB does (the microbenchmark's launch settings, ardlab.programs)
    "c-huge": ("ardlab", {"timer": "c"}, {"NUMPY_MADVISE_HUGEPAGE": "1"}),
}
# What a run measures unless told (--tools): IMB and ardlab's default timer, the pair the agreement is about.
DEFAULT_TOOLS = ("imb", "c")
# The agreement the issue asks for: ardlab / IMB within this factor of 1.
AGREE = 0.10
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


def imb_arguments(ranks: int, extra: tuple[str, ...] = ()) -> list[str]:
    """IMB_ARGS for `ranks`, with `extra` flags (flag, value pairs) replacing or adding to them."""
    args = [a.format(ranks=ranks) for a in IMB_ARGS]
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    return args


def run_imb(library_name: str, algorithm: str, sizes: list[int], ranks: int, extra: tuple[str, ...] = ()) -> list[dict]:
    """One IMB-MPI1 Allreduce launch: a row per size (IMB's t_avg: the mean over ranks of each rank's mean)."""
    from ardlab.comm import launch
    from ardlab.comm.libraries import library

    env = imb_env(library_name, algorithm)
    with tempfile.NamedTemporaryFile("w", suffix=".msglen", delete=False) as f:
        f.write("\n".join(map(str, sizes)) + "\n")
    try:
        argv = [*library(library_name).launcher(launch.require_env(library_name), ranks), str(imb_binary()),
                "Allreduce", "-msglen", f.name, *imb_arguments(ranks, extra)]
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


def run_ardlab(library_name: str, algorithm: str, sizes: list[int], ranks: int, timer: str,
               env: dict[str, str] | None = None, max_iterations: int | None = None) -> list[dict]:
    """One launch of ardlab's microbenchmark with `timer`, at thread level single unless `env` says otherwise, at most
    `max_iterations` timed calls a size (default: the microbenchmark's)."""
    from ardlab.bench import allreduce
    from ardlab.bench.allreduce import comparison
    from ardlab.comm.startup import THREAD_LEVEL_VAR
    from ardlab.driver import run_comparison

    more = {} if max_iterations is None else {"max_iterations": max_iterations}
    plan = allreduce.plan(library_name, ranks=ranks, sizes=sizes, algorithms=[algorithm], timer=timer,
                          progress=False, env={THREAD_LEVEL_VAR: "single", **(env or {})}, **more)
    return [{"size_bytes": int(r["size_bytes"]), "iterations": int(r["iterations"]), "avg_us": float(r["avg_us"])}
            for r in run_comparison(comparison(plan))]


def run_tool(tool: str, library_name: str, algorithm: str, sizes: list[int], ranks: int) -> list[dict]:
    """One launch of a TOOLS entry."""
    kind, how, env = TOOLS[tool]
    if kind == "imb":
        return run_imb(library_name, algorithm, sizes, ranks, how)
    return run_ardlab(library_name, algorithm, sizes, ranks, env=env, **how)


def applicable_sizes(library_name: str, algorithm: str, sizes: list[int], ranks: int) -> list[int]:
    """The sizes (float32) at which `algorithm` runs as itself (ardlab.bench.allreduce.why_inapplicable): both tools
    measure only those."""
    from ardlab.bench.allreduce import why_inapplicable
    from ardlab.comm.libraries import algorithm as entry

    alg = entry(library_name, algorithm)
    return [s for s in sizes if why_inapplicable(alg, ranks=ranks, nodes=1, count=s // 4) is None]


def cross_checked(libraries: list[str], algorithms: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """The (library, algorithm) blocks a run measures: each library's ALGORITHMS, or only `algorithms` of them."""
    blocks = [(lib, alg) for lib in libraries for alg in ALGORITHMS[lib] if algorithms is None or alg in algorithms]
    unknown = sorted(set(algorithms or ()) - {alg for lib in libraries for alg in ALGORITHMS[lib]})
    if unknown or not blocks:
        raise ValueError(f"algorithms {unknown or list(algorithms or ())} are not cross-checked for "
                         f"{', '.join(libraries)}; valid: "
                         + "; ".join(f"{lib}: {', '.join(ALGORITHMS[lib])}" for lib in libraries))
    return blocks


def measure(libraries: list[str], sizes: list[int], ranks: int, rounds: int, seed: int,
            tools: tuple[str, ...] = DEFAULT_TOOLS, probe_cpus: tuple[int, int] | None = (0, 1),
            algorithms: tuple[str, ...] | None = None) -> list[dict]:
    """Every (library, algorithm, tool) once per round. A round runs the (library, algorithm) blocks in a seeded
    shuffled order and, inside a block, its tools in one too: the launches a ratio pairs run next to each other
    (seconds apart), so that the machine's drift hardly enters the ratio. With `probe_cpus`, the cache-line round
    trip between those CPUs (ardlab.experiments.corelatency) is measured right before and right after every launch and
    kept in its rows (core_rtt_before_ns, core_rtt_after_ns). `algorithms` keeps only those of each library's
    (ALGORITHMS; every name must be one of some library's)."""
    from ardlab.experiments import corelatency
    from ardlab.rounds import order, schedule

    def probe() -> float:
        return corelatency.round_trip_ns(probe_cpus) if probe_cpus else float("nan")

    blocks = cross_checked(libraries, algorithms)
    for lib in libraries:
        if lib in IMB_LIBRARIES and any(TOOLS[t][0] == "imb" for t in tools):
            imb_env(lib, "default")  # fails before anything runs where IMB would load another library
    probe()  # likewise where the probe is not built or cannot pin its CPUs
    rows = []
    for r, block_order in enumerate(schedule(blocks, rounds=rounds, seed=seed, group="vs_imb")):
        position = 0
        for lib, alg in block_order:
            mine = applicable_sizes(lib, alg, sizes, ranks)
            mine_tools = [t for t in tools if TOOLS[t][0] != "imb" or lib in IMB_LIBRARIES]
            for tool in order(mine_tools, seed=seed, group=f"vs_imb/{lib}/{alg}", round_index=r):
                before = probe()
                got = run_tool(tool, lib, alg, mine, ranks)
                after = probe()
                rows += [{"library": lib, "algorithm": alg, "tool": tool, "round": r, "position": position, **g,
                          "core_rtt_before_ns": round(before, 1), "core_rtt_after_ns": round(after, 1)}
                         for g in got]
                position += 1
                print(f"round {r + 1}/{rounds}: {lib} {alg} {tool}", flush=True)
    return rows


def _column(tool: str) -> str:
    return tool.replace("-", "_").replace("@", "_")


def with_windows(df):
    """`df` (raw rows) with each launch's `window` (ardlab.experiments.corelatency.window: fast, slow or mixed) from the
    cache-line round trips measured before and after it, against the fastest of the whole run; empty where a row has
    none (rows from before the probe)."""
    from ardlab.experiments.corelatency import window

    if "core_rtt_before_ns" not in df:
        return df.assign(window="")
    fastest = df[["core_rtt_before_ns", "core_rtt_after_ns"]].min().min()
    return df.assign(window=[window(b, a, fastest) if b == b and a == a else ""
                             for b, a in zip(df.core_rtt_before_ns, df.core_rtt_after_ns)])


def pooled_rounds(runs: list):
    """Several runs' raw rows (DataFrames) as one run's: each run's rounds numbered after the previous run's, so that
    a round still pairs only launches made seconds apart."""
    import pandas as pd

    offset, frames = 0, []
    for rows in runs:
        frames.append(rows.assign(round=rows["round"] + offset))
        offset += int(rows["round"].max()) + 1
    return pd.concat(frames, ignore_index=True)


def summarize(rows: list[dict]) -> list[dict]:
    """Per (library, algorithm, size): each tool's median time, and each tool's time over the reference's (IMB where
    the library has it, else ardlab's `c`) as the paired ratio (the geometric mean of the per-round ratios) with its
    95% bootstrap interval (ardlab.stats.speedup_ci); `agreement` says whether ardlab's `c` is within AGREE of IMB.
    Where the rows carry the cache-line probe, the same ratios again over the rounds in which both launches ran in a
    fast window
    (`*_fast`; `rounds_fast` counts those of IMB and `c`) and in a slow one (`*_slow`): the machine's windows
    (ardlab.experiments.corelatency) told apart from the tools."""
    import pandas as pd

    df = with_windows(pd.DataFrame(rows))
    keys = ["library", "algorithm", "size_bytes", "round"]
    wide = df.pivot_table(index=keys, columns="tool", values="avg_us")
    windows = df.pivot_table(index=keys, columns="tool", values="window", aggfunc="first")
    probed = bool((df.window != "").any())
    out = []
    for (lib, alg, size), g in wide.groupby(level=[0, 1, 2], sort=False):
        g = g.dropna(axis=1, how="all")
        reference = next((t for t in ("imb", "c") if t in g), None)  # no ratios where the run had neither
        row = {"library": lib, "algorithm": alg, "size_bytes": size, "rounds": len(g), "reference": reference or ""}
        row |= {f"{_column(t)}_us": g[t].median() for t in g.columns}
        row |= ratios(g, reference)
        if reference == "imb" and "c" in g:
            row["agreement"] = agreement(row["c_over_imb"], row["c_over_imb_lo"], row["c_over_imb_hi"])
        if probed and reference:
            w = windows.loc[g.index]
            for state in ("fast", "slow"):
                both = [t for t in g.columns if t != reference]
                mask = w[reference] == state
                # the paired rounds of the pair the agreement is about (IMB and `c`), else the reference's
                row[f"rounds_{state}"] = int((mask & (w["c"] == state)).sum() if "c" in w and reference != "c"
                                             else mask.sum())
                for tool in both:
                    sub = g[mask & (w[tool] == state)][[reference, tool]]
                    row |= {f"{k}_{state}": v for k, v in ratios(sub, reference, tools=[tool]).items()}
                if reference == "imb" and "c" in g:
                    r, lo, hi = (row[f"c_over_imb{x}_{state}"] for x in ("", "_lo", "_hi"))
                    row[f"agreement_{state}"] = agreement(r, lo, hi) if r == r else ""
        out.append(row)
    columns = list(dict.fromkeys(k for row in out for k in row))  # every row the same columns (Open MPI: no IMB)
    return [{k: row.get(k, "" if k.startswith("agreement") else float("nan")) for k in columns} for row in out]


def ratios(g, reference: str | None, tools=None) -> dict:
    """Each tool's time over the reference's in the paired rounds of `g` (one column a tool, one row a round):
    the geometric mean of the per-round ratios and its 95% bootstrap interval (ardlab.stats.speedup_ci: rounds
    missing either dropped)."""
    from ardlab.stats import speedup_ci

    out = {}
    for tool in tools if tools is not None else g.columns:
        if not reference or tool == reference:
            continue
        key = f"{_column(tool)}_over_{reference}"
        ratio, lo, hi = speedup_ci(g[tool], g[reference])
        out |= {key: ratio, f"{key}_lo": lo, f"{key}_hi": hi}
    return out


def agreement(ratio: float, lo: float, hi: float) -> str:
    """"within 10%" where the paired ratio is within AGREE of 1; "differs" where, besides, its whole interval
    lies outside that band (a measured difference); "not resolved" where the ratio is outside but the interval
    reaches into the band (the rounds' spread hides whether the tools differ)."""
    import math

    if abs(ratio - 1) <= AGREE:
        return f"within {AGREE:.0%}"
    if not (math.isnan(lo) or math.isnan(hi)) and (lo > 1 + AGREE or hi < 1 - AGREE):
        return "differs"
    return "not resolved"


def main(argv: list[str] | None = None) -> int:
    from ardlab.bench.sizes import parse_sizes

    p = argparse.ArgumentParser(prog="python -m ardlab.experiments.vs_imb", description=__doc__.splitlines()[0])
    p.add_argument("--libraries", default=",".join(ALGORITHMS))
    p.add_argument("--sizes", default="4:16M:x4")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--algorithms", help="only these of each library's algorithms (comma-separated; default: all "
                                        "of ALGORITHMS)")
    p.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                   help=f"what to run per (library, algorithm); valid: {', '.join(TOOLS)}")
    p.add_argument("--probe-cpus", default="0,1",
                   help="the two CPUs whose cache-line round trip is measured before and after every launch "
                        "(ardlab.experiments.corelatency; default 0,1, the ranks' CPUs on 2 cores), or 'none'")
    p.add_argument("--raw", metavar="CSV", help="also write every measured row there")
    p.add_argument("--summarize", metavar="CSV", nargs="+",
                   help="measure nothing: make the table from --raw files (several: their rounds pooled)")
    add_round_arguments(p, rounds=5)
    a = p.parse_args(argv)
    libraries = a.libraries.split(",")
    bad = [lib for lib in libraries if lib not in ALGORITHMS]
    if bad:
        p.error(f"unknown libraries {bad}; valid: {', '.join(ALGORITHMS)}")
    tools = tuple(a.tools.split(","))
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        p.error(f"unknown tools {bad}; valid: {', '.join(TOOLS)}")
    algorithms = tuple(a.algorithms.split(",")) if a.algorithms else None
    try:
        cross_checked(libraries, algorithms)
    except ValueError as e:
        p.error(str(e))
    probe_cpus = None
    if a.probe_cpus != "none":
        from ardlab.experiments.corelatency import parse_cpus

        try:
            probe_cpus = parse_cpus(a.probe_cpus)
        except ValueError as e:
            p.error(f"--probe-cpus: {e} (or 'none')")
    if a.summarize:
        import pandas as pd

        rows = pooled_rounds([pd.read_csv(path) for path in a.summarize]).to_dict("records")
    else:
        rows = measure(libraries, parse_sizes(a.sizes), a.ranks, a.rounds, a.seed, tools, probe_cpus, algorithms)
        if a.raw:
            save_rows(rows, a.raw)
    table = summarize(rows)
    import pandas as pd

    print(pd.DataFrame(table).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    save_rows(table, a.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
