/* ardlab's Allreduce timing loop (ardlab/bench/timeloop.c, included as is) as a program of its own, for SimGrid's
 * SMPI (ardlab.sim): smpicc builds it, smpirun runs its ranks on a simulated platform, and MPI_Wtime there is the
 * simulated clock. The microbenchmark's method: float32 sums, `warmup` untimed calls, then `iterations` calls each
 * after a barrier and timed alone.
 *
 *   smpirun -np P -platform PLATFORM.xml -hostfile HOSTS --cfg=smpi/allreduce:ALG ./smpiloop WARMUP ITERS SIZES
 *
 * SIZES: bytes, comma-separated, multiples of 4. Rank 0 prints one line per size and timed call:
 * "size_bytes,iteration,seconds". Buffers are SMPI's shared allocations (one copy for all ranks: the simulator needs
 * no data to time the calls, and 1024 ranks of private buffers would not fit in memory), so the sums are not
 * checked here; the algorithms' sums are the libraries' and ardlab's own, checked where they run for real.
 */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeloop.c"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: smpiloop WARMUP ITERATIONS SIZES\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int warmup = atoi(argv[1]), iterations = atoi(argv[2]);
    /* strtok_r: the ranks are SimGrid actors in one process, switched at MPI calls; strtok's state is libc's, shared */
    long largest = 0;
    char *sizes = strdup(argv[3]), *at;
    for (char *tok = strtok_r(sizes, ",", &at); tok; tok = strtok_r(NULL, ",", &at))
        if (atol(tok) > largest)
            largest = atol(tok);
    float *send = SMPI_SHARED_MALLOC((size_t)largest), *recv = SMPI_SHARED_MALLOC((size_t)largest);
    double *seconds = malloc(sizeof(double) * (size_t)(iterations > 0 ? iterations : 1));
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Datatype dtype = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    strcpy(sizes, argv[3]);
    for (char *tok = strtok_r(sizes, ",", &at); tok; tok = strtok_r(NULL, ",", &at)) {
        long bytes = atol(tok);
        int rc = ardlab_time_allreduce(&comm, send, recv, (int)(bytes / 4), &dtype, &op, warmup, iterations,
                                       seconds, NULL, 0, 0);
        if (rc != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 3);
        if (rank == 0)
            for (int i = 0; i < iterations; i++)
                printf("%ld,%d,%.9e\n", bytes, i, seconds[i]);
    }
    SMPI_SHARED_FREE(send);
    SMPI_SHARED_FREE(recv);
    free(seconds);
    free(sizes);
    MPI_Finalize();
    return 0;
}
