/* The compiled timing loop of ardlab's Allreduce microbenchmark (ardlab.bench.timeloop loads it).
 *
 * The OSU/IMB method in C, so that the timed region holds MPI_Allreduce and nothing of Python or mpi4py:
 * `warmup` untimed calls, then `iterations` calls, each after a barrier and timed alone with MPI_Wtime.
 * Built per environment against that environment's MPI (containers/install-env); the handles come from
 * mpi4py as the addresses of its MPI_Comm / MPI_Datatype / MPI_Op (MPI._addressof), so one source serves the
 * MPICH ABI (MPICH, Intel MPI) and Open MPI alike.
 */
#include <mpi.h>
#include <stddef.h>
#include <string.h>

/* seconds[i] gets call i's time. With `expected` non-NULL, recv is compared with its `nbytes` after every timed
 * call, outside the timed region. With `back_to_back` set, IMB-MPI1's method instead: one barrier, then the
 * `iterations` calls timed as one span (no barrier and no check between them), each seconds[i] = span / iterations,
 * and recv checked after the span. Returns MPI_SUCCESS, an MPI error code, or -(i + 1) for the first timed call i
 * whose result differs. */
int ardlab_time_allreduce(const MPI_Comm *comm, const void *send, void *recv, int count,
                          const MPI_Datatype *datatype, const MPI_Op *op, int warmup, int iterations,
                          double *seconds, const void *expected, size_t nbytes, int back_to_back)
{
    int rc;
    for (int i = 0; i < warmup; i++) {
        rc = MPI_Allreduce(send, recv, count, *datatype, *op, *comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    if (back_to_back) {
        rc = MPI_Barrier(*comm);
        if (rc != MPI_SUCCESS)
            return rc;
        double t0 = MPI_Wtime();
        for (int i = 0; i < iterations; i++) {
            rc = MPI_Allreduce(send, recv, count, *datatype, *op, *comm);
            if (rc != MPI_SUCCESS)
                return rc;
        }
        double each = (MPI_Wtime() - t0) / iterations;
        for (int i = 0; i < iterations; i++)
            seconds[i] = each;
        if (expected != NULL && iterations > 0 && memcmp(recv, expected, nbytes) != 0)
            return -iterations;
        return MPI_SUCCESS;
    }
    for (int i = 0; i < iterations; i++) {
        rc = MPI_Barrier(*comm);
        if (rc != MPI_SUCCESS)
            return rc;
        double t0 = MPI_Wtime();
        rc = MPI_Allreduce(send, recv, count, *datatype, *op, *comm);
        seconds[i] = MPI_Wtime() - t0;
        if (rc != MPI_SUCCESS)
            return rc;
        if (expected != NULL && memcmp(recv, expected, nbytes) != 0)
            return -(i + 1);
    }
    return MPI_SUCCESS;
}
