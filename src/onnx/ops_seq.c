/* ops_seq.c — ONNX's sequence and optional operators over the containers of sequence.c, and the
 * load-time check that no tensor operator reads a container. A container holds its elements
 * unchanged (no copy): SequenceAt returns the very tensor inserted, so autograd flows through. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ helpers */
/* in[i] is a container of kind; a clear error naming the node otherwise. */
static bool need(const tso_node *n, ts_tensor *const *in, int i, ts_onnx_kind kind) {
    if (in[i] && tso_kind_of(in[i]) == kind) return true;
    return tso_fail(n, TS_ERR_ARG, "input %d must be a%s %s, got %s", i,
                    kind == TS_ONNX_OPTIONAL ? "n" : "", tso_kind_name(kind),
                    tso_value_desc(in[i]));
}

static bool need_tensor(const tso_node *n, ts_tensor *const *in, int i) {
    return need(n, in, i, TS_ONNX_TENSOR);
}

/* out[0] = a new container (owned by the scope) */
static bool emit(const tso_node *n, ts_tensor **out, ts_onnx_kind kind, ts_tensor *const *items,
                 int64_t count, ts_dtype dt, ts_device dev) {
    out[0] = tsi_own(tso_seq_new(n->op_type, kind, items, count, dt, dev));
    return out[0] != NULL || tso_fail_pending(n);
}

/* t may join the sequence seq: its element type and device. */
static bool fits(const tso_node *n, ts_tensor *seq, ts_tensor *t) {
    bool same_dtype = ts_dtype_of(t) == ts_dtype_of(seq);
    if (same_dtype && tsi_device_eq(tsi_device(t), tsi_device(seq))) return true;
    return tso_fail(n, same_dtype ? TS_ERR_DEVICE : TS_ERR_DTYPE, "cannot insert %s into %s",
                    tsi_desc(t), tso_value_desc(seq));
}

/* A position input (one integer) as an index in [0, len) (inclusive: [0, len]); -1 with the error
 * naming the node. Absent: def. */
static int64_t position(const tso_node *n, ts_tensor *t, int64_t def, int64_t len, bool inclusive) {
    int64_t p = def;
    if (t && tso_read_ints(n, t, &p, 1, "position") != 1)
        return ts_error() ? -1 : (tso_fail(n, TS_ERR_SHAPE, "position must hold one value"), -1);
    int64_t hi = inclusive ? len : len - 1;
    if (p < -len || p > hi) {
        tso_fail(n, TS_ERR_ARG, "position %lld is out of range for a sequence of %lld tensors",
                 (long long)p, (long long)len);
        return -1;
    }
    return p < 0 ? p + len : p;
}

/* the elements of seq with t put at position at (t NULL: the element at `at` taken out) */
static bool edit(const tso_node *n, ts_tensor *seq, ts_tensor *t, int64_t at, ts_tensor **out) {
    int64_t len = tso_seq_length(seq), count = t ? len + 1 : len - 1;
    ts_tensor **items = malloc((size_t)(len + 1) * sizeof *items);
    if (!items) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int64_t i = 0, k = 0; i < len; i++) {
        if (i == at && t) items[k++] = t;
        if (i != at || t) items[k++] = tso_seq_item(seq, i);
    }
    if (t && at == len) items[len] = t;
    bool ok = emit(n, out, TS_ONNX_SEQUENCE, items, count, ts_dtype_of(seq), tsi_device(seq));
    free(items);
    return ok;
}

/* ------------------------------------------------------------------ sequences */
static bool check_sequence_empty(const tso_node *n) {
    int64_t t = tso_attr_int(n, "dtype", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    if (t < INT32_MIN || t > INT32_MAX || tso_dtype_from_onnx((int32_t)t) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "dtype %s: Tessera lacks the type",
                        tso_onnx_type_name(t < INT32_MIN || t > INT32_MAX ? -1 : (int32_t)t));
    return true;
}

TSO_RUN(run_sequence_empty) {
    (void)in;
    int32_t t = (int32_t)tso_attr_int(n, "dtype", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    return emit(n, out, TS_ONNX_SEQUENCE, NULL, 0, tso_dtype_from_onnx(t), c->device);
}

TSO_RUN(run_sequence_construct) {
    (void)c;
    if (n->n_in < 1) return tso_fail(n, TS_ERR_FORMAT, "needs at least one input");
    for (int i = 0; i < n->n_in; i++) {
        if (!need_tensor(n, in, i)) return false;
        if (i && (ts_dtype_of(in[i]) != ts_dtype_of(in[0]) ||
                  !tsi_device_eq(tsi_device(in[i]), tsi_device(in[0]))))
            return tso_fail(n,
                            ts_dtype_of(in[i]) != ts_dtype_of(in[0]) ? TS_ERR_DTYPE : TS_ERR_DEVICE,
                            "input %d is %s, input 0 %s: a sequence's tensors share their type "
                            "and device",
                            i, tsi_desc(in[i]), tsi_desc(in[0]));
    }
    return emit(n, out, TS_ONNX_SEQUENCE, in, n->n_in, ts_dtype_of(in[0]), tsi_device(in[0]));
}

TSO_RUN(run_sequence_insert) {
    (void)c;
    if (!need(n, in, 0, TS_ONNX_SEQUENCE) || !need_tensor(n, in, 1) || !fits(n, in[0], in[1]))
        return false;
    int64_t len = tso_seq_length(in[0]);
    int64_t at = position(n, in[2], len, len, true);
    return at >= 0 && edit(n, in[0], in[1], at, out);
}

TSO_RUN(run_sequence_erase) {
    (void)c;
    if (!need(n, in, 0, TS_ONNX_SEQUENCE)) return false;
    int64_t at = position(n, in[1], -1, tso_seq_length(in[0]), false);
    return at >= 0 && edit(n, in[0], NULL, at, out);
}

TSO_RUN(run_sequence_at) {
    (void)c;
    if (!need(n, in, 0, TS_ONNX_SEQUENCE)) return false;
    if (!in[1]) return tso_fail(n, TS_ERR_FORMAT, "needs the input position");
    int64_t at = position(n, in[1], 0, tso_seq_length(in[0]), false);
    if (at < 0) return false;
    out[0] = tsi_own(ts_retain(tso_seq_item(in[0], at)));
    return true;
}

TSO_RUN(run_sequence_length) {
    if (!need(n, in, 0, TS_ONNX_SEQUENCE)) return false;
    int64_t len = tso_seq_length(in[0]);
    out[0] = tso_ints_tensor(c, &len, 1, false);
    return out[0] != NULL || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ SplitToSequence */
/* The part sizes: split absent -> ones; a scalar s -> s each, the last what remains; a vector ->
 * its values, adding up to dim. *count gets the number of parts; NULL with the error set. */
static int64_t *split_sizes(const tso_node *n, ts_tensor *split, int64_t dim, int64_t *count) {
    bool vector = split && ts_ndim(split) != 0;
    int64_t chunk = 1;
    if (split && !vector) {
        double s;
        if (!tso_read_scalar(n, split, &s, "split")) return NULL;
        if (!(s >= 1 && s <= (double)INT32_MAX))
            return tso_fail(n, TS_ERR_ARG, "split %g must be a positive size", s), NULL;
        chunk = (int64_t)s;
    }
    int64_t k = vector ? ts_numel(split) : (dim + chunk - 1) / chunk;
    if (k > INT_MAX) return tso_fail(n, TS_ERR_SHAPE, "%lld parts", (long long)k), NULL;
    int64_t *sizes = malloc((size_t)(k + 1) * sizeof *sizes);
    if (!sizes) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    if (vector && tso_read_ints(n, split, sizes, (int)k, "split") != k) {
        free(sizes);
        return NULL;
    }
    int64_t total = 0;
    bool ok = true;
    for (int64_t i = 0; i < k; i++) {
        if (!vector) sizes[i] = dim - total < chunk ? dim - total : chunk;
        ok = ok && sizes[i] >= 0 && sizes[i] <= dim - total;
        total += ok ? sizes[i] : 0;
    }
    if (!ok || total != dim) {
        free(sizes);
        return tso_fail(n, TS_ERR_SHAPE, "split sizes do not add up to %lld", (long long)dim), NULL;
    }
    *count = k;
    return sizes;
}

TSO_RUN(run_split_to_sequence) {
    (void)c;
    if (!need_tensor(n, in, 0)) return false;
    ts_tensor *x = in[0];
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(x), false);
    if (axis < 0) return false;
    /* keepdims applies to the parts of one that no split input asked for */
    bool squeeze = !in[1] && tso_attr_int(n, "keepdims", 1) == 0;
    int64_t k = 0, *sizes = split_sizes(n, in[1], ts_size(x, axis), &k);
    if (!sizes) return false;
    ts_tensor **parts = calloc((size_t)k + 1, sizeof *parts);
    bool ok = parts != NULL || tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int64_t i = 0, at = 0; ok && i < k; at += sizes[i++]) {
        parts[i] = ts_narrow(x, axis, at, sizes[i]);
        if (squeeze && parts[i]) parts[i] = ts_squeeze_dim(parts[i], axis);
        ok = parts[i] != NULL || tso_fail_pending(n);
    }
    ok = ok && emit(n, out, TS_ONNX_SEQUENCE, parts, k, ts_dtype_of(x), tsi_device(x));
    free(parts);
    free(sizes);
    return ok;
}

/* ------------------------------------------------------------------ ConcatFromSequence */
static bool check_concat_from_sequence(const tso_node *n) {
    if (!tso_attr(n, "axis")) return tso_fail(n, TS_ERR_FORMAT, "needs the attribute axis");
    return true;
}

TSO_RUN(run_concat_from_sequence) {
    (void)c;
    if (!need(n, in, 0, TS_ONNX_SEQUENCE)) return false;
    int64_t len = tso_seq_length(in[0]);
    if (len == 0) return tso_fail(n, TS_ERR_ARG, "the sequence is empty: nothing to concatenate");
    if (len > INT_MAX) return tso_fail(n, TS_ERR_SHAPE, "%lld tensors", (long long)len);
    bool stack = tso_attr_int(n, "new_axis", 0) != 0;
    int rank = ts_ndim(tso_seq_item(in[0], 0));
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), rank + stack, false);
    if (axis < 0) return false;
    ts_tensor **items = malloc((size_t)len * sizeof *items);
    if (!items) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int64_t i = 0; i < len; i++) items[i] = tso_seq_item(in[0], i);
    out[0] = stack ? ts_stack(items, (int)len, axis) : ts_cat(items, (int)len, axis);
    free(items);
    return out[0] != NULL || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ SequenceMap */
static bool check_sequence_map(const tso_node *n) {
    const tso_graph *body = tso_node_subgraph(n, "body");
    if (!body) return tso_fail(n, TS_ERR_FORMAT, "the graph attribute 'body' is missing");
    if (n->n_in < 1 || body->n_inputs != n->n_in || body->n_outputs != n->n_out)
        return tso_fail(n, TS_ERR_FORMAT,
                        "'body' has %d inputs and %d outputs, the node %d and %d (at least one)",
                        body->n_inputs, body->n_outputs, n->n_in, n->n_out);
    return true;
}

/* the number of iterations: input 0's length, which every other sequence input must share */
static int64_t map_length(const tso_node *n, ts_tensor *const *in) {
    if (!need(n, in, 0, TS_ONNX_SEQUENCE)) return -1;
    int64_t len = tso_seq_length(in[0]);
    for (int j = 1; j < n->n_in; j++) {
        ts_onnx_kind k = tso_kind_of(in[j]);
        if (!in[j] || k == TS_ONNX_OPTIONAL)
            return tso_fail(n, TS_ERR_ARG, "input %d must be a sequence or a tensor, got %s", j,
                            tso_value_desc(in[j])),
                   -1;
        if (k == TS_ONNX_SEQUENCE && tso_seq_length(in[j]) != len)
            return tso_fail(n, TS_ERR_SHAPE, "input %d holds %lld tensors, input 0 %lld", j,
                            (long long)tso_seq_length(in[j]), (long long)len),
                   -1;
    }
    return len;
}

/* Runs the body on element i of each sequence input (a tensor input as it is); its outputs go
 * to res[j * len + i] (new references). */
static bool map_step(tso_ctx *c, const tso_node *n, tso_graph *body, ts_tensor *const *in,
                     ts_tensor **args, ts_tensor **outs, ts_tensor **res, int64_t i, int64_t len) {
    for (int j = 0; j < n->n_in; j++)
        args[j] = tso_kind_of(in[j]) == TS_ONNX_SEQUENCE ? tso_seq_item(in[j], i) : in[j];
    ts_scope_begin();
    bool ok = tso_run_graph(c->model, body, c, c->device, args, n->n_in, outs);
    ts_scope_end();
    if (!ok) return tso_fail_pending(n);
    for (int j = 0; j < n->n_out; j++) res[j * len + i] = outs[j];
    return true;
}

TSO_RUN(run_sequence_map) {
    tso_graph *body = tso_node_subgraph(n, "body");
    int64_t len = map_length(n, in);
    if (len < 0) return false;
    ts_tensor **args = calloc((size_t)(n->n_in + n->n_out), sizeof *args);
    ts_tensor **res = calloc((size_t)(len * n->n_out + 1), sizeof *res);
    bool ok = (args && res) || tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int64_t i = 0; ok && i < len; i++)
        ok = map_step(c, n, body, in, args, args + n->n_in, res, i, len);
    for (int j = 0; ok && j < n->n_out; j++) {
        ts_tensor **items = res + j * len;
        /* no iteration: the type the body declares for the output */
        ts_dtype dt = len ? ts_dtype_of(items[0]) : body->out_info[j].dtype;
        ok = emit(n, out + j, TS_ONNX_SEQUENCE, items, len, dt,
                  len ? tsi_device(items[0]) : c->device);
    }
    for (int64_t i = 0; res && i < len * n->n_out; i++) ts_release(res[i]);
    free(args);
    free(res);
    return ok;
}

/* ------------------------------------------------------------------ optionals */
static bool check_optional(const tso_node *n) {
    const Onnx__AttributeProto *a = tso_attr(n, "type");
    if ((n->n_in < 1 || n->in[0] < 0) && (!a || !a->tp))
        return tso_fail(n, TS_ERR_FORMAT, "needs an input or the attribute type");
    ts_onnx_kind kind;
    const Onnx__TypeProto *tensor;
    /* the attribute is the element's type: wrapped, it must be a type an optional may have */
    Onnx__TypeProto__Optional wrap = ONNX__TYPE_PROTO__OPTIONAL__INIT;
    Onnx__TypeProto whole = ONNX__TYPE_PROTO__INIT;
    wrap.elem_type = a ? a->tp : NULL;
    whole.value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
    whole.optional_type = &wrap;
    if (!tso_type_kind(&whole, &kind, &tensor, n->label, "type")) return false;
    int32_t et = tensor && tensor->tensor_type ? tensor->tensor_type->elem_type : 0;
    if (et && tso_dtype_from_onnx(et) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "type: element type %s, which Tessera lacks",
                        tso_onnx_type_name(et));
    return true;
}

TSO_RUN(run_optional) {
    if (in[0]) {
        if (tso_kind_of(in[0]) == TS_ONNX_OPTIONAL)
            return tso_fail(n, TS_ERR_ARG,
                            "input 0 is an optional; an optional holds a tensor "
                            "or a sequence");
        return emit(n, out, TS_ONNX_OPTIONAL, in, 1, ts_dtype_of(in[0]), tsi_device(in[0]));
    }
    const Onnx__AttributeProto *a = tso_attr(n, "type");
    return emit(n, out, TS_ONNX_OPTIONAL, NULL, 0, tso_type_dtype(a ? a->tp : NULL), c->device);
}

/* A tensor or a sequence where an optional is expected counts as one holding it (opset 18's
 * reading, which models of earlier opsets rely on too: backend test_loop16_seq_none carries an
 * optional into a Loop body at the first iteration and the sequence itself after); an absent
 * input is an empty optional. */
TSO_RUN(run_optional_has_element) {
    bool has = in[0] && (tso_kind_of(in[0]) != TS_ONNX_OPTIONAL || tso_seq_length(in[0]) > 0);
    out[0] = ts_scalar(has, (ts_opts){.dtype = TS_BOOL, .device = c->device});
    return out[0] != NULL || tso_fail_pending(n);
}

TSO_RUN(run_optional_get_element) {
    (void)c;
    if (!in[0]) return tso_fail(n, TS_ERR_ARG, "input 0 is absent");
    ts_tensor *v = in[0];
    if (tso_kind_of(v) == TS_ONNX_OPTIONAL) {
        v = tso_seq_item(v, 0);
        if (!v) return tso_fail(n, TS_ERR_ARG, "the optional is empty");
    }
    out[0] = tsi_own(ts_retain(v));
    return true;
}

/* Every row is not_foldable: its result, or its input, is a container. */
const tso_op_def tso_ops_seq[] = {
    {"SequenceEmpty", 11, run_sequence_empty, check_sequence_empty, true},
    {"SequenceConstruct", 11, run_sequence_construct, NULL, true},
    {"SequenceInsert", 11, run_sequence_insert, NULL, true},
    {"SequenceErase", 11, run_sequence_erase, NULL, true},
    {"SequenceAt", 11, run_sequence_at, NULL, true},
    {"SequenceLength", 11, run_sequence_length, NULL, true},
    {"SplitToSequence", 11, run_split_to_sequence, NULL, true},
    {"ConcatFromSequence", 11, run_concat_from_sequence, check_concat_from_sequence, true},
    {"SequenceMap", 17, run_sequence_map, check_sequence_map, true},
    {"Optional", 15, run_optional, check_optional, true},
    {"OptionalHasElement", 15, run_optional_has_element, NULL, true},
    {"OptionalGetElement", 15, run_optional_get_element, NULL, true},
    {NULL, 0, NULL, NULL, false},
};

/* ------------------------------------------------------------------ the load-time check */
/* The inputs [first, last] of op take containers; every other input of every operator a tensor. */
static const struct {
    const char *op;
    int first, last;
} takes[] = {
    {"Identity", 0, 0},           {"Loop", 2, INT_MAX},         {"SequenceInsert", 0, 0},
    {"SequenceErase", 0, 0},      {"SequenceAt", 0, 0},         {"SequenceLength", 0, 0},
    {"ConcatFromSequence", 0, 0}, {"SequenceMap", 0, INT_MAX},  {"Optional", 0, 0},
    {"OptionalHasElement", 0, 0}, {"OptionalGetElement", 0, 0},
};
/* the operators whose results are containers (Identity: when its input is one) */
static const char *const makes[] = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert",
                                    "SequenceErase", "SplitToSequence",   "SequenceMap",
                                    "Optional"};

static bool takes_container(const char *op, int i) {
    for (size_t k = 0; k < sizeof takes / sizeof *takes; k++)
        if (!strcmp(takes[k].op, op)) return i >= takes[k].first && i <= takes[k].last;
    return false;
}

static bool makes_container(const tso_node *nd, const bool *known) {
    for (size_t k = 0; k < sizeof makes / sizeof *makes; k++)
        if (!strcmp(makes[k], nd->op_type)) return true;
    return !strcmp(nd->op_type, "Identity") && nd->n_in == 1 && nd->in[0] >= 0 && known[nd->in[0]];
}

bool tso_check_container_uses(const tso_graph *g, const char *where) {
    bool *known = calloc((size_t)g->n_values + 1, sizeof *known);
    if (!known) return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory"), false;
    for (int i = 0; i < g->n_inputs; i++) known[g->inputs[i]] = g->in_info[i].kind != 0;
    bool ok = true;
    for (int k = 0; ok && k < g->n_nodes; k++) {
        const tso_node *nd = &g->nodes[k];
        for (int i = 0; ok && i < nd->n_in; i++)
            if (nd->in[i] >= 0 && known[nd->in[i]] && !takes_container(nd->op_type, i)) {
                tsi_error_set(TS_ERR_FORMAT,
                              "onnx_load: %s: %s: input %d ('%s') is a sequence or an optional; "
                              "%s takes a tensor there",
                              where, nd->label, i, g->values[nd->in[i]].name, nd->op_type);
                ok = false;
            }
        for (int o = 0; ok && o < nd->n_out; o++)
            if (nd->out[o] >= 0) known[nd->out[o]] = makes_container(nd, known);
    }
    free(known);
    return ok;
}
