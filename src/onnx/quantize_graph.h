/* quantize_graph.h — what ts_onnx_quantize's two files share (quantize_graph.c: the arena, reading
 * the model, ORT's arithmetic, calibration and the driver; quantize_rewrite.c: the static QDQ and
 * the dynamic rewrites): the rewrite's state and its helpers. */
#ifndef TS_ONNX_QUANTIZE_GRAPH_H
#define TS_ONNX_QUANTIZE_GRAPH_H

#include "onnx/onnx_internal.h"

enum { K_NONE = 0, K_CONV, K_MATMUL, K_GEMM, K_ADD };

typedef struct qz_range {
    const char *name;
    float lo, hi; /* calibrated over every batch */
    float scale;  /* ORT's compute_scale_zp */
    int zp;
    bool graph_out; /* a graph output: its producer writes name_QuantizeLinear_Input */
} qz_range;

typedef struct qz {
    Onnx__ModelProto *m;
    Onnx__GraphProto *g;
    const char *base_dir;
    ts_onnx_quantize_opts o;
    void **mem; /* the arena: every allocation of the rewrite */
    int n_mem, cap_mem;
    Onnx__NodeProto **nodes; /* the new graph's nodes and initializers */
    int n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    int n_inits, cap_inits;
    int *kind; /* per original node: K_* when it is quantized */
    qz_range *r;
    int n_r;
    const char **done_w; /* weights already quantized (their DequantizeLinear output name) */
    const char **done_wout;
    int n_done;
} qz;

/* the arena (every allocation freed with the rewrite), a formatted string in it, and growing one
 * of the qz arrays */
void *qz_alloc(qz *q, size_t n);
char *qz_str(qz *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool qz_push(qz *q, void ***a, int *n, int *cap, void *item);
/* new nodes and initializers (raw little-endian data, as ORT writes them) */
Onnx__NodeProto *qz_add_node(qz *q, const char *op, int n_in, const char *const *in, int n_out,
                             const char *const *out);
bool qz_node_attr_int(qz *q, Onnx__NodeProto *n, const char *name, int64_t v);
const char *qz_add_init(qz *q, const char *name, int32_t type, int ndim, const int64_t *dims,
                        const void *data, size_t bytes);
const char *qz_add_scalar(qz *q, const char *name, int32_t type, const void *v, size_t bytes);
/* the model's initializers, attributes and float data */
Onnx__TensorProto *qz_find_init(const qz *q, const char *name);
int64_t qz_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def);
float *qz_init_floats(const qz *q, const Onnx__TensorProto *t, int64_t *count);
/* an activation's calibrated range; ORT's compute_scale_zp and its quantization of one value */
qz_range *qz_range_of(qz *q, const char *name);
void qz_quant_params(float rmin, float rmax, int qmin, int qmax, bool symmetric, float *scale,
                     int *zp);
int qz_quantize_value(float x, float scale, int zp, int qmin, int qmax);
static inline const char *qz_nm(const char *s) { return s ? s : ""; }

/* quantize_rewrite.c: the new graph's nodes and initializers for each mode */
bool qz_build_static(qz *q);
bool qz_build_dynamic(qz *q);

#endif /* TS_ONNX_QUANTIZE_GRAPH_H */
