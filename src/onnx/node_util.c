/* node_util.c — what the operator files share: attribute lookups, errors that name the node,
 * small integer tensors read to the host, and the operator table's lookup. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ the operator table */
static const tso_op_def *const families[] = {
    tso_ops_elementwise, tso_ops_shape,      tso_ops_nn,     tso_ops_reduce,      tso_ops_index,
    tso_ops_misc,        tso_ops_unpool_det, tso_ops_window, tso_ops_grid_sample, tso_ops_detect,
    tso_ops_quantize,    tso_ops_signal,     tso_ops_quant,  tso_ops_seq,         tso_ops_text};
static const tso_op_def *const training_families[] = {tso_ops_train};

/* the newest row for op_type with since <= version among count families */
static const tso_op_def *find_in(const tso_op_def *const *fams, size_t count, const char *op_type,
                                 int version, bool *any) {
    const tso_op_def *best = NULL;
    if (any) *any = false;
    for (size_t f = 0; f < count; f++)
        for (const tso_op_def *d = fams[f]; d->op_type; d++) {
            if (strcmp(d->op_type, op_type)) continue;
            if (any) *any = true;
            if (d->since <= version && (!best || d->since > best->since)) best = d;
        }
    return best;
}

const tso_op_def *tso_find_op(const char *op_type, int opset, bool *any) {
    return find_in(families, sizeof families / sizeof *families, op_type, opset, any);
}

bool tso_is_op(const tso_node *n, const char *op) {
    return !strcmp(n->op_type, op) && n->def == tso_find_op(op, n->opset, NULL);
}

ts_tensor *tso_known(const tso_graph *g, int v) {
    if (v < 0) return NULL;
    const tso_value *val = &g->values[v];
    return val->kind == TSO_V_PARAM || val->kind == TSO_V_CONST ? val->tensor : NULL;
}

const tso_op_def *tso_find_ms_op(const char *op_type) {
    for (const tso_op_def *d = tso_ops_ms; d->op_type; d++)
        if (!strcmp(d->op_type, op_type)) return d;
    return NULL;
}

const tso_op_def *tso_find_training_op(const char *op_type, int version, bool *any) {
    return find_in(training_families, sizeof training_families / sizeof *training_families, op_type,
                   version, any);
}

/* ------------------------------------------------------------------ attributes */
const Onnx__AttributeProto *tso_attr(const tso_node *n, const char *name) {
    const Onnx__NodeProto *np = n->proto;
    for (size_t i = 0; i < np->n_attribute; i++)
        if (!strcmp(np->attribute[i]->name, name)) return np->attribute[i];
    return NULL;
}

int64_t tso_attr_int(const tso_node *n, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    if (!a) return def;
    if (a->has_i) return a->i;
    if (!a->has_f || a->f != a->f) return def; /* NaN: no integer */
    /* a float where an integer belongs: clamped (a cast out of range is undefined), so the
     * operator's own range check refuses it */
    if (a->f >= 0x1p63f) return INT64_MAX;
    if (a->f < -0x1p63f) return INT64_MIN;
    return (int64_t)a->f;
}

float tso_attr_float(const tso_node *n, const char *name, float def) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    if (!a) return def;
    if (a->has_f) return a->f;
    if (a->has_i) return (float)a->i;
    return def;
}

const char *tso_attr_string(const tso_node *n, const char *name, const char *def, char *buf,
                            size_t size) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    if (!a || !a->has_s) return def;
    size_t len = a->s.len < size - 1 ? a->s.len : size - 1;
    if (len) memcpy(buf, a->s.data, len);
    buf[len] = '\0';
    return buf;
}

int tso_attr_ints(const tso_node *n, const char *name, const int64_t **v) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    *v = NULL;
    if (!a) return -1;
    if (!a->n_ints && a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return -1;
    *v = a->ints;
    return (int)a->n_ints;
}

int tso_attr_floats(const tso_node *n, const char *name, const float **v) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    *v = NULL;
    if (!a) return -1;
    if (!a->n_floats && a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
        return -1;
    *v = a->floats;
    return (int)a->n_floats;
}

ts_tensor *tso_attr_tensor(const tso_node *n, const char *name, ts_device dev, bool *present) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    if (present) *present = a && a->t;
    if (!a || !a->t) return NULL;
    if (a->t->data_type == TSO_ONNX_INT4 || a->t->data_type == TSO_ONNX_UINT4) {
        /* held as int8 / uint8, a 4-bit zero point would lose its range: initializers only */
        tso_fail(n, TS_ERR_UNSUPPORTED,
                 "attribute %s: a %s tensor (4-bit values are read from "
                 "initializers only)",
                 name, tso_onnx_type_name(a->t->data_type));
        return NULL;
    }
    ts_tensor *t = tso_tensor_from_proto(a->t, NULL, dev, name);
    if (!t) {
        tso_fail_pending(n);
        return NULL;
    }
    return tsi_own(t);
}

tso_graph *tso_node_subgraph(const tso_node *n, const char *name) {
    for (int i = 0; i < n->n_sub; i++)
        if (!strcmp(n->sub_names[i], name)) return n->sub[i];
    return NULL;
}

/* ------------------------------------------------------------------ limits */
/* The most elements one node may make (its output, its padded input, the im2col workspace of a
 * convolution): TS_ONNX_MAX_NODE_ELEMENTS, read once (default 2^40: no practical limit). A file
 * is untrusted input, and a few bytes of pads, repeats or a Range's delta can ask for terabytes:
 * a run that must bound its memory (a service, the fuzzer, which sets 2^24) sets it, and such a
 * node is then refused with an error naming it instead of exhausting the machine. */
int64_t tso_max_node_elements(void) {
    static _Atomic int64_t cap; /* 0: not read yet */
    int64_t c = cap;
    if (!c) {
        const char *e = tsi_env(TSI_ENV_ONNX_MAX_NODE_ELEMENTS);
        char *end = NULL;
        long long v = e ? strtoll(e, &end, 10) : 0;
        c = v > 0 && end && !*end ? (int64_t)v : (int64_t)1 << 40;
        if (c > (int64_t)1 << 60) c = (int64_t)1 << 60; /* products below stay in range */
        cap = c;
    }
    return c;
}

/* A trip count is the file's: M = 2^62 with a condition that never turns false would run for
 * centuries. The bound is on every Loop body run of one run, so nested loops cannot multiply it
 * (the fuzzer sets 4096). */
int64_t tso_max_loop_iterations(void) {
    static _Atomic int64_t cap; /* 0: not read yet */
    int64_t c = cap;
    if (!c) {
        const char *e = tsi_env(TSI_ENV_ONNX_MAX_LOOP_ITERATIONS);
        char *end = NULL;
        long long v = e ? strtoll(e, &end, 10) : 0;
        c = v > 0 && end && !*end ? (int64_t)v : (int64_t)1 << 31;
        cap = c;
    }
    return c;
}

bool tso_loop_tick(tso_ctx *c, const tso_node *n) {
    while (c->outer) c = c->outer;
    const int64_t cap = tso_max_loop_iterations();
    if (++c->loop_iterations <= cap) return true;
    return tso_fail(n, TS_ERR_UNSUPPORTED,
                    "more than %lld Loop iterations in one run (TS_ONNX_MAX_LOOP_ITERATIONS "
                    "bounds them: a file's trip count is untrusted)",
                    (long long)cap);
}

/* ------------------------------------------------------------------ errors */
bool tso_fail(const tso_node *n, ts_status code, const char *fmt, ...) {
    if (ts_error()) return false;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tsi_error_set(code, "onnx: %s: %s", n->label, msg);
    return false;
}

bool tso_fail_pending(const tso_node *n) {
    if (!ts_error()) {
        tsi_error_set(TS_ERR_STATE, "onnx: %s failed without an error", n->label);
        return false;
    }
    if (!strstr(ts_error_message(), "onnx: node") && !strstr(ts_error_message(), "(in onnx node"))
        tsi_error_append(" (in onnx %s)", n->label);
    return false;
}

/* ------------------------------------------------------------------ small tensors */
int tso_read_ints(const tso_node *n, ts_tensor *t, int64_t *v, int max, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "%s is missing", what), -1;
    ts_dtype dt = ts_dtype_of(t);
    if (dt != TS_I64 && dt != TS_I32 && dt != TS_U8 && dt != TS_BOOL)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be an integer tensor, got %s", what, tsi_desc(t)),
               -1;
    int64_t count = ts_numel(t);
    if (ts_ndim(t) > 1)
        return tso_fail(n, TS_ERR_SHAPE, "%s must be a scalar or a vector, got %s", what,
                        tsi_desc(t)),
               -1;
    if (count > max)
        return tso_fail(n, TS_ERR_SHAPE, "%s has %lld values (at most %d)", what, (long long)count,
                        max),
               -1;
    ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_I64);
    if (!h || ts_copy_to_host(h, v, (size_t)count * sizeof *v) != TS_OK) {
        tso_fail_pending(n);
        return -1;
    }
    return (int)count;
}

bool tso_read_int(const tso_node *n, ts_tensor *t, int64_t *v, const char *what) {
    int count = tso_read_ints(n, t, v, 1, what);
    if (count < 0) return false;
    return count == 1 || tso_fail(n, TS_ERR_ARG, "%s must be one integer", what);
}

bool tso_read_scalar(const tso_node *n, ts_tensor *t, double *v, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "%s is missing", what);
    if (ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_SHAPE, "%s must hold one value, got %s", what, tsi_desc(t));
    *v = ts_item(t);
    if (ts_error()) return tso_fail_pending(n);
    return true;
}

ts_tensor *tso_ints_tensor(tso_ctx *c, const int64_t *v, int count, bool as_vector) {
    ts_shape s = as_vector ? (ts_shape){.ndim = 1, .dims = {count}} : (ts_shape){.ndim = 0};
    return ts_from_data(s, TS_I64, v, (ts_opts){.dtype = TS_I64, .device = c->device});
}

int tso_wrap_axis(const tso_node *n, int64_t axis, int rank, bool inclusive) {
    int64_t hi = inclusive ? rank : rank - 1;
    if (axis < -rank || axis > hi)
        return tso_fail(n, TS_ERR_ARG, "axis %lld is out of range for a tensor of rank %d",
                        (long long)axis, rank),
               -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

int tso_attr_choice(const tso_node *n, const char *name, const char *def,
                    const char *const *choices, int count) {
    char buf[64];
    const char *s = tso_attr_string(n, name, def, buf, sizeof buf);
    for (int i = 0; i < count; i++)
        if (!strcmp(s, choices[i])) return i;
    tso_fail(n, TS_ERR_UNSUPPORTED, "%s '%s' is not supported", name, s);
    return -1;
}
