/* bench_util.h — what the benchmark programs share: wall time and the stop on a Tessera error.
 * Define BENCH_NAME (the program's name, for the message) before including it. */
#ifndef TS_BENCH_UTIL_H
#define TS_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tessera.h"

static inline double now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* exits with the message when an error is pending */
static inline void die_on_error(const char *what) {
    if (ts_error() == TS_OK) return;
    fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, what, ts_error_message());
    exit(1);
}

#endif /* TS_BENCH_UTIL_H */
