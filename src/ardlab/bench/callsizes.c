/* What a program hands MPI_Allreduce and MPI_Iallreduce: every call's size and operation, counted per rank
 * (ardlab.bench.callsizes).
 *
 * Loaded into a rank before its MPI library (ardlab.rank does, with RTLD_GLOBAL, when ARDLAB_CALLSIZES names a
 * folder), so the MPI_(I)allreduce(_c) of mpi4py and Horovod resolve here first; each call is
 * counted by (bytes, operation) and passed on to the PMPI_ function. At MPI_Finalize each rank writes
 * <ARDLAB_CALLSIZES>/rank<N>.csv: bytes,op,calls. Built per environment against its MPI, like timeloop.c.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 4096 /* distinct (bytes, op) pairs; a program with more fails loudly at MPI_Finalize */

struct slot { long long bytes; int op; long long calls; };
static struct slot slots[SLOTS];
static int used, overflow;

static const char *op_name(int op)
{
    static const char *names[] = {"sum", "max", "min", "prod", "band", "bor", "bxor", "land", "lor", "lxor", "other"};
    return names[op];
}

static int op_index(MPI_Op op)
{
    if (op == MPI_SUM) return 0;
    if (op == MPI_MAX) return 1;
    if (op == MPI_MIN) return 2;
    if (op == MPI_PROD) return 3;
    if (op == MPI_BAND) return 4;
    if (op == MPI_BOR) return 5;
    if (op == MPI_BXOR) return 6;
    if (op == MPI_LAND) return 7;
    if (op == MPI_LOR) return 8;
    if (op == MPI_LXOR) return 9;
    return 10;
}

static void count_call(long long count, MPI_Datatype datatype, MPI_Op op)
{
    int size = 0;
    PMPI_Type_size(datatype, &size);
    long long bytes = count * size;
    int o = op_index(op), i;
    for (i = 0; i < used && !(slots[i].bytes == bytes && slots[i].op == o); i++)
        ;
    if (i == used) {
        if (used == SLOTS)
            overflow = 1;
        else
            slots[used++] = (struct slot){bytes, o, 0};
    }
    if (i < SLOTS)
        slots[i].calls++;
}

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    count_call(count, datatype, op);
    return PMPI_Allreduce(send, recv, count, datatype, op, comm);
}

/* The non-blocking form (ardlab.nn's nonblocking and bucketed modes), counted alike when it is posted. */
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    count_call(count, datatype, op);
    return PMPI_Iallreduce(send, recv, count, datatype, op, comm, request);
}

#if MPI_VERSION >= 4
/* The large-count forms, which mpi4py 4 calls wherever the library has them (MPICH, Intel MPI). */
int MPI_Allreduce_c(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    count_call((long long)count, datatype, op);
    return PMPI_Allreduce_c(send, recv, count, datatype, op, comm);
}

int MPI_Iallreduce_c(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Request *request)
{
    count_call((long long)count, datatype, op);
    return PMPI_Iallreduce_c(send, recv, count, datatype, op, comm, request);
}
#endif

int MPI_Finalize(void)
{
    const char *dir = getenv("ARDLAB_CALLSIZES");
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.csv", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "bytes,op,calls\n");
            for (int i = 0; i < used; i++)
                fprintf(f, "%lld,%s,%lld\n", slots[i].bytes, op_name(slots[i].op), slots[i].calls);
            if (overflow)
                fprintf(f, "-1,overflow,0\n");
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
