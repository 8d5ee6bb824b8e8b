/* bench_gpu_util.h — what the GPU benchmark programs (bench_gpu, bench_gpu_kernels,
 * bench_gpu_models) share: the device under test, its synchronisation, and the median of timed
 * rounds. Include after bench_util.h. */
#ifndef TS_BENCH_GPU_UTIL_H
#define TS_BENCH_GPU_UTIL_H

#include <stdlib.h>

#include "tessera.h"

#define MAX_RUNS 16

/* cuda:0, or BENCH_GPU_DEVICE (e.g. sim:0) to check a program's logic on a machine without a
 * GPU; the numbers are then meaningless. */
static ts_device bench_device;

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
