"""Each pick proven to run what it names, by the library's own behaviour (``ardlab.comm.probe``), before the training
check: a forced setting that silently runs something else is reported and the next candidate is taken.

Open MPI and Intel MPI: every rank under gdb with a breakpoint on each internal algorithm function of the table, each
hit kept with the rank it came from and that rank's host. A proof is positive evidence, read against what the table
says the algorithm runs and where (``verdict``):

- an algorithm with a function of its own (``Algorithm.symbol``) is proven when that function ran on every rank at
  every call; a "silent fallback" when another algorithm's function ran instead (on every rank, or on the node
  leaders alone: a two-level algorithm);
- a two-level algorithm (``Algorithm.two_level``: an intra-node part on every rank, an inter-node part on each node's
  leader) has no function of its own here: its pattern is a flat algorithm's function on the node leaders alone,
  which tells it from a flat fallback but not from the library's other two-level algorithms, so it "cannot be
  proven here" (with that said); the same function on every rank where some node has several is a silent fallback;
- where nothing the library runs can be seen (no function of its own, and no other algorithm's ran), it "cannot be
  proven here" either.

"Cannot be proven here" is a verdict of its own: such a candidate may be picked, and the answer says beside it that
its proof could not be made. MPICH: its wheel's libmpi is stripped (no internal function to break on) and exposes no
MPI_T performance variable or event (0 of each, counted through MPI_T on this build), so nothing it runs can be seen;
with its fallback reports printed, a forced algorithm it reports falling back from is a silent fallback, and one it
reports nothing for "cannot be proven here" (the absence of a message is no positive evidence), probed at the job's
dominant call size (the size that carries most of a step's bytes). The probe runs on the job's ranks and nodes, with
the job's launcher.
"""

from __future__ import annotations

from collections.abc import Callable

PROVEN, FALLBACK, CANNOT = "proven", "silent fallback", "cannot be proven here"
PICKABLE = (PROVEN, CANNOT)  # the verdicts a candidate may be picked under (the answer shows which)
CALLS = 3


def dominant_count(calls) -> int:
    """Elements (float32) of the summed size that carries the most bytes of a step."""
    sums = calls[calls["op"] == "sum"]
    share = sums["bytes"] * sums["calls_per_step"]
    return max(1, int(sums.loc[share.idxmax(), "bytes"]) // 4)


def _name_of(library_name: str, symbol: str) -> str:
    """The table's algorithm whose function `symbol` is (the function itself where none is)."""
    from ardlab.comm.libraries import library

    return next((n for n, a in library(library_name).algorithms.items() if a.symbol == symbol), symbol)


def verdict(library_name: str, algorithm: str, evidence, ranks: int, calls: int = CALLS) -> tuple[str, str]:
    """(PROVEN, FALLBACK or CANNOT, why in words) from a probe's Evidence (``ardlab.comm.probe.Evidence``) of
    `ranks` ranks making `calls` calls each (see the module's docstring)."""
    from ardlab.comm.libraries import library
    from ardlab.comm.probe import symbols

    if not symbols(library_name):  # MPICH: fallback reports
        if evidence.totals().get(f"fallback:{algorithm}"):
            return FALLBACK, "the library reported that it cannot apply it"
        return CANNOT, ("no fallback reported, but no function or MPI_T variable of this build shows what ran (the "
                        "absence of a message, not positive evidence)")
    alg = library(library_name).algorithms[algorithm]
    everyone = set(range(ranks))
    unknown = everyone - set(evidence.hosts)
    if unknown:
        raise ValueError(f"the probe of {algorithm} does not say where ranks {sorted(unknown)} ran")
    leaders = evidence.leaders()
    shared = leaders != everyone  # some node holds several ranks
    seen = {sym: evidence.ranks_hitting(sym, calls) for c in evidence.hits.values() for sym in c}
    on_all = sorted(sym for sym, where in seen.items() if where == everyone)
    on_leaders = sorted(sym for sym, where in seen.items() if where == leaders and shared)
    followers_quiet = not any(evidence.hits.get(r) for r in everyone - leaders)
    if alg.symbol and alg.symbol in on_all:
        return PROVEN, f"{alg.symbol} on all {ranks} ranks at every call"
    if alg.symbol and alg.symbol in seen:
        where = "the node leaders alone" if alg.symbol in on_leaders else f"ranks {sorted(seen[alg.symbol])}"
        return FALLBACK, f"{alg.symbol} ran on {where}, not on all {ranks} ranks"
    if on_all:
        ran = _name_of(library_name, on_all[0])
        if alg.two_level and not shared:
            return CANNOT, (f"{on_all[0]} on every rank: at one rank a node a two-level algorithm is its inter-node "
                            f"part alone, as {ran} forced would look")
        return FALLBACK, f"runs {ran} ({on_all[0]} on all {ranks} ranks)"
    if on_leaders and followers_quiet:
        if alg.two_level:
            return CANNOT, (f"a two-level pattern: {on_leaders[0]} on the {len(leaders)} node leaders alone, not a "
                            "flat fallback; its intra-node part has no function to observe, so which two-level "
                            "algorithm ran cannot be told")
        return FALLBACK, f"a two-level algorithm ran ({on_leaders[0]} on the node leaders alone)"
    if not seen:
        return CANNOT, ("no function of its own to observe, and no other algorithm's ran" if not alg.symbol else
                        f"{alg.symbol} was never hit, nor any other algorithm's function")
    return FALLBACK, "other algorithms' functions ran: " + ", ".join(
        f"{sym} on ranks {sorted(where)}" for sym, where in sorted(seen.items()))


def probe_pick(job, library_name: str, algorithm: str, count: int) -> tuple[str, dict]:
    """(verdict, record) of `algorithm` forced in `library_name` on the job's ranks, `count` floats a call; the
    record holds why, and the hits per rank (``rank:symbol=hits``; MPICH's reports under rank -1)."""
    from ardlab.comm.probe import probe_ranks

    evidence = probe_ranks(library_name, algorithm, ranks=job.ranks, nodes=job.nodes, launcher=job.launcher,
                           count=count, calls=CALLS, timeout=job.timeout_s)
    result, why = verdict(library_name, algorithm, evidence, job.ranks)
    hits = {f"{rank}:{sym}": n for rank, c in sorted(evidence.hits.items()) for sym, n in sorted(c.items())}
    return result, {"why": why, "hits": hits}


def probe_tuned(job, library_name: str, path: str, algorithm: str, count: int) -> str:
    """The verdict of `algorithm` with the tuned file `path` in force (the library selecting from it, nothing forced)
    at `count` floats a call, a size in the file's range that names `algorithm`: whether the file runs what it says
    there."""
    from ardlab.comm.libraries import library
    from ardlab.comm.probe import probe_ranks

    evidence = probe_ranks(library_name, "default", ranks=job.ranks, nodes=job.nodes, launcher=job.launcher,
                           count=count, calls=CALLS, timeout=job.timeout_s,
                           extra_env=library(library_name).tuned_env(path))
    return verdict(library_name, algorithm, evidence, job.ranks)[0]


def proven_picks(ranked: dict[str, list[str]], prover: Callable[[str, str], tuple[str, dict]]
                 ) -> tuple[dict[str, str], list[dict]]:
    """Per library, the first of its candidates (fastest predicted first) that `prover` proves or cannot prove (the
    answer says which: ``PICKABLE``), the default where none before it is; and every probe's record. The default
    needs no proof (nothing is forced)."""
    from ardlab.comm.libraries import DEFAULT

    picks, log = {}, []
    for lib, names in ranked.items():
        picks[lib] = DEFAULT
        for name in names:
            if name == DEFAULT:
                break
            result, record = prover(lib, name)
            log.append({"library": lib, "algorithm": name, "proof": result, "why": record.get("why", ""),
                        "hits": ";".join(f"{k}={v}" for k, v in sorted(record.get("hits", {}).items()))})
            if result in PICKABLE:
                picks[lib] = name
                break
    return picks, log
