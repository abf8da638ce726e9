/* The cost of moving one cache line between two CPUs (ardlab.experiments.corelatency loads it).
 *
 * Two threads, one pinned to each CPU, pass one atomic flag back and forth: `round_trips` times the first sets it to
 * an odd value and waits for the second to make it even again. The time of a round trip is what a shared-memory
 * Allreduce whose ranks spin on shared flags (MPICH's release_gather, the other libraries' shared-memory defaults)
 * pays per step at small sizes. On a virtual machine it is the hypervisor's placement of the two vCPUs, which can
 * change under a running guest while the guest sees the same CPUs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

struct pong {
    _Atomic long *flag;
    _Atomic int ready;  /* 0: starting, 1: pinned, -1: could not be pinned */
    long round_trips;
    int cpu;
};

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *ponger(void *arg)
{
    struct pong *p = arg;
    if (pin(p->cpu) != 0) {
        atomic_store(&p->ready, -1);
        return NULL;
    }
    atomic_store(&p->ready, 1);
    for (long i = 0; i < p->round_trips; i++) {
        long want = 2 * i + 1;
        while (atomic_load_explicit(p->flag, memory_order_acquire) != want)
            ;
        atomic_store_explicit(p->flag, want + 1, memory_order_release);
    }
    return NULL;
}

/* Nanoseconds per round trip of one cache line between `cpu_a` (this thread, pinned for the call and then given back
 * its former CPU set) and `cpu_b` (a new thread), over `round_trips` round trips after as many warm-up ones.
 * Returns a negative value when a thread cannot be pinned or started (-1: cpu_a, -2: cpu_b, -3: thread). */
double ardlab_core_rtt_ns(int cpu_a, int cpu_b, long round_trips)
{
    static _Atomic long flag __attribute__((aligned(64)));
    cpu_set_t before;
    if (pthread_getaffinity_np(pthread_self(), sizeof(before), &before) != 0)
        return -1;
    if (pin(cpu_a) != 0)
        return -1;
    double ns = 0;
    for (int pass = 0; pass < 2; pass++) {  /* pass 0 warms up; pass 1 is timed */
        atomic_store(&flag, 0);
        struct pong p = {&flag, 0, round_trips, cpu_b};
        pthread_t thread;
        if (pthread_create(&thread, NULL, ponger, &p) != 0) {
            pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
            return -3;
        }
        int ready;
        while ((ready = atomic_load(&p.ready)) == 0)
            ;
        if (ready < 0) {
            pthread_join(thread, NULL);
            pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
            return -2;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < round_trips; i++) {
            atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2)
                ;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_join(thread, NULL);
        ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / round_trips;
    }
    pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
    return ns;
}
