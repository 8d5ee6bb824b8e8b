/* test_gemv.c — the float32 matrix-vector kernel (gemv.c) against a float64 reference: its edges
 * (rows in fours and the rest, the k tail, padded rows, strided outputs and biases), nothing
 * written outside y, the same bits on 1 and 2 threads, declining where it must (the portable ISA,
 * turned off); and the products that kern_matmul.c gives it (a linear layer on one row with and
 * without bias, x @ W^T through ts_matmul, a weight with padded rows, a matrix times a column)
 * against the reference, with the kernel's bits, while the layouts it does not take (W [k, n]
 * row-major) still come out right. The variant is the one ts_cpu_isa_get() names (ctest runs this
 * under each TS_CPU_ISA cap).
 *
 * The bound: y = b + sum_p w_p x_p, products and sums rounded in some order fixed by k, then the
 * bias added: |y - ref| <= gamma_{k+1} (sum_p |w_p x_p| + |b|), gamma_n = n u / (1 - n u),
 * u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1 and 3.5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemv.h"
#include "ts_test.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double gamma_n(int64_t n) {
    const double u = 0x1p-24;
    return (double)n * u / (1.0 - (double)n * u);
}

/* whether the kernel runs here: an x86 build and a vector ISA */
static bool kernel_here(void) {
    return tsi_gemv_rows_present() && ts_cpu_isa_get() != TS_ISA_GENERIC;
}

/* |got - (b + W x)| within the bound for each of n rows (W rows at stride ldw, y at stride sy,
 * the bias at stride sb or none): the number of rows outside it */
static int count_wrong(const char *what, int64_t n, int64_t k, const float *x, const float *w,
                       int64_t ldw, const float *b, int64_t sb, const float *y, int64_t sy) {
    int bad = 0;
    for (int64_t o = 0; o < n; o++) {
        double s = b ? b[o * sb] : 0.0, mag = b ? fabs(b[o * sb]) : 0.0;
        for (int64_t p = 0; p < k; p++) {
            const double t = (double)w[o * ldw + p] * (double)x[p];
            s += t, mag += fabs(t);
        }
        const double got = y[o * sy];
        if (!(fabs(got - s) <= gamma_n(k + 1) * mag)) {
            if (bad++ < 3)
                printf("  %s n=%lld k=%lld row %lld: %.9g, reference %.9g (bound %.3g)\n", what,
                       (long long)n, (long long)k, (long long)o, got, s, gamma_n(k + 1) * mag);
        }
    }
    return bad;
}

static float *random_floats(int64_t count) {
    float *p = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    for (int64_t i = 0; i < count; i++) p[i] = uniform();
    return p;
}

enum { GUARD = 5 };
static const float GUARD_VALUE = -777.0f;

/* One direct call: W [n][ldw] (ldw = k + pad), y at stride sy with guards around and between its
 * elements, bias at stride sb (0: none). Returns the result rows (caller frees) or NULL when the
 * kernel declined (then y is checked untouched). */
static float *direct_case(int64_t n, int64_t k, int64_t pad, int64_t sy, int64_t sb,
                          bool parallel) {
    const int64_t ldw = k + pad, span = (n - 1) * sy + 1 + 2 * GUARD;
    float *x = random_floats(k), *w = random_floats(n * ldw),
          *b = sb ? random_floats(n * sb) : NULL;
    float *yb = malloc(sizeof(float) * (size_t)span), *y = yb + GUARD;
    for (int64_t i = 0; i < span; i++) yb[i] = GUARD_VALUE;
    const bool took = tsi_gemv_f32(n, k, x, w, ldw, b, sb, y, sy, parallel);
    CHECK(took == kernel_here());
    float *rows = NULL;
    char what[64];
    snprintf(what, sizeof what, "direct pad=%lld sy=%lld sb=%lld", (long long)pad, (long long)sy,
             (long long)sb);
    if (took) {
        CHECK_EQ(count_wrong(what, n, k, x, w, ldw, b, sb, y, sy), 0);
        rows = malloc(sizeof(float) * (size_t)n);
        for (int64_t o = 0; o < n; o++) rows[o] = y[o * sy];
    }
    /* the guards, the elements between y's, and everything when it declined, keep their value */
    int touched = 0;
    for (int64_t i = 0; i < span; i++) {
        const int64_t off = i - GUARD;
        const bool inside = took && off >= 0 && off % sy == 0 && off / sy < n;
        if (!inside && yb[i] != GUARD_VALUE) touched++;
    }
    CHECK_EQ(touched, 0);
    free(x), free(w), free(b), free(yb);
    return rows;
}

static void check_direct(void) {
    /* rows: fewer than four, fours, fours and a rest; k: below one vector, one, a tail, long */
    const int64_t ns[] = {1, 3, 4, 5, 7, 64, 65, 131};
    const int64_t ks[] = {1, 5, 8, 15, 16, 17, 33, 576, 1031};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (size_t j = 0; j < sizeof ks / sizeof *ks; j++) {
            const int64_t n = ns[i], k = ks[j];
            free(direct_case(n, k, 0, 1, 0, false));
            free(direct_case(n, k, 3, 1, 1, false));
            free(direct_case(n, k, 1, 3, 2, true));
        }
    /* large enough for threads (n k >= 2^16, several pieces of rows): the same bits on 1 and 2 */
    const int64_t big[][2] = {{1000, 1024}, {1001, 577}, {129, 1031}};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        const uint64_t seed = rng;
        ts_set_num_threads(1);
        float *one = direct_case(big[i][0], big[i][1], 0, 1, 1, true);
        rng = seed;
        ts_set_num_threads(2);
        float *two = direct_case(big[i][0], big[i][1], 0, 1, 1, true);
        CHECK((one == NULL) == (two == NULL));
        if (one && two) CHECK(memcmp(one, two, sizeof(float) * (size_t)big[i][0]) == 0);
        free(one), free(two);
    }
    /* turned off: declines, writes nothing */
    tsi_gemv_enable(false);
    float x[4] = {1, 2, 3, 4}, w[8] = {1, 1, 1, 1, 2, 2, 2, 2}, y[2] = {-1, -1};
    CHECK(!tsi_gemv_f32(2, 4, x, w, 4, NULL, 0, y, 1, false));
    CHECK(y[0] == -1 && y[1] == -1);
    tsi_gemv_enable(true);
    CHECK(tsi_gemv_f32(2, 4, x, w, 4, NULL, 0, y, 1, false) == kernel_here());
    if (kernel_here()) CHECK(y[0] == 10 && y[1] == 20);
}

/* ------------------------------------------------------------------ through kern_matmul.c */
static ts_tensor *tensor_of(const float *p, ts_shape s) {
    return ts_from_data(s, TS_F32, p, (ts_opts){0});
}

static float *host(ts_tensor *t, int64_t count) {
    float *p = malloc(sizeof(float) * (size_t)count);
    ts_tensor *c = ts_contiguous(t);
    CHECK(c && ts_numel(c) == count &&
          ts_copy_to_host(c, p, sizeof(float) * (size_t)count) == TS_OK);
    return p;
}

/* x [1, k] @ W^T + b with W [n, k] stored in rows of ldw = k + pad (a narrowed view when pad > 0),
 * by ts_linear (bias or none) and ts_matmul(x, W^T): within the bound, the kernel's bits where it
 * runs, the same bits on 1 and 2 threads. Then W^T copied into a row-major [k, n] (the layout the
 * kernel does not take): within the bound. */
static void linear_case(int64_t n, int64_t k, int64_t pad, bool bias) {
    const int64_t ldw = k + pad;
    float *x = random_floats(k), *w = random_floats(n * ldw), *b = random_floats(n);
    ts_tensor *tx = tensor_of(x, TS_SHAPE(1, k)), *tb = bias ? tensor_of(b, TS_SHAPE(n)) : NULL;
    ts_tensor *tw = ts_narrow(tensor_of(w, TS_SHAPE(n, ldw)), 1, 0, k);
    float *want = malloc(sizeof(float) * (size_t)n);
    const bool took = tsi_gemv_f32(n, k, x, w, ldw, bias ? b : NULL, 1, want, 1, false);
    char what[64];
    for (int threads = 1; threads <= 2; threads++) {
        ts_set_num_threads(threads);
        ts_tensor *outs[3] = {ts_linear(tx, tw, tb), ts_matmul(tx, ts_t(tw)),
                              ts_contiguous(ts_t(tw))};
        if (outs[1] && bias) outs[1] = ts_add(outs[1], tb);
        outs[2] = outs[2] ? ts_matmul(tx, outs[2]) : NULL; /* W^T row-major [k, n] */
        if (outs[2] && bias) outs[2] = ts_add(outs[2], tb);
        for (int i = 0; i < 3; i++) {
            CHECK(outs[i] && ts_ndim(outs[i]) == 2 && ts_size(outs[i], 1) == n);
            if (!outs[i]) continue;
            float *y = host(outs[i], n);
            snprintf(what, sizeof what, "%s pad=%lld bias=%d threads=%d",
                     i == 0   ? "linear"
                     : i == 1 ? "matmul x W^T"
                              : "matmul x [k, n]",
                     (long long)pad, bias, threads);
            CHECK_EQ(count_wrong(what, n, k, x, w, ldw, bias ? b : NULL, 1, y, 1), 0);
            /* the kernel ran where it takes the product (past kern_matmul.c's direct loop) */
            if (took && i < 2 && (double)n * (double)k > 4096)
                CHECK(memcmp(y, want, sizeof(float) * (size_t)n) == 0);
            free(y);
        }
    }
    free(x), free(w), free(b), free(want);
}

/* A [m, k] (rows of lda) @ v [k, 1]: the kernel with A's rows as its weight; and as a linear
 * layer of one output with a bias */
static void column_case(int64_t m, int64_t k, int64_t pad) {
    const int64_t lda = k + pad;
    float *a = random_floats(m * lda), *v = random_floats(k);
    ts_tensor *ta = ts_narrow(tensor_of(a, TS_SHAPE(m, lda)), 1, 0, k);
    ts_tensor *tv = tensor_of(v, TS_SHAPE(k, 1));
    float *want = malloc(sizeof(float) * (size_t)m);
    const bool took = tsi_gemv_f32(m, k, v, a, lda, NULL, 0, want, 1, false);
    ts_tensor *y = ts_matmul(ta, tv);
    CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == m && ts_size(y, 1) == 1);
    if (y) {
        float *got = host(y, m);
        CHECK_EQ(count_wrong("A v", m, k, v, a, lda, NULL, 0, got, 1), 0);
        if (took && (double)m * (double)k > 4096)
            CHECK(memcmp(got, want, sizeof(float) * (size_t)m) == 0);
        free(got);
    }
    /* a linear layer with one output on m rows: the same product, plus its one bias element */
    const float bias = 0.375f;
    ts_tensor *yl = ts_linear(ta, ts_reshape(tv, TS_SHAPE(1, k)), tensor_of(&bias, TS_SHAPE(1)));
    CHECK(yl && ts_ndim(yl) == 2 && ts_size(yl, 0) == m && ts_size(yl, 1) == 1);
    if (yl) {
        float *got = host(yl, m);
        CHECK_EQ(count_wrong("linear to 1", m, k, v, a, lda, &bias, 0, got, 1), 0);
        free(got);
    }
    free(a), free(v), free(want);
}

static void check_products(void) {
    ts_scope_begin();
    /* MobileNetV3-Small's classifier, odd sizes, one output, a short k */
    const int64_t shapes[][2] = {{1024, 576}, {1000, 1024}, {517, 1031}, {1, 5000}, {4099, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int pad = 0; pad <= 7; pad += 7) {
            linear_case(shapes[i][0], shapes[i][1], pad, true);
            linear_case(shapes[i][0], shapes[i][1], pad, false);
        }
    column_case(1000, 1024, 0);
    column_case(333, 77, 5);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the cpu backend installed */
    printf("gemv: kernel %s (isa %s)\n", kernel_here() ? "on" : "declines",
           tsi_cpu_isa_name(ts_cpu_isa_get()));
    check_direct();
    check_products();
    return ts_test_finish();
}
