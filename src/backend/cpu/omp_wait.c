/* omp_wait.c — how the CPU kernels' OpenMP threads wait between parallel regions.
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its constructor, before main. Its
 * default (300000 spins, a few milliseconds, before a thread sleeps) collapses when other processes
 * want the cores: a thread that finished its share spins on the barrier, keeping its core from the
 * preempted thread it waits for, and every parallel region pays for it (bench/results/threads.md
 * has the figures). A library cannot change that setting in its own process: the loader
 * runs libc's initialisation, which resets the environment to the one the kernel passed, after an
 * executable's .preinit_array and before libgomp's constructor. So ts_cpu_bounded_spin re-executes
 * the program once with GOMP_SPINCOUNT set (the `tessera` command calls it first thing), and
 * start-up takes the variable out of the environment again so that child processes see what the
 * program was given. */
#define _POSIX_C_SOURCE 200809L
#include "backend/cpu/omp_wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera.h"

/* Measured on a loaded 2-core machine (bench/results/threads.md): about 10 microseconds of spinning
 * before a thread sleeps. */
#define TS_OMP_SPINCOUNT "1000"
/* marks a GOMP_SPINCOUNT that ts_cpu_bounded_spin set (so start-up can take it out again) */
#define TS_OMP_MARK "TS_OMP_SPIN_SET"

static atomic_bool noted; /* omp_wait_note ran: the library has started */

/* Only before the library starts: later the process has state an exec would lose, and start-up
 * has taken the variables out of the environment again. */
void ts_cpu_bounded_spin(char **argv) {
    if (atomic_load(&noted) || !argv || !argv[0] || getenv("OMP_WAIT_POLICY") ||
        getenv("GOMP_SPINCOUNT") || getenv(TS_OMP_MARK))
        return;
    if (setenv("GOMP_SPINCOUNT", TS_OMP_SPINCOUNT, 0) || setenv(TS_OMP_MARK, "1", 0)) return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* no /proc (or no permission): go on with libgomp's default, and leave no trace */
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(TS_OMP_MARK);
}

static char described[160] = "libgomp's default";
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void omp_wait_note(void) {
    atomic_store(&noted, true);
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    const bool ours = spin && getenv(TS_OMP_MARK);
    if (spin)
        snprintf(described, sizeof described, "GOMP_SPINCOUNT=%s%s", spin,
                 ours ? " (set by ts_cpu_bounded_spin)" : "");
    else if (pol)
        snprintf(described, sizeof described, "OMP_WAIT_POLICY=%s", pol);
    if (getenv(TS_OMP_MARK)) {
        unsetenv(TS_OMP_MARK);
        if (ours) unsetenv("GOMP_SPINCOUNT");
    }
}

void tsi_omp_wait_init(void) { pthread_once(&once, omp_wait_note); }

const char *tsi_omp_wait_describe(void) {
    tsi_omp_wait_init();
    return described;
}
