"""Measurement and benchmark scripts.

- ``allreduce``: the Allreduce latency microbenchmark (OSU/IMB method) that ``ardlab bench allreduce`` and the
  workflow run; ``sizes``: message-size lists and ranges.
- Benchmark scripts that print figures measured side by side in one run (``python -m ardlab.bench.<name>``):
  ``own_vs_native`` (our Allreduce algorithms against each library's best), ``nn_speed`` (ardlab.nn img/s and
  convolution GFLOP/s against NumPy's sgemm), ``vs_tensorflow`` (ardlab.nn against tf.keras, with the per-layer
  profile), ``frameworks`` (ardlab.nn against TensorFlow + Horovod per library), ``dp_overlap`` (the 2-rank
  data-parallel step against the 1-rank step per backend and mode), ``onednn_overhead`` (the oneDNN binding's
  per-call cost against NumPy), ``onednn_dense`` (Dense on oneDNN against Dense on BLAS in an onednn model).
"""


def save_rows(rows, output) -> None:
    """A benchmark's rows to `output` (.csv, and the same table as .md beside it), saying where."""
    from ardlab.results import save_table

    for path in save_table(rows, output):
        print(f"wrote {path}")
