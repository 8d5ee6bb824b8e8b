/* export_ops_ew.c — ONNX forms of the traced elementwise, shape and reduction ops: each emitter
 * writes the nodes of one record (export_internal.h). ONNX keeps its inputs' types, so where
 * Tessera promotes (an integer tensor divided, a float scalar on an integer tensor), the operands
 * are cast to the type Tessera computed in first. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "onnx/export_internal.h"

/* ------------------------------------------------------------------ helpers */
static ts_dtype in_dt(const tse *e, const tsi_trace_rec *r, int k) {
    return tse_in(e, r, k)->dtype;
}
static ts_dtype out_dt(const tse *e, const tsi_trace_rec *r) { return tse_out(e, r)->dtype; }
static int out_rank(const tse *e, const tsi_trace_rec *r) { return tse_out(e, r)->shape.ndim; }

/* The type both operands of a comparison are compared in: the floating one, else the wider. */
static ts_dtype compare_dtype(ts_dtype a, ts_dtype b) {
    if (a == b) return a;
    if (tsi_is_float(a) != tsi_is_float(b)) return tsi_is_float(a) ? a : b;
    return ts_promote_types(a, b);
}

static bool is_comparison(const char *onnx_op) {
    return !strcmp(onnx_op, "Equal") || !strcmp(onnx_op, "Less") || !strcmp(onnx_op, "Greater") ||
           !strcmp(onnx_op, "LessOrEqual") || !strcmp(onnx_op, "GreaterOrEqual") ||
           !strcmp(onnx_op, "And") || !strcmp(onnx_op, "Or");
}

/* ------------------------------------------------------------------ unary */
/* Ops that map one to one (the row's ONNX operator); the input is first cast to the result type (a
 * float function of an integer tensor). Rounding an integer changes nothing. */
static const char *emit_unary(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const ts_dtype dt = in_dt(e, r, 0), od = out_dt(e, r);
    const char *op = e->onnx_op;
    if (!tsi_is_float(dt) && (!strcmp(op, "Floor") || !strcmp(op, "Ceil") || !strcmp(op, "Round")))
        return in[0];
    const char *x = tse_cast(e, in[0], dt, od);
    return x ? tse_node1(e, op, 1, &x, out) : NULL;
}

static const char *emit_rsqrt(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const char *x = tse_cast(e, in[0], in_dt(e, r, 0), out_dt(e, r));
    const char *s = x ? tse_node1(e, "Sqrt", 1, &x, NULL) : NULL;
    return s ? tse_node1(e, "Reciprocal", 1, &s, out) : NULL;
}

static const char *emit_log1p(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const ts_dtype od = out_dt(e, r);
    const char *x = tse_cast(e, in[0], in_dt(e, r, 0), od);
    const char *p = x ? tse_node2(e, "Add", x, tse_const_scalar(e, 1, od), NULL) : NULL;
    return p ? tse_node1(e, "Log", 1, &p, out) : NULL;
}

static const char *emit_square(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    const char *x = tse_cast(e, in[0], in_dt(e, r, 0), out_dt(e, r));
    return tse_node2(e, "Mul", x, x, out);
}

static const char *emit_silu(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    (void)r;
    const char *s = tse_node1(e, "Sigmoid", 1, in, NULL);
    return tse_node2(e, "Mul", in[0], s, out);
}

/* The exact (erf) GELU as PyTorch writes it before opset 20: x * 0.5 * (1 + erf(x / sqrt 2)),
 * in the order Div, Erf, Add, Mul, Mul. */
static const char *emit_gelu(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    const ts_dtype dt = in_dt(e, r, 0);
    const char *d = tse_node2(e, "Div", in[0], tse_const_scalar(e, sqrt(2.0), dt), NULL);
    const char *f = d ? tse_node1(e, "Erf", 1, &d, NULL) : NULL;
    const char *a = f ? tse_node2(e, "Add", f, tse_const_scalar(e, 1, dt), NULL) : NULL;
    const char *m = a ? tse_node2(e, "Mul", in[0], a, NULL) : NULL;
    return m ? tse_node2(e, "Mul", m, tse_const_scalar(e, 0.5, dt), out) : NULL;
}

/* clamp(lo, hi) as Clip; a NaN bound is an absent input */
static const char *emit_clamp(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const ts_dtype od = out_dt(e, r);
    const char *c[3] = {tse_cast(e, in[0], in_dt(e, r, 0), od), "", ""};
    for (int k = 0; k < 2; k++)
        if (!isnan(r->f[k]) && !(c[k + 1] = tse_const_scalar(e, r->f[k], od))) return NULL;
    return c[0] ? tse_node1(e, "Clip", 3, c, out) : NULL;
}

/* leaky_relu(negative_slope) as LeakyRelu(alpha) (the same function; ONNX names no gradient) */
static const char *emit_leaky_relu(tse *e, const tsi_trace_rec *r, const char *const *in,
                                   const char *out) {
    Onnx__NodeProto *n = tse_node(e, "LeakyRelu", 1, in, out);
    return n && tse_attr_float(e, n, "alpha", (float)r->f[0]) ? n->output[0] : NULL;
}

/* ------------------------------------------------------------------ binary */
/* a op b (the row's ONNX operator) with both operands cast to the type Tessera computed in; the
 * reversed scalar forms (rsub_scalar: s - x) swap them, and ne is Not(Equal). */
static const char *binary_node(tse *e, const tsi_trace_rec *r, const char *x, ts_dtype xt,
                               const char *y, ts_dtype yt, const char *out) {
    const char *op = e->onnx_op;
    const ts_dtype c = is_comparison(op) ? compare_dtype(xt, yt) : out_dt(e, r);
    x = tse_cast(e, x, xt, c);
    y = tse_cast(e, y, yt, c);
    if (!strncmp(r->op, "rsub", 4) || !strncmp(r->op, "rpow", 4)) {
        const char *t = x;
        x = y, y = t;
    }
    if (strncmp(r->op, "ne", 2)) return tse_node2(e, op, x, y, out);
    const char *eq = tse_node2(e, "Equal", x, y, NULL);
    return eq ? tse_node1(e, "Not", 1, &eq, out) : NULL;
}

static const char *emit_binary(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    return binary_node(e, r, in[0], in_dt(e, r, 0), in[1], in_dt(e, r, 1), out);
}

/* x op s: the scalar is a constant of the type Tessera computed in (PyTorch's rules: a float
 * scalar makes an integer tensor float; a comparison keeps the tensor's type when it can) */
static const char *emit_scalar(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    const double s = r->f[0];
    const ts_dtype xt = in_dt(e, r, 0), od = out_dt(e, r);
    ts_dtype st = od;
    if (od == TS_BOOL) st = tsi_is_float(xt) || s == (double)(int64_t)s ? xt : TS_F32;
    return binary_node(e, r, in[0], xt, tse_const_scalar(e, s, st), st, out);
}

static const char *emit_add_alpha(tse *e, const tsi_trace_rec *r, const char *const *in,
                                  const char *out) {
    const ts_dtype od = out_dt(e, r);
    const char *y = tse_cast(e, in[1], in_dt(e, r, 1), od);
    if (r->f[0] != 1) y = tse_node2(e, "Mul", y, tse_const_scalar(e, r->f[0], od), NULL);
    return tse_node2(e, "Add", tse_cast(e, in[0], in_dt(e, r, 0), od), y, out);
}

static const char *emit_fmod(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    const ts_dtype od = out_dt(e, r);
    const bool scalar = strstr(r->op, "scalar") != NULL;
    const char *y =
        scalar ? tse_const_scalar(e, r->f[0], od) : tse_cast(e, in[1], in_dt(e, r, 1), od);
    const char *x = tse_cast(e, in[0], in_dt(e, r, 0), od);
    Onnx__NodeProto *n = x && y ? tse_node(e, "Mod", 2, (const char *[]){x, y}, out) : NULL;
    return n && tse_attr_int(e, n, "fmod", 1) ? n->output[0] : NULL;
}

/* ------------------------------------------------------------------ where, casts, aliases */
static const char *emit_where(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const ts_dtype od = out_dt(e, r);
    const char *c[3] = {tse_cast(e, in[0], in_dt(e, r, 0), TS_BOOL),
                        tse_cast(e, in[1], in_dt(e, r, 1), od),
                        tse_cast(e, in[2], in_dt(e, r, 2), od)};
    return c[0] && c[1] && c[2] ? tse_node1(e, "Where", 3, c, out) : NULL;
}

static const char *emit_masked_fill(tse *e, const tsi_trace_rec *r, const char *const *in,
                                    const char *out) {
    const ts_dtype od = out_dt(e, r);
    const char *c[3] = {tse_cast(e, in[1], in_dt(e, r, 1), TS_BOOL),
                        tse_const_scalar(e, r->f[0], od), in[0]};
    return c[0] && c[1] ? tse_node1(e, "Where", 3, c, out) : NULL;
}

static const char *emit_to_dtype(tse *e, const tsi_trace_rec *r, const char *const *in,
                                 const char *out) {
    if (in_dt(e, r, 0) == out_dt(e, r)) return in[0];
    Onnx__NodeProto *n = tse_node(e, "Cast", 1, in, out);
    return n && tse_attr_int(e, n, "to", tso_dtype_to_onnx(out_dt(e, r))) ? n->output[0] : NULL;
}

/* clone, contiguous, to (a device), t of a vector: the same values */
static const char *emit_alias(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    (void)e, (void)r, (void)out;
    return in[0];
}

/* ------------------------------------------------------------------ shapes */
static const char *reshape_to(tse *e, const char *x, const int64_t *shape, int n, const char *out) {
    const char *s = tse_const_ints(e, shape, n, false);
    return tse_node2(e, "Reshape", x, s, out);
}

/* view / reshape with the shape the caller gave (-1 stays); with a dynamic batch a leading size
 * equal to the input's batch size copies it instead (ONNX's 0), so another batch size fits. */
static const char *emit_reshape(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    ts_tensor *x = tse_in(e, r, 0), *y = tse_out(e, r);
    int64_t shape[TS_MAX_DIMS];
    const int n = r->n_i ? r->n_i : y->shape.ndim;
    memcpy(shape, r->n_i ? r->i : y->shape.dims, (size_t)n * sizeof *shape);
    if (e->o.dynamic_batch && n > 0 && x->shape.ndim > 0 && shape[0] == x->shape.dims[0] &&
        shape[0] > 0)
        shape[0] = 0;
    return reshape_to(e, in[0], shape, n, out);
}

/* flatten(1, -1) is ONNX's Flatten; other spans a Reshape that keeps the leading dims (0) */
static const char *emit_flatten(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    ts_tensor *x = tse_in(e, r, 0);
    const int a = (int)r->i[0], b = (int)r->i[1], nd = x->shape.ndim;
    if (a == 1 && b == nd - 1) {
        Onnx__NodeProto *n = tse_node(e, "Flatten", 1, in, out);
        return n && tse_attr_int(e, n, "axis", 1) ? n->output[0] : NULL;
    }
    int64_t shape[TS_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < a; i++) shape[k++] = 0;
    shape[k++] = -1;
    for (int i = b + 1; i < nd; i++) shape[k++] = x->shape.dims[i];
    return reshape_to(e, in[0], shape, k, out);
}

/* squeeze / unsqueeze: the axes removed or added, found by lining the shapes up (size-1 dims are
 * interchangeable, so any alignment gives the same result) */
static const char *emit_squeeze(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    const ts_shape a = tse_in(e, r, 0)->shape, b = tse_out(e, r)->shape;
    const bool squeeze = a.ndim > b.ndim;
    const ts_shape *big = squeeze ? &a : &b, *small = squeeze ? &b : &a;
    int64_t axes[TS_MAX_DIMS];
    int n = 0;
    for (int i = 0, j = 0; i < big->ndim; i++) {
        if (j < small->ndim && big->dims[i] == small->dims[j])
            j++;
        else
            axes[n++] = i;
    }
    if (n == 0) return in[0];
    const char *ax = tse_const_ints(e, axes, n, false);
    return tse_node2(e, squeeze ? "Squeeze" : "Unsqueeze", in[0], ax, out);
}

static const char *transpose(tse *e, const char *x, const int64_t *perm, int n, const char *out) {
    Onnx__NodeProto *t = tse_node(e, "Transpose", 1, &x, out);
    return t && tse_attr_ints(e, t, "perm", perm, n) ? t->output[0] : NULL;
}

static const char *emit_permute(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    return transpose(e, in[0], r->i, out_rank(e, r), out);
}

static const char *emit_transpose(tse *e, const tsi_trace_rec *r, const char *const *in,
                                  const char *out) {
    const int n = out_rank(e, r);
    if (n < 2) return in[0];
    int64_t perm[TS_MAX_DIMS];
    for (int i = 0; i < n; i++) perm[i] = i;
    perm[r->i[0]] = r->i[1];
    perm[r->i[1]] = r->i[0];
    return transpose(e, in[0], perm, n, out);
}

/* slice(d, start, step) / narrow(d, start): a Slice; a slice that runs to the end says so (INT64
 * max), which stays right for another size */
static const char *emit_slice(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const int d = (int)r->i[0];
    const int64_t start = r->i[1], step = r->i[2];
    const int64_t size = tse_in(e, r, 0)->shape.dims[d], len = tse_out(e, r)->shape.dims[d];
    int64_t end = start + len * step;
    if (end >= size) end = INT64_MAX;
    if (len == 0) end = start;
    const int64_t ax = d;
    const char *c[5] = {in[0], tse_const_ints(e, &start, 1, false),
                        tse_const_ints(e, &end, 1, false), tse_const_ints(e, &ax, 1, false),
                        tse_const_ints(e, &step, 1, false)};
    for (int k = 1; k < 5; k++)
        if (!c[k]) return NULL;
    return tse_node1(e, "Slice", 5, c, out);
}

/* select(d, i): a Gather with a 0-dim index drops the dim */
static const char *emit_select(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    const char *idx = tse_const_ints(e, &r->i[1], 1, true);
    Onnx__NodeProto *n = idx ? tse_node(e, "Gather", 2, (const char *[]){in[0], idx}, out) : NULL;
    return n && tse_attr_int(e, n, "axis", r->i[0]) ? n->output[0] : NULL;
}

/* expand: 1 where the size stays the input's (Expand broadcasts), so a batch dim stays free */
static const char *emit_expand(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    const ts_shape a = tse_in(e, r, 0)->shape, b = tse_out(e, r)->shape;
    int64_t shape[TS_MAX_DIMS];
    for (int i = 0; i < b.ndim; i++) {
        const int j = i - (b.ndim - a.ndim);
        shape[i] = j >= 0 && a.dims[j] == b.dims[i] ? 1 : b.dims[i];
    }
    return tse_node2(e, "Expand", in[0], tse_const_ints(e, shape, b.ndim, false), out);
}

/* cat along d. He et al.'s option-A shortcut concatenates zero blocks around a tensor: that is a
 * Pad, which (unlike zeros of the example's batch size) fits any batch size. */
static const char *emit_cat(tse *e, const tsi_trace_rec *r, const char *const *in,
                            const char *out) {
    const int d = (int)r->i[0], nd = out_rank(e, r);
    int live = -1, others = 0;
    int64_t before = 0, after = 0;
    for (int k = 0; k < r->n_in; k++) {
        ts_tensor *t = tse_in(e, r, k);
        if (t->shape.ndim != nd) continue; /* a legacy empty vector: skipped by cat */
        if (tse_in_is_zero_const(e, r, k)) {
            *(live < 0 ? &before : &after) += t->shape.dims[d];
        } else {
            others += live >= 0;
            live = k;
        }
    }
    if (ts_error()) return NULL;
    if (live >= 0 && !others && before + after > 0 && in_dt(e, r, live) == out_dt(e, r)) {
        int64_t pads[2 * TS_MAX_DIMS] = {0};
        pads[d] = before;
        pads[nd + d] = after;
        return tse_node2(e, "Pad", in[live], tse_const_ints(e, pads, 2 * nd, false), out);
    }
    const char **parts = tse_alloc(e, (size_t)r->n_in * sizeof *parts);
    int n = 0;
    for (int k = 0; parts && k < r->n_in; k++) {
        ts_tensor *t = tse_in(e, r, k);
        if (t->shape.ndim != nd) continue;
        if (!(parts[n++] = tse_cast(e, in[k], t->dtype, out_dt(e, r)))) return NULL;
    }
    Onnx__NodeProto *c = parts ? tse_node(e, "Concat", n, parts, out) : NULL;
    return c && tse_attr_int(e, c, "axis", d) ? c->output[0] : NULL;
}

static const char *emit_stack(tse *e, const tsi_trace_rec *r, const char *const *in,
                              const char *out) {
    const char **parts = tse_alloc(e, (size_t)r->n_in * sizeof *parts);
    const char *ax = tse_const_ints(e, &r->i[0], 1, false);
    if (!parts || !ax) return NULL;
    for (int k = 0; k < r->n_in; k++) {
        const char *x = tse_cast(e, in[k], in_dt(e, r, k), out_dt(e, r));
        if (!(parts[k] = tse_node2(e, "Unsqueeze", x, ax, NULL))) return NULL;
    }
    Onnx__NodeProto *c = tse_node(e, "Concat", r->n_in, parts, out);
    return c && tse_attr_int(e, c, "axis", r->i[0]) ? c->output[0] : NULL;
}

/* ------------------------------------------------------------------ reductions */
/* sum, mean, prod, amax, amin, logsumexp over the dims of the mask (opset 17: ReduceSum takes its
 * axes as an input, the others as an attribute); argmax / argmin over one dim or all of them */
static const char *emit_reduce(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    const char *onnx = e->onnx_op;
    if (!onnx) return tse_refuse(e, r, "no ONNX operator (var and std have none)");
    int64_t axes[TS_MAX_DIMS];
    int n = 0;
    const int nd = tse_in(e, r, 0)->shape.ndim;
    for (int i = 0; i < nd; i++)
        if (r->i[0] >> i & 1) axes[n++] = i;
    const char *x = tse_cast(e, in[0], in_dt(e, r, 0), out_dt(e, r));
    if (n == 0) return x; /* a 0-dim input: nothing to reduce */
    const bool axes_input = !strcmp(onnx, "ReduceSum");
    const char *c[2] = {x, axes_input ? tse_const_ints(e, axes, n, false) : NULL};
    Onnx__NodeProto *node =
        x && (c[1] || !axes_input) ? tse_node(e, onnx, 1 + axes_input, c, out) : NULL;
    if (node && !axes_input && !tse_attr_ints(e, node, "axes", axes, n)) return NULL;
    return node && tse_attr_int(e, node, "keepdims", r->i[1]) ? node->output[0] : NULL;
}

static const char *emit_arg(tse *e, const tsi_trace_rec *r, const char *const *in,
                            const char *out) {
    const int nd = tse_in(e, r, 0)->shape.ndim;
    int axis = 0, n = 0;
    for (int i = 0; i < nd; i++)
        if (r->i[0] >> i & 1) axis = i, n++;
    const char *x = in[0];
    int64_t keep = r->i[1];
    if (n != 1) { /* the whole tensor: its flat index */
        const int64_t flat = -1;
        x = reshape_to(e, x, &flat, 1, NULL);
        axis = 0;
        keep = 0;
    }
    Onnx__NodeProto *node =
        x ? tse_node(e, !strcmp(r->op, "argmax") ? "ArgMax" : "ArgMin", 1, &x, out) : NULL;
    return node && tse_attr_int(e, node, "axis", axis) && tse_attr_int(e, node, "keepdims", keep)
               ? node->output[0]
               : NULL;
}

/* The op families' rows that export as one ONNX node of their own (the onnx column of
 * unary_ops.def, binary_ops.def and reduce_ops.def; OWN rows have their emitter in the table
 * below, NO rows none) */
#define OWN NULL
#define NO  NULL
static const tse_op family_rows[] = {
#define X(ID, name, front, dtype, grad_fn, autocast, autocast_cpu, onnx) {#name, emit_unary, onnx},
#include "backend/unary_ops.def"
#undef X
#define X(ID, name, front, dtype, grad_fn, autocast, autocast_cpu, onnx) {#name, emit_binary, onnx},
#include "backend/binary_ops.def"
#undef X
#define X(ID, name, name_dim, dtype, grad_fn, grad_fn_dim, autocast, autocast_cpu, onnx)           \
    {#name, emit_reduce, onnx}, {#name_dim, emit_reduce, onnx},
#include "backend/reduce_ops.def"
#undef X
};
#undef OWN
#undef NO

const tse_op *tse_family_op(const char *op) {
    for (size_t i = 0; i < sizeof family_rows / sizeof *family_rows; i++)
        if (family_rows[i].onnx && !strcmp(family_rows[i].op, op)) return &family_rows[i];
    return NULL;
}

/* the other elementwise ops, the scalar forms, and the family rows with an emitter of their own */
const tse_op tse_ops_elementwise[] = {
    {"rsqrt", emit_rsqrt, NULL},
    {"log1p", emit_log1p, NULL},
    {"square", emit_square, NULL},
    {"silu", emit_silu, NULL},
    {"gelu", emit_gelu, NULL},
    {"leaky_relu", emit_leaky_relu, NULL},
    {"clamp", emit_clamp, NULL},
    {"clamp_min", emit_clamp, NULL},
    {"clamp_max", emit_clamp, NULL},
    {"fmod", emit_fmod, NULL},
    {"add_alpha", emit_add_alpha, NULL},
    {"add_scalar", emit_scalar, "Add"},
    {"sub_scalar", emit_scalar, "Sub"},
    {"rsub_scalar", emit_scalar, "Sub"},
    {"mul_scalar", emit_scalar, "Mul"},
    {"div_scalar", emit_scalar, "Div"},
    {"pow_scalar", emit_scalar, "Pow"},
    {"rpow_scalar", emit_scalar, "Pow"},
    {"maximum_scalar", emit_scalar, "Max"},
    {"minimum_scalar", emit_scalar, "Min"},
    {"fmod_scalar", emit_fmod, NULL},
    {"eq_scalar", emit_scalar, "Equal"},
    {"ne_scalar", emit_scalar, "Equal"},
    {"lt_scalar", emit_scalar, "Less"},
    {"le_scalar", emit_scalar, "LessOrEqual"},
    {"gt_scalar", emit_scalar, "Greater"},
    {"ge_scalar", emit_scalar, "GreaterOrEqual"},
    {"where", emit_where, NULL},
    {"masked_fill", emit_masked_fill, NULL},
    {"to_dtype", emit_to_dtype, NULL},
    {"to", emit_alias, NULL},
    {"clone", emit_alias, NULL},
    {"contiguous", emit_alias, NULL},
    {"identity", emit_alias, NULL},
    {"t", emit_alias, NULL}, /* a vector's t: 2-D ones trace as transpose */
    {"view", emit_reshape, NULL},
    {"reshape", emit_reshape, NULL},
    {"flatten", emit_flatten, NULL},
    {"squeeze", emit_squeeze, NULL},
    {"unsqueeze", emit_squeeze, NULL},
    {"permute", emit_permute, NULL},
    {"transpose", emit_transpose, NULL},
    {"slice", emit_slice, NULL},
    {"narrow", emit_slice, NULL},
    {"select", emit_select, NULL},
    {"expand", emit_expand, NULL},
    {"cat", emit_cat, NULL},
    {"stack", emit_stack, NULL},
    {"var", emit_reduce, NULL},
    {"std", emit_reduce, NULL},
    {"argmax", emit_arg, "ArgMax"},
    {"argmin", emit_arg, "ArgMin"},
    {NULL, NULL, NULL},
};
