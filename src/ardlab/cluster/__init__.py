"""An emulated multi-node Slurm cluster on this machine, to rehearse (and test) what crosses a network.

    ardlab cluster up --nodes 4 --rate 1gbit     # or: python -m ardlab.cluster up ...
    eval "$(ardlab cluster env)"                 # SLURM_CONF for sbatch/srun/snakemake --profile slurm
    ardlab cluster status
    ardlab cluster down                          # every daemon, namespace, link and file it made

Nodes n1..nN are network namespaces on one bridge (``network``), each with its own slurmd, hostname, boot_id
and /dev/shm (``slurm``); slurmctld runs in a namespace of its own, one munged serves all. Links may be limited to
a rate (tbf, both directions). Everything lives under one state folder (default ``<repo>/.cluster``, or
``$ARDLAB_CLUSTER``) with ``cluster.json`` recording what was made, so ``down`` cleans up after a crash too;
``up`` is idempotent for the same shape and refuses a different one while a cluster is up. Needs root.
Standard library only.
"""

from ardlab.cluster.lifecycle import (  # noqa: F401  (the package's face)
    DEFAULT_SUBNET,
    Cluster,
    cancel_jobs,
    dead_daemons,
    default_state,
    down,
    status,
    stop_run,
    up,
    watch,
)
