/* xformer_util.h — models built in memory node by node (xformer_util.c): a graph under
 * construction (cur, in cur_model), its nodes, constants, initializers, inputs and outputs, loaded
 * plain or optimized; float inputs from a fixed sequence and the checks of outputs against
 * float64 references within a bound. */
#ifndef TS_TEST_XFORMER_UTIL_H
#define TS_TEST_XFORMER_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx_build.h"
#include "tessera.h"

#define U      0x1p-24 /* float32's unit roundoff */
#define FLOAT  ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64  ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define SYM    (-1) /* a symbolic dimension in an input's shape */
#define BIGEND INT64_MAX

/* ------------------------------------------------------------------ building models
 * On onnx_build.h (attr, attr_int, attr_ints, ...): every part of a model comes from its arena,
 * freed when the model has been loaded (done); arena_release at the end of the test. */
extern Onnx__ModelProto *cur_model; /* the model begin() started */
extern Onnx__GraphProto *cur;       /* its graph */

/* a new model importing the default domain at opset */
void begin(int opset);
/* how many nodes of the loaded model's graph are of op type `type` (every node: NULL) */
int nodes_of(ts_module *m, const char *type);
/* a node of the current graph: inputs and outputs as space-separated names ("-" for an absent
 * optional input); named TYPE_INDEX */
Onnx__NodeProto *op(const char *type, const char *ins, const char *outs);
/* a tensor of `type` (FLOAT: f, INT64: i) with its values in float_data or int64_data */
Onnx__TensorProto *data_tensor(const char *name, int32_t type, int ndim, const int64_t *dims,
                               const float *f, const int64_t *i);
/* a Constant node: a float scalar (rank 0) or [1] (rank 1) */
void constant(const char *out, double v, int rank);
void constant_ints(const char *out, int count, const int64_t *v);
void constant_tensor(const char *out, int ndim, const int64_t *dims, const float *v);
void initializer(const char *name, int ndim, const int64_t *dims, const float *v);
/* a float graph input of that shape (ndim < 0: none; SYM dims symbolic: "batch" first, "len"
 * after), a float output of no declared shape */
void input(const char *name, int ndim, const int64_t *dims);
void output(const char *name);
/* The model built so far, loaded (optimize or not); NULL with the error. The arena is kept (the
 * same bytes load twice) until done() frees it. */
ts_module *load(bool optimize);
void done(void); /* arena_free */

/* ------------------------------------------------------------------ values and checks */
/* uniform in [-a, a) from a fixed sequence (the same weights on every run) */
void fill(float *v, int n, double a);
ts_tensor *host_tensor(ts_shape s, const float *v, ts_device dev);
/* t's values as doubles (a host array of ts_numel(t); freed by the caller) */
double *host(ts_tensor *t);
/* every |got - want| <= tol (elementwise) */
void check_close(const char *what, ts_tensor *got, const double *want, const double *tol,
                 int64_t n);
/* Runs a model of one output on inputs (device copies made here) */
ts_tensor *run(ts_module *m, int n_in, ts_tensor *const *in);

#endif /* TS_TEST_XFORMER_UTIL_H */
