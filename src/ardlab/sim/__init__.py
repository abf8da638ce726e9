"""A simulated cluster beside the emulated one: ardlab's Allreduce timing loop run by SimGrid's SMPI.

SMPI runs an unmodified MPI C program on a simulated platform: every rank an actor of one process, every message
timed by a network model. It implements the classic Allreduce algorithms, so the cost families ardlab's table names
(``ardlab.comm.families``: ring, recursive doubling, Rabenseifner, ...) can be timed at 16-1024 ranks, where no
machine here reaches. ``platform`` describes the simulated nodes and links (from the emulated cluster's link);
``loop`` builds ``smpiloop.c`` (the microbenchmark's own timing loop, ``bench/timeloop.c``) with ``smpicc`` and runs it
under ``smpirun``, one launch per algorithm and size, into tidy rows.

    python -m ardlab.sim loop --nodes 4 --ranks 4 --rate 1gbit --sizes 4,64K,1M --output sim.csv

SimGrid comes from Debian (``libsimgrid-dev``: smpicc, smpirun), installed by ``containers/setup-envs``.
"""
