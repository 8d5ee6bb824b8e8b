/* pickle_read.c — the pickle interpreter of the .pt reader (see pickle_read.h): the opcodes of
 * protocols 2-5 that hold data, containers, the memo and the allow-listed globals. Nothing a file
 * names is ever run: REDUCE on an allowed global builds one of the values below, and a global off
 * the list is refused where the GLOBAL opcode names it, as torch.load(weights_only=True) does. */
#define _POSIX_C_SOURCE 200809L
#include "io/pickle_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define PK_BLOCK 1024
struct pk_block {
    pk_block *next;
    size_t n;
    pk_value v[PK_BLOCK];
};

typedef struct pk_state {
    const char *file;
    const unsigned char *start, *p, *end;
    size_t op_at;
    unsigned char op;
    pk_doc *doc;
    pk_value **stack;
    size_t sp, scap;
    size_t marks[PK_MAX_MARKS];
    int nm;
    pk_value **memo;
    size_t memo_cap, memo_limit, memo_len;
} pk_state;

static ts_status __attribute__((format(printf, 3, 4)))
pk_fail(pk_state *s, ts_status code, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char op[8];
    if (s->op >= 0x20 && s->op < 0x7f)
        snprintf(op, sizeof op, "'%c'", s->op);
    else
        snprintf(op, sizeof op, "0x%02x", s->op);
    return tsi_error_set(code, "%s: data.pkl byte %zu (opcode %s): %s", s->file, s->op_at, op,
                         what);
}

static ts_status oom(pk_state *s) { return pk_fail(s, TS_ERR_OOM, "out of memory"); }

/* ------------------------------------------------------------------ values */

static pk_value *new_value(pk_state *s, pk_kind kind) {
    pk_doc *d = s->doc;
    if (d->n_objects >= PK_MAX_OBJECTS)
        return pk_fail(s, TS_ERR_FORMAT, "the pickle builds more than %d values", PK_MAX_OBJECTS),
               NULL;
    if (!d->blocks || d->blocks->n == PK_BLOCK) {
        pk_block *b = malloc(sizeof *b);
        if (!b) return oom(s), NULL;
        b->next = d->blocks;
        b->n = 0;
        d->blocks = b;
    }
    pk_value *v = &d->blocks->v[d->blocks->n++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    d->n_objects++;
    return v;
}

static bool add_item(pk_state *s, pk_value *c, pk_value *item) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        pk_value **items = realloc(c->items, cap * sizeof *items);
        if (!items) return oom(s), false;
        c->items = items;
        c->cap = cap;
    }
    c->items[c->n++] = item;
    return true;
}

static char *copy_str(pk_state *s, const void *p, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return oom(s), NULL;
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* ------------------------------------------------------------------ stack, marks, memo */

static size_t base(const pk_state *s) { return s->nm ? s->marks[s->nm - 1] : 0; }

static bool push(pk_state *s, pk_value *v) {
    if (!v) return false;
    if (s->sp == s->scap) {
        if (s->scap >= PK_MAX_STACK)
            return pk_fail(s, TS_ERR_FORMAT, "the stack holds more than %d values", PK_MAX_STACK),
                   false;
        size_t cap = s->scap ? s->scap * 2 : 64;
        pk_value **st = realloc(s->stack, cap * sizeof *st);
        if (!st) return oom(s), false;
        s->stack = st;
        s->scap = cap;
    }
    s->stack[s->sp++] = v;
    return true;
}

static pk_value *pop(pk_state *s) {
    if (s->sp <= base(s)) return pk_fail(s, TS_ERR_FORMAT, "stack underflow"), NULL;
    return s->stack[--s->sp];
}

static pk_value *top(pk_state *s) {
    if (s->sp <= base(s)) return pk_fail(s, TS_ERR_FORMAT, "stack underflow"), NULL;
    return s->stack[s->sp - 1];
}

/* The values since the last MARK (first at *items, n of them); the MARK is gone. */
static bool pop_mark(pk_state *s, pk_value ***items, size_t *n) {
    if (!s->nm) return pk_fail(s, TS_ERR_FORMAT, "no MARK to pop to"), false;
    size_t at = s->marks[--s->nm];
    *items = s->stack ? s->stack + at : NULL; /* "(l" before any push: an empty stack */
    *n = s->sp - at;
    s->sp = at;
    return true;
}

static bool memo_put(pk_state *s, uint64_t idx) {
    pk_value *v = top(s);
    if (!v) return false;
    if (idx >= s->memo_limit)
        return pk_fail(s, TS_ERR_FORMAT, "memo index %llu is over the limit of %zu",
                       (unsigned long long)idx, s->memo_limit),
               false;
    if (idx >= s->memo_cap) {
        size_t cap = s->memo_cap ? s->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        if (cap > s->memo_limit) cap = s->memo_limit;
        pk_value **m = realloc(s->memo, cap * sizeof *m);
        if (!m) return oom(s), false;
        memset(m + s->memo_cap, 0, (cap - s->memo_cap) * sizeof *m);
        s->memo = m;
        s->memo_cap = cap;
    }
    if (!s->memo[idx]) s->memo_len++;
    s->memo[idx] = v;
    return true;
}

static bool memo_get(pk_state *s, uint64_t idx) {
    if (idx >= s->memo_cap || !s->memo[idx])
        return pk_fail(s, TS_ERR_FORMAT, "memo index %llu was never stored",
                       (unsigned long long)idx),
               false;
    return push(s, s->memo[idx]);
}

/* ------------------------------------------------------------------ reading the stream */

static const unsigned char *take(pk_state *s, uint64_t n) {
    if (n > (uint64_t)(s->end - s->p))
        return pk_fail(s, TS_ERR_FORMAT, "%llu bytes of argument pass the end of the pickle",
                       (unsigned long long)n),
               NULL;
    const unsigned char *at = s->p;
    s->p += n;
    return at;
}

static bool read_uint(pk_state *s, int n, uint64_t *out) {
    const unsigned char *b = take(s, (uint64_t)n);
    if (!b) return false;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    *out = v;
    return true;
}

static bool push_int(pk_state *s, int64_t i) {
    pk_value *v = new_value(s, PK_INT);
    if (v) v->i = i;
    return push(s, v);
}

/* LONG1 / LONG4: n bytes of little-endian two's complement */
static bool push_long(pk_state *s, uint64_t n) {
    const unsigned char *b = take(s, n);
    if (!b) return false;
    if (n > 8) return push(s, new_value(s, PK_BIGINT));
    uint64_t u = 0;
    for (uint64_t i = n; i-- > 0;) u = u << 8 | b[i];
    if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
    int64_t i;
    memcpy(&i, &u, sizeof i);
    return push_int(s, i);
}

static bool push_string(pk_state *s, pk_kind kind, uint64_t n) {
    if (n > PK_MAX_STRING)
        return pk_fail(s, TS_ERR_FORMAT, "a %llu-byte string is over the limit of %zu bytes",
                       (unsigned long long)n, PK_MAX_STRING),
               false;
    const unsigned char *b = take(s, n);
    if (!b) return false;
    pk_value *v = new_value(s, kind);
    if (!v) return false;
    if (!(v->s = copy_str(s, b, (size_t)n))) return false;
    v->len = (size_t)n;
    return push(s, v);
}

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
        return pk_fail(s, TS_ERR_FORMAT, "malformed global name"), false;
    char full[420];
    /* Python 2's names, as pickle's own compatibility mapping has them */
    if (ml == 11 && !memcmp(mod, "__builtin__", 11)) mod = "builtins", ml = 8;
    if (ml == 12 && !memcmp(mod, "torch.tensor", 12)) mod = "torch._tensor", ml = 13;
    snprintf(full, sizeof full, "%.*s.%.*s", (int)ml, mod, (int)nl, name);
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        if (strcmp(full, allowed[i].name) != 0) continue;
        pk_value *v = new_value(s, PK_GLOBAL);
        if (!v || !(v->s = copy_str(s, full, strlen(full)))) return false;
        v->len = strlen(full);
        v->global = allowed[i].g;
        v->dtype = allowed[i].dt;
        v->nbytes = allowed[i].itemsize;
        v->untyped = allowed[i].g == PKG_STORAGE_TYPE && allowed[i].itemsize == 0;
        v->what = allowed[i].what;
        return push(s, v);
    }
    const char *shown = !strncmp(full, "builtins.", 9) ? full + 9 : full;
    size_t top_len = strcspn(full, ".");
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
        if (strlen(blocked[i]) == top_len && !strncmp(full, blocked[i], top_len))
            return pk_fail(s, TS_ERR_UNSUPPORTED,
                           "Trying to load unsupported GLOBAL %s whose module %.*s is blocked "
                           "(ts_load_pt reads as torch.load(weights_only=True) does)",
                           full, (int)top_len, full),
                   false;
    return pk_fail(s, TS_ERR_UNSUPPORTED,
                   "Unsupported global: GLOBAL %s was not an allowed global by default: "
                   "ts_load_pt reads as torch.load(weights_only=True) does and resolves only "
                   "PyTorch's allow-list (tensor rebuilders, storages, dtypes, containers); "
                   "save a state_dict (or load with tessera.load in Python)",
                   shown),
           false;
}

static bool op_global(pk_state *s) {
    const unsigned char *p = s->p;
    const void *nl1 = memchr(p, '\n', (size_t)(s->end - p));
    if (!nl1) return pk_fail(s, TS_ERR_FORMAT, "GLOBAL's module is not a line"), false;
    const unsigned char *name = (const unsigned char *)nl1 + 1;
    const void *nl2 = memchr(name, '\n', (size_t)(s->end - name));
    if (!nl2) return pk_fail(s, TS_ERR_FORMAT, "GLOBAL's name is not a line"), false;
    s->p = (const unsigned char *)nl2 + 1;
    return push_global(s, (const char *)p, (size_t)((const unsigned char *)nl1 - p),
                       (const char *)name, (size_t)((const unsigned char *)nl2 - name));
}

static bool op_stack_global(pk_state *s) {
    pk_value *name = pop(s), *mod = name ? pop(s) : NULL;
    if (!mod) return false;
    if (mod->kind != PK_STR || name->kind != PK_STR)
        return pk_fail(s, TS_ERR_FORMAT, "STACK_GLOBAL needs two strings"), false;
    return push_global(s, mod->s, mod->len, name->s, name->len);
}

/* ------------------------------------------------------------------ calls */

static const char *kind_name(pk_kind k) {
    static const char *const names[] = {"None", "bool",   "int",     "int",    "float",
                                        "str",  "bytes",  "tuple",   "list",   "dict",
                                        "set",  "global", "storage", "tensor", "object"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static bool is_seq(const pk_value *v) { return v->kind == PK_TUPLE || v->kind == PK_LIST; }

/* size or stride: a tuple (or torch.Size) of non-negative ints */
static bool int_tuple(pk_state *s, const pk_value *v, const char *what, int *ndim, int64_t *out) {
    if (!is_seq(v))
        return pk_fail(s, TS_ERR_FORMAT, "tensor %s is a %s, not a tuple", what,
                       kind_name(v->kind)),
               false;
    if (v->n > TS_MAX_DIMS)
        return pk_fail(s, TS_ERR_UNSUPPORTED,
                       "a tensor of %zu dims; Tessera tensors have at most %d", v->n, TS_MAX_DIMS),
               false;
    for (size_t i = 0; i < v->n; i++) {
        const pk_value *d = v->items[i];
        if (d->kind != PK_INT || d->i < 0)
            return pk_fail(s, TS_ERR_FORMAT, "tensor %s[%zu] is not an int >= 0", what, i), false;
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
        return pk_fail(s, TS_ERR_FORMAT, "a tensor rebuilder called with %zu arguments", n), NULL;
    pk_value *st = a[0];
    if (st->kind != PK_STORAGE)
        return pk_fail(s, TS_ERR_FORMAT, "a tensor's storage is a %s", kind_name(st->kind)), NULL;
    if (a[1]->kind != PK_INT || a[1]->i < 0)
        return pk_fail(s, TS_ERR_FORMAT, "a tensor's storage offset is not an int >= 0"), NULL;
    if (s->doc->n_tensors >= PK_MAX_TENSORS)
        return pk_fail(s, TS_ERR_FORMAT, "more than %d tensors", PK_MAX_TENSORS), NULL;
    pk_tensor t = {.storage = st, .offset = a[1]->i, .dtype = st->dtype};
    t.dtype_name = st->dtype ? ts_dtype_name(st->dtype) : st->what;
    int nd2 = 0;
    if (!int_tuple(s, a[2], "size", &t.ndim, t.size) ||
        !int_tuple(s, a[3], "stride", &nd2, t.stride))
        return NULL;
    if (nd2 != t.ndim)
        return pk_fail(s, TS_ERR_FORMAT, "a tensor of %d dims has %d strides", t.ndim, nd2), NULL;
    if (g == PKG_REBUILD_TENSOR_V3) {
        pk_value *dt = a[6];
        if (dt->kind != PK_GLOBAL || dt->global != PKG_DTYPE)
            return pk_fail(s, TS_ERR_FORMAT, "_rebuild_tensor_v3's dtype is a %s",
                           kind_name(dt->kind)),
                   NULL;
        t.dtype = dt->dtype;
        t.dtype_name = dt->dtype ? ts_dtype_name(dt->dtype) : dt->what;
    } else if (st->untyped) {
        t.dtype = TS_U8;
        t.dtype_name = "uint8";
    }
    if (!t.dtype)
        return pk_fail(s, TS_ERR_UNSUPPORTED, "a tensor of dtype %s: Tessera has no such dtype",
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
        return pk_fail(s, TS_ERR_FORMAT, "a %s tensor of %d dims needs more than 2^62 bytes",
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
        return pk_fail(s, TS_ERR_FORMAT,
                       "a %s tensor's view (offset %lld) reaches past the end of its %llu-byte "
                       "storage '%.100s'",
                       t.dtype_name, (long long)t.offset, (unsigned long long)st->nbytes, st->s),
               NULL;
    pk_value *v = new_value(s, PK_TENSOR);
    if (!v) return NULL;
    if (!(v->t = malloc(sizeof *v->t))) return oom(s), NULL;
    *v->t = t;
    pk_doc *d = s->doc;
    if (d->n_tensors == d->cap_tensors) {
        int cap = d->cap_tensors ? d->cap_tensors * 2 : 16;
        pk_tensor **ts = realloc(d->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return oom(s), NULL;
        d->tensors = ts;
        d->cap_tensors = cap;
    }
    d->tensors[d->n_tensors++] = v->t;
    return v;
}

static pk_value *call(pk_state *s, pk_value *f, pk_value *args, int depth) {
    if (f->kind != PK_GLOBAL)
        return pk_fail(s, TS_ERR_FORMAT, "calling a %s, not a global", kind_name(f->kind)), NULL;
    if (args->kind != PK_TUPLE)
        return pk_fail(s, TS_ERR_FORMAT, "arguments of %s are a %s, not a tuple", f->s,
                       kind_name(args->kind)),
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
            return pk_fail(s, TS_ERR_FORMAT, "%s needs a tensor", f->s), NULL;
        return a[0];
    case PKG_FROM_TYPE_V2:
        if (n != 4 || a[0]->kind != PK_GLOBAL || a[2]->kind != PK_TUPLE || depth > 8)
            return pk_fail(s, TS_ERR_FORMAT, "malformed _rebuild_from_type_v2 call"), NULL;
        return call(s, a[0], a[2], depth + 1);
    case PKG_DICT: {
        pk_value *d = new_value(s, PK_DICT);
        if (!d || n == 0) return d;
        if (n == 1 && a[0]->kind == PK_DICT) {
            for (size_t i = 0; i < a[0]->n; i++)
                if (!add_item(s, d, a[0]->items[i])) return NULL;
            return d;
        }
        if (n == 1 && is_seq(a[0])) {
            for (size_t i = 0; i < a[0]->n; i++) {
                pk_value *kv = a[0]->items[i];
                if (!is_seq(kv) || kv->n != 2)
                    return pk_fail(s, TS_ERR_FORMAT, "%s needs (key, value) pairs", f->s), NULL;
                if (!add_item(s, d, kv->items[0]) || !add_item(s, d, kv->items[1])) return NULL;
            }
            return d;
        }
        return pk_fail(s, TS_ERR_FORMAT, "%s called with %zu arguments", f->s, n), NULL;
    }
    case PKG_SET:
        return new_value(s, PK_SET);
    case PKG_SIZE: {
        pk_value *t = new_value(s, PK_TUPLE);
        if (!t || n == 0) return t;
        if (n != 1 || !is_seq(a[0]))
            return pk_fail(s, TS_ERR_FORMAT, "torch.Size needs a tuple"), NULL;
        for (size_t i = 0; i < a[0]->n; i++)
            if (!add_item(s, t, a[0]->items[i])) return NULL;
        return t;
    }
    case PKG_OPAQUE:
        return new_value(s, PK_OTHER);
    case PKG_REFUSED:
        return pk_fail(s, TS_ERR_UNSUPPORTED, "%s (%s) is not supported by ts_load_pt", f->what,
                       f->s),
               NULL;
    default:
        return pk_fail(s, TS_ERR_FORMAT, "%s cannot be called", f->s), NULL;
    }
}

/* ('storage', storage type, key, location, numel) */
static bool op_persid(pk_state *s) {
    pk_value *pid = pop(s);
    if (!pid) return false;
    if (pid->kind != PK_TUPLE || pid->n != 5)
        return pk_fail(s, TS_ERR_FORMAT,
                       "persistent_load id must be a 5-tuple ('storage', type, key, location, "
                       "numel)"),
               false;
    pk_value **a = pid->items;
    if ((a[0]->kind != PK_STR && a[0]->kind != PK_BYTES) || strcmp(a[0]->s, "storage") != 0)
        return pk_fail(s, TS_ERR_FORMAT, "only persistent_load of storage is allowed"), false;
    if (a[1]->kind != PK_GLOBAL || a[1]->global != PKG_STORAGE_TYPE)
        return pk_fail(s, TS_ERR_FORMAT, "unknown storage type (a %s)", kind_name(a[1]->kind)),
               false;
    if ((a[2]->kind != PK_STR && a[2]->kind != PK_BYTES) ||
        (a[3]->kind != PK_STR && a[3]->kind != PK_BYTES))
        return pk_fail(s, TS_ERR_FORMAT, "storage key and location must be strings"), false;
    if (strlen(a[2]->s) != a[2]->len || !a[2]->len || a[2]->len > 200)
        return pk_fail(s, TS_ERR_FORMAT, "malformed storage key"), false;
    if (a[4]->kind != PK_INT || a[4]->i < 0)
        return pk_fail(s, TS_ERR_FORMAT, "storage numel must be an int >= 0"), false;
    pk_value *v = new_value(s, PK_STORAGE);
    if (!v || !(v->s = copy_str(s, a[2]->s, a[2]->len))) return false;
    v->len = a[2]->len;
    v->dtype = a[1]->dtype;
    v->untyped = a[1]->untyped;
    v->i = a[4]->i;
    uint64_t item = v->untyped ? 1 : a[1]->nbytes;
    if (__builtin_mul_overflow((uint64_t)v->i, item, &v->nbytes) || v->nbytes > ((uint64_t)1 << 62))
        return pk_fail(s, TS_ERR_FORMAT, "storage '%.100s' claims %lld elements", v->s,
                       (long long)v->i),
               false;
    v->what = a[1]->what;
    return push(s, v);
}

/* ------------------------------------------------------------------ the loop */

static bool collect(pk_state *s, pk_kind kind) {
    pk_value **items;
    size_t n;
    if (!pop_mark(s, &items, &n)) return false;
    pk_value *v = new_value(s, kind);
    if (!v) return false;
    if (kind == PK_DICT && n % 2)
        return pk_fail(s, TS_ERR_FORMAT, "DICT with an odd number of values"), false;
    for (size_t i = 0; i < n; i++)
        if (!add_item(s, v, items[i])) return false;
    return push(s, v);
}

static bool tuple_n(pk_state *s, size_t n) {
    if (s->sp - base(s) < n) return pk_fail(s, TS_ERR_FORMAT, "stack underflow"), false;
    pk_value *v = new_value(s, PK_TUPLE);
    if (!v) return false;
    for (size_t i = s->sp - n; i < s->sp; i++)
        if (!add_item(s, v, s->stack[i])) return false;
    s->sp -= n;
    return push(s, v);
}

/* APPENDS / SETITEMS / ADDITEMS: the values since the MARK go into the container below it */
static bool extend(pk_state *s, pk_kind kind) {
    pk_value **items;
    size_t n;
    if (!pop_mark(s, &items, &n)) return false;
    pk_value *c = top(s);
    if (!c) return false;
    if (c->kind != kind)
        return pk_fail(s, TS_ERR_FORMAT, "adding items to a %s, not a %s", kind_name(c->kind),
                       kind_name(kind)),
               false;
    if (kind == PK_DICT && n % 2)
        return pk_fail(s, TS_ERR_FORMAT, "SETITEMS with an odd number of values"), false;
    for (size_t i = 0; i < n; i++)
        if (!add_item(s, c, items[i])) return false;
    return true;
}

static bool step(pk_state *s, bool *done) {
    uint64_t u;
    pk_value *v, *w, *c;
    switch (s->op) {
    case 0x80: /* PROTO */
        if (!read_uint(s, 1, &u)) return false;
        if (u > 5)
            return pk_fail(s, TS_ERR_FORMAT, "pickle protocol %llu", (unsigned long long)u), false;
        return true;
    case 0x95: /* FRAME: a length only */
        return read_uint(s, 8, &u);
    case '.': /* STOP */
        if (!(v = pop(s))) return false;
        s->doc->root = v;
        *done = true;
        return true;
    case '(': /* MARK */
        if (s->nm >= PK_MAX_MARKS)
            return pk_fail(s, TS_ERR_FORMAT, "more than %d nested MARKs", PK_MAX_MARKS), false;
        s->marks[s->nm++] = s->sp;
        return true;
    case '0': /* POP */
        if (s->sp > base(s)) return s->sp--, true;
        return pop_mark(s, &(pk_value **){NULL}, &(size_t){0});
    case '1': /* POP_MARK */
        return pop_mark(s, &(pk_value **){NULL}, &(size_t){0});
    case '2': /* DUP */
        return (v = top(s)) && push(s, v);
    case 'N':
        return push(s, new_value(s, PK_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        if (!(v = new_value(s, PK_BOOL))) return false;
        v->i = s->op == 0x88;
        return push(s, v);
    case 'J': /* BININT */
        if (!read_uint(s, 4, &u)) return false;
        return push_int(s, (int32_t)(uint32_t)u);
    case 'K': /* BININT1 */
        return read_uint(s, 1, &u) && push_int(s, (int64_t)u);
    case 'M': /* BININT2 */
        return read_uint(s, 2, &u) && push_int(s, (int64_t)u);
    case 0x8a: /* LONG1 */
        return read_uint(s, 1, &u) && push_long(s, u);
    case 0x8b: /* LONG4 */
        if (!read_uint(s, 4, &u)) return false;
        if ((int32_t)(uint32_t)u < 0)
            return pk_fail(s, TS_ERR_FORMAT, "negative LONG4 size"), false;
        return push_long(s, u);
    case 'G': { /* BINFLOAT: big-endian */
        const unsigned char *b = take(s, 8);
        if (!b || !(v = new_value(s, PK_FLOAT))) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        memcpy(&v->f, &bits, sizeof v->f);
        return push(s, v);
    }
    case 'X':
        return read_uint(s, 4, &u) && push_string(s, PK_STR, u); /* BINUNICODE */
    case 0x8c:
        return read_uint(s, 1, &u) && push_string(s, PK_STR, u); /* SHORT_BINUNICODE */
    case 0x8d:
        return read_uint(s, 8, &u) && push_string(s, PK_STR, u); /* BINUNICODE8 */
    case 'T': /* BINSTRING (Python 2 str): signed length */
        if (!read_uint(s, 4, &u)) return false;
        if ((int32_t)(uint32_t)u < 0)
            return pk_fail(s, TS_ERR_FORMAT, "negative BINSTRING size"), false;
        return push_string(s, PK_STR, u);
    case 'U':
        return read_uint(s, 1, &u) && push_string(s, PK_STR, u); /* SHORT_BINSTRING */
    case 'B':
        return read_uint(s, 4, &u) && push_string(s, PK_BYTES, u); /* BINBYTES */
    case 'C':
        return read_uint(s, 1, &u) && push_string(s, PK_BYTES, u); /* SHORT_BINBYTES */
    case 0x8e:
        return read_uint(s, 8, &u) && push_string(s, PK_BYTES, u); /* BINBYTES8 */
    case 0x96:
        return read_uint(s, 8, &u) && push_string(s, PK_BYTES, u); /* BYTEARRAY8 */
    case '}':
        return push(s, new_value(s, PK_DICT)); /* EMPTY_DICT */
    case ']':
        return push(s, new_value(s, PK_LIST)); /* EMPTY_LIST */
    case ')':
        return push(s, new_value(s, PK_TUPLE)); /* EMPTY_TUPLE */
    case 0x8f:
        return push(s, new_value(s, PK_SET)); /* EMPTY_SET */
    case 't':
        return collect(s, PK_TUPLE); /* TUPLE */
    case 'l':
        return collect(s, PK_LIST); /* LIST */
    case 'd':
        return collect(s, PK_DICT); /* DICT */
    case 0x91:
        return collect(s, PK_SET); /* FROZENSET */
    case 0x85:
        return tuple_n(s, 1);
    case 0x86:
        return tuple_n(s, 2);
    case 0x87:
        return tuple_n(s, 3);
    case 'a': /* APPEND */
        if (!(v = pop(s)) || !(c = top(s))) return false;
        if (c->kind != PK_LIST)
            return pk_fail(s, TS_ERR_FORMAT, "APPEND to a %s", kind_name(c->kind)), false;
        return add_item(s, c, v);
    case 'e':
        return extend(s, PK_LIST); /* APPENDS */
    case 'u':
        return extend(s, PK_DICT); /* SETITEMS */
    case 0x90:
        return extend(s, PK_SET); /* ADDITEMS */
    case 's':                     /* SETITEM */
        if (!(v = pop(s)) || !(w = pop(s)) || !(c = top(s))) return false;
        if (c->kind != PK_DICT)
            return pk_fail(s, TS_ERR_FORMAT, "SETITEM on a %s", kind_name(c->kind)), false;
        return add_item(s, c, w) && add_item(s, c, v);
    case 'q':
        return read_uint(s, 1, &u) && memo_put(s, u); /* BINPUT */
    case 'r':
        return read_uint(s, 4, &u) && memo_put(s, u); /* LONG_BINPUT */
    case 0x94:
        return memo_put(s, s->memo_len); /* MEMOIZE */
    case 'h':
        return read_uint(s, 1, &u) && memo_get(s, u); /* BINGET */
    case 'j':
        return read_uint(s, 4, &u) && memo_get(s, u); /* LONG_BINGET */
    case 'c':
        return op_global(s); /* GLOBAL */
    case 0x93:
        return op_stack_global(s); /* STACK_GLOBAL */
    case 'Q':
        return op_persid(s); /* BINPERSID */
    case 'R':                /* REDUCE */
    case 0x81:               /* NEWOBJ */
        if (!(w = pop(s)) || !(v = pop(s))) return false;
        return push(s, call(s, v, w, 0));
    case 0x92: /* NEWOBJ_EX: cls, args, kwargs (no keyword arguments) */
        if (!(c = pop(s)) || !(w = pop(s)) || !(v = pop(s))) return false;
        if (c->kind != PK_DICT || c->n)
            return pk_fail(s, TS_ERR_FORMAT, "NEWOBJ_EX with keyword arguments"), false;
        return push(s, call(s, v, w, 0));
    case 'b': /* BUILD: the state is not applied (no allowed type needs it for its tensors) */
        return (v = pop(s)) && top(s);
    default:
        break;
    }
    static const char legacy[] = "IFLSVPgpoi\x82\x83\x84\x97\x98";
    if (s->op && strchr(legacy, s->op))
        return pk_fail(s, TS_ERR_UNSUPPORTED,
                       "this opcode (protocol 0/1 text, extension registry or out-of-band "
                       "buffer) is not supported by ts_load_pt; torch.save writes protocol 2"),
               false;
    return pk_fail(s, TS_ERR_FORMAT, "unknown opcode"), false;
}

void pk_free(pk_doc *doc) {
    if (!doc) return;
    for (pk_block *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        for (size_t i = 0; i < b->n; i++) {
            free(b->v[i].items);
            free(b->v[i].s);
            free(b->v[i].t);
        }
        free(b);
    }
    free(doc->tensors);
    memset(doc, 0, sizeof *doc);
}

ts_status pk_parse(const char *file, const unsigned char *data, size_t size, pk_doc *doc) {
    memset(doc, 0, sizeof *doc);
    pk_state s = {.file = file, .start = data, .p = data, .end = data + size, .doc = doc};
    s.memo_limit = size < PK_MAX_MEMO ? size : PK_MAX_MEMO;
    ts_status st = TS_OK;
    if (size > PK_MAX_PICKLE)
        st = tsi_error_set(TS_ERR_FORMAT, "%s: data.pkl holds %zu bytes, over the limit of %zu",
                           file, size, PK_MAX_PICKLE);
    bool done = false;
    while (!st && !done) {
        if (s.p >= s.end) {
            s.op_at = size;
            s.op = 0;
            st = tsi_error_set(TS_ERR_FORMAT, "%s: data.pkl ends without STOP (byte %zu)", file,
                               size);
            break;
        }
        s.op_at = (size_t)(s.p - s.start);
        s.op = *s.p++;
        if (!step(&s, &done)) st = ts_error() ? ts_error() : TS_ERR_FORMAT;
    }
    free(s.stack);
    free(s.memo);
    if (st) pk_free(doc);
    return st;
}
