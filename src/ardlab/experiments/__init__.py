"""Investigations: benchmark scripts that print figures measured side by side in one run, each answering one question
(``EXPERIMENTS``); their results are in ``results/experiments/`` (each folder's or table's README says which command
made it). The product (what the workflow and the CLI run) is in ``ardlab.bench``.

    python -m ardlab.experiments                 # the list
    python -m ardlab.experiments NAME [ARGS...]  # one of them (as python -m ardlab.experiments.NAME)
"""

# Each investigation once: its module's name -> the question it answers (tests/test_experiments_registry.py: every
# module of the package is here, and every name here a module with main(argv)).
EXPERIMENTS = {
    "own_vs_native": "our Allreduce algorithms against each library's best",
    "vs_imb": "the microbenchmark's time against IMB-MPI1's, per library, algorithm and size",
    "corelatency": "the cache-line round trip between two cores, recorded around each launch (the machine's slow and "
                   "fast windows)",
    "nn_speed": "ardlab.nn's img/s and convolution GFLOP/s against NumPy's sgemm",
    "vs_tensorflow": "ardlab.nn against tf.keras, with the per-layer profile",
    "frameworks": "ardlab.nn against TensorFlow + Horovod, per library",
    "dp_overlap": "the 2-rank data-parallel step against the 1-rank step, per backend and mode",
    "onednn_overhead": "the oneDNN binding's per-call cost against NumPy",
    "onednn_dense": "Dense on oneDNN against Dense on BLAS",
    "onednn_layouts": "the convolutions' chosen weight layouts against the plain HWIO array",
    "link_queue": "on the emulated cluster, the Allreduce with tbf's queue at the cluster's 1 ms against deeper queues",
    "core_per_rank": "a core per rank against ranks sharing cores (the 2 x 2 gaps' time-sharing part)",
    "gaps": "the 2 x 2 gaps taken apart (the bytes, what is left beyond them, the queue) from link_queue's and "
            "core_per_rank's rounds, and the bound the bytes alone put on training",
    "image_overhead": "the same measurement from an Apptainer image and from the library's environment",
    "mpitune": "Intel's mpitune_fast tuning file against ardlab advise's, paired in training",
    "simulator": "the simulated cluster (SimGrid's SMPI) against the emulated one's committed rows at 2-4 nodes",
}

def add_round_arguments(p, rounds: int) -> None:
    """The interleaved-round options every benchmark script shares: --rounds, --seed, --output."""
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--seed", type=int, default=0, help="seed of the rounds' orders")
    p.add_argument("--output", metavar="CSV", help="also write the rows there (and the same table as .md)")


def spread(name: str, values) -> dict:
    """{name: median, name_min: min, name_max: max} of a per-round measurement (a ratio, mostly)."""
    import statistics

    values = list(values)
    return {name: statistics.median(values), f"{name}_min": min(values), f"{name}_max": max(values)}


def save_rows(rows, output) -> None:
    """A benchmark's rows to `output` (.csv, and the same table as .md beside it), saying where; nothing where
    `output` is None (the script was asked only to print)."""
    from ardlab.results import save_table

    if output is None:
        return
    for path in save_table(rows, output):
        print(f"wrote {path}")
