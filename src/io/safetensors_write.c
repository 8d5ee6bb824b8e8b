/* safetensors_write.c — the safetensors writer: the Python library's exact byte layout (same tensor
 * order, compact JSON, space padding to 8 bytes), written atomically. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/strbuf.h"
#include "io/atomic_file.h"

/* Names, and the rank of each dtype in the Python library's Dtype enum: it writes the tensors by
 * descending rank (widest alignment first), then by name, and so do we, byte for byte. */
static const char *const st_names[TS_DTYPE_COUNT] = {
    [TS_F32] = "F32", [TS_F64] = "F64", [TS_F16] = "F16",   [TS_BF16] = "BF16", [TS_I64] = "I64",
    [TS_I32] = "I32", [TS_U8] = "U8",   [TS_BOOL] = "BOOL", [TS_I8] = "I8",     [TS_I16] = "I16",
    [TS_U16] = "U16", [TS_U32] = "U32", [TS_U64] = "U64",   [TS_C64] = "C64",
};
static const int st_rank[TS_DTYPE_COUNT] = {
    [TS_BOOL] = 0, [TS_U8] = 4,   [TS_F16] = 11, [TS_BF16] = 12, [TS_I32] = 13,
    [TS_F32] = 15, [TS_F64] = 17, [TS_I64] = 18, [TS_I8] = 5,    [TS_I16] = 9,
    [TS_U16] = 10, [TS_U32] = 14, [TS_U64] = 19, [TS_C64] = 16,
};

static void sb_u64(tsi_strbuf *b, uint64_t v) {
    char tmp[24];
    tsi_sb_putn(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v));
}
/* A JSON string escaped as serde_json does (short escapes, \u00XX for other controls, UTF-8 as is).
 */
static void sb_json_str(tsi_strbuf *b, const char *s) {
    tsi_sb_putn(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *esc = *c == '"'    ? "\\\""
                          : *c == '\\' ? "\\\\"
                          : *c == '\n' ? "\\n"
                          : *c == '\r' ? "\\r"
                          : *c == '\t' ? "\\t"
                          : *c == '\b' ? "\\b"
                          : *c == '\f' ? "\\f"
                                       : NULL;
        char u[8];
        if (!esc && *c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", *c);
            esc = u;
        }
        if (esc)
            tsi_sb_puts(b, esc);
        else
            tsi_sb_putn(b, (const char *)c, 1);
    }
    tsi_sb_putn(b, "\"", 1);
}

/* The reader (ours and Python's) refuses names that are not UTF-8, so the writer does too. */
static bool utf8_ok(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        size_t len = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        if (!len) return false;
        if (len > 1) {
            unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
            unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            if (s[1] < lo || s[1] > hi) return false;
            for (size_t k = 2; k < len; k++)
                if ((s[k] & 0xC0) != 0x80) return false;
        }
        s += len;
    }
    return true;
}

typedef struct wentry {
    const char *name;
    ts_tensor *t;
} wentry;

static int cmp_write_order(const void *a, const void *b) {
    const wentry *x = a, *y = b;
    int rx = st_rank[x->t->dtype], ry = st_rank[y->t->dtype];
    if (rx != ry) return rx > ry ? -1 : 1;
    return strcmp(x->name, y->name);
}
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t nbytes_of(const ts_tensor *t) {
    return (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
}

/* Everything is checked before the temporary file exists. */
static ts_status check_args(const char *op, const char *path, const ts_tensor_list *l,
                            const char *const *meta, int n_meta) {
    if (!path || !l) return tsi_error_set(TS_ERR_ARG, "%s: path or tensor list is NULL", op);
    if (n_meta < 0 || (n_meta > 0 && !meta))
        return tsi_error_set(TS_ERR_ARG, "%s: %d metadata pairs but meta is %s", op, n_meta,
                             meta ? "set" : "NULL");
    for (int i = 0; i < l->n; i++) {
        const char *name = l->names ? l->names[i] : NULL;
        if (!name) return tsi_error_set(TS_ERR_ARG, "%s: tensor %d has no name", op, i);
        if (!utf8_ok(name) || !strcmp(name, "__metadata__"))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: tensor name '%.200s' is not valid UTF-8 or is "
                                 "reserved",
                                 op, name);
        if (!l->tensors || !l->tensors[i]) {
            if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: tensor '%.200s' is NULL", op, name);
            return ts_error();
        }
        if ((unsigned)l->tensors[i]->dtype >= TS_DTYPE_COUNT || !st_names[l->tensors[i]->dtype])
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: tensor '%.200s': the safetensors format has no %s dtype", op,
                                 name, ts_dtype_name(l->tensors[i]->dtype));
    }
    for (int i = 0; i < 2 * n_meta; i++)
        if (!meta[i] || !utf8_ok(meta[i]))
            return tsi_error_set(TS_ERR_ARG, "%s: metadata %s %d is NULL or not valid UTF-8", op,
                                 i % 2 ? "value" : "key", i / 2);
    return TS_OK;
}

/* The first name that appears twice among n strings taken every `stride` pointers, or NULL. */
static const char *duplicate_of(const char *const *s, int n, int stride, const char ***sorted) {
    const char **v = malloc(sizeof *v * (size_t)(n ? n : 1));
    *sorted = v;
    if (!v) return NULL;
    for (int i = 0; i < n; i++) v[i] = s[(size_t)i * (size_t)stride];
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    for (int i = 1; i < n; i++)
        if (!strcmp(v[i - 1], v[i])) return v[i];
    return NULL;
}

/* JSON header padded with spaces so the data starts 8-byte aligned, as the Python writer does. */
static ts_status build_header(const char *op, tsi_strbuf *b, const wentry *w, int n,
                              const char *const *meta, int n_meta) {
    const char **keys = NULL;
    const char *dup = duplicate_of(meta, n_meta, 2, &keys);
    if (!keys) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    if (dup) {
        free(keys);
        return tsi_error_set(TS_ERR_ARG, "%s: metadata key '%.200s' appears twice", op, dup);
    }
    tsi_sb_putn(b, "{", 1);
    if (n_meta > 0) {
        tsi_sb_puts(b, "\"__metadata__\":{");
        for (int k = 0; k < n_meta; k++) { /* keys sorted, so the bytes do not depend on order */
            int i = 0;
            while (meta[2 * i] != keys[k]) i++;
            if (k) tsi_sb_putn(b, ",", 1);
            sb_json_str(b, meta[2 * i]);
            tsi_sb_putn(b, ":", 1);
            sb_json_str(b, meta[2 * i + 1]);
        }
        tsi_sb_putn(b, "}", 1);
    }
    free(keys);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const ts_tensor *t = w[i].t;
        if (i || n_meta > 0) tsi_sb_putn(b, ",", 1);
        sb_json_str(b, w[i].name);
        tsi_sb_puts(b, ":{\"dtype\":\"");
        tsi_sb_puts(b, st_names[t->dtype]);
        tsi_sb_puts(b, "\",\"shape\":[");
        for (int d = 0; d < t->shape.ndim; d++) {
            if (d) tsi_sb_putn(b, ",", 1);
            sb_u64(b, (uint64_t)t->shape.dims[d]);
        }
        tsi_sb_puts(b, "],\"data_offsets\":[");
        sb_u64(b, at);
        tsi_sb_putn(b, ",", 1);
        at += nbytes_of(t);
        sb_u64(b, at);
        tsi_sb_puts(b, "]}");
    }
    tsi_sb_putn(b, "}", 1);
    while (!b->failed && b->len % 8) tsi_sb_putn(b, " ", 1);
    return b->failed ? tsi_error_set(TS_ERR_OOM, "%s: out of memory for the header", op) : TS_OK;
}

/* One tensor's bytes, contiguous, from any device; device memory goes through a bounded buffer. */
static ts_status write_tensor(const char *op, tsi_afile *f, ts_tensor *t, char **scratch) {
    size_t n = nbytes_of(t);
    if (!n) return TS_OK;
    if (!tsi_meta_refuse(op, t)) return ts_error(); /* no bytes to write */
    ts_tensor *c = tsi_contiguous(op, t);
    if (!c) return ts_error();
    const char *src = tsi_kview(c).data;
    ts_status st = TS_OK;
    if (tsi_device(c).type == TS_CPU) {
        st = tsi_afile_write(f, src, n);
    } else {
        enum { CHUNK = 4 << 20 };
        if (!*scratch && !(*scratch = malloc(CHUNK)))
            st = tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
        for (size_t off = 0; off < n && !st; off += CHUNK) {
            size_t k = n - off < CHUNK ? n - off : CHUNK;
            tsi_be(c)->copy_d2h(tsi_be(c), tsi_dev_index(c), *scratch, src + off, k);
            st = tsi_afile_write(f, *scratch, k);
        }
    }
    ts_release(c);
    return st;
}

ts_status ts_safetensors_save(const char *path, const ts_tensor_list *tensors,
                              const char *const *meta, int n_meta) {
    const char *op = "safetensors_save";
    tsi_init();
    ts_status st = check_args(op, path, tensors, meta, n_meta);
    if (st) return st;
    int n = tensors->n;
    wentry *w = malloc(sizeof *w * (size_t)(n ? n : 1));
    const char **names = NULL;
    const char *dup = duplicate_of((const char *const *)tensors->names, n, 1, &names);
    if (!w || !names)
        st = tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    else if (dup)
        st = tsi_error_set(TS_ERR_ARG, "%s: tensor name '%.200s' appears twice", op, dup);
    free(names);
    for (int i = 0; i < n && !st; i++) w[i] = (wentry){tensors->names[i], tensors->tensors[i]};
    if (!st) qsort(w, (size_t)n, sizeof *w, cmp_write_order);
    tsi_strbuf hdr = {0};
    if (!st) st = build_header(op, &hdr, w, n, meta, n_meta);
    tsi_afile f;
    if (!st) st = tsi_afile_open(&f, op, path);
    if (!st) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
        st = tsi_afile_write(&f, len8, 8);
        if (!st) st = tsi_afile_write(&f, hdr.s, hdr.len);
        char *scratch = NULL;
        for (int i = 0; i < n && !st; i++) st = write_tensor(op, &f, w[i].t, &scratch);
        free(scratch);
        if (st)
            tsi_afile_abort(&f);
        else
            st = tsi_afile_commit(&f);
    }
    free(hdr.s);
    free(w);
    return st;
}
