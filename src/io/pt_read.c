/* pt_read.c — ts_load_pt: PyTorch's checkpoint zip (<archive>/data.pkl, <archive>/data/<key>,
 * <archive>/byteorder) through libzip, the pickle through src/io/pickle_read.c, then every tensor
 * named by its path in the pickled object and copied out of its storage (each storage read once,
 * every size checked against the zip entry that holds it). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "core/internal.h"
#include "io/pickle_read.h"
#include "io/tensor_list_take.h"
#include "tessera/pt.h"

#define PT_MAX_DEFLATE_RATIO 1100 /* deflate expands at most ~1032x: more is a bomb or a lie */
#define PT_MAX_DEPTH         64   /* containers nested in the pickled object */
#define PT_MAX_NAME          4096 /* bytes of one tensor's name */
#define PT_MAX_VISITS        PK_MAX_OBJECTS /* a DAG of shared containers cannot name 2^N paths */
#define PT_MAX_NAME_BYTES    ((size_t)64 << 20) /* all names: 100,000 tensors take some 6 MB */

typedef struct pt_named {
    char *name;
    pk_tensor *t;
} pt_named;

typedef struct pt_ctx {
    const char *op, *file;
    size_t file_size;
    zip_t *za;
    char prefix[256]; /* "<archive>/" */
    bool big_endian;
    uint64_t budget; /* output bytes left: expanded views of a small storage cannot take more */
    char name[PT_MAX_NAME + 1];
    size_t visits, name_bytes;
    pt_named *named;
    int n_named, cap_named;
} pt_ctx;

/* ------------------------------------------------------------------ the zip */

static ts_status zip_fail(const pt_ctx *c, const char *entry, const char *what) {
    return tsi_error_set(TS_ERR_FORMAT, "%s: zip entry '%.200s': %s", c->file, entry, what);
}

/* Reads a whole entry; expect (when not UINT64_MAX) is the size the pickle claims for it. */
static ts_status read_entry(pt_ctx *c, zip_int64_t idx, const char *name, uint64_t expect,
                            unsigned char **out, size_t *n) {
    *out = NULL;
    *n = 0;
    zip_stat_t zs;
    zip_stat_init(&zs);
    if (zip_stat_index(c->za, (zip_uint64_t)idx, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE) ||
        !(zs.valid & ZIP_STAT_COMP_SIZE) || !(zs.valid & ZIP_STAT_COMP_METHOD))
        return zip_fail(c, name, zip_strerror(c->za));
    if ((zs.valid & ZIP_STAT_ENCRYPTION_METHOD) && zs.encryption_method != ZIP_EM_NONE)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: zip entry '%.200s' is encrypted", c->file,
                             name);
    if (zs.comp_method != ZIP_CM_STORE && zs.comp_method != ZIP_CM_DEFLATE)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: zip entry '%.200s' uses compression method %d (stored and "
                             "deflated entries are supported)",
                             c->file, name, (int)zs.comp_method);
    if (expect != UINT64_MAX && zs.size != expect)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: zip entry '%.200s' holds %llu bytes but the pickle claims %llu "
                             "for its storage",
                             c->file, name, (unsigned long long)zs.size,
                             (unsigned long long)expect);
    uint64_t most =
        zs.comp_method == ZIP_CM_STORE ? zs.comp_size : zs.comp_size * PT_MAX_DEFLATE_RATIO + 64;
    if (zs.comp_size > c->file_size || zs.size > most || zs.size > SIZE_MAX / 2)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: zip entry '%.200s' claims %llu bytes from %llu compressed in a "
                             "%zu-byte file",
                             c->file, name, (unsigned long long)zs.size,
                             (unsigned long long)zs.comp_size, c->file_size);
    unsigned char *buf = malloc(zs.size ? (size_t)zs.size : 1);
    if (!buf)
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory for zip entry '%.200s' (%llu bytes)",
                             c->op, name, (unsigned long long)zs.size);
    zip_file_t *f = zip_fopen_index(c->za, (zip_uint64_t)idx, 0);
    if (!f) {
        free(buf);
        return zip_fail(c, name, zip_strerror(c->za));
    }
    uint64_t got = 0;
    ts_status st = TS_OK;
    while (got < zs.size) {
        zip_int64_t r = zip_fread(f, buf + got, zs.size - got);
        if (r <= 0) {
            st = zip_fail(c, name, r < 0 ? zip_file_strerror(f) : "shorter than its header says");
            break;
        }
        got += (uint64_t)r;
    }
    unsigned char extra;
    if (!st && zip_fread(f, &extra, 1) != 0) st = zip_fail(c, name, "longer than its header says");
    if (zip_fclose(f) != 0 && !st) st = zip_fail(c, name, "damaged (CRC or inflate error)");
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    *n = (size_t)zs.size;
    return TS_OK;
}

static zip_int64_t locate(pt_ctx *c, const char *rest, char *full, size_t cap) {
    snprintf(full, cap, "%s%s", c->prefix, rest);
    return zip_name_locate(c->za, full, ZIP_FL_ENC_RAW);
}

/* The one "<archive>/data.pkl" at the top of the zip. */
static ts_status find_archive(pt_ctx *c, zip_int64_t *pkl) {
    zip_int64_t n = zip_get_num_entries(c->za, 0), found = -1;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(c->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        if (!name) continue;
        const char *slash = strchr(name, '/');
        if (!slash || strcmp(slash, "/data.pkl") != 0) continue;
        size_t len = (size_t)(slash - name) + 1;
        if (found >= 0)
            return tsi_error_set(TS_ERR_FORMAT, "%s: two archives ('%s' and '%.200s') in one zip",
                                 c->file, c->prefix, name);
        if (len >= sizeof c->prefix)
            return tsi_error_set(TS_ERR_FORMAT, "%s: archive name '%.200s' is too long", c->file,
                                 name);
        memcpy(c->prefix, name, len);
        c->prefix[len] = '\0';
        found = i;
    }
    if (found < 0)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: no <archive>/data.pkl in the zip: not a torch.save checkpoint",
                             c->file);
    *pkl = found;
    return TS_OK;
}

static ts_status read_byteorder(pt_ctx *c) {
    char full[300];
    zip_int64_t idx = locate(c, "byteorder", full, sizeof full);
    if (idx < 0) return TS_OK; /* older files: little-endian */
    unsigned char *b;
    size_t n;
    ts_status st = read_entry(c, idx, full, UINT64_MAX, &b, &n);
    if (st) return st;
    if (n == 6 && !memcmp(b, "little", 6))
        c->big_endian = false;
    else if (n == 3 && !memcmp(b, "big", 3))
        c->big_endian = true;
    else
        st = tsi_error_set(TS_ERR_FORMAT, "%s: byteorder is neither 'little' nor 'big'", c->file);
    free(b);
    return st;
}

/* ------------------------------------------------------------------ names */

static ts_status add_named(pt_ctx *c, size_t len, pk_tensor *t) {
    c->name_bytes += len + 1;
    if (c->n_named >= PK_MAX_TENSORS || c->name_bytes > PT_MAX_NAME_BYTES)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: more than %d tensor names or %zu bytes of names (shared "
                             "containers name one tensor many times)",
                             c->file, PK_MAX_TENSORS, PT_MAX_NAME_BYTES);
    if (c->n_named == c->cap_named) {
        int cap = c->cap_named ? c->cap_named * 2 : 16;
        pt_named *nn = realloc(c->named, (size_t)cap * sizeof *nn);
        if (!nn) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
        c->named = nn;
        c->cap_named = cap;
    }
    char *name = malloc(len + 1);
    if (!name) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
    memcpy(name, c->name, len);
    name[len] = '\0';
    c->named[c->n_named++] = (pt_named){name, t};
    return TS_OK;
}

/* Appends ".<key>" (or "<key>" at the top) to the name; false (no error) for a key that has no
 * name (a tuple, None, a float...). */
static ts_status append_key(pt_ctx *c, size_t len, const pk_value *k, size_t *out, bool *named) {
    char buf[32];
    const char *s = buf;
    size_t n;
    *named = true;
    if (k->kind == PK_STR && strlen(k->s) == k->len) {
        s = k->s;
        n = k->len;
    } else if (k->kind == PK_INT) {
        n = (size_t)snprintf(buf, sizeof buf, "%lld", (long long)k->i);
    } else if (k->kind == PK_BOOL) {
        n = (size_t)snprintf(buf, sizeof buf, "%s", k->i ? "True" : "False");
    } else {
        *named = false;
        *out = len;
        return TS_OK;
    }
    size_t dot = len ? 1 : 0;
    if (len + dot + n > PT_MAX_NAME)
        return tsi_error_set(TS_ERR_FORMAT, "%s: a tensor's name passes %d bytes ('%.100s...')",
                             c->file, PT_MAX_NAME, c->name);
    if (dot) c->name[len] = '.';
    memcpy(c->name + len + dot, s, n);
    *out = len + dot + n;
    return TS_OK;
}

static ts_status walk(pt_ctx *c, const pk_value *v, size_t len, int depth, bool bad_key) {
    if (++c->visits > PT_MAX_VISITS)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: the pickled containers reference each other more than %d times",
                             c->file, PT_MAX_VISITS);
    if (v->kind == PK_TENSOR) {
        c->name[len] = '\0';
        if (bad_key)
            return tsi_error_set(TS_ERR_UNSUPPORTED,
                                 "%s: a tensor under a dict key that is neither a str nor an int "
                                 "(under '%.200s') has no name",
                                 c->file, c->name);
        return add_named(c, len, v->t);
    }
    bool dict = v->kind == PK_DICT;
    if (!dict && v->kind != PK_LIST && v->kind != PK_TUPLE) return TS_OK;
    if (depth >= PT_MAX_DEPTH) {
        c->name[len] = '\0';
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: the pickled object nests deeper than %d containers (at "
                             "'%.200s')",
                             c->file, PT_MAX_DEPTH, c->name);
    }
    size_t step = dict ? 2 : 1;
    for (size_t i = 0; i + step - 1 < v->n; i += step) {
        size_t n = len;
        bool named = false;
        pk_value index = {.kind = PK_INT, .i = (int64_t)i};
        ts_status st = append_key(c, len, dict ? v->items[i] : &index, &n, &named);
        if (!st) st = walk(c, v->items[i + step - 1], n, depth + 1, bad_key || !named);
        if (st) return st;
    }
    return TS_OK;
}

static int cmp_named_name(const void *a, const void *b) {
    return strcmp(((const pt_named *)a)->name, ((const pt_named *)b)->name);
}

static ts_status check_unique(pt_ctx *c) {
    if (c->n_named < 2) return TS_OK;
    pt_named *sorted = malloc(sizeof *sorted * (size_t)(c->n_named ? c->n_named : 1));
    if (!sorted) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
    memcpy(sorted, c->named, sizeof *sorted * (size_t)c->n_named);
    qsort(sorted, (size_t)c->n_named, sizeof *sorted, cmp_named_name);
    ts_status st = TS_OK;
    for (int i = 1; i < c->n_named && !st; i++)
        if (!strcmp(sorted[i - 1].name, sorted[i].name))
            st = tsi_error_set(TS_ERR_FORMAT, "%s: tensor name '%.200s' appears twice", c->file,
                               sorted[i].name);
    free(sorted);
    return st;
}

/* ------------------------------------------------------------------ tensors */

static int cmp_by_storage(const void *a, const void *b) {
    const pk_tensor *x = *(pk_tensor *const *)a, *y = *(pk_tensor *const *)b;
    int k = strcmp(x->storage->s, y->storage->s);
    if (k) return k;
    return x < y ? -1 : x > y;
}

/* The view's elements, in order, into dst (contiguous); bytes swapped for a big-endian file. */
static void gather(unsigned char *dst, const unsigned char *src, const pk_tensor *t, size_t es,
                   int64_t numel, bool swap) {
    int64_t idx[TS_MAX_DIMS] = {0}, off = t->offset;
    for (int64_t k = 0; k < numel; k++) {
        memcpy(dst + (size_t)k * es, src + (size_t)off * es, es);
        if (swap)
            for (size_t i = 0; i < es / 2; i++) {
                unsigned char x = dst[k * (int64_t)es + (int64_t)i];
                dst[k * (int64_t)es + (int64_t)i] = dst[k * (int64_t)es + (int64_t)(es - 1 - i)];
                dst[k * (int64_t)es + (int64_t)(es - 1 - i)] = x;
            }
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += t->stride[d];
            if (++idx[d] < t->size[d]) break;
            off -= t->stride[d] * t->size[d];
            idx[d] = 0;
        }
    }
}

static ts_status make_tensor(pt_ctx *c, pk_tensor *t, const unsigned char *storage, ts_device dev) {
    size_t es = tsi_dtype_size(t->dtype);
    ts_shape shape = ts_shape_make((size_t)t->ndim, t->size);
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) numel *= t->size[i]; /* checked by pk_parse: < 2^62 bytes */
    uint64_t bytes = (uint64_t)numel * es;
    if (bytes > c->budget)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: tensors viewing storage '%.100s' would take more than %llu "
                             "bytes: a %zu-byte file cannot hold that much",
                             c->file, t->storage->s, (unsigned long long)bytes, c->file_size);
    c->budget -= bytes;
    ts_tensor *out = tsi_new(c->op, shape, t->dtype, dev);
    if (!out) return ts_error();
    bool host = dev.type == TS_CPU;
    unsigned char *dst = host ? tsi_kview(out).data : malloc(bytes ? (size_t)bytes : 1);
    if (!dst) {
        ts_release(out);
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
    }
    gather(dst, storage, t, es, numel, c->big_endian && es > 1);
    ts_status st = TS_OK;
    if (t->dtype == TS_BOOL) /* kernels assume a bool byte is 0 or 1 */
        for (int64_t k = 0; k < numel && !st; k++)
            if (dst[k] > 1)
                st = tsi_error_set(TS_ERR_FORMAT,
                                   "%s: bool element %lld of storage '%.100s' holds %u (not 0 "
                                   "or 1)",
                                   c->file, (long long)k, t->storage->s, dst[k]);
    if (!host) {
        if (!st && bytes)
            tsi_be(out)->copy_h2d(tsi_be(out), tsi_dev_index(out), tsi_kview(out).data, dst,
                                  (size_t)bytes);
        free(dst);
    }
    if (st) {
        ts_release(out);
        return st;
    }
    t->made = out;
    return TS_OK;
}

/* Every named tensor, storage by storage: one storage in memory at a time. */
static ts_status make_tensors(pt_ctx *c, ts_device dev) {
    pk_tensor **order = malloc(sizeof *order * (size_t)(c->n_named ? c->n_named : 1));
    if (!order) return tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
    for (int i = 0; i < c->n_named; i++) order[i] = c->named[i].t;
    qsort(order, (size_t)c->n_named, sizeof *order, cmp_by_storage);
    ts_status st = TS_OK;
    for (int i = 0; i < c->n_named && !st;) {
        int j = i;
        const pk_value *s0 = order[i]->storage;
        while (j < c->n_named && !strcmp(order[j]->storage->s, s0->s)) {
            if (order[j]->storage->nbytes != s0->nbytes)
                st = tsi_error_set(TS_ERR_FORMAT,
                                   "%s: storage '%.100s' is claimed with %llu and with %llu bytes",
                                   c->file, s0->s, (unsigned long long)s0->nbytes,
                                   (unsigned long long)order[j]->storage->nbytes);
            j++;
        }
        char full[600];
        snprintf(full, sizeof full, "data/%s", s0->s);
        char entry[900];
        zip_int64_t idx = st ? -1 : locate(c, full, entry, sizeof entry);
        if (!st && idx < 0)
            st = tsi_error_set(TS_ERR_FORMAT, "%s: storage '%.100s' has no zip entry '%.300s'",
                               c->file, s0->s, entry);
        unsigned char *buf = NULL;
        size_t n = 0;
        if (!st) st = read_entry(c, idx, entry, s0->nbytes, &buf, &n);
        for (int k = i; k < j && !st; k++)
            if (!order[k]->made) st = make_tensor(c, order[k], buf, dev);
        free(buf);
        i = j;
    }
    free(order);
    return st;
}

/* ------------------------------------------------------------------ the entry points */

static ts_status load_zip(pt_ctx *c, ts_device dev, ts_tensor_list *got) {
    zip_int64_t pkl_idx = -1;
    ts_status st = find_archive(c, &pkl_idx);
    if (!st) st = read_byteorder(c);
    unsigned char *pkl = NULL;
    size_t pkl_n = 0;
    if (!st) {
        zip_stat_t zs;
        zip_stat_init(&zs);
        if (zip_stat_index(c->za, (zip_uint64_t)pkl_idx, 0, &zs) == 0 && zs.size > PK_MAX_PICKLE)
            st =
                tsi_error_set(TS_ERR_FORMAT, "%s: data.pkl holds %llu bytes, over the limit of %zu",
                              c->file, (unsigned long long)zs.size, PK_MAX_PICKLE);
    }
    if (!st) {
        char name[300];
        snprintf(name, sizeof name, "%sdata.pkl", c->prefix);
        st = read_entry(c, pkl_idx, name, UINT64_MAX, &pkl, &pkl_n);
    }
    pk_doc doc = {0};
    if (!st) st = pk_parse(c->file, pkl, pkl_n, &doc);
    free(pkl);
    if (!st) st = walk(c, doc.root, 0, 0, false);
    if (!st) st = check_unique(c);
    if (!st) st = make_tensors(c, dev);
    if (!st && c->n_named) {
        got->names = calloc((size_t)c->n_named, sizeof *got->names);
        got->tensors = calloc((size_t)c->n_named, sizeof *got->tensors);
        got->cap = c->n_named;
        if (!got->names || !got->tensors)
            st = tsi_error_set(TS_ERR_OOM, "%s: out of memory", c->op);
    }
    for (int i = 0; i < c->n_named && !st; i++) {
        got->names[got->n] = c->named[i].name;
        c->named[i].name = NULL;
        got->tensors[got->n++] = ts_retain(c->named[i].t->made);
    }
    /* the list holds its references; the ones tsi_new gave go */
    for (int i = 0; i < doc.n_tensors; i++) ts_release(doc.tensors[i]->made);
    pk_free(&doc);
    return st;
}

static ts_status parse_named(const char *op, const char *file, const void *data, size_t size,
                             ts_device dev, ts_tensor_list *out) {
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: output list is NULL", op);
    if (!data && size) return tsi_error_set(TS_ERR_ARG, "%s: data is NULL", op);
    dev = tsi_resolve_device(dev);
    if (dev.type != TS_CPU && !tsi_check_device(op, dev)) return ts_error();
    const unsigned char *b = data;
    if (size >= 2 && b[0] == 0x80 && b[1] == 0x02)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: PyTorch's legacy format (before 1.6, or "
                             "_use_new_zipfile_serialization=False) is not supported: save it "
                             "again with torch.save",
                             file);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(size ? data : "", size, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
    if (!za) {
        ts_status st = tsi_error_set(TS_ERR_FORMAT, "%s: not a readable zip archive: %s", file,
                                     zip_error_strerror(&ze));
        zip_error_fini(&ze);
        if (src) zip_source_free(src);
        return st;
    }
    zip_error_fini(&ze);
    pt_ctx *c = calloc(1, sizeof *c);
    ts_tensor_list got = {0};
    ts_status st = TS_OK;
    if (!c) st = tsi_error_set(TS_ERR_OOM, "%s: out of memory", op);
    if (c) {
        c->op = op;
        c->file = file;
        c->file_size = size;
        c->za = za;
        c->budget = (uint64_t)size * 4 + ((uint64_t)16 << 20);
        st = load_zip(c, dev, &got);
        for (int i = 0; i < c->n_named; i++) free(c->named[i].name);
        free(c->named);
        free(c);
    }
    zip_discard(za);
    return tsi_tensor_list_take(out, &got, st);
}

ts_status ts_load_pt_parse(const void *data, size_t size, ts_device dev, ts_tensor_list *out) {
    return parse_named("load_pt_parse", "<memory>", data, size, dev, out);
}

ts_status ts_load_pt(const char *path, ts_device dev, ts_tensor_list *out) {
    const char *op = "load_pt";
    tsi_init();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open '%s': %s", op, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tsi_error_set(TS_ERR_IO, "%s: '%s' is not a regular file", op, path);
    }
    size_t size = (size_t)sb.st_size;
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
