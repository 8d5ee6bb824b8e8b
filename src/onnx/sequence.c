/* sequence.c — ONNX's sequence and optional values as container tensors (onnx_internal.h says
 * why): making and reading them, the public ts_onnx_sequence / ts_onnx_optional API and the
 * declared types of graph values that hold them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* What a container's storage owns: one reference to each element. */
typedef struct seq_items {
    ts_onnx_kind kind; /* TS_ONNX_SEQUENCE or TS_ONNX_OPTIONAL */
    int64_t n;
    ts_tensor *items[];
} seq_items;

/* The storage's release callback: the last reference to the container (or to a view of it, which
 * shares the storage) drops the elements. Also what marks a tensor as a container. */
static void seq_release(void *ctx) {
    seq_items *s = ctx;
    for (int64_t i = 0; i < s->n; i++) ts_release(s->items[i]);
    free(s);
}

static seq_items *items_of(const ts_tensor *t) {
    return t && t->storage->release == seq_release ? t->storage->release_ctx : NULL;
}

ts_onnx_kind tso_kind_of(const ts_tensor *t) {
    const seq_items *s = items_of(t);
    return s ? s->kind : TS_ONNX_TENSOR;
}

int64_t tso_seq_length(const ts_tensor *t) {
    const seq_items *s = items_of(t);
    return s ? s->n : -1;
}

ts_tensor *tso_seq_item(const ts_tensor *t, int64_t i) {
    seq_items *s = items_of(t);
    return s && i >= 0 && i < s->n ? s->items[i] : NULL;
}

const char *tso_kind_name(ts_onnx_kind k) {
    return k == TS_ONNX_SEQUENCE ? "sequence" : k == TS_ONNX_OPTIONAL ? "optional" : "tensor";
}

/* items[i] may join a container of kind holding dt on dev: a tensor in a sequence; a tensor or a
 * sequence in an optional; the container's element type and device. */
static bool check_item(const char *op, ts_onnx_kind kind, ts_tensor *item, int64_t i, ts_dtype dt,
                       ts_device dev) {
    if (!tsi_check_input(op, item, "element")) return false;
    ts_onnx_kind k = tso_kind_of(item);
    if (k == TS_ONNX_OPTIONAL || (kind == TS_ONNX_SEQUENCE && k != TS_ONNX_TENSOR))
        return tsi_error_set(TS_ERR_ARG, "%s: element %lld is %s; %s", op, (long long)i,
                             k == TS_ONNX_OPTIONAL ? "an optional" : "a sequence",
                             kind == TS_ONNX_SEQUENCE ? "a sequence holds tensors"
                                                      : "an optional holds a tensor or a sequence"),
               false;
    if (item->dtype != dt)
        return tsi_error_set(TS_ERR_DTYPE, "%s: element %lld is %s; the %s holds %s", op,
                             (long long)i, tsi_desc(item), tso_kind_name(kind), ts_dtype_name(dt)),
               false;
    if (!tsi_device_eq(tsi_device(item), dev))
        return tsi_error_set(TS_ERR_DEVICE, "%s: element %lld is %s; the %s is on %s", op,
                             (long long)i, tsi_desc(item), tso_kind_name(kind), ts_device_str(dev)),
               false;
    return true;
}

ts_tensor *tso_seq_new(const char *op, ts_onnx_kind kind, ts_tensor *const *items, int64_t n,
                       ts_dtype dt, ts_device dev) {
    if (n < 0 || (n && !items) || (kind == TS_ONNX_OPTIONAL && n > 1))
        return tsi_error_set(TS_ERR_ARG, "%s: %lld elements for a %s", op, (long long)n,
                             tso_kind_name(kind)),
               NULL;
    dev = tsi_resolve_device(dev);
    if (!tsi_check_device(op, dev)) return NULL;
    if (dt == TS_DTYPE_DEFAULT) dt = n && items[0] ? items[0]->dtype : TS_F32;
    for (int64_t i = 0; i < n; i++)
        if (!check_item(op, kind, items[i], i, dt, dev)) return NULL;
    if ((uint64_t)n > (SIZE_MAX - sizeof(seq_items)) / sizeof(ts_tensor *))
        return tsi_error_set(TS_ERR_OOM, "%s: %lld elements", op, (long long)n), NULL;
    seq_items *s = malloc(sizeof *s + (size_t)n * sizeof(ts_tensor *));
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    /* shape [0]: no element to read, so a tensor op handed a container by mistake touches no
     * memory; the data pointer is any valid one */
    ts_tensor *t = tsi_new_external(op, (ts_shape){.ndim = 1, .dims = {0}}, dt, dev, s, 0);
    if (!t) {
        free(s);
        return NULL;
    }
    s->kind = kind;
    s->n = n;
    for (int64_t i = 0; i < n; i++) s->items[i] = ts_retain(items[i]);
    t->storage->release_ctx = s;
    t->storage->release = seq_release;
    return t;
}

/* ------------------------------------------------------------------ the public API */
/* The device a new container goes on: the one asked for, else its first element's. */
static ts_device container_device(ts_device asked, ts_tensor *first) {
    if (asked.type == TS_DEVICE_DEFAULT && first) return tsi_device(first);
    return tsi_resolve_device(asked);
}

ts_tensor *ts_onnx_sequence(int n, ts_tensor *const *tensors, ts_opts o) {
    if (n < 0 || (n && !tensors))
        return tsi_error_set(TS_ERR_ARG, "onnx_sequence: %d tensors at %p", n, (void *)tensors),
               NULL;
    for (int i = 0; i < n; i++)
        if (!tsi_check_input("onnx_sequence", tensors[i], "a tensor")) return NULL;
    ts_device dev = container_device(o.device, n ? tensors[0] : NULL);
    return tsi_own(tso_seq_new("onnx_sequence", TS_ONNX_SEQUENCE, tensors, n, o.dtype, dev));
}

ts_tensor *ts_onnx_optional(ts_tensor *value, ts_opts o) {
    if (!value && ts_error()) return NULL; /* a NULL from a failed op is not an empty optional */
    ts_device dev = container_device(o.device, value);
    return tsi_own(tso_seq_new("onnx_optional", TS_ONNX_OPTIONAL, &value, value ? 1 : 0,
                               value && !o.dtype ? ts_dtype_of(value) : o.dtype, dev));
}

bool ts_onnx_is_sequence(ts_tensor *t) { return tso_kind_of(t) == TS_ONNX_SEQUENCE; }
bool ts_onnx_is_optional(ts_tensor *t) { return tso_kind_of(t) == TS_ONNX_OPTIONAL; }

const char *tso_value_desc(const ts_tensor *t) {
    if (!t) return "nothing (an absent input)";
    ts_onnx_kind k = tso_kind_of(t);
    if (k == TS_ONNX_TENSOR) return tsi_desc(t);
    char *b = tsi_fmt_buf();
    if (k == TS_ONNX_SEQUENCE)
        snprintf(b, TSI_FMT_BUF_LEN, "a sequence of %lld %s tensors on %s",
                 (long long)tso_seq_length(t), ts_dtype_name(t->dtype),
                 ts_device_str(tsi_device(t)));
    else
        snprintf(b, TSI_FMT_BUF_LEN, "an optional %s",
                 tso_seq_length(t)
                     ? (tso_kind_of(tso_seq_item(t, 0)) == TS_ONNX_SEQUENCE ? "holding a sequence"
                                                                            : "holding a tensor")
                     : "with no value");
    return b;
}

/* t is a container of kind; TS_ERR_ARG naming op and what t is otherwise. */
static bool expect_kind(const char *op, ts_tensor *t, ts_onnx_kind kind) {
    if (!tsi_check_input(op, t, tso_kind_name(kind))) return false;
    if (tso_kind_of(t) == kind) return true;
    tsi_error_set(TS_ERR_ARG, "%s: expected a%s %s, got %s", op,
                  kind == TS_ONNX_OPTIONAL ? "n" : "", tso_kind_name(kind), tso_value_desc(t));
    return false;
}

int64_t ts_onnx_sequence_length(ts_tensor *seq) {
    return expect_kind("onnx_sequence_length", seq, TS_ONNX_SEQUENCE) ? tso_seq_length(seq) : -1;
}

ts_tensor *ts_onnx_sequence_at(ts_tensor *seq, int64_t i) {
    if (!expect_kind("onnx_sequence_at", seq, TS_ONNX_SEQUENCE)) return NULL;
    int64_t len = tso_seq_length(seq);
    if (i < -len || i >= len)
        return tsi_error_set(TS_ERR_ARG,
                             "onnx_sequence_at: index %lld is out of range for a sequence of "
                             "%lld tensors",
                             (long long)i, (long long)len),
               NULL;
    return tsi_own(ts_retain(tso_seq_item(seq, i < 0 ? i + len : i)));
}

bool ts_onnx_optional_has_value(ts_tensor *opt) {
    return expect_kind("onnx_optional_has_value", opt, TS_ONNX_OPTIONAL) && tso_seq_length(opt);
}

ts_tensor *ts_onnx_optional_value(ts_tensor *opt) {
    if (!expect_kind("onnx_optional_value", opt, TS_ONNX_OPTIONAL)) return NULL;
    if (!tso_seq_length(opt))
        return tsi_error_set(TS_ERR_STATE, "onnx_optional_value: the optional is empty"), NULL;
    return tsi_own(ts_retain(tso_seq_item(opt, 0)));
}

/* ------------------------------------------------------------------ declared types */
static const char *type_words(const Onnx__TypeProto *tp) {
    switch (tp ? tp->value_case : ONNX__TYPE_PROTO__VALUE__NOT_SET) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        return "tensors";
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        return "sequences";
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return "maps";
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        return "optionals";
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        return "sparse tensors";
    default:
        return "values of no declared type";
    }
}

static const Onnx__TypeProto *elem_type(const Onnx__TypeProto *tp) {
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
        return tp->sequence_type ? tp->sequence_type->elem_type : NULL;
    return tp->optional_type ? tp->optional_type->elem_type : NULL;
}

static bool declared(const Onnx__TypeProto *tp) {
    return tp && tp->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET;
}

bool tso_type_kind(const Onnx__TypeProto *tp, ts_onnx_kind *kind, const Onnx__TypeProto **tensor,
                   const char *where, const char *name) {
    *kind = TS_ONNX_TENSOR;
    *tensor = NULL;
    if (!declared(tp)) return true;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        *tensor = tp;
        return true;
    }
    bool seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    if (!seq && tp->value_case != ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: %s: '%s' holds %s; Tessera runs tensors, sequences of "
                             "tensors and optionals of either",
                             where, name, type_words(tp)),
               false;
    *kind = seq ? TS_ONNX_SEQUENCE : TS_ONNX_OPTIONAL;
    const Onnx__TypeProto *e = elem_type(tp);
    /* an optional may hold a sequence (of tensors); a sequence holds tensors */
    if (!seq && declared(e) && e->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
        seq = true;
        e = elem_type(e);
    }
    if (declared(e) && e->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: %s: '%s' is %s of %s; Tessera's %s hold tensors", where,
                             name, seq ? "a sequence" : "an optional", type_words(e),
                             seq ? "sequences" : "optionals"),
               false;
    *tensor = declared(e) ? e : NULL;
    return true;
}

ts_dtype tso_type_dtype(const Onnx__TypeProto *tp) {
    while (declared(tp) && tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        if (tp->value_case != ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE &&
            tp->value_case != ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE)
            return TS_DTYPE_DEFAULT;
        tp = elem_type(tp);
    }
    if (!declared(tp) || !tp->tensor_type || !tp->tensor_type->has_elem_type)
        return TS_DTYPE_DEFAULT;
    return tso_dtype_from_onnx(tp->tensor_type->elem_type);
}
