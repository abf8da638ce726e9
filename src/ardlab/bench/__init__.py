"""What the workflow and the CLI measure with: ``allreduce``, the Allreduce latency microbenchmark (OSU/IMB method)
that ``ardlab bench allreduce`` and the workflow run; ``sizes``, message-size lists and ranges; ``timeloop``, its
compiled timing loop; ``callsizes``, the counter of the Allreduce calls a training run makes. The one-off
investigations (benchmark scripts and their studies) are in ``ardlab.experiments``.
"""
