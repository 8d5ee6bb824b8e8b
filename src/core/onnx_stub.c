/* onnx_stub.c — the public ONNX API of a build without protobuf-c (TS_ONNX off or not found): every
 * call answers TS_ERR_UNSUPPORTED, saying what to install. */
#ifndef TS_HAVE_ONNX
#include "core/internal.h"

static void *unsupported(const char *op) {
    tsi_error_set(TS_ERR_UNSUPPORTED,
                  "%s: this build of Tessera has no ONNX support (install protobuf-c-compiler, "
                  "libprotobuf-c-dev and libonnx-dev, then rebuild)",
                  op);
    return NULL;
}

ts_module *ts_onnx_load(const char *path, ts_onnx_opts o) {
    (void)path, (void)o;
    return unsupported("onnx_load");
}
ts_module *ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                               ts_onnx_opts o) {
    (void)data, (void)size, (void)base_dir, (void)o;
    return unsupported("onnx_load");
}
bool ts_onnx_is_model(ts_module *m) {
    (void)m;
    return false;
}
int ts_onnx_num_inputs(ts_module *m) {
    (void)m;
    unsupported("onnx_num_inputs");
    return -1;
}
int ts_onnx_num_outputs(ts_module *m) {
    (void)m;
    unsupported("onnx_num_outputs");
    return -1;
}
ts_status ts_onnx_input_info(ts_module *m, int i, ts_onnx_value_info *out) {
    (void)m, (void)i, (void)out;
    unsupported("onnx_input_info");
    return TS_ERR_UNSUPPORTED;
}
ts_status ts_onnx_output_info(ts_module *m, int i, ts_onnx_value_info *out) {
    (void)m, (void)i, (void)out;
    unsupported("onnx_output_info");
    return TS_ERR_UNSUPPORTED;
}
ts_status ts_onnx_run(ts_module *m, int n_inputs, ts_tensor *const *inputs, int n_outputs,
                      ts_tensor **outputs) {
    (void)m, (void)n_inputs, (void)inputs, (void)n_outputs, (void)outputs;
    unsupported("onnx_run");
    return TS_ERR_UNSUPPORTED;
}
char *ts_onnx_describe(ts_module *m) {
    (void)m;
    return unsupported("onnx_describe");
}
ts_tensor *ts_onnx_tensor_load(const char *path, ts_device dev, char **name) {
    (void)path, (void)dev, (void)name;
    return unsupported("onnx_tensor_load");
}
ts_tensor *ts_onnx_tensor_parse(const void *data, size_t size, ts_device dev, char **name) {
    (void)data, (void)size, (void)dev, (void)name;
    return unsupported("onnx_tensor_parse");
}
ts_tensor *ts_onnx_sequence(int n, ts_tensor *const *tensors, ts_opts o) {
    (void)n, (void)tensors, (void)o;
    return unsupported("onnx_sequence");
}
ts_tensor *ts_onnx_optional(ts_tensor *value, ts_opts o) {
    (void)value, (void)o;
    return unsupported("onnx_optional");
}
bool ts_onnx_is_sequence(ts_tensor *t) {
    (void)t;
    return false;
}
bool ts_onnx_is_optional(ts_tensor *t) {
    (void)t;
    return false;
}
int64_t ts_onnx_sequence_length(ts_tensor *seq) {
    (void)seq;
    unsupported("onnx_sequence_length");
    return -1;
}
ts_tensor *ts_onnx_sequence_at(ts_tensor *seq, int64_t i) {
    (void)seq, (void)i;
    return unsupported("onnx_sequence_at");
}
bool ts_onnx_optional_has_value(ts_tensor *opt) {
    (void)opt;
    unsupported("onnx_optional_has_value");
    return false;
}
ts_tensor *ts_onnx_optional_value(ts_tensor *opt) {
    (void)opt;
    return unsupported("onnx_optional_value");
}
ts_status ts_onnx_export(ts_module *m, int n_inputs, ts_tensor *const *example_inputs,
                         const char *path, ts_onnx_export_opts o) {
    (void)m, (void)n_inputs, (void)example_inputs, (void)path, (void)o;
    unsupported("onnx_export");
    return TS_ERR_UNSUPPORTED;
}
#else
typedef int ts_onnx_stub_unused; /* ISO C: a translation unit must not be empty */
#endif
