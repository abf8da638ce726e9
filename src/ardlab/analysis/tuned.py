"""Tuned selection files: make each library itself choose the best measured Allreduce per message size.

From microbenchmark rows (the library's forced algorithms that a selection file can name, one rank count;
not 'default', not ours) the best algorithm per measured size is found, neighbouring sizes with the same winner merge
into ranges, and the ranges are written in the library's own format. ``best_ranges`` (the workflow's `tune` rule)
takes the lowest median over rounds; ``tested_ranges`` (``ardlab advise``) a winner only where a paired test over the
rounds says it beat the default beyond noise, leaving the range to the library's own selection elsewhere. Formats:

- Open MPI: a coll/tuned dynamic rules file (``OMPI_MCA_coll_tuned_dynamic_rules_filename``);
- Intel MPI: an ``I_MPI_ADJUST_ALLREDUCE`` value ``id:lo-hi;...`` (the file holds the value);
- MPICH: a JSON selection tree (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``). It replaces MPICH's whole
  built-in tree, so the library's own tree is read from its libmpi and only Allreduce (commutative ops, this
  communicator size and smaller) is replaced.

A range switches algorithm just above the last size measured for the smaller one. The ranges are also written
beside the file as a table (``ardlab.results.ranges_path``). Which settings use the file
is in the table (``Library.tuning_env``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.comm.libraries import DEFAULT, OMPI_SEGMENT_VAR, library
from ardlab.results import RANGES_COLUMNS, atomic_open, ranges_path, scale_name, write_csv

MAX_BYTES = 2**31 - 1

# The name of a tuned selection file in its folder (the workflow's `tune` rule matches it with wildcards); the scale
# is the one of the microbenchmark it comes from: r<ranks> on one node, n<nodes>-r<ranks> across nodes.
FILE_NAME = "{library}-{scale}{suffix}"


def path(folder: str | Path, library_name: str, ranks: int, nodes: int = 1) -> Path:
    """Where the tuned selection file of `library_name` for `ranks` ranks on `nodes` nodes lives in `folder`."""
    return Path(folder) / FILE_NAME.format(library=library_name, scale=scale_name(ranks, nodes),
                                           suffix=library(library_name).tuning_suffix)


@dataclass(frozen=True)
class Range:
    lo: int  # bytes, inclusive
    hi: int  # bytes, inclusive (MAX_BYTES for the last)
    algorithm: str


def best_ranges(df: pd.DataFrame, library_name: str, ranks: int) -> list[Range]:
    """Winner per size among the library's forced native algorithms at `ranks`, merged into ranges."""
    lib = library(library_name)
    candidates = [n for n, a in lib.algorithms.items() if n != DEFAULT and a.selectable]
    sel = df[(df.library == library_name) & (df.ranks == ranks) & df.algorithm.isin(candidates)]
    if sel.empty:
        raise ValueError(f"no {lib.display} measurements of forced algorithms at {ranks} ranks to tune from "
                         f"(candidates: {', '.join(candidates)})")
    med = sel.groupby(["size_bytes", "algorithm"]).avg_us.median().reset_index()
    winners = med.loc[med.groupby("size_bytes").avg_us.idxmin()]
    return merge_ranges(zip(winners.size_bytes, winners.algorithm))


def tested_ranges(df: pd.DataFrame, library_name: str, ranks: int, confidence: float = 0.95) -> list[Range]:
    """Winner per size by a paired test over the rounds, merged into ranges: at each size the forced algorithm with
    the highest geometric-mean speedup over the library's default (paired by round), named only where that speedup
    is beyond noise (the lower end of its t interval above 1, at level 1 - (1 - confidence) / k for the largest of
    the k algorithms measured there: ``ardlab.stats.max_adjusted_ci``; only one measured in ``MIN_ROUNDS`` rounds or
    more can win: the race may have dropped others earlier); elsewhere the range is left to the library's own
    selection (DEFAULT). A library whose file cannot leave a range to its own selection (no
    ``Library.default_selection_value``: Intel MPI) gets the leader there, when it is within noise of the default
    (not slower beyond noise). `df` needs a ``round`` column. ValueError where no size has a winner (a file would
    only restate the default), or where such a library's default beat every forced algorithm at a size beyond noise
    or none was measured in enough rounds there."""
    from ardlab.stats import MIN_ROUNDS, max_adjusted_ci

    lib = library(library_name)
    candidates = [n for n, a in lib.algorithms.items() if n != DEFAULT and a.selectable]
    sel = df[(df.library == library_name) & (df.ranks == ranks)]
    forced = sel[sel.algorithm.isin(candidates)]
    if forced.empty:
        raise ValueError(f"no {lib.display} measurements of forced algorithms at {ranks} ranks to tune from "
                         f"(candidates: {', '.join(candidates)})")
    times = sel.pivot_table(index="round", columns=["size_bytes", "algorithm"], values="avg_us", aggfunc="median")
    winners = []
    for size in sorted({int(s) for s in sel.size_bytes}):
        by = times[size] if size in times.columns.get_level_values(0) else None
        if by is None or DEFAULT not in by:
            raise ValueError(f"no {lib.display} default measured at {size} bytes to test the forced algorithms "
                             "against")
        base = by[DEFAULT]
        tested = {}
        for alg in (a for a in by.columns if a in candidates):
            both = base.notna() & by[alg].notna()
            tested[alg] = (base[both].to_numpy(), by[alg][both].to_numpy())
        best = DEFAULT
        # a winner needs an interval: measured in MIN_ROUNDS rounds at least (one the race dropped early has fewer)
        speedups = {a: float(np.exp(np.mean(np.log(b / v)))) for a, (b, v) in tested.items() if len(b) >= MIN_ROUNDS}
        if speedups:
            leader = max(speedups, key=speedups.get)
            _, low, high = max_adjusted_ci(*tested[leader], len(tested), confidence)
            if low > 1:
                best = leader
            elif not lib.default_selection_value:
                if high < 1:
                    raise ValueError(f"{lib.display}'s default beat every forced algorithm at {size} bytes beyond "
                                     "noise, and its selection file cannot leave a range to its own selection")
                best = leader  # within noise of the default: the file must name an algorithm
        elif not lib.default_selection_value and tested:
            raise ValueError(f"no forced {lib.display} algorithm measured in {MIN_ROUNDS} rounds at {size} bytes, and "
                             "its selection file cannot leave a range to its own selection")
        winners.append((size, best))
    if all(alg == DEFAULT for _, alg in winners):
        raise ValueError(f"no size where a forced {lib.display} algorithm is faster than its default beyond noise "
                         f"at {ranks} ranks")
    return merge_ranges(winners)


def read_ranges(selection_file: str | Path) -> list[Range]:
    """The ranges of a tuned selection file, from the table written beside it (``ardlab.results.ranges_path``)."""
    import csv

    table = ranges_path(selection_file)
    if not table.is_file():
        raise FileNotFoundError(f"{table} (the ranges of tuned file {selection_file}) does not exist: make the tuned "
                                "file with `ardlab tune`, which writes both")
    with open(table, newline="") as f:
        return [Range(int(r["lo_bytes"]), int(r["hi_bytes"]), r["algorithm"]) for r in csv.DictReader(f)]


def merge_ranges(winners) -> list[Range]:
    """(size, best algorithm) pairs -> ranges: neighbouring sizes with the same winner merge, each range ends
    at the last size its algorithm won, and the last range is open (MAX_BYTES)."""
    ranges: list[Range] = []
    lo = 0
    for size, alg in sorted((int(s), a) for s, a in winners):
        if ranges and ranges[-1].algorithm == alg:
            ranges[-1] = Range(ranges[-1].lo, size, alg)
        else:
            ranges.append(Range(lo, size, alg))
        lo = size + 1
    if not ranges:
        raise ValueError("no winners to make ranges from")
    ranges[-1] = Range(ranges[-1].lo, MAX_BYTES, ranges[-1].algorithm)
    return ranges


def openmpi_rules(library_name: str, ranges: list[Range], ranks: int, libmpi: str | Path | None = None) -> str:
    """Open MPI's coll/tuned dynamic rules file: one rule per range (its algorithm's number and segment size)."""
    lib = library(library_name)
    lines = ["1", "2", "1", str(ranks), str(len(ranges))]  # collectives, allreduce id, comm sizes, size, rules
    for r in ranges:
        seg = lib.algorithms[r.algorithm].env.get(OMPI_SEGMENT_VAR, "0")
        lines.append(f"{r.lo} {lib.selection_value(r.algorithm)} 0 {seg}")
    return "\n".join(lines) + "\n"


def intelmpi_adjust(library_name: str, ranges: list[Range], ranks: int, libmpi: str | Path | None = None) -> str:
    """Intel MPI's I_MPI_ADJUST_ALLREDUCE selection: algorithm:lo-hi per range."""
    lib = library(library_name)
    return ";".join(f"{lib.selection_value(r.algorithm)}:{r.lo}-{r.hi}" for r in ranges) + "\n"


def mpich_builtin_selection(libmpi: str | Path) -> dict:
    """MPICH's built-in MPIR-level selection tree, as compiled into its libmpi."""
    blob = Path(libmpi).read_bytes()
    decoder = json.JSONDecoder()
    start = 0
    while (start := blob.find(b'{"collective=', start)) != -1:
        end = blob.find(b"\0", start)
        text = blob[start:end].decode("utf-8", "replace")
        start += 1
        if '"algorithm=MPIR_Allreduce_intra_' not in text:
            continue
        try:
            tree, _ = decoder.raw_decode(text)
        except json.JSONDecodeError:
            continue
        return tree
    raise ValueError(f"{libmpi}: no built-in MPIR collective selection tree found (not an MPICH libmpi?)")


def mpich_json(library_name: str, ranges: list[Range], ranks: int, libmpi: str | Path | None = None) -> str:
    """MPICH's JSON selection: its built-in tree (read from its libmpi, default the mpich environment's) with our
    ranges where the selected algorithms surely apply."""
    if libmpi is None:
        from ardlab.comm.launch import env_prefix

        libmpi = env_prefix(library_name) / "lib" / library(library_name).soname
    algs = library(library_name).algorithms
    tree = mpich_builtin_selection(libmpi)
    default_intra = tree["collective=allreduce"]["comm_type=intra"]
    ours: dict = {}
    for r in ranges:
        key = "avg_msg_size=any" if r.hi == MAX_BYTES else f"avg_msg_size<={r.hi}"
        if r.algorithm == DEFAULT:  # left to MPICH's own choice: its built-in tree there
            ours[key] = default_intra
            continue
        params = {p: {} for p in algs[r.algorithm].selection_params}
        ours[key] = {f"algorithm=MPIR_Allreduce_intra_{r.algorithm}": params}
    # Selected algorithms run unchecked: keep the built-in choice wherever one of them might not apply
    # (non-commutative or user-defined ops, fewer elements than the largest power of two <= ranks), and on the
    # sub-communicators of a node-aware algorithm: `smp` calls Allreduce again on the node-roots communicator (of the
    # same size at 1 rank per node), where our ranges would select `smp` once more, which has no sub-communicators
    # there and reduces nothing (measured: each rank kept its own data at 8 MiB on 2 nodes x 1 rank).
    tree["collective=allreduce"]["comm_type=intra"] = {
        "is_commutative=no": default_intra,
        "is_commutative=yes": {
            "is_op_built_in=no": default_intra,
            "is_op_built_in=yes": {
                "count<pow2": default_intra,
                "count=any": {f"comm_size<={ranks}": {
                    "comm_hierarchy=node_roots": default_intra, "comm_hierarchy=node": default_intra,
                    "comm_hierarchy=any": ours}, "comm_size=any": default_intra},
            },
        },
    }
    return json.dumps(tree, indent=1) + "\n"


# The writers of tuned selection files, by the name a library's table entry gives (Library.tuned_writer):
# (library name, ranges, ranks, libmpi) -> the file's text; a library that reuses a format gets its own table's
# values in it.
WRITERS = {"openmpi_rules": openmpi_rules, "intelmpi_adjust": intelmpi_adjust, "mpich_json": mpich_json}


def write(library_name: str, ranges: list[Range], ranks: int, output: str | Path, *,
          libmpi: str | Path | None = None) -> Path:
    """Write the tuned selection file of `library_name` atomically (its table entry names the writer)."""
    name = library(library_name).tuned_writer
    if name not in WRITERS:
        raise ValueError(f"no tuned-file writer for {library_name!r} (its table entry names {name!r}; "
                         f"known: {', '.join(WRITERS)})")
    text = WRITERS[name](library_name, ranges, ranks, libmpi)
    output = Path(output)
    write_csv(ranges_path(output), RANGES_COLUMNS,
              [{"lo_bytes": r.lo, "hi_bytes": r.hi, "algorithm": r.algorithm} for r in ranges])
    with atomic_open(output) as f:
        f.write(text)
    return output
