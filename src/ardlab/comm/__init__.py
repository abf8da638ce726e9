"""Communication: the library/algorithm table (`libraries`) and our own Allreduce algorithms (`own`).

Only the table is imported here, so reading it needs neither NumPy nor mpi4py.
"""

from ardlab.comm.libraries import (  # noqa: F401
    DEFAULT,
    LIBRARIES,
    OWN_ALGORITHMS,
    Algorithm,
    Library,
    algorithm,
    algorithms,
    detect,
    forced_algorithm,
    library,
    run_env,
)
