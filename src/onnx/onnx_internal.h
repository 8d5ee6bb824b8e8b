/* onnx_internal.h — the ONNX graph as Tessera holds it (values, nodes, sub-graphs), the operator
 * table's interface and the attribute helpers the operator files share. */
#ifndef TS_ONNX_INTERNAL_H
#define TS_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "nn/module_internal.h" /* tsi_strdup, the module registry */
#include "onnx.pb-c.h"
#include "tessera.h"

/* Caps on an untrusted file (docs/ONNX.md, "Untrusted files"): far above real models (a ResNet-50
 * has 122 nodes and 161 initializers, a GPT-2 XL export about 10,000 of each). */
#define TSO_MAX_FILE_BYTES   ((size_t)2 << 30) /* protobuf's own limit for one message */
#define TSO_MAX_NODES        (1 << 20)
#define TSO_MAX_VALUES       (1 << 22)
#define TSO_MAX_INITIALIZERS (1 << 20)
#define TSO_MAX_GRAPH_DEPTH  16 /* sub-graphs inside sub-graphs (If / Loop / Scan bodies) */
#define TSO_MAX_ATTR_LIST    (1 << 20)
#define TSO_MAX_NAME         4096
#define TSO_OPSET_MIN        1
#define TSO_OPSET_MAX        21 /* opsets 18-21: each change is gated (opset_gate.c) */

typedef enum tso_value_kind {
    TSO_V_INPUT = 1, /* a graph input */
    TSO_V_PARAM,     /* an initializer, held by the module (parameter or buffer) */
    TSO_V_CONST,     /* a Constant node's value or a folded result, held by the graph */
    TSO_V_NODE,      /* produced by a node */
    TSO_V_OUTER,     /* a sub-graph's reference to a value of an enclosing graph */
} tso_value_kind;

typedef struct tso_value {
    char *name;
    tso_value_kind kind;
    int producer;        /* node index (TSO_V_NODE) */
    int outer;           /* value index in the parent graph (TSO_V_OUTER) */
    int uses;            /* consumers in this graph (+1 when a graph output) */
    bool pinned;         /* read by a sub-graph: kept until the graph's run ends */
    ts_tensor *tensor;   /* TSO_V_PARAM: the module's tensor (borrowed); TSO_V_CONST: owned */
    ts_tensor *dev_copy; /* TSO_V_CONST: the copy on the device last run on (owned) */
    int32_t onnx_type;   /* an initializer's INT4 / UINT4 (held as int8 / uint8), else 0 */
} tso_value;

struct tso_graph;
struct tso_op_def;

typedef struct tso_node {
    const Onnx__NodeProto *proto; /* attributes are read from the proto, kept with the model */
    char *label;                  /* "node 'name' (Conv)" or "node 12 (Conv)" for messages */
    const char *op_type;
    int opset;
    const struct tso_op_def *def;
    int n_in, n_out;
    int *in, *out; /* value indices; -1 for an absent optional input or output */
    int n_sub;
    struct tso_graph **sub; /* compiled sub-graph attributes, in attribute order */
    const char **sub_names;
    void *state; /* an operator's own data (freed with free_state) */
    void (*free_state)(void *);
} tso_node;

typedef struct tso_graph {
    struct tso_graph *parent;
    int depth;
    tso_value *values;
    int n_values, cap_values;
    tso_node *nodes; /* in execution (topological) order */
    int n_nodes;
    int *inputs, n_inputs; /* graph inputs without an initializer */
    int *outputs, n_outputs;
    ts_onnx_value_info *in_info, *out_info;
} tso_graph;

typedef struct tso_model {
    ts_module base;
    Onnx__ModelProto *proto;
    tso_graph *graph;
    int opset;
    char *base_dir;
    bool optimize;
    bool no_weights;
    bool blocked; /* the blocked-layout rewrite (rewrite_blocked.c) changed the top graph */
    /* a dense conv net loaded with the rewrites and not under TS_ONNX_BLOCKED=nchw or 0: its runs
     * go channels_last where oneDNN's NHWC kernels are native (tso_blocked_mode) */
    bool channels_last;
    /* ts_module_place's split of the top graph across devices (place.h); NULL: it runs whole on
     * its inputs' device */
    struct tso_place *place;
    size_t *measure; /* place.c's example run: per top-level node, the bytes of its outputs */
} tso_model;

/* What an operator sees while it runs. */
typedef struct tso_ctx {
    tso_model *model;
    tso_graph *graph;
    ts_device device;        /* where new tensors (constants, shapes) go */
    ts_tensor **vals;        /* the running graph's values */
    struct tso_ctx *outer;   /* the enclosing graph's context (sub-graphs) */
    int64_t loop_iterations; /* the Loop bodies this run ran (kept by the outermost context) */
    int blk; /* the block of this run's blocked-layout nodes (rewrite_blocked.c), 0: plain */
} tso_ctx;

/* in[i] is NULL for an absent optional input; an operator sets out[i] (a tensor owned by the
 * current scope, as any op's result) for each output it produces and returns false with the error
 * set on failure. */
typedef bool (*tso_run_fn)(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out);
/* Load-time check of the attributes (an unsupported mode is TS_ERR_UNSUPPORTED naming the node). */
typedef bool (*tso_check_fn)(const tso_node *n);

typedef struct tso_op_def {
    const char *op_type;
    int since; /* the first opset whose semantics this row implements */
    tso_run_fn run;
    tso_check_fn check;
    bool not_foldable; /* random and sequence ops: never constant-folded */
} tso_op_def;

/* The operator families (ops_*.c), each a table ending with a {NULL} row. */
extern const tso_op_def tso_ops_elementwise[];
extern const tso_op_def tso_ops_shape[];
extern const tso_op_def tso_ops_nn[];
extern const tso_op_def tso_ops_reduce[];
extern const tso_op_def tso_ops_index[];
extern const tso_op_def tso_ops_misc[];
extern const tso_op_def tso_ops_unpool_det[];  /* MaxUnpool, Det */
extern const tso_op_def tso_ops_window[];      /* Hann/Hamming/BlackmanWindow, MelWeightMatrix */
extern const tso_op_def tso_ops_grid_sample[]; /* GridSample */
extern const tso_op_def tso_ops_detect[];      /* NonMaxSuppression, RoiAlign */
extern const tso_op_def tso_ops_quantize[];    /* (Dynamic)QuantizeLinear, DequantizeLinear */
extern const tso_op_def tso_ops_seq[];         /* sequences and optionals (ops_seq.c) */
extern const tso_op_def tso_ops_signal[];      /* DFT, STFT */
extern const tso_op_def tso_ops_quant[];       /* ConvInteger, MatMulInteger, QLinearConv, ... */
extern const tso_op_def tso_ops_text[];        /* TfIdfVectorizer */
/* The ai.onnx.preview.training domain (Momentum, Adam, Adagrad, Gradient), looked up apart from
 * the default domain's families: its operators have that domain's own versions. */
#define TSO_DOMAIN_TRAINING      "ai.onnx.preview.training"
#define TSO_TRAINING_VERSION_MAX 1 /* the only version ONNX defines */
extern const tso_op_def tso_ops_train[];
const tso_op_def *tso_find_training_op(const char *op_type, int version, bool *any);
/* ONNX Runtime's com.microsoft domain: the quantized operators its quantizer writes (QLinearAdd;
 * ops_qoperator_ms.c), looked up apart from the default domain; any other operator of that domain
 * is refused as an unknown domain */
#define TSO_DOMAIN_MS "com.microsoft"
extern const tso_op_def tso_ops_ms[];
const tso_op_def *tso_find_ms_op(const char *op_type);
/* The row for op_type at opset (the newest row with since <= opset), NULL when none. *any is set
 * when some row exists for the op at another opset. */
const tso_op_def *tso_find_op(const char *op_type, int opset, bool *any);
/* for the graph rewrites: n is the default domain's operator op (another domain may reuse the
 * name), and value v's tensor when it is known at load (an initializer or a constant) or NULL */
bool tso_is_op(const tso_node *n, const char *op);
/* opset_gate.c: false with the error naming the node when n's opset is past its row and ONNX
 * changed the operator in between in a way the row does not implement (or the node uses it) */
bool tso_opset_gate(const tso_node *n);
/* the gate's list: entry i's operator and version; returns the count */
int tso_opset_changes(const char **op, int *version, int i);
ts_tensor *tso_known(const tso_graph *g, int v);

/* ------------------------------------------------------------------ attributes */
const Onnx__AttributeProto *tso_attr(const tso_node *n, const char *name);
int64_t tso_attr_int(const tso_node *n, const char *name, int64_t def);
float tso_attr_float(const tso_node *n, const char *name, float def);
/* The string value, NUL-terminated into buf (truncated to n - 1); def when absent. */
const char *tso_attr_string(const tso_node *n, const char *name, const char *def, char *buf,
                            size_t size);
/* count of ints (-1 when absent); *v points into the model */
int tso_attr_ints(const tso_node *n, const char *name, const int64_t **v);
int tso_attr_floats(const tso_node *n, const char *name, const float **v);
/* a tensor attribute converted to a tensor on dev (owned by the current scope); NULL when absent
 * (no error) or on error (error set) */
ts_tensor *tso_attr_tensor(const tso_node *n, const char *name, ts_device dev, bool *present);
/* the compiled sub-graph of a graph attribute, NULL when absent */
tso_graph *tso_node_subgraph(const tso_node *n, const char *name);

/* ------------------------------------------------------------------ helpers for operators */
/* An error naming the node: "onnx: node 'conv1' (Conv): <message>"; returns false. */
bool tso_fail(const tso_node *n, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Adds the node to a pending error from a Tessera op ("... (in onnx node 'x' (Add))"). */
bool tso_fail_pending(const tso_node *n);
/* An operator's run function in an ops_*.c file (a tso_run_fn), and its usual end: the result in
 * out[0], or the node's pending error reported */
#define TSO_RUN(name)                                                                              \
    static bool name(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out)
#define TSO_DONE(x) return (out[0] = (x)) != NULL || tso_fail_pending(n)
/* TS_ONNX_MAX_NODE_ELEMENTS (default 2^40): the most elements a node's output or workspace may
 * have; ts_onnx_run and ts_onnx_load make it every new tensor's limit while they run
 * (tsi_tensor_cap_set), and Conv/pooling check their workspaces against it */
int64_t tso_max_node_elements(void);
/* The most Loop body runs one ts_onnx_run may make (a node with a sub-graph is never folded),
 * nested loops counted together: TS_ONNX_MAX_LOOP_ITERATIONS, read once (default 2^31).
 * tso_loop_tick counts one in c's outermost context; false with the error set, naming node n, past
 * the limit. */
int64_t tso_max_loop_iterations(void);
bool tso_loop_tick(tso_ctx *c, const tso_node *n);
/* The integer values of a small integer tensor (any device, i64/i32/...) into v[0..max-1];
 * returns the count, -1 on error (named after the node). */
int tso_read_ints(const tso_node *n, ts_tensor *t, int64_t *v, int max, const char *what);
/* one integer of a one-element tensor (any device); false with the error naming the node */
bool tso_read_int(const tso_node *n, ts_tensor *t, int64_t *v, const char *what);
/* the same for a one-element tensor as a double */
bool tso_read_scalar(const tso_node *n, ts_tensor *t, double *v, const char *what);
/* axis in [-rank, rank) (inclusive: [-rank, rank], Unsqueeze's and Concat-like ranges) as a
 * non-negative dim; -1 with the error naming the node when out of range */
int tso_wrap_axis(const tso_node *n, int64_t axis, int rank, bool inclusive);
/* options for a new tensor of dtype dt on x's device */
static inline ts_opts tso_opts_of(ts_tensor *x, ts_dtype dt) {
    return (ts_opts){.dtype = dt, .device = ts_device_of(x)};
}
/* The index of a string attribute's value among choices[0..n-1] (def when absent); -1 with
 * TS_ERR_UNSUPPORTED naming the node and the value when it is none of them. */
int tso_attr_choice(const tso_node *n, const char *name, const char *def,
                    const char *const *choices, int count);
/* a new i64 tensor on the context's device from host values */
ts_tensor *tso_ints_tensor(tso_ctx *c, const int64_t *v, int count, bool as_vector);
/* ONNX's 4-bit integers (past Debian's onnx 1.12 enum): an initializer of these is held one value
 * a byte as int8 / uint8 (tso_tensor_from_proto), its value's onnx_type saying which */
#define TSO_ONNX_UINT4 21
#define TSO_ONNX_INT4  22
/* ONNX's element type -> Tessera's dtype (TS_DTYPE_DEFAULT when Tessera lacks it) and names */
ts_dtype tso_dtype_from_onnx(int32_t t);
int32_t tso_dtype_to_onnx(ts_dtype d);
const char *tso_onnx_type_name(int32_t t);

/* ------------------------------------------------------------------ tensors, graphs */
/* A TensorProto as a tensor on dev (a new reference, no scope). base_dir for external data (NULL:
 * refused). what names it in errors. */
ts_tensor *tso_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, ts_device dev,
                                 const char *what);
/* Runs a compiled graph (or sub-graph) with its inputs; fills outs[0..n_outputs-1] with new
 * references (in no scope). */
bool tso_run_graph(tso_model *m, tso_graph *g, tso_ctx *outer, ts_device dev,
                   ts_tensor *const *inputs, int n_inputs, ts_tensor **outs);
void tso_graph_free(tso_graph *g);
void tso_node_free(tso_node *n); /* what a node owns, not the node */
void tso_graph_count_uses(tso_graph *g);

/* ------------------------------------------------------------------ inference rewrites
 * (ts_onnx_opts.optimize; optimize.c). Each returns false with the error set on failure. */
bool tso_rewrite_conv(tso_model *m);    /* rewrite_conv.c */
bool tso_rewrite_xformer(tso_model *m); /* rewrite_xformer.c */
/* rewrite_qdq.c: DequantizeLinear -> MatMul / Conv [-> Relu] -> QuantizeLinear as one integer
 * node (run at every load, not only under optimize: it is how ONNX Runtime runs QDQ models) */
bool tso_rewrite_qdq(tso_model *m);
/* rewrite_matmul_integer.c: MatMulInteger -> Cast -> Mul [-> Add] (ORT's quantize_dynamic
 * pattern) as one ts_matmul_integer_to_float node, bit for bit (every load, after folding) */
bool tso_rewrite_matmul_integer(tso_model *m);
/* Removes the nodes with dead[k] (freeing what they own), renumbers producers, recounts uses. */
void tso_graph_drop_dead(tso_graph *g, const bool *dead);
/* rewrite_blocked.c: values kept in oneDNN's channel-blocked layout between convolutions */
bool tso_rewrite_blocked(tso_model *m);
/* the block this run of m's top graph on dev uses (0: its blocked nodes run as the plain ones;
 * -1: as the plain ones, the 4-D float32 inputs made channels_last: m->channels_last on AVX-512,
 * the default for dense conv nets) */
int tso_blocked_mode(const tso_model *m, ts_device dev, ts_tensor *const *inputs, int n_inputs);

/* ------------------------------------------------------------------ sequences and optionals
 * (sequence.c, seq_proto.c). ONNX's sequence (of tensors) and optional (of a tensor or a sequence)
 * values travel through the runner, Loop, If and the operators as ts_tensor handles, so run.c and
 * the operator signature stay tensor-only: a container is an empty tensor (shape [0], dtype the
 * element type of the tensors it holds, on their device) over external storage whose release
 * callback drops the elements, and that callback is how a container is recognised. Containers are
 * immutable (operators make new ones sharing the elements); reference counting frees them. The
 * sequence operators are never constant-folded: a folded container would reach another device as
 * the empty tensor it looks like. */
/* A new container of kind over items[0..n-1] (each retained): n <= 1 for an optional; elements of
 * dtype dt (TS_DTYPE_DEFAULT: items[0]'s, float32 when empty) on dev. New reference, no scope. */
ts_tensor *tso_seq_new(const char *op, ts_onnx_kind kind, ts_tensor *const *items, int64_t n,
                       ts_dtype dt, ts_device dev);
ts_onnx_kind tso_kind_of(const ts_tensor *t); /* TS_ONNX_TENSOR for a tensor or NULL */
int64_t tso_seq_length(const ts_tensor *t);   /* elements held (optional: 0 or 1); -1: a tensor */
ts_tensor *tso_seq_item(const ts_tensor *t, int64_t i); /* borrowed; NULL out of [0, length) */
const char *tso_kind_name(ts_onnx_kind k);              /* "sequence" */
/* "float32 [3] on cpu", "a sequence of 2 float32 tensors on sim:0", "an optional with no value"
 * (a ring buffer string, for messages) */
const char *tso_value_desc(const ts_tensor *t);
/* A declared type's kind and the TypeProto of the tensors it holds (NULL when undeclared); a map,
 * a sparse tensor or a nesting Tessera lacks (a sequence of sequences) is TS_ERR_UNSUPPORTED
 * naming where and name. */
bool tso_type_kind(const Onnx__TypeProto *tp, ts_onnx_kind *kind, const Onnx__TypeProto **tensor,
                   const char *where, const char *name);
/* the element type of the tensors a declared type holds; TS_DTYPE_DEFAULT when undeclared */
ts_dtype tso_type_dtype(const Onnx__TypeProto *tp);
/* A serialized TensorProto, SequenceProto or OptionalProto (kind says which: the bytes do not) on
 * dev, owned by the current scope; dt is an empty container's element type. */
ts_tensor *tso_value_parse(const void *data, size_t size, ts_onnx_kind kind, ts_dtype dt,
                           ts_device dev);
ts_tensor *tso_value_load(const char *path, ts_onnx_kind kind, ts_dtype dt, ts_device dev);
/* At load: no node reads a value known to be a sequence or optional (a container-typed graph
 * input, a sequence operator's result) where its operator takes a tensor (TS_ERR_FORMAT naming
 * the node). */
bool tso_check_container_uses(const tso_graph *g, const char *where);

/* ProtobufC's allocator over the library's malloc (so the allocation-failure sweep reaches it). */
extern ProtobufCAllocator tso_pb_allocator;

#endif /* TS_ONNX_INTERNAL_H */
