/* fuzz_onnx.c — libFuzzer target: the ONNX loader on arbitrary bytes (ts_onnx_load_buffer, no
 * folder for external data) must load a model or refuse it with a status and a message, releasing
 * everything; a model that loads answers its queries and, when every input has a fixed shape of at
 * most 4096 elements, runs once on zeros: outputs on success, none and a message on failure
 * (tools/fuzz.sh builds and runs it; ctest replays tests/fuzz/corpus/onnx). ts_onnx_quantize reads
 * the same bytes first (dynamic, and static without batches). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera.h"

#define MAX_ELEMS 4096
#define MAX_IO    16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* a few bytes of pads or strides can ask a node for terabytes: the fuzzer's malloc limit (2 GiB)
 * would report that as a failure, so runs here bound each node (docs/ONNX.md, "Untrusted files") */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TS_ONNX_MAX_NODE_ELEMENTS", "16777216", 0);
    setenv("TS_ONNX_MAX_LOOP_ITERATIONS", "4096", 0); /* a trip count of 2^62 would never end */
    return 0;
}

/* a failure must come with its message */
static void check_failure(ts_status st) {
    if (st == TS_OK || ts_error() != st || !ts_error_message()[0]) abort();
    ts_error_clear();
}

/* the queries of a loaded model; false when an input is unusable for a run */
static bool check_info(ts_module *m, int n_in, int n_out, ts_onnx_value_info *in) {
    bool runnable = n_in <= MAX_IO;
    for (int i = 0; i < n_in; i++) {
        ts_onnx_value_info vi;
        if (ts_onnx_input_info(m, i, &vi) != TS_OK || !vi.name) abort();
        if (vi.ndim > TS_MAX_DIMS) abort();
        int64_t numel = 1;
        for (int d = 0; d < vi.ndim && runnable; d++) {
            if (vi.dims[d] < 0 || vi.dims[d] > MAX_ELEMS)
                runnable = false;
            else
                numel *= vi.dims[d];
            if (numel > MAX_ELEMS) runnable = false;
        }
        if (vi.ndim < 0) runnable = false;
        if (i < MAX_IO) in[i] = vi;
    }
    for (int i = 0; i < n_out; i++) {
        ts_onnx_value_info vi;
        if (ts_onnx_output_info(m, i, &vi) != TS_OK || !vi.name || vi.ndim > TS_MAX_DIMS) abort();
    }
    /* out of range: an error, not a crash */
    ts_onnx_value_info vi;
    if (ts_onnx_input_info(m, n_in, &vi) == TS_OK) abort();
    ts_error_clear();
    char *text = ts_onnx_describe(m);
    if (!text) check_failure(ts_error());
    free(text);
    return runnable;
}

static void run_zeros(ts_module *m, int n_in, int n_out, const ts_onnx_value_info *info) {
    ts_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    if (n_out > MAX_IO) n_out = MAX_IO;
    ts_scope_begin();
    for (int i = 0; i < n_in; i++) {
        ts_shape s = {.ndim = info[i].ndim};
        for (int d = 0; d < s.ndim; d++) s.dims[d] = info[i].dims[d];
        in[i] = ts_zeros(s, (ts_opts){.dtype = info[i].dtype, .device = ts_cpu()});
    }
    ts_status st = ts_onnx_run(m, n_in, in, n_out, out);
    if (st != TS_OK) {
        for (int i = 0; i < n_out; i++)
            if (out[i]) abort();
        check_failure(st);
    } else {
        for (int i = 0; i < n_out; i++)
            if (!out[i]) abort();
    }
    ts_scope_end();
    ts_error_clear();
}

static int no_batches(void *user, int n, ts_tensor **in) {
    (void)user, (void)n, (void)in;
    return 0;
}

/* ts_onnx_quantize on the same bytes: a written model or a failure with its message; dynamic
 * (no run), and static with no calibration batch (the graph walked and augmented, then refused) */
static void quantize(const uint8_t *data, size_t size) {
    static char out[64];
    if (!out[0]) snprintf(out, sizeof out, "/tmp/fuzz_onnx_quantize_%d.onnx", (int)getpid());
    ts_status st = ts_onnx_quantize_buffer(
        data, size, NULL, out, (ts_onnx_quantize_opts){.mode = TS_ONNX_QUANT_DYNAMIC}, NULL);
    if (st) check_failure(st);
    st = ts_onnx_quantize_buffer(data, size, NULL, out,
                                 (ts_onnx_quantize_opts){.calib_fn = no_batches}, NULL);
    if (st == TS_OK) abort(); /* no batch: never a calibrated model */
    check_failure(st);
    unlink(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    quantize(data, size);
    ts_module *m = ts_onnx_load_buffer(data, size, NULL, (ts_onnx_opts){0});
    if (!m) {
        check_failure(ts_error());
        return 0;
    }
    if (ts_error() || !ts_onnx_is_model(m)) abort();
    int n_in = ts_onnx_num_inputs(m), n_out = ts_onnx_num_outputs(m);
    if (n_in < 0 || n_out < 0) abort();
    ts_onnx_value_info info[MAX_IO];
    if (check_info(m, n_in, n_out, info)) run_zeros(m, n_in, n_out, info);
    ts_module_free(m);
    ts_error_clear();
    return 0;
}
