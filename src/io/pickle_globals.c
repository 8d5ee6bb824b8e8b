/* pickle_globals.c — the globals a .pt pickle may name (PyTorch's weights_only allow-list: tensor
 * rebuilders, storages, dtypes, containers; a blocked module is refused by name) and the values
 * REDUCE / BUILD / BINPERSID make of them. Nothing a file names is run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pickle_internal.h"

/* ------------------------------------------------------------------ globals */

typedef struct pk_allowed {
    const char *name;
    pk_global g;
    ts_dtype dt;
    unsigned itemsize; /* storages */
    const char *what;  /* PKG_REFUSED: what it builds */
} pk_allowed;

static const pk_allowed allowed[] = {
    {"torch._utils._rebuild_tensor", PKG_REBUILD_TENSOR, 0, 0, NULL},
    {"torch._utils._rebuild_tensor_v2", PKG_REBUILD_TENSOR_V2, 0, 0, NULL},
    {"torch._utils._rebuild_tensor_v3", PKG_REBUILD_TENSOR_V3, 0, 0, NULL},
    {"torch._utils._rebuild_parameter", PKG_REBUILD_PARAMETER, 0, 0, NULL},
    {"torch._utils._rebuild_parameter_with_state", PKG_REBUILD_PARAMETER, 0, 0, NULL},
    {"torch.nn.parameter.Parameter", PKG_PARAMETER, 0, 0, NULL},
    {"torch._tensor._rebuild_from_type_v2", PKG_FROM_TYPE_V2, 0, 0, NULL},
    {"collections.OrderedDict", PKG_DICT, 0, 0, NULL},
    {"collections.Counter", PKG_DICT, 0, 0, NULL},
    {"builtins.set", PKG_SET, 0, 0, NULL},
    {"torch.Size", PKG_SIZE, 0, 0, NULL},
    {"torch.device", PKG_OPAQUE, 0, 0, NULL},
    {"builtins.bytearray", PKG_OPAQUE, 0, 0, NULL},
    {"builtins.complex", PKG_OPAQUE, 0, 0, NULL},
    {"_codecs.encode", PKG_OPAQUE, 0, 0, NULL},
    {"torch.serialization._get_layout", PKG_OPAQUE, 0, 0, NULL},
    {"torch.FloatStorage", PKG_STORAGE_TYPE, TS_F32, 4, NULL},
    {"torch.DoubleStorage", PKG_STORAGE_TYPE, TS_F64, 8, NULL},
    {"torch.HalfStorage", PKG_STORAGE_TYPE, TS_F16, 2, NULL},
    {"torch.BFloat16Storage", PKG_STORAGE_TYPE, TS_BF16, 2, NULL},
    {"torch.LongStorage", PKG_STORAGE_TYPE, TS_I64, 8, NULL},
    {"torch.IntStorage", PKG_STORAGE_TYPE, TS_I32, 4, NULL},
    {"torch.ShortStorage", PKG_STORAGE_TYPE, TS_I16, 2, NULL},
    {"torch.CharStorage", PKG_STORAGE_TYPE, TS_I8, 1, NULL},
    {"torch.ByteStorage", PKG_STORAGE_TYPE, TS_U8, 1, NULL},
    {"torch.BoolStorage", PKG_STORAGE_TYPE, TS_BOOL, 1, NULL},
    {"torch.ComplexFloatStorage", PKG_STORAGE_TYPE, 0, 8, "complex64"},
    {"torch.ComplexDoubleStorage", PKG_STORAGE_TYPE, 0, 16, "complex128"},
    {"torch.QInt8Storage", PKG_STORAGE_TYPE, 0, 1, "qint8"},
    {"torch.QUInt8Storage", PKG_STORAGE_TYPE, 0, 1, "quint8"},
    {"torch.QInt32Storage", PKG_STORAGE_TYPE, 0, 4, "qint32"},
    /* untyped storages count bytes; the tensor's dtype comes from _rebuild_tensor_v3 */
    {"torch.storage.UntypedStorage", PKG_STORAGE_TYPE, TS_U8, 0, NULL},
    {"torch.UntypedStorage", PKG_STORAGE_TYPE, TS_U8, 0, NULL},
    {"torch.float32", PKG_DTYPE, TS_F32, 4, NULL},
    {"torch.float", PKG_DTYPE, TS_F32, 4, NULL},
    {"torch.float64", PKG_DTYPE, TS_F64, 8, NULL},
    {"torch.double", PKG_DTYPE, TS_F64, 8, NULL},
    {"torch.float16", PKG_DTYPE, TS_F16, 2, NULL},
    {"torch.half", PKG_DTYPE, TS_F16, 2, NULL},
    {"torch.bfloat16", PKG_DTYPE, TS_BF16, 2, NULL},
    {"torch.int64", PKG_DTYPE, TS_I64, 8, NULL},
    {"torch.long", PKG_DTYPE, TS_I64, 8, NULL},
    {"torch.int32", PKG_DTYPE, TS_I32, 4, NULL},
    {"torch.int", PKG_DTYPE, TS_I32, 4, NULL},
    {"torch.int16", PKG_DTYPE, TS_I16, 2, NULL},
    {"torch.short", PKG_DTYPE, TS_I16, 2, NULL},
    {"torch.int8", PKG_DTYPE, TS_I8, 1, NULL},
    {"torch.uint8", PKG_DTYPE, TS_U8, 1, NULL},
    {"torch.bool", PKG_DTYPE, TS_BOOL, 1, NULL},
    {"torch.uint16", PKG_DTYPE, TS_U16, 2, NULL},
    {"torch.uint32", PKG_DTYPE, TS_U32, 4, NULL},
    {"torch.uint64", PKG_DTYPE, TS_U64, 8, NULL},
    {"torch.complex32", PKG_DTYPE, 0, 4, "complex32"},
    {"torch.complex64", PKG_DTYPE, 0, 8, "complex64"},
    {"torch.complex128", PKG_DTYPE, 0, 16, "complex128"},
    {"torch.float8_e4m3fn", PKG_DTYPE, 0, 1, "float8_e4m3fn"},
    {"torch.float8_e5m2", PKG_DTYPE, 0, 1, "float8_e5m2"},
    {"torch.float8_e4m3fnuz", PKG_DTYPE, 0, 1, "float8_e4m3fnuz"},
    {"torch.float8_e5m2fnuz", PKG_DTYPE, 0, 1, "float8_e5m2fnuz"},
    {"torch.float8_e8m0fnu", PKG_DTYPE, 0, 1, "float8_e8m0fnu"},
    {"torch.qint8", PKG_DTYPE, 0, 1, "qint8"},
    {"torch.quint8", PKG_DTYPE, 0, 1, "quint8"},
    {"torch.qint32", PKG_DTYPE, 0, 4, "qint32"},
    {"torch.Tensor", PKG_REFUSED, 0, 0, "a legacy torch.Tensor() pickle"},
    {"torch._utils._rebuild_qtensor", PKG_REFUSED, 0, 0, "a quantized tensor"},
    {"torch._utils._rebuild_sparse_tensor", PKG_REFUSED, 0, 0, "a sparse tensor"},
    {"torch._utils._rebuild_sparse_csr_tensor", PKG_REFUSED, 0, 0, "a sparse tensor"},
    {"torch._utils._rebuild_meta_tensor_no_storage", PKG_REFUSED, 0, 0, "a meta tensor"},
    {"torch._utils._rebuild_wrapper_subclass", PKG_REFUSED, 0, 0, "a tensor subclass"},
    {"torch._utils._rebuild_device_tensor_from_cpu_tensor", PKG_REFUSED, 0, 0,
     "a device tensor rebuilt from a CPU tensor"},
    {"torch._utils._rebuild_device_tensor_from_numpy", PKG_REFUSED, 0, 0,
     "a device tensor rebuilt from NumPy"},
};

static const char *const blocked[] = {"sys", "os", "posix", "nt", "subprocess"};

static bool name_ok(const char *p, size_t n) {
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (!(p[i] == '_' || p[i] == '.' || (p[i] >= 'a' && p[i] <= 'z') ||
              (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
            return false;
    return true;
}

static bool push_global(pk_state *s, const char *mod, size_t ml, const char *name, size_t nl) {
    if (ml > 200 || nl > 200 || !name_ok(mod, ml) || !name_ok(name, nl))
        return pki_fail(s, TS_ERR_FORMAT, "malformed global name"), false;
    char full[420];
    /* Python 2's names, as pickle's own compatibility mapping has them */
    if (ml == 11 && !memcmp(mod, "__builtin__", 11)) mod = "builtins", ml = 8;
    if (ml == 12 && !memcmp(mod, "torch.tensor", 12)) mod = "torch._tensor", ml = 13;
    snprintf(full, sizeof full, "%.*s.%.*s", (int)ml, mod, (int)nl, name);
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        if (strcmp(full, allowed[i].name) != 0) continue;
        pk_value *v = pki_new_value(s, PK_GLOBAL);
        if (!v || !(v->s = pki_copy_str(s, full, strlen(full)))) return false;
        v->len = strlen(full);
        v->global = allowed[i].g;
        v->dtype = allowed[i].dt;
        v->nbytes = allowed[i].itemsize;
        v->untyped = allowed[i].g == PKG_STORAGE_TYPE && allowed[i].itemsize == 0;
        v->what = allowed[i].what;
        return pki_push(s, v);
    }
    const char *shown = !strncmp(full, "builtins.", 9) ? full + 9 : full;
    size_t top_len = strcspn(full, ".");
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
        if (strlen(blocked[i]) == top_len && !strncmp(full, blocked[i], top_len))
            return pki_fail(s, TS_ERR_UNSUPPORTED,
                            "Trying to load unsupported GLOBAL %s whose module %.*s is blocked "
                            "(ts_load_pt reads as torch.load(weights_only=True) does)",
                            full, (int)top_len, full),
                   false;
    return pki_fail(s, TS_ERR_UNSUPPORTED,
                    "Unsupported global: GLOBAL %s was not an allowed global by default: "
                    "ts_load_pt reads as torch.load(weights_only=True) does and resolves only "
                    "PyTorch's allow-list (tensor rebuilders, storages, dtypes, containers); "
                    "save a state_dict (or load with tessera.load in Python)",
                    shown),
           false;
}

bool pki_op_global(pk_state *s) {
    const unsigned char *p = s->p;
    const void *nl1 = memchr(p, '\n', (size_t)(s->end - p));
    if (!nl1) return pki_fail(s, TS_ERR_FORMAT, "GLOBAL's module is not a line"), false;
    const unsigned char *name = (const unsigned char *)nl1 + 1;
    const void *nl2 = memchr(name, '\n', (size_t)(s->end - name));
    if (!nl2) return pki_fail(s, TS_ERR_FORMAT, "GLOBAL's name is not a line"), false;
    s->p = (const unsigned char *)nl2 + 1;
    return push_global(s, (const char *)p, (size_t)((const unsigned char *)nl1 - p),
                       (const char *)name, (size_t)((const unsigned char *)nl2 - name));
}

bool pki_op_stack_global(pk_state *s) {
    pk_value *name = pki_pop(s), *mod = name ? pki_pop(s) : NULL;
    if (!mod) return false;
    if (mod->kind != PK_STR || name->kind != PK_STR)
        return pki_fail(s, TS_ERR_FORMAT, "STACK_GLOBAL needs two strings"), false;
    return push_global(s, mod->s, mod->len, name->s, name->len);
}

/* ------------------------------------------------------------------ calls */

const char *pki_kind_name(pk_kind k) {
    static const char *const names[] = {"None", "bool",   "int",     "int",    "float",
                                        "str",  "bytes",  "tuple",   "list",   "dict",
                                        "set",  "global", "storage", "tensor", "object"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static bool is_seq(const pk_value *v) { return v->kind == PK_TUPLE || v->kind == PK_LIST; }

/* size or stride: a tuple (or torch.Size) of non-negative ints */
static bool int_tuple(pk_state *s, const pk_value *v, const char *what, int *ndim, int64_t *out) {
    if (!is_seq(v))
        return pki_fail(s, TS_ERR_FORMAT, "tensor %s is a %s, not a tuple", what,
                        pki_kind_name(v->kind)),
               false;
    if (v->n > TS_MAX_DIMS)
        return pki_fail(s, TS_ERR_UNSUPPORTED,
                        "a tensor of %zu dims; Tessera tensors have at most %d", v->n, TS_MAX_DIMS),
               false;
    for (size_t i = 0; i < v->n; i++) {
        const pk_value *d = v->items[i];
        if (d->kind != PK_INT || d->i < 0)
            return pki_fail(s, TS_ERR_FORMAT, "tensor %s[%zu] is not an int >= 0", what, i), false;
        out[i] = d->i;
    }
    *ndim = (int)v->n;
    return true;
}

/* _rebuild_tensor(_v2, _v3): a view of a storage, checked against the storage's claimed size */
static pk_value *rebuild_tensor(pk_state *s, pk_global g, pk_value **a, size_t n) {
    size_t lo = g == PKG_REBUILD_TENSOR ? 4 : g == PKG_REBUILD_TENSOR_V2 ? 4 : 7;
    size_t hi = g == PKG_REBUILD_TENSOR ? 4 : g == PKG_REBUILD_TENSOR_V2 ? 7 : 8;
    if (n < lo || n > hi)
        return pki_fail(s, TS_ERR_FORMAT, "a tensor rebuilder called with %zu arguments", n), NULL;
    pk_value *st = a[0];
    if (st->kind != PK_STORAGE)
        return pki_fail(s, TS_ERR_FORMAT, "a tensor's storage is a %s", pki_kind_name(st->kind)),
               NULL;
    if (a[1]->kind != PK_INT || a[1]->i < 0)
        return pki_fail(s, TS_ERR_FORMAT, "a tensor's storage offset is not an int >= 0"), NULL;
    if (s->doc->n_tensors >= PK_MAX_TENSORS)
        return pki_fail(s, TS_ERR_FORMAT, "more than %d tensors", PK_MAX_TENSORS), NULL;
    pk_tensor t = {.storage = st, .offset = a[1]->i, .dtype = st->dtype};
    t.dtype_name = st->dtype ? ts_dtype_name(st->dtype) : st->what;
    int nd2 = 0;
    if (!int_tuple(s, a[2], "size", &t.ndim, t.size) ||
        !int_tuple(s, a[3], "stride", &nd2, t.stride))
        return NULL;
    if (nd2 != t.ndim)
        return pki_fail(s, TS_ERR_FORMAT, "a tensor of %d dims has %d strides", t.ndim, nd2), NULL;
    if (g == PKG_REBUILD_TENSOR_V3) {
        pk_value *dt = a[6];
        if (dt->kind != PK_GLOBAL || dt->global != PKG_DTYPE)
            return pki_fail(s, TS_ERR_FORMAT, "_rebuild_tensor_v3's dtype is a %s",
                            pki_kind_name(dt->kind)),
                   NULL;
        t.dtype = dt->dtype;
        t.dtype_name = dt->dtype ? ts_dtype_name(dt->dtype) : dt->what;
    } else if (st->untyped) {
        t.dtype = TS_U8;
        t.dtype_name = "uint8";
    }
    if (!t.dtype)
        return pki_fail(s, TS_ERR_UNSUPPORTED, "a tensor of dtype %s: Tessera has no such dtype",
                        t.dtype_name),
               NULL;
    /* the elements the view reaches must lie inside the storage's claimed bytes, and the view
     * itself (an expanded one can pass its storage) under 2^62 bytes */
    uint64_t es = tsi_dtype_size(t.dtype), last = (uint64_t)t.offset, end, numel = 1;
    bool empty = false, over = false, big = false;
    for (int i = 0; i < t.ndim; i++)
        big |= __builtin_mul_overflow(numel, (uint64_t)t.size[i], &numel);
    uint64_t view_bytes;
    if (big || __builtin_mul_overflow(numel, es, &view_bytes) || view_bytes > ((uint64_t)1 << 62))
        return pki_fail(s, TS_ERR_FORMAT, "a %s tensor of %d dims needs more than 2^62 bytes",
                        t.dtype_name, t.ndim),
               NULL;
    for (int i = 0; i < t.ndim; i++) {
        if (!t.size[i]) empty = true;
        uint64_t step;
        over |= __builtin_mul_overflow((uint64_t)(t.size[i] ? t.size[i] - 1 : 0),
                                       (uint64_t)t.stride[i], &step);
        over |= __builtin_add_overflow(last, step, &last);
    }
    over |= __builtin_add_overflow(last, 1, &end) || __builtin_mul_overflow(end, es, &end);
    if (!empty && (over || end > st->nbytes))
        return pki_fail(s, TS_ERR_FORMAT,
                        "a %s tensor's view (offset %lld) reaches past the end of its %llu-byte "
                        "storage '%.100s'",
                        t.dtype_name, (long long)t.offset, (unsigned long long)st->nbytes, st->s),
               NULL;
    pk_value *v = pki_new_value(s, PK_TENSOR);
    if (!v) return NULL;
    if (!(v->t = malloc(sizeof *v->t))) return pki_oom(s), NULL;
    *v->t = t;
    pk_doc *d = s->doc;
    if (d->n_tensors == d->cap_tensors) {
        int cap = d->cap_tensors ? d->cap_tensors * 2 : 16;
        pk_tensor **ts = realloc(d->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return pki_oom(s), NULL;
        d->tensors = ts;
        d->cap_tensors = cap;
    }
    d->tensors[d->n_tensors++] = v->t;
    return v;
}

pk_value *pki_call(pk_state *s, pk_value *f, pk_value *args, int depth) {
    if (f->kind != PK_GLOBAL)
        return pki_fail(s, TS_ERR_FORMAT, "calling a %s, not a global", pki_kind_name(f->kind)),
               NULL;
    if (args->kind != PK_TUPLE)
        return pki_fail(s, TS_ERR_FORMAT, "arguments of %s are a %s, not a tuple", f->s,
                        pki_kind_name(args->kind)),
               NULL;
    pk_value **a = args->items;
    size_t n = args->n;
    switch (f->global) {
    case PKG_REBUILD_TENSOR:
    case PKG_REBUILD_TENSOR_V2:
    case PKG_REBUILD_TENSOR_V3:
        return rebuild_tensor(s, f->global, a, n);
    case PKG_REBUILD_PARAMETER:
    case PKG_PARAMETER:
        if (n < 1 || n > 4 || a[0]->kind != PK_TENSOR)
            return pki_fail(s, TS_ERR_FORMAT, "%s needs a tensor", f->s), NULL;
        return a[0];
    case PKG_FROM_TYPE_V2:
        if (n != 4 || a[0]->kind != PK_GLOBAL || a[2]->kind != PK_TUPLE || depth > 8)
            return pki_fail(s, TS_ERR_FORMAT, "malformed _rebuild_from_type_v2 call"), NULL;
        return pki_call(s, a[0], a[2], depth + 1);
    case PKG_DICT: {
        pk_value *d = pki_new_value(s, PK_DICT);
        if (!d || n == 0) return d;
        if (n == 1 && a[0]->kind == PK_DICT) {
            for (size_t i = 0; i < a[0]->n; i++)
                if (!pki_add_item(s, d, a[0]->items[i])) return NULL;
            return d;
        }
        if (n == 1 && is_seq(a[0])) {
            for (size_t i = 0; i < a[0]->n; i++) {
                pk_value *kv = a[0]->items[i];
                if (!is_seq(kv) || kv->n != 2)
                    return pki_fail(s, TS_ERR_FORMAT, "%s needs (key, value) pairs", f->s), NULL;
                if (!pki_add_item(s, d, kv->items[0]) || !pki_add_item(s, d, kv->items[1]))
                    return NULL;
            }
            return d;
        }
        return pki_fail(s, TS_ERR_FORMAT, "%s called with %zu arguments", f->s, n), NULL;
    }
    case PKG_SET:
        return pki_new_value(s, PK_SET);
    case PKG_SIZE: {
        pk_value *t = pki_new_value(s, PK_TUPLE);
        if (!t || n == 0) return t;
        if (n != 1 || !is_seq(a[0]))
            return pki_fail(s, TS_ERR_FORMAT, "torch.Size needs a tuple"), NULL;
        for (size_t i = 0; i < a[0]->n; i++)
            if (!pki_add_item(s, t, a[0]->items[i])) return NULL;
        return t;
    }
    case PKG_OPAQUE:
        return pki_new_value(s, PK_OTHER);
    case PKG_REFUSED:
        return pki_fail(s, TS_ERR_UNSUPPORTED, "%s (%s) is not supported by ts_load_pt", f->what,
                        f->s),
               NULL;
    default:
        return pki_fail(s, TS_ERR_FORMAT, "%s cannot be called", f->s), NULL;
    }
}

/* ('storage', storage type, key, location, numel) */
bool pki_op_persid(pk_state *s) {
    pk_value *pid = pki_pop(s);
    if (!pid) return false;
    if (pid->kind != PK_TUPLE || pid->n != 5)
        return pki_fail(s, TS_ERR_FORMAT,
                        "persistent_load id must be a 5-tuple ('storage', type, key, location, "
                        "numel)"),
               false;
    pk_value **a = pid->items;
    if ((a[0]->kind != PK_STR && a[0]->kind != PK_BYTES) || strcmp(a[0]->s, "storage") != 0)
        return pki_fail(s, TS_ERR_FORMAT, "only persistent_load of storage is allowed"), false;
    if (a[1]->kind != PK_GLOBAL || a[1]->global != PKG_STORAGE_TYPE)
        return pki_fail(s, TS_ERR_FORMAT, "unknown storage type (a %s)", pki_kind_name(a[1]->kind)),
               false;
    if ((a[2]->kind != PK_STR && a[2]->kind != PK_BYTES) ||
        (a[3]->kind != PK_STR && a[3]->kind != PK_BYTES))
        return pki_fail(s, TS_ERR_FORMAT, "storage key and location must be strings"), false;
    if (strlen(a[2]->s) != a[2]->len || !a[2]->len || a[2]->len > 200)
        return pki_fail(s, TS_ERR_FORMAT, "malformed storage key"), false;
    if (a[4]->kind != PK_INT || a[4]->i < 0)
        return pki_fail(s, TS_ERR_FORMAT, "storage numel must be an int >= 0"), false;
    pk_value *v = pki_new_value(s, PK_STORAGE);
    if (!v || !(v->s = pki_copy_str(s, a[2]->s, a[2]->len))) return false;
    v->len = a[2]->len;
    v->dtype = a[1]->dtype;
    v->untyped = a[1]->untyped;
    v->i = a[4]->i;
    uint64_t item = v->untyped ? 1 : a[1]->nbytes;
    if (__builtin_mul_overflow((uint64_t)v->i, item, &v->nbytes) || v->nbytes > ((uint64_t)1 << 62))
        return pki_fail(s, TS_ERR_FORMAT, "storage '%.100s' claims %lld elements", v->s,
                        (long long)v->i),
               false;
    v->what = a[1]->what;
    return pki_push(s, v);
}
