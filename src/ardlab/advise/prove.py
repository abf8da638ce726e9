"""Each pick proven to run what it names, by the library's own behaviour (``ardlab.comm.probe``), before the training
check: a forced setting that silently runs something else is reported and the next candidate is taken.

Open MPI and Intel MPI: every rank under gdb with a breakpoint on each internal algorithm function of the table; the
pick is proven when its own function is hit by every call. MPICH (a stripped build): with its fallback reports
printed, the pick is proven when the library reports no fallback for it at the job's dominant call size (the size
that carries most of a step's bytes). The probe runs on the job's ranks and nodes, with the job's launcher.
"""

from __future__ import annotations

from collections.abc import Callable

PROVEN, FALLBACK, UNSEEN = "proven", "silent fallback", "not observed"
CALLS = 3


def dominant_count(calls) -> int:
    """Elements (float32) of the summed size that carries the most bytes of a step."""
    sums = calls[calls["op"] == "sum"]
    share = sums["bytes"] * sums["calls_per_step"]
    return max(1, int(sums.loc[share.idxmax(), "bytes"]) // 4)


def verdict(library_name: str, algorithm: str, hits) -> str:
    """PROVEN, FALLBACK or UNSEEN from a probe's hits (see the module's docstring)."""
    from ardlab.comm.libraries import library
    from ardlab.comm.probe import symbols

    if not symbols(library_name):  # MPICH: fallback reports
        return FALLBACK if hits.get(f"fallback:{algorithm}") else PROVEN
    symbol = library(library_name).algorithms[algorithm].symbol
    if symbol and hits.get(symbol, 0) >= CALLS:
        return PROVEN
    return FALLBACK if hits else UNSEEN


def probe_pick(job, library_name: str, algorithm: str, count: int) -> tuple[str, dict]:
    """(verdict, hits) of `algorithm` forced in `library_name` on the job's ranks, `count` floats a call."""
    from ardlab.comm.probe import probe

    hits = probe(library_name, algorithm, ranks=job.ranks, nodes=job.nodes, launcher=job.launcher, count=count,
                 calls=CALLS, timeout=job.timeout_s)
    return verdict(library_name, algorithm, hits), dict(hits)


def proven_picks(ranked: dict[str, list[str]], prover: Callable[[str, str], tuple[str, dict]]
                 ) -> tuple[dict[str, str], list[dict]]:
    """Per library, the first of its candidates (fastest predicted first) that `prover` proves, the default where none
    before it is; and every probe's record. The default needs no proof (nothing is forced)."""
    from ardlab.comm.libraries import DEFAULT

    picks, log = {}, []
    for lib, names in ranked.items():
        picks[lib] = DEFAULT
        for name in names:
            if name == DEFAULT:
                break
            result, hits = prover(lib, name)
            log.append({"library": lib, "algorithm": name, "proof": result,
                        "hits": ";".join(f"{k}={v}" for k, v in sorted(hits.items()))})
            if result == PROVEN:
                picks[lib] = name
                break
    return picks, log
