/* export.c — ts_onnx_export: one forward of the module under the op trace (autograd/trace.h), the
 * records its result depends on turned into ONNX nodes by the op table (export_ops_*.c), and the
 * ModelProto packed into a file written atomically. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "onnx/export_internal.h"
#include "tessera/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "initializers are written in the host's byte order, and ONNX's raw_data is little-endian"
#endif

static const char *OP = "onnx_export";

/* ------------------------------------------------------------------ arena */
/* Every protobuf struct, string and raw buffer of one export lives in these blocks, freed at once:
 * the structs point at each other freely and a failure anywhere leaks nothing. */
struct tse_block {
    tse_block *next;
    size_t used, cap;
    max_align_t data[];
};
#define TSE_BLOCK ((size_t)64 << 10)

static void *arena_get(tse *e, size_t n, bool zero) {
    n = (n + 15) & ~(size_t)15;
    tse_block *b = e->arena;
    if (!b || b->cap - b->used < n) {
        const size_t cap = n > TSE_BLOCK / 4 ? n : TSE_BLOCK;
        tse_block *nb = malloc(sizeof *nb + cap);
        if (!nb) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory (%zu bytes)", OP, n);
            return NULL;
        }
        nb->used = 0;
        nb->cap = cap;
        if (b && cap != TSE_BLOCK) { /* a large buffer of its own: the current block goes on */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            e->arena = nb;
        }
        b = nb;
    }
    void *p = (unsigned char *)b->data + b->used;
    b->used += n;
    if (zero) memset(p, 0, n);
    return p;
}

void *tse_alloc(tse *e, size_t n) { return arena_get(e, n, true); }

static char *arena_str(tse *e, const char *s) {
    size_t n = strlen(s) + 1;
    char *c = arena_get(e, n, false);
    if (c) memcpy(c, s, n);
    return c;
}

/* Generated names start with '/' (as PyTorch's do), which no state-dict name does. */
const char *tse_fresh(tse *e, const char *stem) {
    char buf[96];
    snprintf(buf, sizeof buf, "/%s_%d", stem, e->n_names++);
    return arena_str(e, buf);
}

const char *tse_refuse(tse *e, const tsi_trace_rec *r, const char *fmt, ...) {
    (void)e;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tsi_error_set(TS_ERR_UNSUPPORTED, "%s: op '%s' has no ONNX form here: %s", OP, r->op, msg);
    return NULL;
}

/* Grows a pointer array by one slot (plain realloc: the arrays outlive nothing but the export). */
static bool push(void ***a, int *n, int *cap, void *item) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        void **g = realloc(*a, (size_t)nc * sizeof *g);
        if (!g) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
            return false;
        }
        *a = g;
        *cap = nc;
    }
    (*a)[(*n)++] = item;
    return true;
}

/* ------------------------------------------------------------------ nodes and attributes */
Onnx__NodeProto *tse_node(tse *e, const char *op_type, int n_in, const char *const *in,
                          const char *out) {
    Onnx__NodeProto *n = tse_alloc(e, sizeof *n);
    char **ins = tse_alloc(e, (size_t)(n_in ? n_in : 1) * sizeof *ins);
    char **outs = tse_alloc(e, sizeof *outs);
    const char *name = tse_fresh(e, op_type);
    if (!n || !ins || !outs || !name) return NULL;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    for (int k = 0; k < n_in; k++) ins[k] = (char *)(in[k] ? in[k] : "");
    outs[0] = (char *)(out ? out : name);
    n->n_input = (size_t)n_in;
    n->input = ins;
    n->n_output = 1;
    n->output = outs;
    n->name = (char *)name;
    n->op_type = (char *)op_type;
    return push((void ***)&e->nodes, &e->n_nodes, &e->cap_nodes, n) ? n : NULL;
}

const char *tse_node1(tse *e, const char *op_type, int n_in, const char *const *in,
                      const char *out) {
    Onnx__NodeProto *n = tse_node(e, op_type, n_in, in, out);
    return n ? n->output[0] : NULL;
}

const char *tse_node2(tse *e, const char *op_type, const char *a, const char *b, const char *out) {
    const char *in[2] = {a, b};
    return a && b ? tse_node1(e, op_type, 2, in, out) : NULL;
}

static Onnx__AttributeProto *attr_new(tse *e, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = n ? tse_alloc(e, sizeof *a) : NULL;
    Onnx__AttributeProto **list =
        a ? tse_alloc(e, (n->n_attribute + 1) * sizeof *list) : NULL; /* a few per node */
    if (!list) return NULL;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = true;
    a->type = type;
    if (n->n_attribute) memcpy(list, n->attribute, n->n_attribute * sizeof *list);
    list[n->n_attribute++] = a;
    n->attribute = list;
    return a;
}

bool tse_attr_int(tse *e, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr_new(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = true, a->i = v;
    return a != NULL;
}

bool tse_attr_float(tse *e, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = attr_new(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = true, a->f = v;
    return a != NULL;
}

bool tse_attr_ints(tse *e, Onnx__NodeProto *n, const char *name, const int64_t *v, int count) {
    Onnx__AttributeProto *a = attr_new(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = a ? tse_alloc(e, (size_t)(count ? count : 1) * sizeof *c) : NULL;
    if (!c) return false;
    if (count) memcpy(c, v, (size_t)count * sizeof *c);
    a->n_ints = (size_t)count;
    a->ints = c;
    return true;
}

const char *tse_cast(tse *e, const char *x, ts_dtype from, ts_dtype to) {
    if (!x || from == to) return x;
    Onnx__NodeProto *n = tse_node(e, "Cast", 1, &x, NULL);
    return n && tse_attr_int(e, n, "to", tso_dtype_to_onnx(to)) ? n->output[0] : NULL;
}

/* ------------------------------------------------------------------ initializers */
ts_dtype tse_storage_dtype(ts_dtype d) {
    return d == TS_QINT8 ? TS_I8 : d == TS_QUINT8 ? TS_U8 : d == TS_QINT32 ? TS_I32 : d;
}

/* A quantized tensor's initializer holds its integers (export_ops_quant.c writes the scales and
 * zero points next to the nodes that read it). */
static const char *add_init(tse *e, const char *name, ts_tensor *t) {
    if (tsi_is_quantized(t->dtype) && t->dtype != TS_QUINT4X2) {
        ts_tensor *ints = ts_int_repr(t); /* owned by the export's scope */
        return ints ? add_init(e, name, ints) : NULL;
    }
    const int32_t type = tso_dtype_to_onnx(t->dtype);
    if (!type)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: %s has dtype %s, which ONNX lacks", OP, name,
                             ts_dtype_name(t->dtype)),
               NULL;
    const size_t bytes = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    Onnx__TensorProto *tp = tse_alloc(e, sizeof *tp);
    int64_t *dims = tse_alloc(e, (size_t)(t->shape.ndim ? t->shape.ndim : 1) * sizeof *dims);
    void *raw = arena_get(e, bytes ? bytes : 1, false);
    if (!tp || !dims || !raw || ts_copy_to_host(t, raw, bytes) != TS_OK) return NULL;
    *tp = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    memcpy(dims, t->shape.dims, (size_t)t->shape.ndim * sizeof *dims);
    tp->n_dims = (size_t)t->shape.ndim;
    tp->dims = dims;
    tp->has_data_type = true;
    tp->data_type = type;
    tp->name = (char *)name;
    tp->has_raw_data = true;
    tp->raw_data = (ProtobufCBinaryData){bytes, raw};
    return push((void ***)&e->inits, &e->n_inits, &e->cap_inits, tp) ? name : NULL;
}

static bool same_tensor(const Onnx__TensorProto *a, const Onnx__TensorProto *b) {
    return a->data_type == b->data_type && a->n_dims == b->n_dims &&
           !memcmp(a->dims, b->dims, a->n_dims * sizeof *a->dims) &&
           a->raw_data.len == b->raw_data.len &&
           !memcmp(a->raw_data.data, b->raw_data.data, a->raw_data.len);
}

/* A generated constant equal to an earlier one is that one (each attention layer's causal mask,
 * each reshape's shape): the new initializer is dropped again. */
const char *tse_const_tensor(tse *e, ts_tensor *t, const char *name) {
    const char *n = !t ? NULL : name ? name : tse_fresh(e, "const");
    if (!n || !add_init(e, n, t)) return NULL;
    const Onnx__TensorProto *made = e->inits[e->n_inits - 1];
    for (int i = 0; !name && i < e->n_inits - 1; i++) { /* all generated while converting */
        if (!same_tensor(e->inits[i], made)) continue;
        e->n_inits--;
        return e->inits[i]->name;
    }
    return n;
}

/* A host buffer as a cpu tensor (inside the export's scope), then as an initializer. */
static const char *const_host(tse *e, ts_shape s, ts_dtype dt, const void *data) {
    ts_tensor *t = tsi_from_host(OP, s, dt, data, ts_cpu());
    const char *n = t ? tse_const_tensor(e, t, NULL) : NULL;
    ts_release(t);
    return n;
}

const char *tse_const_ints(tse *e, const int64_t *v, int count, bool scalar) {
    return const_host(e, scalar ? (ts_shape){0} : TS_SHAPE(count), TS_I64, v);
}

const char *tse_const_scalar(tse *e, double v, ts_dtype dt) {
    ts_tensor *t = ts_scalar(v, (ts_opts){.dtype = dt, .device = ts_cpu()});
    return t ? tse_const_tensor(e, t, NULL) : NULL; /* t belongs to the export's scope */
}

/* ------------------------------------------------------------------ values */
ts_tensor *tse_in(const tse *e, const tsi_trace_rec *r, int k) {
    return k < r->n_in && r->in[k] >= 0 ? e->tr.vals[r->in[k]].t : NULL;
}
ts_tensor *tse_out(const tse *e, const tsi_trace_rec *r) { return e->tr.vals[r->out].t; }

bool tse_in_is_zero_const(tse *e, const tsi_trace_rec *r, int k) {
    if (k >= r->n_in || r->in[k] < 0) return false;
    const tsi_trace_value *v = &e->tr.vals[r->in[k]];
    if (v->producer >= 0 || v->named >= 0 || v->untraced) return false;
    const size_t n = (size_t)tsi_numel(v->t->shape) * tsi_dtype_size(v->t->dtype);
    unsigned char *buf = n ? malloc(n) : NULL;
    if (n && !buf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory (%zu bytes)", OP, n);
    bool zero = buf && ts_copy_to_host(v->t, buf, n) == TS_OK;
    for (size_t i = 0; zero && i < n; i++) zero = buf[i] == 0;
    free(buf);
    return zero; /* on failure the error is pending and the export ends with it */
}

static const char *input_name(const tse *e, int i) {
    return e->o.input_names && e->o.input_names[i] ? e->o.input_names[i] : "input";
}
static const char *output_name(const tse *e, int i) {
    return e->o.output_names && e->o.output_names[i] ? e->o.output_names[i] : "output";
}

/* The ONNX name of trace value v. Parameters, buffers and constants get their initializers at the
 * end (write_inits), for those a node reads: an emitter may take an input's name and not use it
 * (cat's zero blocks become a Pad). */
static const char *value_name(tse *e, int v) {
    if (e->vname[v]) return e->vname[v];
    const tsi_trace_value *tv = &e->tr.vals[v];
    const char *name;
    if (tv->producer >= 0) {
        tsi_error_set(TS_ERR_STATE, "%s: a value is read before the op that makes it", OP);
        return NULL;
    } else if (tv->named == 0) {
        name = input_name(e, 0);
    } else if (tv->named > 0) {
        name = e->sd.names[tv->named - 1];
    } else if (tv->untraced) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s: op '%s' has no ONNX form: the trace does not record it, and the "
                      "output depends on its result",
                      OP, tv->untraced);
        return NULL;
    } else {
        name = tse_fresh(e, "const");
    }
    return e->vname[v] = name;
}

/* Value v is computed (through traced ops) from the graph's input, or from a tensor an untraced op
 * made (*untraced: its name). */
static bool reads_input(const tse *e, int v, const char **untraced) {
    bool *seen = calloc((size_t)e->tr.n_vals + 1, sizeof *seen);
    int *stack = malloc(((size_t)e->tr.n_vals + 1) * sizeof *stack);
    bool found = !seen || !stack; /* out of memory: refuse rather than guess */
    int n = 0;
    if (!found) stack[n++] = v, seen[v] = true;
    while (!found && n > 0) {
        const tsi_trace_value *tv = &e->tr.vals[stack[--n]];
        if (tv->named == 0 || tv->untraced) {
            found = true;
            *untraced = tv->untraced;
            break;
        }
        if (tv->producer < 0) continue;
        const tsi_trace_rec *r = &e->tr.recs[tv->producer];
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] >= 0 && !seen[r->in[k]]) seen[r->in[k]] = true, stack[n++] = r->in[k];
    }
    free(seen);
    free(stack);
    return found;
}

const char *tse_const_in(tse *e, const tsi_trace_rec *r, int k) {
    const int v = k < r->n_in ? r->in[k] : -1;
    if (v < 0) return NULL;
    if (e->vname[v]) return e->vname[v];
    const tsi_trace_value *tv = &e->tr.vals[v];
    if (tv->producer < 0) return value_name(e, v);
    const char *untraced = NULL;
    if (reads_input(e, v, &untraced))
        return untraced ? tse_refuse(e, r,
                                     "input %d depends on op '%s', which the trace does not "
                                     "record",
                                     k, untraced)
                        : tse_refuse(e, r,
                                     "input %d (a weight or bias) is computed from the model's "
                                     "input; it must be a constant",
                                     k);
    return e->vname[v] = tse_const_tensor(e, tv->t, NULL); /* computed from constants: its value */
}

static int cmp_ptr(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t) * (const char *const *)a,
                    y = (uintptr_t) * (const char *const *)b;
    return x < y ? -1 : x > y;
}

/* The initializers of the outside values of one kind (parameters and buffers, or constants) that
 * some node reads; used[0..n-1] are the nodes' input names, sorted (each value's name is one
 * string, so pointers compare). */
static bool add_read(tse *e, const char **used, size_t n, bool named) {
    for (int v = 0; v < e->tr.n_vals; v++) {
        const tsi_trace_value *tv = &e->tr.vals[v];
        const char *name = e->vname[v];
        if (!name || tv->producer >= 0 || tv->named == 0 || (tv->named > 0) != named) continue;
        if (bsearch(&name, used, n, sizeof *used, cmp_ptr) && !add_init(e, name, tv->t))
            return false;
    }
    return true;
}

/* Moves initializers [from, n_inits) in front of [0, from). */
static bool rotate_front(tse *e, int from) {
    if (from == 0 || from == e->n_inits) return true; /* nothing to move (e->inits may be NULL) */
    Onnx__TensorProto **tmp = malloc((size_t)from * sizeof *tmp);
    if (!tmp) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    const int moved = e->n_inits - from;
    memcpy(tmp, e->inits, (size_t)from * sizeof *tmp);
    memmove(e->inits, e->inits + from, (size_t)moved * sizeof *tmp);
    memcpy(e->inits + moved, tmp, (size_t)from * sizeof *tmp);
    free(tmp);
    return true;
}

/* The initializers: parameters and buffers first (in the order the forward first reads them),
 * then the constants the emitters made, then the trace's constants. */
static bool write_inits(tse *e) {
    size_t n = 0;
    for (int i = 0; i < e->n_nodes; i++) n += e->nodes[i]->n_input;
    const char **used = malloc((n ? n : 1) * sizeof *used);
    if (!used) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    n = 0;
    for (int i = 0; i < e->n_nodes; i++)
        for (size_t k = 0; k < e->nodes[i]->n_input; k++) used[n++] = e->nodes[i]->input[k];
    qsort(used, n, sizeof *used, cmp_ptr);
    const int made = e->n_inits;
    bool ok = add_read(e, used, n, true) && rotate_front(e, made) && add_read(e, used, n, false);
    free(used);
    return ok;
}

/* ------------------------------------------------------------------ the op table */
static const tse_op *find_op(const char *op) {
    static const tse_op *const tables[] = {tse_ops_elementwise, tse_ops_nn, tse_ops_quant};
    char base[64];
    snprintf(base, sizeof base, "%s", op);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
            for (const tse_op *o = tables[t]; o->op; o++)
                if (!strcmp(o->op, base)) return o;
        const tse_op *u = tse_family_op(base);
        if (u) return u;
        size_t n = strlen(base); /* an in-place form: "relu_" is relu written back */
        if (n < 2 || base[n - 1] != '_') break;
        base[n - 1] = 0;
    }
    return NULL;
}

const char *tse_emit_as(tse *e, const char *op, const tsi_trace_rec *r, const char *const *in,
                        const char *out) {
    const tse_op *row = find_op(op);
    if (!row) return tsi_error_set(TS_ERR_STATE, "%s: no emitter '%s'", OP, op), NULL;
    const char *saved = e->onnx_op;
    e->onnx_op = row->onnx;
    const char *res = row->emit(e, r, in, out);
    e->onnx_op = saved;
    return res;
}

/* Records whose result the output reads, walking back from it; an input an emitter writes as a
 * constant (tse_const_inputs: a quantized layer's weight and bias) does not make its producer
 * live. */
static bool *live_records(tse *e) {
    bool *live = calloc((size_t)e->tr.n_recs + 1, sizeof *live);
    bool *val = calloc((size_t)e->tr.n_vals + 1, sizeof *val);
    if (!live || !val) {
        free(live);
        free(val);
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
        return NULL;
    }
    val[e->out_val] = true;
    for (int i = e->tr.n_recs - 1; i >= 0; i--) {
        const tsi_trace_rec *r = &e->tr.recs[i];
        if (!val[r->out]) continue;
        live[i] = true;
        const unsigned consts = tse_const_inputs(r->op);
        for (int k = 0; k < r->n_in; k++)
            if (r->in[k] >= 0 && !(k < 32 && (consts >> k) & 1)) val[r->in[k]] = true;
    }
    free(val);
    return live;
}

static bool convert_record(tse *e, const tsi_trace_rec *r) {
    if (r->stale_in >= 0)
        return tse_refuse(e, r,
                          "input %d was changed in place (through another view of its storage) "
                          "after the op that made it, which a graph of values cannot express",
                          r->stale_in),
               false;
    const tse_op *row = find_op(r->op);
    if (!row)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: op '%s' has no ONNX form (not exported)", OP,
                             r->op),
               false;
    const char **in = tse_alloc(e, (size_t)(r->n_in ? r->n_in : 1) * sizeof *in);
    if (!in) return false;
    const unsigned consts = tse_const_inputs(r->op); /* named by the emitter (tse_const_in) */
    for (int k = 0; k < r->n_in; k++)
        if (r->in[k] >= 0 && !(k < 32 && (consts >> k) & 1) && !(in[k] = value_name(e, r->in[k])))
            return false;
    const char *out = r->out == e->out_val ? output_name(e, 0) : tse_fresh(e, r->op);
    e->onnx_op = row->onnx;
    const char *res = out ? row->emit(e, r, in, out) : NULL;
    return (e->vname[r->out] = res) != NULL;
}

/* ------------------------------------------------------------------ the model */
static Onnx__ValueInfoProto *value_info(tse *e, const char *name, ts_tensor *t) {
    Onnx__ValueInfoProto *vi = tse_alloc(e, sizeof *vi);
    Onnx__TypeProto *tp = tse_alloc(e, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = tse_alloc(e, sizeof *tt);
    Onnx__TensorShapeProto *sh = tse_alloc(e, sizeof *sh);
    const int nd = t->shape.ndim;
    Onnx__TensorShapeProto__Dimension **dims = tse_alloc(e, (size_t)(nd ? nd : 1) * sizeof *dims);
    if (!vi || !tp || !tt || !sh || !dims) return NULL;
    for (int i = 0; i < nd; i++) {
        Onnx__TensorShapeProto__Dimension *d = tse_alloc(e, sizeof *d);
        if (!d) return NULL;
        *d = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (i == 0 && e->o.dynamic_batch) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "batch";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = t->shape.dims[i];
        }
        dims[i] = d;
    }
    *sh = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    sh->n_dim = (size_t)nd;
    sh->dim = dims;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = true;
    tt->elem_type = tso_dtype_to_onnx(tse_storage_dtype(t->dtype));
    tt->shape = sh;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

/* The graph: the live records in trace order, then the output under its name. */
static bool build_graph(tse *e, Onnx__GraphProto *g, const char *graph_name) {
    bool *live = live_records(e);
    const char **vname = tse_alloc(e, (size_t)e->tr.n_vals * sizeof *vname);
    bool ok = live && vname;
    e->vname = vname;
    for (int i = 0; ok && i < e->tr.n_recs; i++)
        if (live[i]) ok = convert_record(e, &e->tr.recs[i]);
    free(live);
    if (!ok) return false;
    const char *res = value_name(e, e->out_val), *out = output_name(e, 0);
    if (!res || (strcmp(res, out) && !tse_node1(e, "Identity", 1, &res, out)) || !write_inits(e))
        return false;
    Onnx__ValueInfoProto **ins = tse_alloc(e, sizeof *ins), **outs = tse_alloc(e, sizeof *outs);
    if (!ins || !outs) return false;
    ins[0] = value_info(e, input_name(e, 0), e->input);
    outs[0] = value_info(e, out, e->tr.vals[e->out_val].t);
    if (!ins[0] || !outs[0]) return false;
    *g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    g->name = (char *)graph_name;
    g->n_node = (size_t)e->n_nodes;
    g->node = e->nodes;
    g->n_initializer = (size_t)e->n_inits;
    g->initializer = e->inits;
    g->n_input = 1;
    g->input = ins;
    g->n_output = 1;
    g->output = outs;
    return true;
}

/* ------------------------------------------------------------------ the trace */
/* Each module's training flag, depth first, so that the export leaves a mixed model as it was. */
static int count_modules(const ts_module *m) {
    int n = 1;
    for (int i = 0; i < m->impl->children.n; i++) n += count_modules(m->impl->children.items[i]);
    return n;
}
static void walk_flags(ts_module *m, bool *flags, int *k, bool save) {
    if (save)
        flags[*k] = m->training;
    else
        m->training = flags[*k];
    ++*k;
    for (int i = 0; i < m->impl->children.n; i++)
        walk_flags(m->impl->children.items[i], flags, k, save);
}

/* The input the trace sees: a copy that autograd follows (a non-leaf, so in-place ops on it stay
 * allowed), so a tensor an untraced op computed from it carries that op's name in its grad_fn. */
static ts_tensor *traced_input(ts_tensor *x) {
    if (!tsi_is_float(x->dtype)) return ts_detach(x);
    ts_tensor *leaf = ts_detach(x);
    if (leaf) ts_set_requires_grad(leaf, true);
    return leaf && !ts_error() ? ts_clone(leaf) : NULL;
}

/* Runs the forward under the trace, in eval mode with autocast off. */
static bool run_trace(tse *e, ts_module *m, ts_tensor *x) {
    e->sd = ts_module_state_dict(m);
    if (ts_error()) return false;
    const int n_mods = count_modules(m);
    bool *flags = malloc((size_t)n_mods * sizeof *flags);
    ts_tensor **named = malloc((size_t)(e->sd.n + 1) * sizeof *named);
    e->input = flags && named ? traced_input(x) : NULL;
    if (!e->input) {
        free(flags);
        free(named);
        if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
        return false;
    }
    named[0] = e->input;
    for (int i = 0; i < e->sd.n; i++) named[i + 1] = e->sd.tensors[i];
    int k = 0;
    walk_flags(m, flags, &k, true);
    ts_module_eval(m);
    const ts_device_type dt = tsi_device(x).type;
    ts_autocast_begin_ex(dt, (ts_autocast_opts){.disabled = true});
    tsi_trace_begin(&e->tr, named, e->sd.n + 1);
    ts_tensor *y = ts_forward(m, e->input);
    /* a result no traced op made (the input itself, or an untraced op's): one alias record, so
     * that the output is a value like any other */
    if (y && !ts_error() && tsi_trace_lookup(&e->tr, y) < 0)
        tsi_trace_record("identity", &y, 1, y, NULL, 0, NULL, 0);
    bool ok = tsi_trace_end(&e->tr) && y && !ts_error();
    ts_autocast_end();
    k = 0;
    walk_flags(m, flags, &k, false);
    free(flags);
    e->tr.named = NULL; /* named[] is gone; the values keep their indices */
    free(named);
    if (ok) e->out_val = tsi_trace_lookup(&e->tr, y);
    return ok && e->out_val >= 0;
}

/* ------------------------------------------------------------------ writing */
/* protobuf-c's output buffer over the atomic file, staged so that the many small appends become
 * few writes; the first failure stops the writing (the error is pending). */
typedef struct file_buffer {
    ProtobufCBuffer base;
    tsi_afile *f;
    uint8_t *stage;
    size_t n, cap;
    bool failed;
} file_buffer;

static void fb_flush(file_buffer *fb) {
    if (!fb->failed && fb->n && tsi_afile_write(fb->f, fb->stage, fb->n) != TS_OK)
        fb->failed = true;
    fb->n = 0;
}

static void fb_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_buffer *fb = (file_buffer *)b;
    if (fb->failed) return;
    if (fb->n + len > fb->cap) fb_flush(fb);
    if (len > fb->cap) {
        if (!fb->failed && tsi_afile_write(fb->f, data, len) != TS_OK) fb->failed = true;
        return;
    }
    memcpy(fb->stage + fb->n, data, len);
    fb->n += len;
}

static bool write_model(const Onnx__ModelProto *model, const char *path) {
    const size_t size = onnx__model_proto__get_packed_size(model);
    if (size > TSO_MAX_FILE_BYTES)
        return tsi_error_set(
                   TS_ERR_UNSUPPORTED,
                   "%s: the model takes %zu bytes; an ONNX file over 2 GiB needs external "
                   "data files, which the exporter does not write",
                   OP, size),
               false;
    file_buffer fb = {.base = {.append = fb_append}, .cap = (size_t)1 << 20};
    if (!(fb.stage = malloc(fb.cap)))
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    tsi_afile f;
    bool ok = tsi_afile_open(&f, OP, path) == TS_OK;
    if (ok) {
        fb.f = &f;
        onnx__model_proto__pack_to_buffer(model, &fb.base);
        fb_flush(&fb);
        if (fb.failed)
            tsi_afile_abort(&f);
        else
            ok = tsi_afile_commit(&f) == TS_OK;
        ok = ok && !fb.failed;
    }
    free(fb.stage);
    return ok;
}

static bool build_and_write(tse *e, const char *graph_name, const char *path) {
    Onnx__GraphProto *g = tse_alloc(e, sizeof *g);
    Onnx__OperatorSetIdProto *opset = tse_alloc(e, sizeof *opset);
    Onnx__OperatorSetIdProto **opsets = tse_alloc(e, sizeof *opsets);
    Onnx__ModelProto *model = tse_alloc(e, sizeof *model);
    if (!g || !opset || !opsets || !model || !build_graph(e, g, graph_name) || ts_error())
        return false;
    *opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset->domain = "";
    opset->has_version = true;
    opset->version = TSE_OPSET;
    opsets[0] = opset;
    *model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    model->has_ir_version = true;
    model->ir_version = TSE_IR_VERSION;
    model->n_opset_import = 1;
    model->opset_import = opsets;
    model->producer_name = (char *)(e->o.producer ? e->o.producer : "tessera");
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TS_VERSION_MAJOR, TS_VERSION_MINOR,
             TS_VERSION_PATCH);
    model->producer_version = version;
    model->graph = g;
    return write_model(model, path);
}

static void tse_free(tse *e) {
    tsi_trace_free(&e->tr);
    ts_tensor_list_free(&e->sd);
    while (e->arena) {
        tse_block *b = e->arena;
        e->arena = b->next;
        free(b);
    }
    free(e->nodes);
    free(e->inits);
}

ts_status ts_onnx_export(ts_module *m, int n_inputs, ts_tensor *const *example_inputs,
                         const char *path, ts_onnx_export_opts o) {
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: module is NULL", OP);
    if (n_inputs != 1 || !example_inputs)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: a module's forward takes one input: expected n_inputs 1 and "
                             "example_inputs, got %d%s",
                             OP, n_inputs, example_inputs ? "" : " and NULL");
    if (!tsi_check_input(OP, example_inputs[0], "example_inputs[0]")) return ts_error();
    if (!path || !*path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL or empty", OP);
    if (o.opset && o.opset != TSE_OPSET)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: opset %d: the exporter writes opset %d", OP,
                             o.opset, TSE_OPSET);
    if (tsi_trace_active)
        return tsi_error_set(TS_ERR_STATE, "%s: called inside another export's forward", OP);
    tse e = {.o = o, .out_val = -1};
    ts_scope_begin();
    bool ok = run_trace(&e, m, example_inputs[0]);
    ts_no_grad_begin();
    ok = ok && build_and_write(&e, m->type_name ? m->type_name : "graph", path);
    ts_no_grad_end();
    tse_free(&e);
    ts_scope_end();
    return ok ? TS_OK : ts_error() ? ts_error() : tsi_error_set(TS_ERR_STATE, "%s: failed", OP);
}
