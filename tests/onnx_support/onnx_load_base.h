/* onnx_load_base.h — the base model of the ONNX loader tests (onnx_load_base.c): y = Relu(x + w),
 * x and w float [2, 3], w = -3..2: with x = 1, y = 0 0 0 1 2 3. ModelProtos are built with
 * onnx_build.h (an arena freed per case). */
#ifndef TS_TEST_ONNX_LOAD_BASE_H
#define TS_TEST_ONNX_LOAD_BASE_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx_build.h"
#include "tessera.h"

#define OPSET 13
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

extern const int64_t d23[2];  /* x's, w's and y's dims */
extern const float w_vals[6]; /* w */
extern const float y_vals[6]; /* y at x = 1 */

Onnx__GraphProto *base_graph(void);
/* the base model with its initializer w replaced */
Onnx__ModelProto *with_w(Onnx__TensorProto *w);
/* Runs a one-input model on x = 1 ([2, 3]) and compares with y_vals. */
bool runs_right(ts_module *m);
/* A model's bytes must load and compute y_vals (base_dir for its external data); frees the
 * arena. */
void loads(const char *what, const Onnx__ModelProto *m, const char *dir);
/* A model's bytes must be refused with code and a message containing frag; frees the arena. */
void refused(const char *what, const Onnx__ModelProto *m, const char *dir, ts_status code,
             const char *frag);

#endif /* TS_TEST_ONNX_LOAD_BASE_H */
