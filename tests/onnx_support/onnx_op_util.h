/* onnx_op_util.h — one-node ONNX models for the operator tests (onnx_op_util.c): built in memory
 * with protobuf-c, loaded, fed and checked against references computed by the tests. */
#ifndef TS_TEST_ONNX_OP_UTIL_H
#define TS_TEST_ONNX_OP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "tessera.h"

#define U        0x1p-24 /* float32's unit roundoff */
#define TRAINING "ai.onnx.preview.training"

/* ------------------------------------------------------------------ one-node models in memory
 * Every protobuf part is calloc'ed and listed; model_free frees the list. */
typedef struct model {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__NodeProto *node;
} model;

char *text(const char *s); /* a copy of s among the model's parts */
void *part(size_t size);   /* zeroed memory among the model's parts (model_free frees it) */
void model_free(void);
/* imports `domain` at `version` */
void import(model *b, const char *domain, int version);
/* Appends the node `op` (in `domain`, "" for the default one) reading `ins` and writing `outs`
 * (space-separated names, "-" an absent optional input); the attribute helpers write to it. */
void add_node(model *b, const char *op, const char *domain, const char *ins, const char *outs);
/* A model with one node `op` (in `domain`) reading the graph inputs `ins` (no types declared: the
 * operator checks them) and writing the graph outputs `outs`; the default domain is imported at
 * `opset`. */
model *model_new(const char *op, const char *domain, int opset, const char *ins, const char *outs);
/* attributes of the last node added */
void a_int(model *b, const char *name, int64_t v);
void a_float(model *b, const char *name, float v);
void a_str(model *b, const char *name, const char *v);
void a_ints(model *b, const char *name, size_t k, const int64_t *v);
void a_floats(model *b, const char *name, size_t k, const float *v);
void a_strs(model *b, const char *name, const char *spaced);
/* a float32 initializer (a parameter of the loaded module) */
void init_f32(model *b, const char *name, int64_t n, const float *v);
/* a uint8 (int8 when s8) initializer of n values */
void init_8bit(model *b, const char *name, bool s8, int64_t n, const int32_t *v);
/* the model packed and loaded on dev (NULL with the error) */
ts_module *load(model *b, ts_device dev);

/* ------------------------------------------------------------------ tensors and checks */
ts_tensor *tensor(ts_device dev, ts_dtype dt, ts_shape s, const void *host);
/* got within tol[i] of want[i] (tol NULL: equal), of dtype dt and shape s */
void check_values(ts_tensor *got, ts_dtype dt, ts_shape s, const double *want, const double *tol,
                  const char *what);
/* Runs m with n_in inputs; out[0..n_out-1] get the outputs. */
bool run(ts_module *m, int n_in, ts_tensor **in, int n_out, ts_tensor **out);
/* deterministic values in [-1, 1) */
double next_value(void);

/* ------------------------------------------------------------------ the test programs */
/* A family's main: load_errors() once (its models refused at load), then on_device(dev) on every
 * test device; ts_test_finish()'s exit status. */
int op_test_main(void (*load_errors)(void), void (*on_device)(ts_device dev));

/* ------------------------------------------------------------------ errors */
/* loading b fails with code and a message holding `says` */
void refused(model *b, ts_status code, const char *says);
/* b loads on dev, and running it on inputs fails with code naming the node and `says` */
void fails(model *b, ts_device dev, int n_in, ts_tensor **in, ts_status code, const char *says);

/* ------------------------------------------------------------------ TfIdfVectorizer
 * A pool of 4 unigrams, 4 bigrams and a trigram, the output columns permuted; weights one per
 * n-gram of the pool. */
typedef struct tfidf_case {
    const char *mode;
    int64_t min, max, skip;
    bool weighted, batch; /* batch: X2 [2, 8] int64, else X1 [11] int32 */
    double want[18];      /* onnxruntime 1.32's outputs for the same model and input */
} tfidf_case;
extern const float tfidf_weights[9];
model *tfidf_model(const tfidf_case *tc);

#endif /* TS_TEST_ONNX_OP_UTIL_H */
