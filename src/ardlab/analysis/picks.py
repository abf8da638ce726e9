"""The best and the worst Allreduce algorithm for one model's training, picked from the microbenchmark.

The study selects algorithms from a microbenchmark and then trains with the selection. A training step makes many
Allreduce calls of many sizes (``ardlab.bench.callsizes`` counts them), so an algorithm's worth for a model is
its predicted Allreduce time per step: the sum over the step's calls of the microbenchmark's time at each call's
size (median over rounds; between measured sizes interpolated in log-log; below the smallest, the smallest's time;
above the largest, the largest's time scaled by size, as a bandwidth-bound call grows). The pick file lists every
measured forced algorithm of every library with that prediction, and marks the fastest ``best`` and the slowest
``worst`` per library (the default is listed too, never picked: it is measured anyway; an algorithm the table says
runs the default here, such as MPICH's ``ccl`` on the PyPI build, is left out).

    ardlab pick --bench raw/microbench/n2-r4/round*.csv --calls callsizes.csv --output picks/x.csv
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ardlab.comm.libraries import DEFAULT, OWN_PREFIX, Algorithm, library
from ardlab.results import PICKS, picked  # noqa: F401  (what a pick file holds is read there: the driver's layer)

_NONE = Algorithm("", "native", "")

COLUMNS = ["library", "algorithm", "predicted_us_per_step", "pick", "calls_per_step", "sizes_measured",
           "ranks", "nodes"]


def time_at(sizes: np.ndarray, times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Microseconds at the byte counts `at`, from measured (size, time) pairs (see the module's docstring)."""
    order = np.argsort(sizes)
    sizes, times = np.asarray(sizes, float)[order], np.asarray(times, float)[order]
    at = np.maximum(np.asarray(at, float), 1.0)
    out = np.exp(np.interp(np.log(at), np.log(sizes), np.log(times)))
    above = at > sizes[-1]
    out[above] = times[-1] * at[above] / sizes[-1]
    return out


def predict(bench: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Predicted Allreduce microseconds per training step of every native algorithm in `bench` (one scale), for
    the calls in `calls` (columns bytes and calls_per_step); the `pick` column marks each library's best and worst
    forced algorithm (both, ``best;worst``, where a library has one)."""
    scales = bench[["ranks", "nodes"]].drop_duplicates()
    if len(scales) != 1:
        raise ValueError(f"microbenchmark rows of {len(scales)} scales (ranks, nodes); pick from one")
    native = bench[~bench["algorithm"].str.startswith(OWN_PREFIX)]
    native = native[[not library(lib).algorithms.get(alg, _NONE).runs_default
                     for lib, alg in zip(native["library"], native["algorithm"])]]
    if native.empty:
        raise ValueError("no microbenchmark rows of the libraries' own algorithms to pick from")
    calls = calls.groupby("bytes", as_index=False)["calls_per_step"].sum()
    med = native.groupby(["library", "algorithm", "size_bytes"], as_index=False)["avg_us"].median()
    rows = []
    for (lib, alg), g in med.groupby(["library", "algorithm"]):
        t = time_at(g["size_bytes"].to_numpy(), g["avg_us"].to_numpy(), calls["bytes"].to_numpy())
        rows.append({"library": lib, "algorithm": alg,
                     "predicted_us_per_step": float((t * calls["calls_per_step"].to_numpy()).sum()),
                     "calls_per_step": float(calls["calls_per_step"].sum()), "sizes_measured": len(g),
                     "ranks": int(scales["ranks"].iloc[0]), "nodes": int(scales["nodes"].iloc[0])})
    out = pd.DataFrame(rows)
    labels: dict[int, list[str]] = {}
    for lib, g in out[out["algorithm"] != DEFAULT].groupby("library"):
        labels.setdefault(g["predicted_us_per_step"].idxmin(), []).append("best")
        labels.setdefault(g["predicted_us_per_step"].idxmax(), []).append("worst")
    out["pick"] = [";".join(labels.get(i, [])) for i in out.index]  # a library's only forced one is both
    return out[COLUMNS].sort_values(["library", "predicted_us_per_step"]).reset_index(drop=True)


