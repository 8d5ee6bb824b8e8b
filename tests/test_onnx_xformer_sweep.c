/* test_onnx_xformer_sweep.c — an allocation-failure sweep (fault_sweep.h) over loading an
 * attention model with ts_onnx_opts.optimize (src/onnx/rewrite_xformer.c) and running it twice (the
 * shape memo's miss and hit): every failure is TS_ERR_OOM and a run that succeeds computes the
 * float64 reference within its bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "xformer_models.h"

/* ------------------------------------------------------------------ allocation failures */
static uint8_t *sweep_bytes;
static size_t sweep_len;
static float sweep_q[AB * AH * 5 * AE], sweep_k[AB * AH * 5 * AE], sweep_v[AB * AH * 5 * AV];
static double sweep_want[AB * AH * 5 * AV], sweep_tol[AB * AH * 5 * AV];

typedef struct sweep_st {
    ts_module *m;
    bool matched;
} sweep_st;

static void *sweep_setup(void) { return calloc(1, sizeof(sweep_st)); }

/* loads the optimized attention model and runs it twice (the memo's miss and hit) */
static bool sweep_scenario(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m); /* the run after a failure loads again */
    s->m = ts_onnx_load_buffer(sweep_bytes, sweep_len, NULL, (ts_onnx_opts){.optimize = true});
    bool ok = s->m != NULL;
    s->matched = true;
    for (int r = 0; ok && r < 2; r++) {
        ts_scope_begin();
        ts_tensor *in[3] = {host_tensor(TS_SHAPE(AB, AH, 5, AE), sweep_q, ts_cpu()),
                            host_tensor(TS_SHAPE(AB, AH, 5, AE), sweep_k, ts_cpu()),
                            host_tensor(TS_SHAPE(AB, AH, 5, AV), sweep_v, ts_cpu())};
        ts_tensor *y = in[0] && in[1] && in[2] ? run(s->m, 3, in) : NULL;
        ok = y && !ts_error();
        double *h = ok ? host(y) : NULL;
        for (int i = 0; h && i < AB * AH * 5 * AV; i++)
            s->matched = s->matched && fabs(h[i] - sweep_want[i]) <= sweep_tol[i];
        free(h);
        ts_scope_end();
    }
    return ok && !ts_error();
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (ok) CHECK(s->matched);
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m);
    free(s);
}

static void test_sweep(void) {
    const attn_spec s = {"", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6};
    fill(sweep_q, AB * AH * 5 * AE, 2.0);
    fill(sweep_k, AB * AH * 5 * AE, 2.0);
    fill(sweep_v, AB * AH * 5 * AV, 1.0);
    attn_mask_of(&s);
    attn_reference(&s, sweep_q, sweep_k, sweep_v, 1 / sqrt((double)AE), sweep_want, sweep_tol);
    build_attention(&s);
    sweep_len = onnx__model_proto__get_packed_size(cur_model);
    sweep_bytes = malloc(sweep_len);
    onnx__model_proto__pack(cur_model, sweep_bytes);
    done();
    const ts_sweep_case c = {.name = "onnx_xformer",
                             .setup = sweep_setup,
                             .run = sweep_scenario,
                             .teardown = sweep_teardown,
                             .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 20000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    free(sweep_bytes);
}

int main(void) {
    ts_sim_configure(1, 0);
    test_sweep();
    arena_release();
    return ts_test_finish();
}
#endif
