/* safetensors_read.c — the safetensors reader: every field of an untrusted file is validated before
 * any tensor is allocated, so a malformed file gives TS_ERR_FORMAT, never a crash or a huge alloc.
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/tensor_list_take.h"

/* Limits on an untrusted header, so that a hostile file cannot cost gigabytes: cJSON spends about
 * 80 bytes on each JSON value, and "0," is two bytes, so a header at the Python library's limit
 * (MAX_HEADER_SIZE, 100 MB) could take 4 GB to parse. A real header takes about 12 bytes per value
 * (8 values per tensor) and rarely 1 MB: GPT-2 XL's is 60 kB. Within these limits the parse costs
 * at most about 250 MB. */
#define ST_MAX_HEADER ((uint64_t)16 << 20) /* 16 MiB: some 170,000 tensors */
#define ST_MAX_VALUES ((uint64_t)1 << 21)  /* JSON values (tensors x 8) */
#define ST_MAX_DEPTH  3                    /* {name: {"shape": [dims]}}: the format's own depth */
#define ST_MAX_INT    9007199254740992.0   /* 2^53: the largest integer range a JSON double keeps */

/* Every dtype the format defines; dt 0 (TS_DTYPE_DEFAULT) marks those Tessera cannot hold. */
typedef struct st_dtype {
    const char *name;
    unsigned bits;
    ts_dtype dt;
} st_dtype;
static const st_dtype st_dtypes[] = {
    {"F32", 32, TS_F32}, {"F64", 64, TS_F64},   {"F16", 16, TS_F16},   {"BF16", 16, TS_BF16},
    {"I64", 64, TS_I64}, {"I32", 32, TS_I32},   {"U8", 8, TS_U8},      {"BOOL", 8, TS_BOOL},
    {"I8", 8, TS_I8},    {"I16", 16, TS_I16},   {"U16", 16, TS_U16},   {"U32", 32, TS_U32},
    {"U64", 64, TS_U64}, {"C64", 64, TS_C64},   {"F8_E5M2", 8, 0},     {"F8_E4M3", 8, 0},
    {"F8_E8M0", 8, 0},   {"F8_E4M3FNUZ", 8, 0}, {"F8_E5M2FNUZ", 8, 0}, {"F6_E2M3", 6, 0},
    {"F6_E3M2", 6, 0},   {"F4", 4, 0},
};

typedef struct st_entry {
    const char *name;
    const st_dtype *dtype;
    int ndim; /* as in the file: may pass TS_MAX_DIMS (then unsupported) */
    int64_t dims[TS_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

typedef struct st_header {
    const char *file; /* for messages */
    char *text;       /* NUL-terminated copy of the JSON */
    cJSON *root;
    const cJSON *meta; /* "__metadata__" or NULL */
    st_entry *entries; /* in the header's order */
    int n;
} st_header;

/* "<file>: tensor '<name>': <what>" as TS_ERR_FORMAT (or another code) */
static ts_status __attribute__((format(printf, 4, 5)))
st_fail(ts_status code, const st_header *h, const char *tensor, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (tensor) return tsi_error_set(code, "%s: tensor '%.200s': %s", h->file, tensor, what);
    return tsi_error_set(code, "%s: %s", h->file, what);
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as the Python library asks.
 */
static size_t utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        if (!len || i + len > n) return i;
        unsigned c1 = s[i + 1];
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (c1 < lo || c1 > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return n;
}

/* Before any allocation: the nesting depth and an upper bound of the number of JSON values (one
 * per container, one per comma, one more), from a scan that skips strings. Malformed JSON is left
 * to the parser. */
static ts_status check_shape(const st_header *h, const char *t, size_t n) {
    uint64_t values = 1;
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            values++;
            if (++depth > ST_MAX_DEPTH)
                return st_fail(TS_ERR_FORMAT, h, NULL,
                               "header nests deeper than %d levels (byte %zu): a safetensors "
                               "header is an object of tensors holding arrays of integers",
                               ST_MAX_DEPTH, i);
        } else if (c == '}' || c == ']') {
            depth -= depth > 0;
        } else if (c == ',') {
            values++;
        }
        if (values > ST_MAX_VALUES)
            return st_fail(TS_ERR_FORMAT, h, NULL,
                           "header holds more than %llu JSON values (byte %zu; a tensor takes "
                           "about 8)",
                           (unsigned long long)ST_MAX_VALUES, i);
    }
    return TS_OK;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= ST_MAX_INT)) return false;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return false;
    *out = u;
    return true;
}

static void shape_str(char *buf, size_t cap, const cJSON *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    int i = 0;
    for (const cJSON *d = shape->child; d && k < cap; d = d->next, i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %.0f" : "%.0f", d->valuedouble);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* One tensor's {"dtype", "shape", "data_offsets"}: each present once, nothing else, sizes agree. */
static ts_status parse_entry(const st_header *h, const cJSON *obj, uint64_t data_size,
                             st_entry *e) {
    const char *name = obj->string;
    e->name = name;
    if (!cJSON_IsObject(obj))
        return st_fail(TS_ERR_FORMAT, h, name,
                       "expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *f = obj->child; f; f = f->next) {
        const cJSON **slot = !strcmp(f->string, "dtype")          ? &dtype
                             : !strcmp(f->string, "shape")        ? &shape
                             : !strcmp(f->string, "data_offsets") ? &offs
                                                                  : NULL;
        if (!slot) return st_fail(TS_ERR_FORMAT, h, name, "unexpected field \"%.100s\"", f->string);
        if (*slot) return st_fail(TS_ERR_FORMAT, h, name, "field \"%s\" appears twice", f->string);
        *slot = f;
    }
    if (!dtype || !shape || !offs)
        return st_fail(TS_ERR_FORMAT, h, name, "missing field \"%s\"",
                       !dtype   ? "dtype"
                       : !shape ? "shape"
                                : "data_offsets");

    if (!cJSON_IsString(dtype)) return st_fail(TS_ERR_FORMAT, h, name, "dtype is not a string");
    e->dtype = NULL;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(dtype->valuestring, st_dtypes[i].name)) e->dtype = &st_dtypes[i];
    if (!e->dtype)
        return st_fail(TS_ERR_FORMAT, h, name, "unknown dtype \"%.40s\"", dtype->valuestring);

    if (!cJSON_IsArray(shape))
        return st_fail(TS_ERR_FORMAT, h, name, "shape is not an array of integers");
    uint64_t numel = 1;
    bool overflow = false;
    e->ndim = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        uint64_t v;
        if (!json_uint(d, &v))
            return st_fail(TS_ERR_FORMAT, h, name, "shape dim %d is not an integer in [0, 2^53]",
                           e->ndim);
        if (e->ndim < TS_MAX_DIMS) e->dims[e->ndim] = (int64_t)v;
        e->ndim++;
        overflow |= __builtin_mul_overflow(numel, v, &numel);
    }

    uint64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &b) ||
        !json_uint(offs->child->next, &en))
        return st_fail(TS_ERR_FORMAT, h, name, "data_offsets is not [begin, end]");
    if (b > en)
        return st_fail(TS_ERR_FORMAT, h, name, "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return st_fail(TS_ERR_FORMAT, h, name,
                       "data_offsets [%llu, %llu] pass the end of the %llu-byte data section",
                       (unsigned long long)b, (unsigned long long)en,
                       (unsigned long long)data_size);
    e->begin = b;
    e->end = en;

    uint64_t bits;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)e->dtype->bits, &bits);
    char sh[160];
    shape_str(sh, sizeof sh, shape);
    if (overflow)
        return st_fail(TS_ERR_FORMAT, h, name, "shape %s of %s needs more than 2^64 bytes", sh,
                       e->dtype->name);
    if (bits % 8)
        return st_fail(TS_ERR_FORMAT, h, name, "shape %s of %s is not a whole number of bytes", sh,
                       e->dtype->name);
    if (bits / 8 != en - b)
        return st_fail(TS_ERR_FORMAT, h, name,
                       "data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
                       (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b),
                       sh, e->dtype->name, (unsigned long long)(bits / 8));
    return TS_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}
/* First name that appears twice (sorting: headers may hold millions of names), or NULL. */
static const char *find_duplicate(const char **names, int n) {
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) return names[i];
    return NULL;
}

static int cmp_offsets(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static ts_status check_metadata(const st_header *h, const cJSON *meta) {
    if (!cJSON_IsObject(meta))
        return st_fail(TS_ERR_FORMAT, h, NULL, "__metadata__ is not an object of strings");
    int m = cJSON_GetArraySize(meta);
    const char **keys = malloc(sizeof *keys * (size_t)(m ? m : 1));
    if (!keys) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", h->file);
    int k = 0;
    ts_status st = TS_OK;
    for (const cJSON *v = meta->child; v && !st; v = v->next) {
        keys[k++] = v->string;
        if (!cJSON_IsString(v))
            st = st_fail(TS_ERR_FORMAT, h, NULL, "__metadata__ value of \"%.100s\" is not a string",
                         v->string);
    }
    const char *dup = st ? NULL : find_duplicate(keys, k);
    if (dup) st = st_fail(TS_ERR_FORMAT, h, NULL, "__metadata__ key \"%.100s\" appears twice", dup);
    free(keys);
    return st;
}

static void header_free(st_header *h) {
    cJSON_Delete(h->root);
    free(h->text);
    free(h->entries);
    memset(h, 0, sizeof *h);
}

/* Parses and validates the JSON header (n bytes) of a file whose data section holds data_size
 * bytes: structure, dtypes, sizes, duplicates, contiguity. Tensor data is not looked at. */
static ts_status header_parse(st_header *h, const char *file, const char *hdr, size_t n,
                              uint64_t data_size) {
    memset(h, 0, sizeof *h);
    h->file = file;
    size_t bad = utf8_invalid_at((const unsigned char *)hdr, n);
    if (bad < n)
        return st_fail(TS_ERR_FORMAT, h, NULL, "header is not valid UTF-8 (byte %zu)", bad);
    ts_status shape_st = check_shape(h, hdr, n);
    if (shape_st) return shape_st;
    h->text = malloc(n + 1);
    if (!h->text)
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory for a %zu-byte header", file, n);
    memcpy(h->text, hdr, n);
    h->text[n] = '\0';
    const char *end = NULL;
    h->root = cJSON_ParseWithOpts(h->text, &end, false);
    if (!h->root) {
        size_t at = end && end >= h->text ? (size_t)(end - h->text) : 0;
        return st_fail(TS_ERR_FORMAT, h, NULL, "header is not valid JSON (error at byte %zu)", at);
    }
    /* the writer pads with spaces; the Python reader accepts any JSON whitespace there */
    for (const char *p = end; p < h->text + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return st_fail(TS_ERR_FORMAT, h, NULL,
                           "unexpected bytes after the JSON header (byte %zu)",
                           (size_t)(p - h->text));
    if (!cJSON_IsObject(h->root))
        return st_fail(TS_ERR_FORMAT, h, NULL, "header is not a JSON object");

    int count = 0;
    for (const cJSON *it = h->root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") != 0) {
            count++;
            continue;
        }
        if (h->meta) return st_fail(TS_ERR_FORMAT, h, NULL, "__metadata__ appears twice");
        h->meta = it;
        ts_status st = check_metadata(h, it);
        if (st) return st;
    }
    h->entries = malloc(sizeof *h->entries * (size_t)(count ? count : 1));
    const char **names = malloc(sizeof *names * (size_t)(count ? count : 1));
    st_entry **order = malloc(sizeof *order * (size_t)(count ? count : 1));
    ts_status st = TS_OK;
    if (!h->entries || !names || !order)
        st = tsi_error_set(TS_ERR_OOM, "%s: out of memory for %d tensors", file, count);
    for (const cJSON *it = h->root->child; it && !st; it = it->next) {
        if (it == h->meta) continue;
        st = parse_entry(h, it, data_size, &h->entries[h->n]);
        names[h->n] = it->string;
        order[h->n] = &h->entries[h->n];
        h->n++;
    }
    const char *dup = st ? NULL : find_duplicate(names, h->n);
    if (dup) st = st_fail(TS_ERR_FORMAT, h, dup, "the name appears twice");
    if (!st) {
        /* the Python writer packs the tensors back to back from offset 0 to the end of the file */
        qsort(order, (size_t)h->n, sizeof *order, cmp_offsets);
        uint64_t at = 0;
        const st_entry *prev = NULL;
        for (int i = 0; i < h->n && !st; i++) {
            const st_entry *e = order[i];
            if (e->begin != at && prev)
                st = st_fail(TS_ERR_FORMAT, h, e->name,
                             "data_offsets [%llu, %llu] do not start where tensor '%.200s' ends "
                             "(%llu): offsets must be contiguous",
                             (unsigned long long)e->begin, (unsigned long long)e->end, prev->name,
                             (unsigned long long)at);
            else if (e->begin != at)
                st = st_fail(TS_ERR_FORMAT, h, e->name,
                             "data_offsets [%llu, %llu]: the first tensor must start at offset 0",
                             (unsigned long long)e->begin, (unsigned long long)e->end);
            at = e->end;
            prev = e;
        }
        if (!st && at != data_size)
            st = st_fail(TS_ERR_FORMAT, h, NULL,
                         "the tensors end at offset %llu but the data section holds %llu bytes",
                         (unsigned long long)at, (unsigned long long)data_size);
    }
    free(names);
    free(order);
    return st;
}

/* Valid files whose content Tessera cannot represent. */
static ts_status check_supported(const st_header *h) {
    for (int i = 0; i < h->n; i++) {
        const st_entry *e = &h->entries[i];
        if (!e->dtype->dt)
            return st_fail(TS_ERR_UNSUPPORTED, h, e->name,
                           "dtype %s is not supported by Tessera (F32, F64, F16, BF16, C64, "
                           "BOOL and the integer dtypes are)",
                           e->dtype->name);
        if (e->ndim > TS_MAX_DIMS)
            return st_fail(TS_ERR_UNSUPPORTED, h, e->name,
                           "%d dims; Tessera tensors have at most %d", e->ndim, TS_MAX_DIMS);
    }
    return TS_OK;
}

/* Reads the 8-byte little-endian header length and checks it against the buffer. */
static ts_status header_span(const char *file, const unsigned char *data, size_t size,
                             uint64_t *n) {
    if (size < 8)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: %zu bytes is too short for the 8-byte header length", file, size);
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--) len = len << 8 | data[i];
    if (len > ST_MAX_HEADER)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: header length %llu is over the limit of %llu bytes", file,
                             (unsigned long long)len, (unsigned long long)ST_MAX_HEADER);
    if (len > size - 8)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: header length %llu is more than the %zu bytes after it", file,
                             (unsigned long long)len, size - 8);
    *n = len;
    return TS_OK;
}

static ts_status parse_named(const char *op, const char *file, const void *data, size_t size,
                             ts_device dev, ts_tensor_list *out) {
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: output list is NULL", op);
    if (!data && size) return tsi_error_set(TS_ERR_ARG, "%s: data is NULL", op);
    dev = tsi_resolve_device(dev);
    if (dev.type != TS_CPU && !tsi_check_device(op, dev)) return ts_error();
    const unsigned char *bytes = data;
    uint64_t n = 0;
    ts_status st = header_span(file, bytes, size, &n);
    if (st) return st;
    st_header h;
    const unsigned char *body = bytes + 8 + n;
    st = header_parse(&h, file, (const char *)bytes + 8, (size_t)n, size - 8 - n);
    if (!st) st = check_supported(&h);
    for (int i = 0; i < h.n && !st; i++) {
        const st_entry *e = &h.entries[i];
        if (e->dtype->dt != TS_BOOL) continue;
        /* kernels assume a bool byte is 0 or 1 */
        for (uint64_t k = e->begin; k < e->end && !st; k++)
            if (body[k] > 1)
                st = st_fail(TS_ERR_FORMAT, &h, e->name, "BOOL element %llu holds %u (not 0 or 1)",
                             (unsigned long long)(k - e->begin), body[k]);
    }
    /* filled directly: the names are known to be distinct, and ts_tensor_list_add's search would
     * make a header of a million tensors quadratic */
    ts_tensor_list got = {0};
    if (!st && h.n > 0) {
        got.names = calloc((size_t)h.n, sizeof *got.names);
        got.tensors = calloc((size_t)h.n, sizeof *got.tensors);
        got.cap = h.n;
        if (!got.names || !got.tensors)
            st = tsi_error_set(TS_ERR_OOM, "%s: %s: out of memory for %d tensors", op, file, h.n);
    }
    for (int i = 0; i < h.n && !st; i++) {
        const st_entry *e = &h.entries[i];
        ts_tensor *t = tsi_new(op, ts_shape_make((size_t)e->ndim, e->dims), e->dtype->dt, dev);
        char *name = t ? strdup(e->name) : NULL;
        if (!name) {
            ts_release(t);
            st = t ? tsi_error_set(TS_ERR_OOM, "%s: out of memory", op) : ts_error();
            if (!st) st = TS_ERR_OOM;
            break;
        }
        if (e->end > e->begin)
            tsi_be(t)->copy_h2d(tsi_be(t), tsi_dev_index(t), tsi_kview(t).data, body + e->begin,
                                (size_t)(e->end - e->begin));
        got.names[got.n] = name;
        got.tensors[got.n++] = t;
    }
    header_free(&h);
    return tsi_tensor_list_take(out, &got, st);
}

ts_status ts_safetensors_parse(const void *data, size_t size, ts_device dev, ts_tensor_list *out) {
    return parse_named("safetensors_parse", "<memory>", data, size, dev, out);
}

/* Opens a regular file for reading; TS_ERR_IO with strerror. */
static int open_regular(const char *op, const char *path, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open '%s': %s", op, path, strerror(errno)), -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tsi_error_set(TS_ERR_IO, "%s: '%s' is not a regular file", op, path);
        close(fd);
        return -1;
    }
    *size = (size_t)sb.st_size;
    return fd;
}

ts_status ts_safetensors_load(const char *path, ts_device dev, ts_tensor_list *out) {
    const char *op = "safetensors_load";
    tsi_init();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op);
    size_t size;
    int fd = open_regular(op, path, &size);
    if (fd < 0) return ts_error();
    /* mapped, not read: a large checkpoint is not held twice in host memory */
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return tsi_error_set(TS_ERR_IO, "%s: cannot map '%s': %s", op, path, strerror(err));
    ts_status st = parse_named(op, path, map, size, dev, out);
    if (map) munmap(map, size);
    return st;
}

static ts_status read_exact(const char *op, const char *path, int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return tsi_error_set(TS_ERR_IO, "%s: reading '%s' failed: %s", op, path,
                                 r < 0 ? strerror(errno) : "unexpected end of file");
        p += r;
        n -= (size_t)r;
    }
    return TS_OK;
}

char *ts_safetensors_metadata(const char *path, const char *key) {
    const char *op = "safetensors_metadata";
    tsi_init();
    if (!path || !key) return tsi_error_set(TS_ERR_ARG, "%s: path or key is NULL", op), NULL;
    size_t size;
    int fd = open_regular(op, path, &size);
    if (fd < 0) return NULL;
    /* only the header is read; it is validated as fully as by the loader */
    unsigned char len8[8];
    uint64_t n = 0;
    char *hdr = NULL, *value = NULL;
    ts_status st = read_exact(op, path, fd, len8, size < 8 ? size : 8);
    if (!st) st = header_span(path, len8, size, &n);
    if (!st && !(hdr = malloc((size_t)n + 1)))
        st = tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    if (!st) st = read_exact(op, path, fd, hdr, (size_t)n);
    close(fd);
    st_header h = {0};
    if (!st) st = header_parse(&h, path, hdr, (size_t)n, size - 8 - n);
    if (!st && h.meta) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(h.meta, key);
        if (v && !(value = strdup(v->valuestring)))
            tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    }
    header_free(&h);
    free(hdr);
    return value;
}
