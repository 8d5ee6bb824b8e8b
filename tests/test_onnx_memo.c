/* test_onnx_memo.c — the shape memo (src/onnx/memo.c) on models packed with protobuf-c
 * (tests/onnx_support/xformer_models.h): same-shape runs reuse its values, other batch sizes,
 * devices and sequence lengths (attention's scale and causal mask from the inputs' shapes) get
 * their own, data-dependent shapes (NonZero) are never kept, threads running one model with their
 * own batch sizes (and an optimized linear) share it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/memo.h"
#include "onnx/onnx_internal.h"
#include "xformer_models.h"

/* ------------------------------------------------------------------ the shape memo */
/* y = Reshape(x, [N, 3, 2]) * N, N read from x's shape at run time (x [N, 6]) */
static void build_memo_model(void) {
    begin(17);
    input("x", 2, (int64_t[]){SYM, 6});
    op("Shape", "x", "shape");
    const int64_t zero = 0;
    Onnx__NodeProto *c = op("Constant", "", "i0");
    attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        data_tensor("i0", INT64, 0, NULL, NULL, &zero);
    op("Gather", "shape i0", "n");
    constant_ints("axes", 1, (int64_t[]){0});
    op("Unsqueeze", "n axes", "n1");
    constant_ints("rest", 2, (int64_t[]){3, 2});
    attr_int(op("Concat", "n1 rest", "target"), "axis", 0);
    op("Reshape", "x target", "r");
    attr_int(op("Cast", "n", "nf"), "to", FLOAT);
    op("Mul", "r nf", "y");
    output("y");
}

static bool memo_run_right(ts_module *m, int64_t n, ts_device dev) {
    float x[8 * 6]; /* values of its own (threads call this): eighths, so x * n is exact */
    for (int i = 0; i < n * 6; i++) x[i] = (float)((i * 37 + (int)n) % 11 - 5) * 0.125f;
    ts_scope_begin();
    ts_tensor *xt = host_tensor(TS_SHAPE(n, 6), x, dev), *y = run(m, 1, &xt);
    bool ok = y && ts_ndim(y) == 3 && ts_size(y, 0) == n && ts_size(y, 1) == 3 &&
              ts_size(y, 2) == 2 && tsi_device_eq(ts_device_of(y), dev);
    double *h = ok ? host(y) : NULL;
    for (int i = 0; ok && i < n * 6; i++) ok = h[i] == (double)x[i] * (double)n;
    free(h);
    ts_scope_end();
    ts_error_clear();
    return ok;
}

static void test_memo(void) {
    printf("shape memo\n");
    build_memo_model();
    ts_module *m = load(false);
    CHECK(m != NULL);
    if (!m) {
        done();
        return;
    }
    tso_graph *g = ((tso_model *)m)->graph;
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    /* batch sizes in turn: a repeat takes the memo (a hit, its nodes skipped), a change of batch
     * size or device computes again and gives its own answer */
    const int64_t batches[] = {2, 2, 3, 3, 2, 5, 2};
    const int hits_after[] = {0, 1, 1, 2, 2, 2, 2};
    int64_t base_hits = 0;
    for (int d = 0; d < nd; d++) {
        ts_module_to(m, devs[d]);
        for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
            CHECK(memo_run_right(m, batches[i], devs[d]));
            int64_t hits;
            int skipped;
            tso_memo_stats(g, &hits, &skipped);
            CHECK_EQ(hits - base_hits, hits_after[i]);
            CHECK_EQ(skipped, 5); /* Shape, Gather, Unsqueeze, Concat, Cast */
        }
        int skipped;
        tso_memo_stats(g, &base_hits, &skipped);
    }
    ts_module_free(m);
    done();

    /* NonZero's output shape depends on x's values: what follows is never kept */
    begin(17);
    input("x", 1, (int64_t[]){4});
    op("NonZero", "x", "nz");
    op("Shape", "nz", "s");
    attr_int(op("Cast", "s", "sf"), "to", FLOAT);
    constant("zero", 0.0, 0);
    op("Add", "sf zero", "y");
    output("y");
    m = load(false);
    CHECK(m != NULL);
    const float xs[3][4] = {{1, 0, 1, 0}, {1, 1, 1, 0}, {0, 0, 0, 0}};
    for (int r = 0; m && r < 6; r++) {
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(4), xs[r % 3], ts_cpu()), *y = run(m, 1, &xt);
        double want[2] = {1, r % 3 == 0 ? 2 : r % 3 == 1 ? 3 : 0}, tol[2] = {0, 0};
        check_close("Shape(NonZero(x))", y, want, tol, 2);
        ts_scope_end();
    }
    int64_t hits;
    int skipped;
    if (m) {
        tso_memo_stats(((tso_model *)m)->graph, &hits, &skipped);
        CHECK_EQ(skipped, 0);
    }
    ts_module_free(m);
    done();
}

/* attention whose scale and causal mask come from the inputs' shapes, run with other sequence
 * lengths: each gets its own scale and mask */
static void test_memo_lengths(void) {
    printf("shape memo: sequence lengths\n");
    const attn_spec base = {"", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6};
    build_attention(&base);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        CHECK(m != NULL);
        const int lens[][2] = {{5, 5}, {5, 5}, {3, 3}, {2, 4}, {5, 5}, {3, 3}};
        for (size_t i = 0; m && i < sizeof lens / sizeof *lens; i++) {
            attn_spec s = base;
            s.L = lens[i][0], s.S = lens[i][1];
            float q[AB * AH * AMAX * AE], k[AB * AH * AMAX * AE], v[AB * AH * AMAX * AV];
            fill(q, AB * AH * s.L * AE, 2.0);
            fill(k, AB * AH * s.S * AE, 2.0);
            fill(v, AB * AH * s.S * AV, 1.0);
            attn_mask_of(&s);
            double want[AB * AH * AMAX * AV], tol[AB * AH * AMAX * AV];
            attn_reference(&s, q, k, v, 1 / sqrt((double)AE), want, tol);
            ts_scope_begin();
            ts_tensor *in[3] = {host_tensor(TS_SHAPE(AB, AH, s.L, AE), q, ts_cpu()),
                                host_tensor(TS_SHAPE(AB, AH, s.S, AE), k, ts_cpu()),
                                host_tensor(TS_SHAPE(AB, AH, s.S, AV), v, ts_cpu())};
            char what[96];
            snprintf(what, sizeof what, "L %d, S %d, %s", s.L, s.S,
                     optimize ? "optimized" : "plain");
            check_close(what, run(m, 3, in), want, tol, AB * AH * s.L * AV);
            ts_scope_end();
        }
        int64_t hits;
        int skipped;
        if (m) {
            tso_memo_stats(((tso_model *)m)->graph, &hits, &skipped);
            CHECK_EQ(hits, 1); /* the second 5 x 5 run */
        }
        ts_module_free(m);
    }
    done();
}

/* threads running one model with their own batch sizes: each always gets its own answer; and an
 * optimized linear in inference */
typedef struct thread_arg {
    ts_module *m, *lin;
    int64_t batch;
    const float *x;
    const double *want, *tol;
    bool ok;
} thread_arg;

static bool linear_run_right(const thread_arg *a) {
    ts_scope_begin();
    ts_tensor *xt = host_tensor(TS_SHAPE(LB, LR, LK), a->x, ts_cpu()), *y = run(a->lin, 1, &xt);
    double *h = y ? host(y) : NULL;
    bool ok = h != NULL;
    for (int i = 0; ok && i < LB * LR * LN; i++) ok = fabs(h[i] - a->want[i]) <= a->tol[i];
    free(h);
    ts_scope_end();
    return ok;
}

static void *memo_thread(void *p) {
    thread_arg *a = p;
    a->ok = true;
    ts_no_grad_begin(); /* per thread */
    for (int i = 0; i < 40; i++)
        a->ok =
            memo_run_right(a->m, i % 3 ? a->batch : 1, ts_cpu()) && linear_run_right(a) && a->ok;
    ts_no_grad_end();
    return NULL;
}

static void test_memo_threads(void) {
    printf("shape memo: threads\n");
    build_memo_model();
    ts_module *m = load(false);
    done();
    const lin_spec ls = {"linear", L_MATMUL_ADD, false, false, false, 1, 1};
    build_linear(&ls);
    ts_module *lin = load(true);
    done();
    CHECK(m && lin);
    float x[LB * LR * LK];
    double want[LB * LR * LN], tol[LB * LR * LN];
    fill(x, LB * LR * LK, 2.0);
    lin_reference(x, LB * LR, true, want, tol);
    enum { T = 4 };
    pthread_t th[T];
    thread_arg args[T];
    for (int t = 0; m && lin && t < T; t++) {
        args[t] =
            (thread_arg){.m = m, .lin = lin, .batch = 2 + t, .x = x, .want = want, .tol = tol};
        CHECK(pthread_create(&th[t], NULL, memo_thread, &args[t]) == 0);
    }
    for (int t = 0; m && lin && t < T; t++) {
        pthread_join(th[t], NULL);
        CHECK(args[t].ok);
    }
    ts_module_free(m);
    ts_module_free(lin);
}

int main(void) {
    ts_sim_configure(1, 0);
    lin_weights_init();
    test_memo();
    test_memo_lengths();
    test_memo_threads();
    arena_release();
    return ts_test_finish();
}
#endif
