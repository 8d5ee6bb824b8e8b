/* bench_gpu_util.h — what the GPU benchmark programs (bench_gpu, bench_gpu_kernels,
 * bench_gpu_models) share: the device under test and how it is picked, its synchronisation, and
 * the median of timed rounds. Define BENCH_NAME before including it. */
#ifndef TS_BENCH_GPU_UTIL_H
#define TS_BENCH_GPU_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tessera.h"

#define MAX_RUNS 16

/* cuda:0, or BENCH_GPU_DEVICE (e.g. sim:0) to check a program's logic on a machine without a
 * GPU; the numbers are then meaningless. */
static ts_device bench_device;

/* Picks bench_device: BENCH_GPU_DEVICE when set (a logic check on a machine without a GPU, e.g.
 * sim:0, configured here when none is; *check true), else cuda:0, and prints a "#" line naming
 * it. Returns false after printing "<BENCH_NAME>: SKIP: <why>" when there is no CUDA device (the
 * runtime says why: built without CUDA, or the driver's reason); the program then exits 0. */
static inline bool bench_pick_device(bool *check) {
    const char *override = getenv("BENCH_GPU_DEVICE");
    *check = override && *override;
    bench_device = ts_cuda(0);
    if (*check) {
        if (!strncmp(override, "sim", 3) && ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
        if (ts_device_parse(override, &bench_device) != TS_OK) die_on_error("BENCH_GPU_DEVICE");
        printf("# BENCH_GPU_DEVICE=%s: a logic check, not a measurement of cuda:0\n", override);
        return true;
    }
    if (ts_cuda_device_count() < 1) {
        ts_cuda_set_device(0);
        printf("%s: SKIP: %s\n", BENCH_NAME,
               ts_error() != TS_OK ? ts_error_message() : "no CUDA device found");
        return false;
    }
    ts_cuda_props p;
    if (ts_cuda_get_properties(0, &p) == TS_OK)
        printf("# tessera on cuda:0: %s, %d SMs, %.1f GiB\n", p.name, p.multiprocessor_count,
               (double)p.total_memory / (1 << 30));
    return true;
}

/* waits for the device's work (a no-op on host devices, whose kernels return done) */
static inline void synchronize(void) {
    if (bench_device.type == TS_CUDA) ts_cuda_synchronize(bench_device.index);
}

static inline int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median is what both sides report: a GPU's clocks and a shared host's noise make the best
 * run optimistic and the mean hostage to one stall. Sorts v. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* TS_BENCH_GPU_UTIL_H */
