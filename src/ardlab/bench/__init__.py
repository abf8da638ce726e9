"""What the workflow and the CLI measure with: ``allreduce``, the Allreduce latency microbenchmark (OSU/IMB method)
that ``ardlab bench allreduce`` and the workflow run; ``sizes``, message-size lists and ranges; ``timeloop``, its
compiled timing loop; ``callsizes``, the counter of the Allreduce calls a program makes (the instrument: it runs no
training; ``ardlab.callcount`` runs a training with it). The package sits below the training programs and imports
none of them. The one-off investigations (benchmark scripts and their studies) are in ``ardlab.experiments``.
"""
