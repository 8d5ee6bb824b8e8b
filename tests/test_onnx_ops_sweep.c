/* test_onnx_ops_sweep.c — an allocation-failure sweep (fault_sweep.h) over the ONNX operator
 * families of test_onnx_signal, test_onnx_text, test_onnx_train and test_onnx_quant: a model of
 * each (DFT, STFT, TfIdfVectorizer, Gradient, QLinearMatMul) loaded and run with every allocation
 * failing in turn; every failure is TS_ERR_OOM and a run that succeeds computes what a clean one
 * does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

/* ------------------------------------------------------------------ allocation failures */
/* Models of the operators here with their inputs (cpu), packed once; the sweep loads and runs them
 * all with every allocation failing in turn. */
enum { SWEEP_MODELS = 5, SWEEP_VALUES = 64 };
typedef struct sweep_model {
    uint8_t *buf;
    size_t len;
    int n_in;
    ts_tensor *in[9];
} sweep_model;
static sweep_model sweep[SWEEP_MODELS];
static double sweep_ref[SWEEP_MODELS][SWEEP_VALUES];

static void sweep_pack(sweep_model *s, model *b, int n_in, ts_tensor *const *in) {
    s->len = onnx__model_proto__get_packed_size(&b->m);
    s->buf = malloc(s->len);
    onnx__model_proto__pack(&b->m, s->buf);
    s->n_in = n_in;
    for (int i = 0; i < n_in; i++) s->in[i] = ts_retain(in[i]);
    model_free();
}

static void sweep_build(void) {
    ts_device cpu = ts_cpu();
    ts_scope_begin();
    float x[12], w3[3] = {2, -1, 0.5f};
    for (int i = 0; i < 12; i++) x[i] = (float)next_value();
    model *b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "onesided", 1);
    sweep_pack(&sweep[0], b, 1, (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(1, 6, 2), x)});
    b = model_new("STFT", "", 17, "x step w", "y");
    ts_tensor *step = ts_scalar(3, (ts_opts){.dtype = TS_I64});
    sweep_pack(&sweep[1], b, 3,
               (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(1, 12, 1), x), step,
                               tensor(cpu, TS_F32, TS_SHAPE(3), w3)});
    b = tfidf_model(&(tfidf_case){"TFIDF", 1, 3, 1, true, false, {0}});
    int64_t tok[8] = {2, 3, 5, 6, 7, 3, 2, 3};
    sweep_pack(&sweep[2], b, 1, (ts_tensor *[]){tensor(cpu, TS_I64, TS_SHAPE(8), tok)});
    b = model_new("Add", "", 13, "a b", "y da");
    import(b, TRAINING, 1);
    b->node->output[0] = text("s"), b->node->n_output = 1;
    add_node(b, "Mul", "", "s w", "y");
    add_node(b, "Gradient", TRAINING, "a b", "da");
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b"), a_str(b, "y", "y");
    init_f32(b, "w", 3, w3);
    sweep_pack(&sweep[3], b, 2,
               (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(3), x),
                               tensor(cpu, TS_F32, TS_SHAPE(3), x + 3)});
    uint8_t q[12] = {1, 7, 250, 3, 9, 0, 128, 77, 5, 6, 200, 13}, zp = 3;
    float sc = 0.5f;
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    ts_tensor *tsc = tensor(cpu, TS_F32, TS_SHAPE(), &sc),
              *tzp = tensor(cpu, TS_U8, TS_SHAPE(), &zp);
    sweep_pack(&sweep[4], b, 8,
               (ts_tensor *[]){tensor(cpu, TS_U8, TS_SHAPE(3, 4), q), tsc, tzp,
                               tensor(cpu, TS_U8, TS_SHAPE(4, 3), q), tsc, tzp, tsc, tzp});
    ts_scope_end();
}

typedef struct sweep_state {
    double got[SWEEP_MODELS][SWEEP_VALUES];
} sweep_state;

static void *sweep_setup(void) { return calloc(1, sizeof(sweep_state)); }
static void sweep_teardown(void *st) { free(st); }

/* loads and runs sweep model k; its last output's values (at most SWEEP_VALUES) into got */
static bool sweep_one(int k, double *got) {
    ts_module *m = ts_onnx_load_buffer(sweep[k].buf, sweep[k].len, NULL, (ts_onnx_opts){0});
    if (!m) return false;
    ts_scope_begin();
    ts_tensor *out[2] = {0};
    int n_out = ts_onnx_num_outputs(m);
    bool ok = ts_onnx_run(m, sweep[k].n_in, sweep[k].in, n_out, out) == TS_OK;
    ts_tensor *y = ok ? ts_contiguous(ts_to_dtype(out[n_out - 1], TS_F64)) : NULL;
    ok = y && ts_numel(y) <= SWEEP_VALUES &&
         ts_copy_to_host(y, got, (size_t)ts_numel(y) * sizeof *got) == TS_OK;
    ts_scope_end();
    ts_module_free(m);
    return ok && !ts_error();
}

static bool sweep_run(void *st) {
    sweep_state *s = st;
    for (int k = 0; k < SWEEP_MODELS; k++)
        if (!sweep_one(k, s->got[k])) return false;
    return true;
}

/* a run that succeeds (at once or after a failure) computes what a clean one does */
static void sweep_check(void *st, bool ok) {
    if (ok) CHECK(!memcmp(((sweep_state *)st)->got, sweep_ref, sizeof sweep_ref));
}

static void test_sweep(void) {
    sweep_build();
    sweep_state *ref = sweep_setup();
    CHECK(sweep_run(ref));
    memcpy(sweep_ref, ref->got, sizeof sweep_ref);
    sweep_teardown(ref);
    const ts_sweep_case c = {.name = "onnx signal, quantized, text and training operators",
                             .setup = sweep_setup,
                             .run = sweep_run,
                             .teardown = sweep_teardown,
                             .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 50000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    for (int k = 0; k < SWEEP_MODELS; k++) {
        for (int i = 0; i < sweep[k].n_in; i++) ts_release(sweep[k].in[i]);
        free(sweep[k].buf);
    }
}

int main(void) {
    test_sweep();
    return ts_test_finish();
}
#endif
