/* export_internal.h — what the exporter's driver (export.c: trace, values, protobuf building,
 * writing) and its op table (export_ops*.c: one emitter per traced op) share. */
#ifndef TS_ONNX_EXPORT_INTERNAL_H
#define TS_ONNX_EXPORT_INTERNAL_H

#include "autograd/trace.h"
#include "onnx/onnx_internal.h"

#define TSE_OPSET      17
#define TSE_IR_VERSION 8 /* the IR version that goes with opset 17 (onnx 1.12) */

typedef struct tse_block tse_block;

/* One export: the trace, the graph being built and an arena that owns every protobuf struct. */
typedef struct tse {
    tsi_tracer tr;
    ts_onnx_export_opts o;
    ts_tensor_list sd; /* the module's state dict: the names of parameters and buffers */
    tse_block *arena;
    Onnx__NodeProto **nodes;
    int n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    int n_inits, cap_inits;
    const char **vname;  /* [n_vals] each trace value's ONNX name once it has one */
    ts_tensor *input;    /* the traced copy of the example input */
    int out_val;         /* the forward's result */
    int n_names;         /* counter for generated names */
    const char *onnx_op; /* the converting row's ONNX operator (tse_op.onnx) */
} tse;

/* An emitter writes the nodes of one traced op: in[k] names input k (NULL: absent), out is the name
 * its result should get. Returns the name that holds the result (out, or an input's name for an
 * op that changes nothing), NULL with the error set on failure. */
typedef const char *(*tse_emit_fn)(tse *e, const tsi_trace_rec *r, const char *const *in,
                                   const char *out);
typedef struct tse_op {
    const char *op; /* the trace's op name (an in-place form "relu_" finds "relu") */
    tse_emit_fn emit;
    const char *onnx; /* the ONNX operator of an emitter that serves several (tse.onnx_op) */
} tse_op;
extern const tse_op tse_ops_elementwise[]; /* export_ops_ew.c; tables end with {NULL} */
extern const tse_op tse_ops_nn[];          /* export_ops_nn.c */
extern const tse_op tse_ops_quant[];       /* export_ops_quant.c */
/* The inputs of trace op `op` (bit k: input k) that its emitter writes as constants through
 * tse_const_in (a quantized layer's weight and bias): their producers are not exported. */
unsigned tse_const_inputs(const char *op);
/* The name of constant input k: a parameter's or constant's own, or, for a value the trace
 * computed from constants alone (Python's int32 bias), an initializer of its value; NULL (error
 * naming the op) when it depends on the model's input. */
const char *tse_const_in(tse *e, const tsi_trace_rec *r, int k);
/* Runs the emitter of trace op `op` (another row's) on r. */
const char *tse_emit_as(tse *e, const char *op, const tsi_trace_rec *r, const char *const *in,
                        const char *out);
/* The integer dtype that holds a quantized dtype in ONNX (qint8: int8, quint8: uint8, qint32:
 * int32); other dtypes are themselves. */
ts_dtype tse_storage_dtype(ts_dtype d);
/* the op families' one-node rows (the onnx column of their .def files): op's, or NULL */
const tse_op *tse_family_op(const char *op);

/* ------------------------------------------------------------------ the driver's helpers */
void *tse_alloc(tse *e, size_t n); /* zeroed, owned by the export; NULL + TS_ERR_OOM */
const char *tse_fresh(tse *e, const char *stem); /* a new unique name "/stem_N" */
/* A node with these inputs ("" for an absent optional one) and one output named out (NULL: a fresh
 * name); the output's name is node->output[0]. */
Onnx__NodeProto *tse_node(tse *e, const char *op_type, int n_in, const char *const *in,
                          const char *out);
/* the same, returning the output's name (NULL on failure) */
const char *tse_node1(tse *e, const char *op_type, int n_in, const char *const *in,
                      const char *out);
/* a binary node; NULL (error pending) when an operand is NULL */
const char *tse_node2(tse *e, const char *op_type, const char *a, const char *b, const char *out);
bool tse_attr_int(tse *e, Onnx__NodeProto *n, const char *name, int64_t v);
bool tse_attr_float(tse *e, Onnx__NodeProto *n, const char *name, float v);
bool tse_attr_ints(tse *e, Onnx__NodeProto *n, const char *name, const int64_t *v, int count);

/* Generated initializers: an int64 vector (or a 0-dim scalar), a scalar of dtype dt, a tensor's
 * data; their names. */
const char *tse_const_ints(tse *e, const int64_t *v, int count, bool scalar);
const char *tse_const_scalar(tse *e, double v, ts_dtype dt);
const char *tse_const_tensor(tse *e, ts_tensor *t, const char *name);
/* x converted to dtype `to` (a Cast node) when `from` differs; x itself otherwise. */
const char *tse_cast(tse *e, const char *x, ts_dtype from, ts_dtype to);

/* The tensors a record saw (NULL for an absent input) and its result. */
ts_tensor *tse_in(const tse *e, const tsi_trace_rec *r, int k);
ts_tensor *tse_out(const tse *e, const tsi_trace_rec *r);
/* Input k is a constant (not a parameter, buffer or graph input) whose elements are all zero. */
bool tse_in_is_zero_const(tse *e, const tsi_trace_rec *r, int k);
/* TS_ERR_UNSUPPORTED "onnx_export: op '<op>': <why>"; returns NULL. */
const char *tse_refuse(tse *e, const tsi_trace_rec *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* TS_ONNX_EXPORT_INTERNAL_H */
