/* bench_weight_only.c — weight-only quantized linear layers at one token (M = 1, decoding):
 * GPT-2 124M's linears (768 -> 2304, 768 -> 768, 768 -> 3072, 3072 -> 768 and the 768 -> 50257
 * head) as float32 (ts_linear), int8 and int4 (group 128) weight-only (ts_weight_only_linear), on
 * 1 and 2 threads. Decoding reads every weight once a token, from memory: each figure cycles
 * through copies of the weight that together pass 64 MiB (twice a 32 MiB L3), so the bytes come
 * from DRAM as they would in a whole model. Reported: microseconds a call (median of ROUNDS rounds)
 * and GB/s of weight bytes read (int: the integers plus the float32 scale and int32 zero point of
 * each row or group), and the fraction of this host's read bandwidth, measured first by a
 * stream-like sum over 256 MiB on the same thread counts.
 * Usage: bench_weight_only [ROUNDS]; bench_weight_only stream: the read bandwidth alone. */
#define BENCH_NAME "bench_weight_only"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tessera/quant.h"

enum { COPY_BYTES = 64 << 20, STREAM_FLOATS = 64 << 20 };

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ stream read */
typedef struct part {
    const float *p;
    size_t n;
    float s;
} part;

static void *sum_part(void *arg) {
    part *a = arg;
    float s[16] = {0};
    for (size_t i = 0; i + 16 <= a->n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += a->p[i + j];
    for (int j = 1; j < 16; j++) s[0] += s[j];
    a->s = s[0];
    return NULL;
}

/* GB/s of a read of n floats split over t threads (best of 5) */
static double stream_gbs(const float *p, size_t n, int t) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        pthread_t th[2];
        part a[2];
        const double t0 = now_s();
        for (int i = 0; i < t; i++) {
            a[i] = (part){p + n / t * i, n / t, 0};
            pthread_create(&th[i], NULL, sum_part, &a[i]);
        }
        for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
        const double dt = now_s() - t0;
        if (a[0].s == 12345.0f) printf(" "); /* keep the sums */
        best = dt < best ? dt : best;
    }
    return (double)n * sizeof(float) / best / 1e9;
}

/* ------------------------------------------------------------------ the layers */
typedef struct variant {
    const char *name;
    int kind; /* 0 float32, 8 int8, 4 int4 */
    int ncopies;
    ts_tensor **w;
    double bytes; /* one copy's bytes read */
} variant;

static void make(variant *v, ts_tensor *wf, int64_t n, int64_t k) {
    const double params = v->kind == 8 ? (double)n * 8 : (double)n * (double)(k / 128) * 8;
    v->bytes = v->kind == 0   ? (double)n * k * 4
               : v->kind == 8 ? (double)n * k + params
                              : (double)n * k / 2 + params;
    v->ncopies = (int)(COPY_BYTES / v->bytes) + 1;
    v->w = calloc((size_t)v->ncopies, sizeof *v->w);
    for (int c = 0; c < v->ncopies; c++) {
        v->w[c] = v->kind == 0   ? ts_clone(wf)
                  : v->kind == 8 ? ts_quantize_int8_weight_only(wf)
                                 : ts_quantize_int4_weight_only(wf, 128);
        die_on_error("make weights");
    }
}

static void drop(variant *v) {
    for (int c = 0; c < v->ncopies; c++) ts_release(v->w[c]);
    free(v->w);
}

static double us_a_call(variant *v, ts_tensor *x, int rounds) {
    double t[64];
    int c = 0;
    for (int r = 0; r < rounds; r++) {
        const int reps = v->ncopies;
        const double t0 = now_s();
        for (int i = 0; i < reps; i++, c = (c + 1) % v->ncopies) {
            ts_tensor *y =
                v->kind ? ts_weight_only_linear(x, v->w[c], NULL) : ts_linear(x, v->w[c], NULL);
            die_on_error("linear");
            ts_release(y);
        }
        t[r] = (now_s() - t0) * 1e6 / reps;
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp_double);
    return t[rounds / 2];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    rounds = rounds < 1 ? 1 : rounds > 64 ? 64 : rounds;
    ts_no_grad_begin();
    float *big = malloc((size_t)STREAM_FLOATS * sizeof *big);
    for (size_t i = 0; i < STREAM_FLOATS; i++) big[i] = (float)(i & 7);
    const double stream[3] = {0, stream_gbs(big, STREAM_FLOATS, 1),
                              stream_gbs(big, STREAM_FLOATS, 2)};
    free(big);
    printf("stream-like read of 256 MiB: %.1f GB/s on 1 thread, %.1f GB/s on 2\n", stream[1],
           stream[2]);
    if (argc > 1 && !strcmp(argv[1], "stream")) return 0; /* the read bandwidth only */
    const int64_t shapes[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}};
    printf("%-14s %7s %-8s %10s %9s %8s\n", "in -> out", "threads", "weights", "us", "GB/s",
           "of read");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t k = shapes[s][0], n = shapes[s][1];
        ts_tensor *x = ts_randn(TS_SHAPE(1, k), (ts_opts){0});
        ts_tensor *wf = ts_mul_scalar(ts_randn(TS_SHAPE(n, k), (ts_opts){0}), 0.02);
        variant v[3] = {
            {"float32", 0, 0, NULL, 0}, {"int8", 8, 0, NULL, 0}, {"int4-g128", 4, 0, NULL, 0}};
        for (int i = 0; i < 3; i++) make(&v[i], wf, n, k);
        for (int t = 1; t <= 2; t++) {
            ts_set_num_threads(t);
            for (int i = 0; i < 3; i++) {
                const double us = us_a_call(&v[i], x, rounds), gbs = v[i].bytes / us / 1e3;
                printf("%5lld -> %-5lld %7d %-8s %10.1f %9.1f %7.0f%%\n", (long long)k,
                       (long long)n, t, v[i].name, us, gbs, 100 * gbs / stream[t]);
            }
        }
        for (int i = 0; i < 3; i++) drop(&v[i]);
        ts_release(x);
        ts_release(wf);
    }
    return 0;
}
