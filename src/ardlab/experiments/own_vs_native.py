"""Benchmark: our ring and Rabenseifner against each library's best native algorithm, side by side.

    python -m ardlab.experiments.own_vs_native [--libraries mpich,openmpi,intelmpi] [--ranks 2] [--repeat 3]

For every library: all algorithms at the same sizes (4 B and 1-16 MiB) in paired, interleaved rounds;
per size the median time of each algorithm. Prints, per library, (a) own / best-native time at >= 1 MiB
(target <= 1.25) and (b) our per-call overhead at 4 B over the best native (target < 30 us).
Noisy machine: only ratios measured in this one run mean anything.
"""

from __future__ import annotations

import argparse
import sys

from ardlab.comm.libraries import LIBRARIES

OURS = ("own_ring", "own_rabenseifner")
SIZES = [4, 1 << 20, 4 << 20, 16 << 20]


def run(libraries: list[str], ranks: int, repeat: int):
    import pandas as pd

    from ardlab.bench.allreduce import comparison, plan
    from ardlab.driver import run_comparison

    frames = []
    for lib in libraries:  # paired rounds: every algorithm of the library once per round, in a shuffled order
        rows = run_comparison(comparison(plan(lib, sweep=True, sizes=SIZES, ranks=ranks, progress=False),
                                         rounds=repeat))
        frames.append(pd.DataFrame(rows).astype({"size_bytes": int, "avg_us": float}))
    return pd.concat(frames)


def summarize(df):
    med = df.groupby(["library", "algorithm", "implementation", "size_bytes"], as_index=False)["avg_us"].median()
    rows = []
    for (lib, size), g in med.groupby(["library", "size_bytes"]):
        native = g[g.implementation == "native"]
        best = native.loc[native.avg_us.idxmin()]
        for ours in OURS:
            mine = g[g.algorithm == ours].avg_us.iloc[0]
            rows.append({"library": lib, "size_bytes": size, "own": ours, "own_us": mine,
                         "best_native": best.algorithm, "best_native_us": best.avg_us,
                         "ratio_own_over_best": mine / best.avg_us, "overhead_us": mine - best.avg_us})
    import pandas as pd

    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--libraries", default=",".join(LIBRARIES))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--csv", help="also write the summary here")
    a = p.parse_args(argv)
    table = summarize(run(a.libraries.split(","), a.ranks, a.repeat))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    big = table[table.size_bytes >= 1 << 20]
    small = table[table.size_bytes == 4]
    print(f"\nown/best-native at >= 1 MiB: worst {big.ratio_own_over_best.max():.2f}x, "
          f"median {big.ratio_own_over_best.median():.2f}x (target <= 1.25x)")
    print(f"overhead at 4 B: worst {small.overhead_us.max():.1f} us, median {small.overhead_us.median():.1f} us "
          f"(target < 30 us)")
    if a.csv:
        table.to_csv(a.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
