/* test_onnx_xformer_grad.c — what the transformer rewrites of ts_onnx_opts.optimize
 * (src/onnx/rewrite_xformer.c) keep of the plain model: gradients reach the inputs and the
 * weights (GELU, linear); a linear of 1024 rows uses the weight's values of the moment as it
 * changes in place and the model moves between devices, with gradients recorded and without; a
 * run the fast path does not take fails as the file's graph does, naming the file's node. Models
 * from tests/onnx_support/xformer_models.h, against float64 references. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "backend/cpu/gemm_provider.h"
#include "tessera/profiler.h"
#include "xformer_models.h"

/* The weight copies (ts_contiguous) a run of m makes. */
static int copies_in_run(ts_module *m, ts_tensor *x) {
    CHECK(ts_profiler_start(NULL) == TS_OK);
    ts_scope_begin();
    CHECK(run(m, 1, &x) != NULL);
    ts_scope_end();
    CHECK(ts_profiler_stop() == TS_OK);
    ts_profile *p = ts_profiler_take();
    size_t n = 0;
    const ts_profile_event *e = p ? ts_profile_events(p, &n) : NULL;
    int copies = 0;
    for (size_t i = 0; i < n; i++)
        copies += e[i].kind == TS_PROF_OP && !strcmp(e[i].name, "contiguous");
    ts_profile_free(p);
    return copies;
}

/* ------------------------------------------------------------------ gradients */
/* loss = sum(y * g) of a one-input model run on x (requires grad); the input's gradient */
static ts_tensor *input_grad(ts_module *m, ts_tensor *x, ts_tensor *g) {
    ts_set_requires_grad(x, true);
    ts_tensor *y = run(m, 1, &x);
    if (!y) return NULL;
    ts_backward(ts_sum(ts_mul(y, g)));
    return ts_grad(x);
}

static void test_gradients(void) {
    printf("gradients\n");
    enum { N = 3, C = 8 };
    float x[N * C], g[N * C];
    fill(x, N * C, 4.0);
    fill(g, N * C, 1.0);
    /* GELU: dx = g (Phi(x) + x phi(x)); a float32 evaluation is off by a few units of each term,
     * the exp's argument x^2 / 2 adding x^2 u to phi's */
    double want[N * C], tol[N * C];
    for (int j = 0; j < N * C; j++) {
        const double v = x[j], phi = exp(-v * v / 2) / sqrt(2 * 3.14159265358979323846),
                     cdf = 0.5 * (1 + erf(v / sqrt(2.0)));
        want[j] = g[j] * (cdf + v * phi);
        tol[j] = 32 * U * fabs(g[j]) * (cdf + fabs(v) * phi * (1 + v * v)) + 1e-37;
    }
    const gelu_spec gs = {"gelu", G_TORCH, 0.5, sqrt(2.0), 1, false, 0, true};
    build_gelu(&gs);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(N, C), x, ts_cpu()),
                  *gt = host_tensor(TS_SHAPE(N, C), g, ts_cpu());
        check_close(optimize ? "gelu dx optimized" : "gelu dx plain", input_grad(m, xt, gt), want,
                    tol, N * C);
        ts_scope_end();
        ts_module_free(m);
    }
    done();

    /* linear: dx = g W^T, dW = x^T g, db = sum g over rows; the bound (n + 2) u sum|.||.| */
    const lin_spec ls = {"linear", L_BIAS_FIRST, false, false, false, 1, 1};
    float lx[LB * LR * LK], lg[LB * LR * LN];
    fill(lx, LB * LR * LK, 2.0);
    fill(lg, LB * LR * LN, 1.0);
    double dx[LB * LR * LK], dx_tol[LB * LR * LK], dw[LK * LN], dw_tol[LK * LN], db[LN], db_tol[LN];
    for (int r = 0; r < LB * LR; r++)
        for (int k = 0; k < LK; k++) {
            double v = 0, a = 0;
            for (int n = 0; n < LN; n++)
                v += (double)lg[r * LN + n] * lin_w[k * LN + n],
                    a += fabs((double)lg[r * LN + n] * lin_w[k * LN + n]);
            dx[r * LK + k] = v, dx_tol[r * LK + k] = (LN + 2) * U * a + 1e-37;
        }
    for (int k = 0; k < LK; k++)
        for (int n = 0; n < LN; n++) {
            double v = 0, a = 0;
            for (int r = 0; r < LB * LR; r++)
                v += (double)lx[r * LK + k] * lg[r * LN + n],
                    a += fabs((double)lx[r * LK + k] * lg[r * LN + n]);
            dw[k * LN + n] = v, dw_tol[k * LN + n] = (LB * LR + 2) * U * a + 1e-37;
        }
    for (int n = 0; n < LN; n++) {
        double v = 0, a = 0;
        for (int r = 0; r < LB * LR; r++) v += lg[r * LN + n], a += fabs(lg[r * LN + n]);
        db[n] = v, db_tol[n] = (LB * LR + 2) * U * a + 1e-37;
    }
    build_linear(&ls);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(LB, LR, LK), lx, ts_cpu()),
                  *gt = host_tensor(TS_SHAPE(LB, LR, LN), lg, ts_cpu());
        check_close(optimize ? "linear dx optimized" : "linear dx plain", input_grad(m, xt, gt), dx,
                    dx_tol, LB * LR * LK);
        /* the weight and the bias are the module's parameters: training reaches them */
        check_close(optimize ? "linear dW optimized" : "linear dW plain",
                    ts_grad(ts_module_get(m, "W")), dw, dw_tol, LK * LN);
        check_close(optimize ? "linear db optimized" : "linear db plain",
                    ts_grad(ts_module_get(m, "b")), db, db_tol, LN);
        ts_scope_end();
        ts_module_free(m);
    }
    done();
}

/* A product of 1024 rows (where the weight is copied transposed for the GEMM) plain and optimized,
 * with gradients recorded and without, as the weight changes in place (an optimizer step) and the
 * model moves between devices: each run uses the weight's values of the moment. */
static void test_linear_rows(void) {
    printf("linear of 1024 rows\n");
    enum { R = 1024 };
    const lin_spec ls = {"linear", L_MATMUL_ADD, false, false, false, 1, 1};
    static float x[R * LK];
    static double want[R * LN], tol[R * LN];
    float saved[LK * LN];
    memcpy(saved, lin_w, sizeof saved);
    fill(x, R * LK, 2.0);
    build_linear(&ls);
    cur->input[0]->type->tensor_type->shape = NULL; /* x [2, 512, K] */
    ts_module *m[2] = {load(false), load(true)};
    CHECK(m[0] && m[1]);
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; m[0] && m[1] && d < nd; d++) {
        ts_module_to(m[0], devs[d]);
        ts_module_to(m[1], devs[d]);
        for (int step = 0; step < 4; step++) {
            if (step % 2) { /* W <- -2 W in place in both, exactly (a power of two) */
                ts_no_grad_begin();
                ts_scope_begin(); /* what the in-place op returns */
                for (int i = 0; i < 2; i++) ts_mul_scalar_(ts_module_get(m[i], "W"), -2);
                ts_scope_end();
                ts_no_grad_end();
                for (int i = 0; i < LK * LN; i++) lin_w[i] *= -2;
            }
            lin_reference(x, R, true, want, tol);
            if (step >= 2) ts_no_grad_begin();
            for (int i = 0; i < 2; i++) {
                ts_scope_begin();
                ts_tensor *xt = host_tensor(TS_SHAPE(2, R / 2, LK), x, devs[d]);
                char what[128];
                snprintf(what, sizeof what, "%s on %s, step %d (%s)", i ? "optimized" : "plain",
                         ts_device_str(devs[d]), step, step >= 2 ? "inference" : "grad mode");
                check_close(what, run(m[i], 1, &xt), want, tol, R * LN);
                ts_error_clear();
                ts_scope_end();
            }
            if (step >= 2) ts_no_grad_end();
        }
        /* the [K, N] weight is copied transposed only where that moves the NN product from the
         * provider's GEMM to oneDNN's primitive (an AVX2 host's large products): this one is
         * below the primitive's size on every host, so it multiplies W where it lies */
        const bool pays = !tsi_lib_sgemm_primitive(false, false, R, LN, LK) &&
                          tsi_lib_sgemm_primitive(false, true, R, LN, LK) && LK <= LN;
        ts_no_grad_begin();
        ts_scope_begin();
        CHECK_EQ(copies_in_run(m[1], host_tensor(TS_SHAPE(2, R / 2, LK), x, devs[d])), pays);
        ts_scope_end();
        ts_no_grad_end();
    }
    memcpy(lin_w, saved, sizeof saved);
    ts_module_free(m[0]);
    ts_module_free(m[1]);
    done();
}

/* A run the fast path does not take fails as the file's graph does, naming the file's node. */
static void test_errors(void) {
    printf("errors name the file's nodes\n");
    const struct {
        const char *name;
        lin_form form;
        ts_shape x;
        const char *node;
    } cases[] = {
        {"x of the wrong width", L_MATMUL_ADD, TS_SHAPE(2, 3, LK + 1), "'MatMul_0' (MatMul)"},
        {"Gemm given a 3-D x", L_GEMM_T, TS_SHAPE(2, 3, LK), "'Gemm_0' (Gemm)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const lin_spec ls = {"", cases[i].form, false, false, false, 1, 0};
        build_linear(&ls);
        cur->input[0]->type->tensor_type->shape = NULL; /* any shape reaches the nodes */
        for (int optimize = 0; optimize < 2; optimize++) {
            ts_module *m = load(optimize);
            ts_scope_begin();
            float x[2 * 3 * (LK + 1)] = {0};
            ts_tensor *xt = host_tensor(cases[i].x, x, ts_cpu()), *y = m ? run(m, 1, &xt) : NULL;
            const char *msg = ts_error_message();
            bool ok = m && !y && ts_error() && strstr(msg, cases[i].node);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__,
                              "%s (%s): expected an error naming %s, got \"%s\"", cases[i].name,
                              optimize ? "optimized" : "plain", cases[i].node, msg);
            else if (optimize)
                printf("  %-30s %s\n", cases[i].name, msg);
            ts_error_clear();
            ts_scope_end();
            ts_module_free(m);
        }
        done();
    }
}

int main(void) {
    ts_sim_configure(1, 0);
    lin_weights_init();
    test_gradients();
    test_linear_rows();
    test_errors();
    arena_release();
    return ts_test_finish();
}
#endif
