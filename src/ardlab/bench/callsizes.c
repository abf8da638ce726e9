/* What a program hands MPI_Allreduce and MPI_Iallreduce, and how long it spends inside them, per rank
 * (ardlab.bench.callsizes counts, ardlab.comm.calltimer reads the time).
 *
 * Loaded into a rank before its MPI library (ardlab.rank does, with RTLD_GLOBAL, in every training run; ardlab advise
 * with LD_PRELOAD into one's own program), so the MPI_(I)allreduce(_c) of mpi4py and Horovod resolve here first; each
 * call is counted by (bytes, operation) and passed on to the PMPI_ function. Where ARDLAB_CALLSIZES names a folder,
 * each rank writes <ARDLAB_CALLSIZES>/rank<N>.csv at MPI_Finalize: bytes,op,calls.
 *
 * The timer: the seconds a rank spends inside summing Allreduce calls (MPI_SUM: the gradients; Horovod's coordination
 * calls are bitwise) and their number, kept as running totals that ardlab_allreduce_timer() reads at any moment (a
 * training run reads them around its timed steps). A blocking call counts from entry to return; a non-blocking one
 * its posting plus the MPI_Wait/Waitall/Test/Testall calls that complete it (the time the rank waited for it, not
 * the time it was in flight behind compute). Where ARDLAB_CALLSIZES names a folder, each rank also writes
 * <ARDLAB_CALLSIZES>/timeline<N>.csv at MPI_Finalize: its first TIMELINE summing calls in order, each with when it
 * ended (seconds after the first), its bytes and its seconds inside (a non-blocking call: its posting), from which
 * one's own program is timed per step from inside (ardlab advise), its start-up apart. Built per environment
 * against its MPI, like timeloop.c.
 *
 * Where ARDLAB_FIRST_ALLREDUCE_S names seconds, a rank that makes no summing call within that long after MPI_Init
 * prints NO_ALLREDUCE_MARK on stderr and exits with status 3 (ardlab advise: a job that averages no gradients over
 * MPI, such as an NCCL or gloo one, is refused within its first seconds, not after a whole run).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* The timer's totals (updated atomically: Horovod calls from its background thread while training reads them) and
 * the posted, not yet completed summing Iallreduce requests, whose completion is timed too. */
static long long timed_ns, timed_calls;
static int timer_overflow;
#define PENDING 1024
static MPI_Request pending[PENDING];
static int pending_used[PENDING];
static int pending_lock;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The timeline of the summing calls: the first TIMELINE (end, bytes, inside), in the order they ended. */
#define TIMELINE 65536
static long long line_end_ns[TIMELINE], line_bytes[TIMELINE], line_inside_ns[TIMELINE], lined;

/* `calls` summing calls of `bytes` took `ns` inside (calls 0: the completion of non-blocking ones posted before). */
static void add_time(long long ns, int calls, long long bytes)
{
    __atomic_add_fetch(&timed_ns, ns, __ATOMIC_RELAXED);
    __atomic_add_fetch(&timed_calls, calls, __ATOMIC_RELAXED);
    if (calls && lined < TIMELINE) {
        long long i = lined;
        line_end_ns[i] = now_ns();
        line_bytes[i] = bytes;
        line_inside_ns[i] = ns;
        lined++;
    }
}

static void lock(void)
{
    while (__atomic_test_and_set(&pending_lock, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void) { __atomic_clear(&pending_lock, __ATOMIC_RELEASE); }

static void remember(MPI_Request request)
{
    lock();
    int i;
    for (i = 0; i < PENDING && pending_used[i]; i++)
        ;
    if (i == PENDING)
        timer_overflow = 1;
    else {
        pending[i] = request;
        pending_used[i] = 1;
    }
    unlock();
}

/* Whether any of `n` requests is a pending summing Iallreduce; with `forget`, those are forgotten (they completed). */
static int pending_among(int n, const MPI_Request *requests, int forget)
{
    int found = 0;
    lock();
    for (int k = 0; k < n; k++)
        for (int i = 0; i < PENDING; i++)
            if (pending_used[i] && memcmp(&pending[i], &requests[k], sizeof(MPI_Request)) == 0) {
                found = 1;
                if (forget)
                    pending_used[i] = 0;
            }
    unlock();
    return found;
}

/* Report the running totals: seconds inside summing Allreduce calls, their number, and whether the timer lost track
 * (more summing Iallreduce requests in flight at once than it holds: the totals are then incomplete). */
void ardlab_allreduce_timer(double *seconds, long long *calls, int *overflow)
{
    *seconds = __atomic_load_n(&timed_ns, __ATOMIC_RELAXED) * 1e-9;
    *calls = __atomic_load_n(&timed_calls, __ATOMIC_RELAXED);
    *overflow = timer_overflow;
}

static long long count_call(long long count, MPI_Datatype datatype, MPI_Op op)
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
    return bytes;
}

/* After an Allreduce call that started at t0: a summing one's time, and a non-blocking one's request (`request`,
 * NULL for a blocking call) kept, so that its completion is timed too. */
static void timed(MPI_Op op, long long bytes, long long t0, int err, const MPI_Request *request)
{
    if (op != MPI_SUM)
        return;
    add_time(now_ns() - t0, 1, bytes);
    if (request && err == MPI_SUCCESS)
        remember(*request);
}

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    long long bytes = count_call(count, datatype, op);
    long long t0 = now_ns();
    int err = PMPI_Allreduce(send, recv, count, datatype, op, comm);
    timed(op, bytes, t0, err, NULL);
    return err;
}

/* The non-blocking form (ardlab.nn's nonblocking and bucketed modes), counted alike when it is posted. */
int MPI_Iallreduce(const void *send, void *recv, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    long long bytes = count_call(count, datatype, op);
    long long t0 = now_ns();
    int err = PMPI_Iallreduce(send, recv, count, datatype, op, comm, request);
    timed(op, bytes, t0, err, request);
    return err;
}

/* Completions: the time of a call that completes (or may complete) a pending summing Iallreduce counts. */
int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!pending_among(1, request, 0))
        return PMPI_Wait(request, status);
    MPI_Request r = *request;
    long long t0 = now_ns();
    int err = PMPI_Wait(request, status);
    add_time(now_ns() - t0, 0, 0);
    pending_among(1, &r, 1);
    return err;
}

int MPI_Waitall(int n, MPI_Request requests[], MPI_Status statuses[])
{
    if (n <= 0 || !pending_among(n, requests, 0))
        return PMPI_Waitall(n, requests, statuses);
    MPI_Request *copy = malloc(sizeof(MPI_Request) * n);
    memcpy(copy, requests, sizeof(MPI_Request) * n);
    long long t0 = now_ns();
    int err = PMPI_Waitall(n, requests, statuses);
    add_time(now_ns() - t0, 0, 0);
    pending_among(n, copy, 1);
    free(copy);
    return err;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!pending_among(1, request, 0))
        return PMPI_Test(request, flag, status);
    MPI_Request r = *request;
    long long t0 = now_ns();
    int err = PMPI_Test(request, flag, status);
    add_time(now_ns() - t0, 0, 0);
    if (*flag)
        pending_among(1, &r, 1);
    return err;
}

int MPI_Testall(int n, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    if (n <= 0 || !pending_among(n, requests, 0))
        return PMPI_Testall(n, requests, flag, statuses);
    MPI_Request *copy = malloc(sizeof(MPI_Request) * n);
    memcpy(copy, requests, sizeof(MPI_Request) * n);
    long long t0 = now_ns();
    int err = PMPI_Testall(n, requests, flag, statuses);
    add_time(now_ns() - t0, 0, 0);
    if (*flag)
        pending_among(n, copy, 1);
    free(copy);
    return err;
}

#if MPI_VERSION >= 4
/* The large-count forms, which mpi4py 4 calls wherever the library has them (MPICH, Intel MPI). */
int MPI_Allreduce_c(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    long long bytes = count_call((long long)count, datatype, op);
    long long t0 = now_ns();
    int err = PMPI_Allreduce_c(send, recv, count, datatype, op, comm);
    timed(op, bytes, t0, err, NULL);
    return err;
}

int MPI_Iallreduce_c(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Request *request)
{
    long long bytes = count_call((long long)count, datatype, op);
    long long t0 = now_ns();
    int err = PMPI_Iallreduce_c(send, recv, count, datatype, op, comm, request);
    timed(op, bytes, t0, err, request);
    return err;
}
#endif

#define NO_ALLREDUCE_MARK "ARDLAB-NO-ALLREDUCE"

static void *watch_first_call(void *arg)
{
    double limit = *(double *)arg;
    long long end = now_ns() + (long long)(limit * 1e9);
    while (now_ns() < end) {
        if (__atomic_load_n(&timed_calls, __ATOMIC_RELAXED) > 0)
            return NULL;
        struct timespec pause = {0, 100000000};
        nanosleep(&pause, NULL);
    }
    if (__atomic_load_n(&timed_calls, __ATOMIC_RELAXED) == 0) {
        fprintf(stderr, "%s no summing MPI_Allreduce within %g s of MPI_Init\n", NO_ALLREDUCE_MARK, limit);
        fflush(stderr);
        _exit(3);
    }
    return NULL;
}

/* Start the watch of the first summing call where ARDLAB_FIRST_ALLREDUCE_S asks for it. */
static void watch_if_asked(void)
{
    static double limit;
    const char *text = getenv("ARDLAB_FIRST_ALLREDUCE_S");
    if (!text || (limit = atof(text)) <= 0)
        return;
    pthread_t thread;
    if (pthread_create(&thread, NULL, watch_first_call, &limit) == 0)
        pthread_detach(thread);
}

int MPI_Init(int *argc, char ***argv)
{
    int err = PMPI_Init(argc, argv);
    watch_if_asked();
    return err;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int err = PMPI_Init_thread(argc, argv, required, provided);
    watch_if_asked();
    return err;
}

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
        snprintf(path, sizeof path, "%s/timeline%d.csv", dir, rank);
        f = fopen(path, "w");
        if (f) {
            fprintf(f, "end_s,bytes,inside_s\n");
            for (long long i = 0; i < lined; i++)
                fprintf(f, "%.9f,%lld,%.9f\n", (line_end_ns[i] - line_end_ns[0]) * 1e-9, line_bytes[i],
                        line_inside_ns[i] * 1e-9);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
