/* onnx_build.h — building ModelProtos in memory for the ONNX tests (onnx_build.c). */
#ifndef TS_TEST_ONNX_BUILD_H
#define TS_TEST_ONNX_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* Each repeated field a builder fills holds at most this many entries. */
enum { CAP = 64 };

/* Zeroed memory from the arena; arena_free frees what a case built, arena_release also the
 * arena's table (at the end of the test). */
void *get(size_t n);
void arena_free(void);
void arena_release(void);
char *str(const char *s);
/* "a,b,,c" -> {"a", "b", "", "c"}; "" -> none */
char **names(const char *csv, size_t *n);

Onnx__GraphProto *graph(void);
/* A node of g: inputs and outputs as comma-separated names ("" for an absent optional one). */
Onnx__NodeProto *node(Onnx__GraphProto *g, const char *op, const char *name, const char *ins,
                      const char *outs);
Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name,
                           Onnx__AttributeProto__AttributeType type);
void attr_int(Onnx__NodeProto *n, const char *name, int64_t v);
void attr_ints(Onnx__NodeProto *n, const char *name, size_t k, const int64_t *v);
void attr_string(Onnx__NodeProto *n, const char *name, const char *s);
void attr_graph(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g);
/* A tensor with its values as raw_data (raw NULL: no data field at all). */
Onnx__TensorProto *tensor(const char *name, int32_t type, int ndim, const int64_t *dims,
                          const void *raw, size_t raw_len);
void add_init(Onnx__GraphProto *g, Onnx__TensorProto *t);
/* A tensor type; ndim < 0: no shape (rank unknown); a negative dim is the symbolic "N" */
Onnx__TypeProto *tensor_type(int32_t type, int ndim, const int64_t *dims);
Onnx__ValueInfoProto *value(const char *name, Onnx__TypeProto *type);
void add_input(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type);
void add_output(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type);
/* A model of g importing the default domain at opset (IR version 8, producer "tessera-tests"). */
Onnx__ModelProto *model(Onnx__GraphProto *g, int opset);
/* The model's bytes (from the arena). */
uint8_t *pack(const Onnx__ModelProto *m, size_t *len);

/* A uniform draw in [lo, hi) from the 64-bit LCG state *s (advanced). */
double rand_uniform(uint64_t *s, double lo, double hi);
/* A float initializer of g with values drawn uniformly in [-a, a) from *s. */
void add_init_rand(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims, double a,
                   uint64_t *s);
/* A Conv node of g, name(in) -> out, k x k with this stride and group, padded to keep the size
 * (k / 2), its weight "<name>.w" (scaled 1 / sqrt(fan-in)) and bias "<name>.b" drawn from *s. */
Onnx__NodeProto *add_conv(Onnx__GraphProto *g, const char *name, const char *in, const char *out,
                          int64_t k, int64_t stride, int64_t group, uint64_t *s, int64_t cin,
                          int64_t cout);

#endif /* TS_TEST_ONNX_BUILD_H */
