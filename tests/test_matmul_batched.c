/* test_matmul_batched.c — batches of small float32 products (kern_matmul.c's batch_to_primitive:
 * oneDNN's matmul primitive over the whole batch in one call) against a float64 reference: odd
 * sizes, B transposed (attention's Q K^T), A transposed, a column stride of 2, a broadcast
 * operand (batch stride 0), a long reduction; which batches take the one call; the same bits on 1
 * and 2 threads; and the products one by one (the call switched off) within the same bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/matmul_dnnl.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* How an operand [bsz, rows, cols] is stored: row-major; as the transpose of a row-major
 * [bsz, cols, rows]; every other column of a row-major [bsz, rows, 2 cols]; one row-major
 * [rows, cols] matrix expanded over the batch (batch stride 0). */
enum layout { CONTIG, TRANSPOSED, STRIDED, BROADCAST };

typedef struct operand {
    enum layout lay;
    int64_t bsz, rows, cols;
    float *host; /* the storage's values */
    ts_tensor *base, *view;
} operand;

static int64_t stored(const operand *o) {
    const int64_t mat = o->rows * o->cols * (o->lay == STRIDED ? 2 : 1);
    return (o->lay == BROADCAST ? 1 : o->bsz) * mat;
}

/* the operand's element [b, r, c] read from its storage (the reference's own indexing) */
static double at(const operand *o, int64_t b, int64_t r, int64_t c) {
    switch (o->lay) {
    case TRANSPOSED:
        return o->host[(b * o->cols + c) * o->rows + r];
    case STRIDED:
        return o->host[(b * o->rows + r) * 2 * o->cols + 2 * c];
    case BROADCAST:
        return o->host[r * o->cols + c];
    default:
        return o->host[(b * o->rows + r) * o->cols + c];
    }
}

static void make(operand *o, enum layout lay, int64_t bsz, int64_t rows, int64_t cols) {
    *o = (operand){.lay = lay, .bsz = bsz, .rows = rows, .cols = cols};
    const int64_t n = stored(o);
    o->host = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) o->host[i] = uniform();
    switch (lay) {
    case TRANSPOSED:
        o->base = ts_tensor_f32(TS_SHAPE(bsz, cols, rows), o->host, (ts_opts){0});
        o->view = ts_transpose(o->base, -2, -1);
        break;
    case STRIDED:
        o->base = ts_tensor_f32(TS_SHAPE(bsz, rows, 2 * cols), o->host, (ts_opts){0});
        o->view = ts_slice(o->base, 2, 0, 2 * cols, 2);
        break;
    case BROADCAST:
        o->base = ts_tensor_f32(TS_SHAPE(1, rows, cols), o->host, (ts_opts){0});
        o->view = ts_expand(o->base, TS_SHAPE(bsz, rows, cols));
        break;
    default:
        o->base = ts_tensor_f32(TS_SHAPE(bsz, rows, cols), o->host, (ts_opts){0});
        o->view = o->base;
    }
}

static void drop(operand *o) {
    if (o->view != o->base) ts_release(o->view);
    ts_release(o->base);
    free(o->host);
}

/* C = A B on the current thread count, copied out (NULL on an error) */
static float *product(const operand *a, const operand *b) {
    ts_tensor *c = ts_matmul(a->view, b->view);
    if (!c) return NULL;
    const size_t bytes = sizeof(float) * (size_t)(a->bsz * a->rows * b->cols);
    float *out = malloc(bytes);
    if (out && ts_copy_to_host(c, out, bytes) != TS_OK) free(out), out = NULL;
    ts_release(c);
    return out;
}

/* Every element within (k + 2) unit roundoffs of sum |a||b| of the float64 sum: the bound of a
 * float32 sum of k float32 products in any order (fused or not). */
static bool within_bound(const operand *a, const operand *b, const float *got) {
    const int64_t m = a->rows, k = a->cols, n = b->cols;
    const double u = ldexp(1.0, -24);
    double worst = 0;
    for (int64_t bi = 0; bi < a->bsz; bi++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    const double x = at(a, bi, i, p) * at(b, bi, p, j);
                    s += x, mag += fabs(x);
                }
                const double err =
                    fabs((double)got[(bi * m + i) * n + j] - s) / ((k + 2) * u * mag);
                worst = err > worst ? err : worst;
            }
    return worst <= 1.0;
}

/* kern_matmul.c's rule, restated: one call for the batch where the primitive is the provider */
static bool one_call(int64_t bsz, int64_t m, int64_t n, int64_t k) {
    const double macs = (double)m * (double)n * (double)k;
    return tsi_lib_sgemm_primitive_provider() && bsz > 1 && m > 1 && n > 1 &&
           macs * (double)bsz >= 131072.0 && (macs <= 4096.0 || macs >= 32768.0);
}

static const char *lay_name[] = {"contiguous", "transposed", "strided", "broadcast"};

static void check_case(int64_t bsz, int64_t m, int64_t n, int64_t k, enum layout la, enum layout lb,
                       bool threads_too) {
    operand a, b;
    make(&a, la, bsz, m, k);
    make(&b, lb, bsz, k, n);
    CHECK_OK();
    const uint64_t before = tsi_dnnl_matmul_count();
    float *got = product(&a, &b);
    const uint64_t ran = tsi_dnnl_matmul_count() - before;
    CHECK_OK();
    CHECK(got != NULL);
    const bool ok = got && within_bound(&a, &b, got);
    printf("%3lld x %3lldx%3lldx%4lld A %-10s B %-10s: %s, %llu primitive call(s)\n",
           (long long)bsz, (long long)m, (long long)n, (long long)k, lay_name[la], lay_name[lb],
           ok ? "within (k+2)u sum|ab|" : "OUT OF BOUND", (unsigned long long)ran);
    CHECK(ok);
    /* the rule: one call for a batch it takes (oneDNN may decline a column stride of 2); none for
     * the others, whose products are each below the primitive's own share (2^20) */
    if (one_call(bsz, m, n, k) && la != STRIDED && lb != STRIDED) CHECK_EQ(ran, 1);
    if (!one_call(bsz, m, n, k) && (double)m * (double)n * (double)k < 1048576.0) CHECK_EQ(ran, 0);
    /* one by one: the same bound */
    tsi_dnnl_matmul_batched_enable(false);
    float *alone = product(&a, &b);
    tsi_dnnl_matmul_batched_enable(true);
    CHECK(alone && within_bound(&a, &b, alone));
    if (threads_too && got) { /* brgemm never splits k: the same bits on 1 and 2 threads */
        const int saved = ts_get_num_threads();
        ts_set_num_threads(saved == 1 ? 2 : 1);
        float *other = product(&a, &b);
        ts_set_num_threads(saved);
        CHECK(other != NULL);
        const size_t bytes = sizeof(float) * (size_t)(bsz * m * n);
        if (other) CHECK(memcmp(other, got, bytes) == 0);
        free(other);
    }
    free(got);
    free(alone);
    drop(&a), drop(&b);
}

/* Every allocation of a batched product failing in turn: a right result or TS_ERR_OOM, never a
 * differently computed one (the one-call path reports its scratchpad not had, rather than multiply
 * one by one) nor a leak. */
static void check_faults(void) {
    operand a, b;
    make(&a, CONTIG, 6, 37, 64);
    make(&b, TRANSPOSED, 6, 64, 45);
    ts_fault_alloc_set(0);
    float *const first = product(&a, &b);
    const int64_t n = (int64_t)ts_fault_alloc_count();
    CHECK(first && within_bound(&a, &b, first));
    const size_t bytes = sizeof(float) * 6 * 37 * 45;
    float *got;
    int failed = 0;
    for (int64_t i = 1; i <= n + 1; i++) {
        ts_fault_alloc_set(i);
        got = product(&a, &b);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (got) {
            CHECK(first && !memcmp(got, first, bytes)); /* the same path's bits */
        } else {
            CHECK(fired);
            CHECK_EQ(ts_error(), TS_ERR_OOM);
            failed++;
        }
        ts_error_clear();
        free(got);
    }
    printf("allocation failures: %lld allocations, %d of them failed the product cleanly\n",
           (long long)n, failed);
    free(first);
    drop(&a), drop(&b);
}

int main(void) {
    const int gate = ts_test_isa_gate();
    if (gate) return gate;
    printf("GEMM: float32 %s; one call a batch: %s\n", tsi_lib_gemm_name(false),
           tsi_lib_sgemm_primitive_provider() ? "yes" : "no (the products go one by one)");
    ts_mem_stats before;
    ts_memory_stats(ts_cpu(), &before);
    /* attention's score and context products at sizes off the vector width */
    check_case(6, 37, 45, 64, CONTIG, TRANSPOSED, true);
    check_case(6, 37, 64, 45, CONTIG, CONTIG, true);
    check_case(4, 24, 40, 50, TRANSPOSED, CONTIG, false);
    check_case(4, 24, 40, 50, TRANSPOSED, TRANSPOSED, false);
    /* many products the plain loop would take one by one (at most 4096 multiply-adds each) */
    check_case(32, 16, 16, 16, CONTIG, CONTIG, false);
    check_case(120, 13, 11, 9, CONTIG, TRANSPOSED, true);
    /* a broadcast operand: one matrix for the whole batch (with A transposed, so that matmul
     * cannot fold the batch into A's rows) */
    check_case(5, 33, 20, 70, BROADCAST, CONTIG, true);
    check_case(5, 20, 33, 70, TRANSPOSED, BROADCAST, true);
    /* a column stride of 2 (oneDNN may run it or decline it: right either way) */
    check_case(4, 24, 40, 50, STRIDED, TRANSPOSED, false);
    check_case(4, 24, 40, 50, CONTIG, STRIDED, false);
    /* a long reduction into a small C: must not be split over the threads */
    check_case(3, 19, 17, 4096, CONTIG, CONTIG, true);
    /* left one by one: one row a batch (decode-time attention), the OpenBLAS-sized products,
     * too little work in all */
    check_case(256, 1, 64, 64, CONTIG, TRANSPOSED, false);
    check_case(64, 50, 1, 40, CONTIG, CONTIG, false);
    check_case(8, 24, 24, 24, CONTIG, CONTIG, false);
    check_case(32, 24, 24, 24, CONTIG, CONTIG,
               false); /* enough work in all, each product mid-size */
    check_case(16, 7, 33, 65, CONTIG, TRANSPOSED, false);
    check_case(2, 16, 16, 64, CONTIG, TRANSPOSED, false);
    check_faults();
    ts_mem_stats after;
    ts_memory_stats(ts_cpu(), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    return ts_test_finish();
}
