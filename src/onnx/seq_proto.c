/* seq_proto.c — ONNX's SequenceProto and OptionalProto (onnx-data.proto: the backend test suite's
 * input_N.pb / output_N.pb for sequence and optional values) read into containers. Debian ships
 * onnx.proto alone, so these two small messages are read from the protobuf wire format here; the
 * TensorProtos inside go through the generated code. */
#include <stdint.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

bool tso_read_file(const char *op, const char *path, uint8_t **data, size_t *size);

#define OP "onnx_value_parse"

/* onnx-data.proto's element kinds, and the field numbers both messages share */
enum { ELEM_UNDEFINED = 0, ELEM_TENSOR = 1, ELEM_SEQUENCE = 3 };
enum { F_ELEM_TYPE = 2, F_TENSOR = 3, F_SPARSE = 4, F_SEQUENCE = 5, F_MAP = 6, F_OPTIONAL = 7 };

/* ------------------------------------------------------------------ the wire format */
typedef struct wire {
    const uint8_t *p, *end;
} wire;

typedef struct field {
    uint32_t num;
    int type;       /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t value; /* a varint's value */
    const uint8_t *data;
    size_t len; /* a length-delimited field's bytes */
} field;

static bool get_varint(wire *w, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

static bool skip(wire *w, size_t n) {
    if ((size_t)(w->end - w->p) < n) return false;
    w->p += n;
    return true;
}

/* The next field; false on bytes that are no valid field (truncated, groups, field 0). */
static bool next_field(wire *w, field *f) {
    uint64_t key, len;
    if (!get_varint(w, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) return false;
    f->num = (uint32_t)(key >> 3);
    f->type = (int)(key & 7);
    switch (f->type) {
    case 0:
        return get_varint(w, &f->value);
    case 1:
        return skip(w, 8);
    case 5:
        return skip(w, 4);
    case 2:
        if (!get_varint(w, &len) || len > (uint64_t)(w->end - w->p)) return false;
        f->data = w->p;
        f->len = (size_t)len;
        w->p += len;
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------------ the messages */
typedef struct reader {
    ts_device dev;
    ts_dtype dt; /* an empty container's element type (the model's declaration) */
} reader;

static void *malformed(const char *what, size_t size) {
    if (ts_fault_alloc_fired()) return tsi_error_set(TS_ERR_OOM, OP ": out of host memory"), NULL;
    return tsi_error_set(TS_ERR_FORMAT, OP ": not a valid %s (%zu bytes)", what, size), NULL;
}

/* A field both messages may hold that Tessera cannot (an element kind, or a value of one):
 * TS_ERR_UNSUPPORTED; false. A field of a known number with the wrong wire type is malformed. */
static bool field_ok(const field *f, const char *what, bool seq, size_t size) {
    bool value_field = f->num >= F_TENSOR && f->num <= F_OPTIONAL;
    if ((f->num == F_ELEM_TYPE && f->type != 0) || (value_field && f->type != 2))
        return malformed(what, size);
    bool kind_ok = f->num != F_ELEM_TYPE || f->value == ELEM_UNDEFINED || f->value == ELEM_TENSOR ||
                   (!seq && f->value == ELEM_SEQUENCE);
    bool value_ok = !value_field || f->num == F_TENSOR || (!seq && f->num == F_SEQUENCE);
    if (kind_ok && value_ok) return true;
    tsi_error_set(TS_ERR_UNSUPPORTED, OP ": the %s holds %s; Tessera's %s hold tensors%s", what,
                  seq ? "sequences, maps, optionals or sparse tensors"
                      : "an optional, a map or a sparse tensor",
                  seq ? "sequences" : "optionals", seq ? "" : " or sequences of tensors");
    return false;
}

/* A TensorProto's bytes as a tensor on the reader's device (new reference). */
static ts_tensor *read_tensor(const reader *r, const field *f) {
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&tso_pb_allocator, f->len, f->data);
    if (!tp) return malformed("TensorProto", f->len);
    ts_tensor *t = tso_tensor_from_proto(tp, NULL, r->dev, tp->name);
    onnx__tensor_proto__free_unpacked(tp, &tso_pb_allocator);
    return t;
}

static bool push(ts_tensor ***items, int64_t *n, int64_t *cap, ts_tensor *t) {
    if (*n == *cap) {
        int64_t c = *cap ? *cap * 2 : 8;
        ts_tensor **v = realloc(*items, (size_t)c * sizeof *v);
        if (!v) {
            ts_release(t);
            return tsi_error_set(TS_ERR_OOM, OP ": out of host memory"), false;
        }
        *items = v;
        *cap = c;
    }
    (*items)[(*n)++] = t;
    return true;
}

static ts_tensor *read_sequence(const reader *r, const uint8_t *data, size_t size) {
    wire w = {data, data + size};
    ts_tensor **items = NULL;
    int64_t n = 0, cap = 0;
    bool ok = true;
    field f;
    while (ok && w.p < w.end) {
        ok = next_field(&w, &f) ? field_ok(&f, "SequenceProto", true, size)
                                : malformed("SequenceProto", size) != NULL;
        ts_tensor *t = ok && f.num == F_TENSOR ? read_tensor(r, &f) : NULL;
        if (ok && f.num == F_TENSOR) ok = t && push(&items, &n, &cap, t);
    }
    ts_tensor *seq = ok ? tso_seq_new(OP, TS_ONNX_SEQUENCE, items, n, n ? 0 : r->dt, r->dev) : NULL;
    for (int64_t i = 0; i < n; i++) ts_release(items[i]);
    free(items);
    return seq;
}

/* protobuf's rule for a message field given twice (merged) is not worth following here: the
 * last value wins */
static ts_tensor *read_optional(const reader *r, const uint8_t *data, size_t size) {
    wire w = {data, data + size};
    ts_tensor *value = NULL;
    bool ok = true;
    field f;
    while (ok && w.p < w.end) {
        ok = next_field(&w, &f) ? field_ok(&f, "OptionalProto", false, size)
                                : malformed("OptionalProto", size) != NULL;
        if (!ok || (f.num != F_TENSOR && f.num != F_SEQUENCE)) continue;
        ts_release(value);
        value = f.num == F_TENSOR ? read_tensor(r, &f) : read_sequence(r, f.data, f.len);
        ok = value != NULL;
    }
    ts_tensor *opt =
        ok ? tso_seq_new(OP, TS_ONNX_OPTIONAL, &value, value ? 1 : 0, value ? 0 : r->dt, r->dev)
           : NULL;
    ts_release(value);
    return opt;
}

ts_tensor *tso_value_parse(const void *data, size_t size, ts_onnx_kind kind, ts_dtype dt,
                           ts_device dev) {
    if (kind == TS_ONNX_TENSOR) return ts_onnx_tensor_parse(data, size, dev, NULL);
    if (!data && size) return tsi_error_set(TS_ERR_ARG, OP ": data is NULL"), NULL;
    if (size > TSO_MAX_FILE_BYTES)
        return tsi_error_set(TS_ERR_FORMAT, OP ": %zu bytes is past protobuf's 2 GiB", size), NULL;
    dev = tsi_resolve_device(dev);
    if (!tsi_check_device(OP, dev)) return NULL;
    reader r = {.dev = dev, .dt = dt};
    const uint8_t *d = data;
    return tsi_own(kind == TS_ONNX_SEQUENCE ? read_sequence(&r, d, size)
                                            : read_optional(&r, d, size));
}

ts_tensor *tso_value_load(const char *path, ts_onnx_kind kind, ts_dtype dt, ts_device dev) {
    uint8_t *data;
    size_t size;
    if (!tso_read_file("onnx_value_load", path, &data, &size)) return NULL;
    ts_tensor *t = tso_value_parse(data, size, kind, dt, dev);
    free(data);
    return t;
}
