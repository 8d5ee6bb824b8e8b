/* profiler_flops.c — with_flops: an op's floating-point operations and the bytes it reads and
 * writes, from its recorded input dims and types (profiler.c's JSON text) and its result's shape.
 * Run once per op event at ts_profiler_stop, so recording costs what record_shapes costs. The
 * formulas (docs/PROFILING.md) are PyTorch's: torch/csrc/profiler/util.cpp computeFlops for the
 * products, conv2d, add and mul, torch.utils.flop_counter for the others. */
#include <string.h>

#include "core/profiler_internal.h"

#define MAX_IN 16

typedef struct shp {
    int nd;
    int64_t d[TS_MAX_DIMS];
} shp;

/* the inputs: n of them parsed; *cut: the list was longer (ended with "...") or unreadable */
typedef struct ins {
    int n;
    bool cut;
    shp s[MAX_IN];
    size_t elsize[MAX_IN]; /* 0: a type the profiler does not know */
} ins;

static const char *skip_sp(const char *p) {
    while (*p == ' ') p++;
    return p;
}

/* "[2, 3]" at p into s; the character after it, NULL when malformed */
static const char *parse_dims(const char *p, shp *s) {
    s->nd = 0;
    if (*p != '[') return NULL;
    p = skip_sp(p + 1);
    while (*p != ']') {
        if (*p < '0' || *p > '9' || s->nd == TS_MAX_DIMS) return NULL;
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return NULL;
            v = v * 10 + (*p++ - '0');
        }
        s->d[s->nd++] = v;
        p = skip_sp(p);
        if (*p == ',') p = skip_sp(p + 1);
    }
    return p + 1;
}

static size_t size_of_type(const char *name, size_t len) {
    for (int d = 1; d < TS_DTYPE_COUNT; d++) {
        const char *n = ts_dtype_name((ts_dtype)d);
        if (strlen(n) == len && !memcmp(n, name, len)) return ts_dtype_size((ts_dtype)d);
    }
    return 0;
}

static void parse_inputs(const tsi_prof_inputs *in, ins *out) {
    memset(out, 0, sizeof *out);
    if (!in || in->dims[0] != '[') return;
    const char *p = skip_sp(in->dims + 1), *t = skip_sp(in->types + 1);
    while (*p && *p != ']') {
        if (*p != '[' || out->n == MAX_IN) { /* the "..." of a long list, or more than we keep */
            out->cut = true;
            return;
        }
        shp *s = &out->s[out->n];
        p = parse_dims(p, s);
        if (!p || *t != '"') {
            out->cut = true;
            return;
        }
        const char *q = strchr(t + 1, '"');
        if (!q) {
            out->cut = true;
            return;
        }
        out->elsize[out->n++] = size_of_type(t + 1, (size_t)(q - t - 1));
        p = skip_sp(p), t = skip_sp(q + 1);
        if (*p == ',') p = skip_sp(p + 1);
        if (*t == ',') t = skip_sp(t + 1);
    }
}

/* the result's "[2, 3] float32" */
static bool parse_result(const char *shape, shp *s, size_t *elsize) {
    const char *p = shape[0] ? parse_dims(shape, s) : NULL;
    if (!p || *p != ' ') return false;
    *elsize = size_of_type(p + 1, strlen(p + 1));
    return *elsize != 0;
}

static int64_t numel(const shp *s, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= s->d[i];
    return n;
}

static int64_t last(const shp *s, int from_end) {
    return s->nd >= from_end ? s->d[s->nd - from_end] : 1;
}

/* matmul's batch: the broadcast of a's and b's dims before their last two */
static int64_t broadcast_batch(const shp *a, const shp *b) {
    int na = a->nd > 2 ? a->nd - 2 : 0, nb = b->nd > 2 ? b->nd - 2 : 0;
    int n = na > nb ? na : nb;
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        int64_t x = i < na ? a->d[na - 1 - i] : 1, y = i < nb ? b->d[nb - 1 - i] : 1;
        p *= x == 1 ? y : x;
    }
    return p;
}

typedef enum {
    F_NONE,
    F_MM,
    F_BMM,
    F_MATMUL,
    F_LINEAR,
    F_CONV,
    F_CONV_T,
    F_SDPA,
    F_ELEMENTWISE
} formula;

static formula formula_of(const char *name) {
    static const struct {
        const char *name;
        formula f;
    } table[] = {
        {"mm", F_MM},
        {"bmm", F_BMM},
        {"matmul", F_MATMUL}, /* mv and dot too (recorded as matmul) */
        {"linear", F_LINEAR},
        {"conv1d", F_CONV},
        {"conv2d", F_CONV},
        {"conv3d", F_CONV},
        {"conv_transpose1d", F_CONV_T},
        {"conv_transpose2d", F_CONV_T},
        {"conv_transpose3d", F_CONV_T},
        {"scaled_dot_product_attention", F_SDPA},
        {"add", F_ELEMENTWISE},
        {"mul", F_ELEMENTWISE},
        {"add_scalar", F_ELEMENTWISE},
        {"mul_scalar", F_ELEMENTWISE},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(name, table[i].name)) return table[i].f;
    return F_NONE;
}

/* 2 per multiply-add of the products (the bias adds of addmm and linear are not counted, as
 * PyTorch's); 0 when the inputs it needs are missing or not the op's usual ranks */
static int64_t flops_of(formula f, const ins *in, const shp *out, bool has_out) {
    const shp *a = &in->s[0], *b = &in->s[1], *c = &in->s[2];
    switch (f) {
    case F_MM: /* [M, K] @ [K, N] */
        return in->n >= 2 && a->nd == 2 && b->nd == 2 ? 2 * a->d[0] * a->d[1] * b->d[1] : 0;
    case F_BMM: /* [B, M, K] @ [B, K, N] */
        return in->n >= 2 && a->nd == 3 && b->nd == 3 ? 2 * a->d[0] * a->d[1] * a->d[2] * b->d[2]
                                                      : 0;
    case F_MATMUL: /* [..., M, K] @ [..., K, N], a 1-d side without its M or N */
        if (in->n < 2 || a->nd < 1 || b->nd < 1) return 0;
        return 2 * broadcast_batch(a, b) * (a->nd >= 2 ? last(a, 2) : 1) * last(a, 1) *
               (b->nd >= 2 ? last(b, 1) : 1);
    case F_LINEAR: /* [..., K] with weight [N, K] or [K] */
        if (in->n < 2 || a->nd < 1 || b->nd < 1 || b->nd > 2) return 0;
        return 2 * numel(a, 0, a->nd) * (b->nd == 2 ? b->d[0] : 1);
    /* 2 * output elements * Cin / groups * kernel elements; weight [Cout, Cin/g, k...] */
    case F_CONV:
        return has_out && in->n >= 2 && b->nd >= 3 ? 2 * numel(out, 0, out->nd) * numel(b, 1, b->nd)
                                                   : 0;
    /* 2 * input elements * Cout / groups * kernel elements; weight [Cin, Cout/g, k...]
     * (torch.utils.flop_counter's: each input element meets each tap once) */
    case F_CONV_T:
        return in->n >= 2 && b->nd >= 3 ? 2 * numel(a, 0, a->nd) * numel(b, 1, b->nd) : 0;
    case F_SDPA: /* q [..., L, E], k [..., S, E], v [..., S, Ev]: Q K^T and the weights times V */
        if (in->n < 3 || a->nd < 2 || b->nd < 2 || c->nd < 2) return 0;
        return 2 * numel(a, 0, a->nd - 1) * last(b, 2) * (last(a, 1) + last(c, 1));
    case F_ELEMENTWISE: /* one per output element */
        return has_out ? numel(out, 0, out->nd) : 0;
    default:
        return 0;
    }
}

void tsi_prof_flops(ts_profile_event *e, const tsi_prof_inputs *in) {
    e->flops = e->op_bytes = 0;
    if (e->kind != TS_PROF_OP) return;
    ins x[1];
    parse_inputs(in, x);
    shp out = {0};
    size_t out_size = 0;
    const bool has_out = parse_result(e->shape, &out, &out_size);
    const formula f = formula_of(e->name);
    /* the inputs a formula reads come first: a list cut after them still counts */
    e->flops = f == F_NONE ? 0 : flops_of(f, x, &out, has_out);
    /* bytes: unknown (0) when the inputs were cut or a type is not known */
    int64_t bytes = has_out ? numel(&out, 0, out.nd) * (int64_t)out_size : 0;
    for (int i = 0; i < x->n && bytes >= 0; i++)
        bytes = x->elsize[i] ? bytes + numel(&x->s[i], 0, x->s[i].nd) * (int64_t)x->elsize[i] : -1;
    e->op_bytes = x->cut || bytes < 0 ? 0 : bytes;
}
