"""Aggregation: the large gaps at 2 emulated nodes x 2 ranks taken apart (issue 43), from committed rows only.

    python -m ardlab.experiments.gaps [--folder results/experiments/gaps_2x2]

A gap is one algorithm's Allreduce time over another's at one size, measured by ``ardlab.experiments.link_queue`` in
interleaved rounds with the links' tbf queue at the emulated cluster's 1 ms and at a deep 30 ms. Per round r, with
t the time ratio and b the ratio of the bytes each sent per call (eth0, both nodes), the gap under the cluster's
queue factors exactly into three parts:

    t_1ms = b_30ms  x  (t_30ms / b_30ms)  x  (t_1ms / t_30ms)
            bytes      beyond the bytes     the shallow queue (drops, TCP's resends and back-off)

and, over rounds, the geometric mean of a product is the product of the geometric means, so the parts' point
estimates multiply to the gap's. Each part has its own paired bootstrap interval over rounds (ardlab.stats).
"Beyond the bytes" holds what the bytes and the queue leave: the algorithm's structure (a root whose link carries
every vector in turn), latency, and the ranks time-sharing the cores on the network path. Where a run measured it
with wait mode off (busy polling on the shared cores), that setting's gap is taken apart beside the one with wait mode
on (the cluster's setting on time-shared cores); and the one-node run on a machine with a core per rank
(``ardlab.experiments.core_per_rank``, no network) gives time-sharing's share there: its "shared over spread" rows.

Inputs (each a ``*_rounds.csv`` of link_queue, one row a launch's size): the pairs in ``GAPS``. Output:
``decomposition.csv`` (tidy: one row a part) and ``decomposition.md`` (one row a gap, its parts side by side); and
``training_bound.{csv,md}``: for the committed cluster runs' Intel MPI training at 2 x 2, what the generic file's
doubled bytes alone would make of the default's step (``training_bound``), beside what was measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ardlab.results import atomic_open, save_frame

# (rounds file, library, numerator, denominator, what the gap is): the gaps the issue names.
GAPS = [
    ("queue_file_waitmode_rounds.csv", "intelmpi", "default", "rabenseifner", "Intel MPI's default over rabenseifner"),
    ("queue_file_250mbit_rounds.csv", "intelmpi", "default", "rabenseifner", "Intel MPI's default over rabenseifner"),
    ("openmpi_2x2_rounds.csv", "openmpi", "basic_linear", "default", "Open MPI's basic_linear over its default"),
    ("openmpi_2x2_rounds.csv", "openmpi", "ring", "default", "Open MPI's ring over its default (coll/han)"),
    ("mpich_2x2_rounds.csv", "mpich", "tree", "default", "MPICH's tree over its default"),
]
SHALLOW, DEEP = "1ms", "30ms"
PARTS = ["gap", "bytes", "beyond the bytes", "the shallow queue"]
WAIT_MODE_OFF = "I_MPI_WAIT_MODE=0"
CORE_PER_RANK = "core_per_rank/h200-b-6rounds/fallback_microbench_ratio.csv"


def setting(settings: str, tuning_file: str) -> str:
    """A variant's label: the tuning file the rows loaded and, where set, wait mode off."""
    label = tuning_file or "builtin"
    return f"{label}, wait mode off" if WAIT_MODE_OFF in str(settings) else label


def side(lower: float, upper: float) -> str:
    """Where a factor's interval lies: "above 1", "below 1", "holds 1", or "too few rounds" without one."""
    if lower != lower or upper != upper:
        return "too few rounds"
    return "above 1" if lower > 1 else "below 1" if upper < 1 else "holds 1"


def _part(name: str, a, b, **extra) -> dict:
    from ardlab.stats import speedup_ci

    point, lo, hi = speedup_ci(a, b)
    return {"part": name, "factor": point, "ci_low": lo, "ci_high": hi, "interval": side(lo, hi), **extra}


def decompose(rounds, library: str, numerator: str, denominator: str, gap: str) -> list[dict]:
    """The parts of `numerator`'s time over `denominator`'s per link rate, setting and size (the module's
    docstring); each row with the drops and retransmitted segments per call of both algorithms under each queue."""
    import pandas as pd

    r = rounds[rounds.library == library].copy()
    r["setting"] = [setting(s, f) for s, f in zip(r.settings, r.mpi_tuning_file.fillna(""))]
    out = []
    for (rate, label, size), g in r.groupby(["link_rate", "setting", "size_bytes"], sort=True):
        piv = g.pivot_table(index="round", columns=["queue", "algorithm"], aggfunc="first",
                            values=["avg_us", "net_tx_bytes_per_call", "drops_per_call", "retransmits_per_call"])
        need = [(q, a) for q in (SHALLOW, DEEP) for a in (numerator, denominator)]
        if any(k not in piv["avg_us"].columns for k in need):
            continue
        piv = piv.dropna(subset=[("avg_us", q, a) for q, a in need])
        t = {q: piv["avg_us"][q][numerator] / piv["avg_us"][q][denominator] for q in (SHALLOW, DEEP)}
        nbytes = pd.to_numeric(piv["net_tx_bytes_per_call"][DEEP][numerator])
        dbytes = pd.to_numeric(piv["net_tx_bytes_per_call"][DEEP][denominator])
        b = nbytes / dbytes
        where = {"gap": gap, "library": library, "numerator": numerator, "denominator": denominator,
                 "link_rate": rate, "setting": label, "size_bytes": int(size), "rounds": len(piv)}
        losses = {f"{a}_{kind}_per_call_{q}": float(piv[f"{kind}_per_call"][q][a].median())
                  for q in (SHALLOW, DEEP) for a in (numerator, denominator) for kind in ("drops", "retransmits")}
        one = pd.Series(1.0, index=b.index)
        out += [_part("gap", piv["avg_us"][SHALLOW][numerator], piv["avg_us"][SHALLOW][denominator], **where,
                      **losses),
                _part("bytes", b, one, **where),
                _part("beyond the bytes", t[DEEP], b, **where),
                _part("the shallow queue", t[SHALLOW], t[DEEP], **where)]
    return out


def decomposition(folder: Path):
    """Every gap of GAPS from the rounds under `folder`, and time-sharing's share on one node where the core-per-rank
    run is there: the tidy table."""
    import pandas as pd

    rows = []
    for name, library, numerator, denominator, gap in GAPS:
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the rounds of {gap} are not there "
                                    "(results/experiments/gaps_2x2/README.md has the commands that make them)")
        rounds = pd.read_csv(path, keep_default_na=False, na_values=[""])
        rows += decompose(rounds, library, numerator, denominator, gap)
    shared = folder / CORE_PER_RANK
    if shared.is_file():
        t = pd.read_csv(shared, keep_default_na=False, na_values=[""])
        for r in t[t.cores == "shared over spread"].itertuples():
            rows.append({"part": "time-sharing, one node without network", "factor": r.default_over_rabenseifner,
                         "ci_low": r.ci_low, "ci_high": r.ci_high, "interval": side(r.ci_low, r.ci_high),
                         "gap": "Intel MPI's default over rabenseifner", "library": "intelmpi",
                         "numerator": "default", "denominator": "rabenseifner", "link_rate": "none (1 node x 8 ranks)",
                         "setting": r.file, "size_bytes": int(r.size_bytes), "rounds": int(r.rounds)})
    return pd.DataFrame(rows)


def training_bound(run: Path, bytes_ratio: float, library: str = "intelmpi", selection: str = "tuned"):
    """What the bytes alone would leave of a training gap at 2 x 2 on a cluster whose switches never drop (no
    shallow queue, nothing beyond the bytes): per framework and model of `run`'s groups with 2 ranks a node, the
    selection's median compute and Allreduce time a step, and the default's step if its Allreduce took `bytes_ratio`
    times the selection's: (compute + bytes_ratio x allreduce) / (compute + allreduce), an upper bound (it assumes
    every call of the step is at a size where the bytes double, and wire-bound). The measured default-over-selection
    ratio (img/s, medians) beside it."""
    import pandas as pd

    from ardlab.analysis import read

    files = sorted(run.glob("raw/train/*/n2-r4/*.csv")) + sorted(run.glob("raw/horovod/*/n2-r4/*.csv"))
    if not files:
        raise FileNotFoundError(f"{run}: no training rows at 2 nodes x 2 ranks (raw/train/*/n2-r4, "
                                "raw/horovod/*/n2-r4)")
    t = read.train([str(f) for f in files])
    t = t[t.library == library]
    out = []
    for (framework, model), g in t.groupby(["framework", "model"], sort=True):
        sel, dflt = g[g.algorithm == selection], g[g.algorithm == "default"]
        if sel.empty or dflt.empty:
            continue
        c, a = float(sel.compute_s.median()), float(sel.allreduce_s.median())
        out.append({"run": run.name, "framework": framework, "model": model, "library": library,
                    "mpi_tuning_file": ";".join(sorted(set(g.mpi_tuning_file.astype(str)))),
                    "threads_per_core": float(g.threads_per_core.max()),
                    f"{selection}_compute_s": c, f"{selection}_allreduce_s": a, "bytes_ratio": bytes_ratio,
                    "bytes_only_bound": (c + bytes_ratio * a) / (c + a),
                    "measured_default_over_selection": float(sel.img_per_s.median() / dflt.img_per_s.median())})
    return pd.DataFrame(out)


def markdown(t) -> str:
    """One row a gap (rate, setting, size): the gap and its parts, each with its interval, and the drops and
    retransmitted segments per call of both algorithms under the shallow and the deep queue."""
    from ardlab.results import markdown as table

    def cell(r) -> str:
        """A factor with its interval, bold where the interval excludes 1 (a byte ratio within 1% of 1 never)."""
        if r is None:
            return ""
        text = f"{r.factor:.2f}x" if r.ci_low != r.ci_low else f"{r.factor:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}]"
        trivial = r.part == "bytes" and abs(r.factor - 1) < 0.01
        return f"**{text}**" if r.interval in ("above 1", "below 1") and not trivial else text

    keys = ["gap", "link_rate", "setting", "size_bytes"]
    rows = []
    for key, g in t.groupby(keys, sort=False):
        parts = {r.part: r for r in g.itertuples()}
        gap = parts.get("gap")
        if gap is None:
            continue
        n, d = gap.numerator, gap.denominator
        def losses(q: str) -> str:
            got = {f"{a}_{k}": getattr(gap, f"{a}_{k}_per_call_{q}") for a in (n, d) for k in ("drops", "retransmits")}
            return (f"{got[n + '_drops']:.0f} / {got[d + '_drops']:.0f}; "
                    f"{got[n + '_retransmits']:.2f} / {got[d + '_retransmits']:.2f}")

        rows.append([key[0], key[1], key[2], f"{key[3] >> 10} KiB", gap.rounds,
                     *(cell(parts.get(p)) for p in PARTS), losses(SHALLOW), losses(DEEP)])
    columns = ["gap", "link rate", "tuning file / setting", "size", "rounds", "gap (1 ms queue)", "bytes",
               "beyond the bytes (30 ms queue)", "the shallow queue (1 ms over 30 ms)",
               "drops; resent segments a call, 1 ms (num / den)", "the same, 30 ms"]
    text = table(columns, rows)
    shared = t[t.part == "time-sharing, one node without network"]
    if not shared.empty:
        text += ("\n\nTime-sharing's share where no network is involved (`core_per_rank/h200-b-6rounds`: 1 node x 8 "
                 "ranks, two ranks a core over one, the default-over-rabenseifner ratio):\n\n")
        text += table(["tuning file", "size", "rounds", "shared over spread"],
                      [[r.setting, f"{r.size_bytes >> 10} KiB", r.rounds, cell(r)] for r in shared.itertuples()])
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folder", default="results/experiments/gaps_2x2", help="where the rounds are, and the tables go")
    p.add_argument("--runs", default="results/runs/cluster,results/runs/cluster-rerun,results/runs/cluster-250mbit",
                   help="cluster runs whose 2 x 2 training the bytes-only bound is computed for (comma-separated)")
    a = p.parse_args(argv)
    import pandas as pd

    folder = Path(a.folder)
    t = decomposition(folder)
    text = markdown(t)
    with atomic_open(folder / "decomposition.csv", "w", newline="") as f:
        t.to_csv(f, index=False, float_format="%.6g")
    with atomic_open(folder / "decomposition.md", "w") as f:
        f.write(text)
    print(text)
    generic = t[(t.library == "intelmpi") & (t.part == "bytes") & t.setting.str.startswith("tuning_generic")]
    ratio = float(generic[generic.size_bytes >= 1 << 20].factor.max())
    bound = pd.concat([training_bound(Path(r), ratio) for r in filter(None, a.runs.split(","))], ignore_index=True)
    save_frame(bound, folder / "training_bound")
    print(bound.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
