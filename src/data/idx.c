/* idx.c — IDX files (MNIST, Fashion-MNIST), plain or gzip: the header's sizes are checked against
 * the bytes really there, and nothing bigger than those bytes is ever allocated. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data_internal.h"

#define MNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define MNIST_HINT                                                                                 \
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass "      \
    "--data-dir"

/* Where the bytes come from: plain bytes in memory, a gzip stream in memory, a plain file or a gzip
 * file. Only plain sources know their size before reading. */
typedef struct src {
    const char *name;
    const uint8_t *mem;
    size_t mem_size, mem_pos;
    int fd;
    gzFile gz;
    z_stream zs;
    bool zs_on, zs_end;
    int64_t plain_size; /* -1 for gzip */
    size_t compressed;  /* gzip input size: sizes the first buffer */
    bool truncated;     /* the gzip stream ended before its end marker */
} src;

static ts_status gz_fail(const src *s, const char *why) {
    return tsi_error_set(TS_ERR_FORMAT, "%s: bad gzip data (%s)", s->name, why ? why : "corrupt");
}

static ts_status zmem_read(src *s, uint8_t *dst, size_t n, size_t *got) {
    while (*got < n && !s->zs_end) {
        size_t want = n - *got;
        s->zs.next_out = dst + *got;
        s->zs.avail_out = want > UINT_MAX ? UINT_MAX : (uInt)want;
        uInt before = s->zs.avail_out;
        int r = inflate(&s->zs, Z_NO_FLUSH);
        *got += before - s->zs.avail_out;
        if (r == Z_STREAM_END) {
            /* gzread goes on with a following member and ignores anything else: do the same */
            if (s->zs.avail_in >= 2 && s->zs.next_in[0] == 0x1f && s->zs.next_in[1] == 0x8b)
                inflateReset(&s->zs);
            else
                s->zs_end = true;
        } else if (r == Z_BUF_ERROR) {
            s->truncated = s->zs_end = true;
        } else if (r == Z_MEM_ERROR) {
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory decompressing", s->name);
        } else if (r != Z_OK) {
            return gz_fail(s, r == Z_NEED_DICT ? "needs a preset dictionary" : s->zs.msg);
        }
    }
    return TS_OK;
}

static ts_status gzfile_read(src *s, uint8_t *dst, size_t n, size_t *got) {
    while (*got < n) {
        size_t want = n - *got;
        int r = gzread(s->gz, dst + *got, want > (1u << 30) ? (1u << 30) : (unsigned)want);
        int err;
        const char *msg = gzerror(s->gz, &err);
        if (r > 0) *got += (size_t)r;
        if (err == Z_BUF_ERROR) {
            s->truncated = true;
            return TS_OK;
        }
        if (err == Z_ERRNO)
            return tsi_error_set(TS_ERR_IO, "%s: read failed: %s", s->name, strerror(errno));
        if (err == Z_MEM_ERROR)
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory decompressing", s->name);
        if (err != Z_OK || r < 0) {
            /* zlib's message is "<fd:N>: what": keep what */
            const char *colon = msg ? strstr(msg, ": ") : NULL;
            return gz_fail(s, colon ? colon + 2 : msg);
        }
        if (r == 0) return TS_OK;
    }
    return TS_OK;
}

static ts_status fd_read(src *s, uint8_t *dst, size_t n, size_t *got) {
    while (*got < n) {
        ssize_t r = read(s->fd, dst + *got, n - *got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tsi_error_set(TS_ERR_IO, "%s: read failed: %s", s->name, strerror(errno));
        if (r == 0) break;
        *got += (size_t)r;
    }
    return TS_OK;
}

/* Up to n bytes; *got < n means the end of the data. */
static ts_status src_read(src *s, uint8_t *dst, size_t n, size_t *got) {
    *got = 0;
    if (s->zs_on) return zmem_read(s, dst, n, got);
    if (s->gz) return gzfile_read(s, dst, n, got);
    if (s->fd >= 0) return fd_read(s, dst, n, got);
    size_t k = s->mem_size - s->mem_pos < n ? s->mem_size - s->mem_pos : n;
    if (k) memcpy(dst, s->mem + s->mem_pos, k);
    s->mem_pos += k;
    *got = k;
    return TS_OK;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *type_name(unsigned t) {
    switch (t) {
    case 0x08:
        return "unsigned byte";
    case 0x09:
        return "signed byte";
    case 0x0B:
        return "short";
    case 0x0C:
        return "int";
    case 0x0D:
        return "float";
    case 0x0E:
        return "double";
    }
    return NULL;
}

/* "header says 60000 x 28 x 28 = 47040000 bytes but the file holds 1000 (...)" */
static ts_status size_mismatch(const src *s, const tsi_idx *x, size_t hdrlen, uint64_t have,
                               bool more) {
    char dims[96];
    int k = snprintf(dims, sizeof dims, "%lld", (long long)x->dims[0]);
    for (int i = 1; i < x->ndim; i++)
        k += snprintf(dims + k, sizeof dims - (size_t)k, " x %lld", (long long)x->dims[i]);
    if (x->ndim == 1) snprintf(dims + k, sizeof dims - (size_t)k, " labels");
    char holds[48];
    if (more)
        snprintf(holds, sizeof holds, "more");
    else
        snprintf(holds, sizeof holds, "%llu", (unsigned long long)have);
    return tsi_error_set(TS_ERR_FORMAT,
                         "%s: header says %s = %llu bytes but the file holds %s (%safter its "
                         "%zu-byte header%s)",
                         s->name, dims, (unsigned long long)x->payload_bytes, holds,
                         s->plain_size < 0 ? "decompressed, " : "", hdrlen,
                         s->truncated ? "; the gzip stream is truncated" : "");
}

static const char *trunc_note(const src *s) {
    return s->truncated ? "; the gzip stream is truncated" : "";
}

/* Reads and checks the header, then exactly the payload it announces. */
static ts_status idx_load(src *s, tsi_idx *x, bool borrow) {
    uint8_t hdr[16];
    size_t got;
    ts_status st = src_read(s, hdr, 4, &got);
    if (st) return st;
    if (got < 4)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: %zu byte%s%s is too short for an IDX file (it starts with a "
                             "4-byte magic number)%s",
                             s->name, got, got == 1 ? "" : "s",
                             s->plain_size < 0 ? " decompressed" : "", trunc_note(s));
    x->magic = be32(hdr);
    unsigned type = hdr[2], nd = hdr[3];
    if (hdr[0] || hdr[1] || !type_name(type) || nd == 0)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: not an IDX file: magic number 0x%08X (expected 0x00000803 for "
                             "images or 0x00000801 for labels)",
                             s->name, x->magic);
    if (type != 0x08)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: IDX element type 0x%02X (%s) is not supported: images and labels "
                             "are unsigned bytes (0x08)",
                             s->name, type, type_name(type));
    if (nd != 1 && nd != 3)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: IDX files with %u dims are not supported (images have 3, labels "
                             "1)",
                             s->name, nd);
    x->ndim = (int)nd;
    size_t hdrlen = 4 + 4 * (size_t)nd;
    st = src_read(s, hdr + 4, hdrlen - 4, &got);
    if (st) return st;
    if (got < hdrlen - 4)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: the header ends after %zu bytes (a %u-dim IDX header has %zu)%s",
                             s->name, 4 + got, nd, hdrlen, trunc_note(s));
    uint64_t payload = 1;
    bool overflow = false;
    for (unsigned i = 0; i < nd; i++) {
        x->dims[i] = be32(hdr + 4 + 4 * i);
        overflow |= __builtin_mul_overflow(payload, (uint64_t)x->dims[i], &payload);
    }
    if (overflow || payload > (uint64_t)INT64_MAX - hdrlen || payload > SIZE_MAX - hdrlen)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: header says %lld x %lld x %lld bytes, which "
                             "overflows",
                             s->name, (long long)x->dims[0], (long long)x->dims[1],
                             (long long)x->dims[2]);
    if (nd == 3 && (x->dims[1] == 0 || x->dims[2] == 0))
        return tsi_error_set(TS_ERR_FORMAT, "%s: header says images of %lld x %lld pixels", s->name,
                             (long long)x->dims[1], (long long)x->dims[2]);
    x->payload_bytes = (size_t)payload;
    size_t total = hdrlen + (size_t)payload;

    if (s->plain_size >= 0) {
        uint64_t have = (uint64_t)s->plain_size - hdrlen;
        if (have != payload) return size_mismatch(s, x, hdrlen, have, false);
        if (borrow) {
            x->payload = s->mem + hdrlen;
            return TS_OK;
        }
    }
    /* A gzip header can claim anything: grow the buffer with the bytes that really arrive. */
    size_t cap = total;
    if (s->plain_size < 0 && s->compressed < SIZE_MAX / 16 && (65536 + 8 * s->compressed) < cap)
        cap = 65536 + 8 * s->compressed;
    x->mem = malloc(cap);
    if (!x->mem) return tsi_error_set(TS_ERR_OOM, "%s: out of memory (%zu bytes)", s->name, cap);
    tsi_advise_huge_pages(x->mem, cap);
    memcpy(x->mem, hdr, hdrlen);
    size_t filled = hdrlen;
    while (filled < total) {
        if (filled == cap) {
            size_t ncap = cap > total / 2 ? total : cap * 2;
            uint8_t *m = realloc(x->mem, ncap);
            if (!m)
                return tsi_error_set(TS_ERR_OOM, "%s: out of memory (%zu bytes)", s->name, ncap);
            x->mem = m;
            tsi_advise_huge_pages(m + filled, ncap - filled);
            cap = ncap;
        }
        st = src_read(s, x->mem + filled, cap - filled, &got);
        if (st) return st;
        filled += got;
        if (filled < cap) break;
    }
    if (filled < total) return size_mismatch(s, x, hdrlen, filled - hdrlen, false);
    uint8_t extra;
    st = src_read(s, &extra, 1, &got);
    if (st) return st;
    if (got) return size_mismatch(s, x, hdrlen, 0, true);
    if (s->truncated)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: the gzip stream is truncated (its end and checksum "
                             "are missing)",
                             s->name);
    x->payload = x->mem + hdrlen;
    return TS_OK;
}

void tsi_idx_release(tsi_idx *x) {
    if (!x) return;
    free(x->mem);
    memset(x, 0, sizeof *x);
}

ts_status tsi_idx_parse(const void *buf, size_t size, const char *name, tsi_idx *out) {
    memset(out, 0, sizeof *out);
    if (!buf && size) return tsi_error_set(TS_ERR_ARG, "%s: buffer is NULL", name);
    src s = {.name = name, .mem = buf, .mem_size = size, .fd = -1, .plain_size = (int64_t)size};
    const uint8_t *b = buf;
    bool gz = size >= 2 && b[0] == 0x1f && b[1] == 0x8b;
    if (gz) {
        if (inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK)
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory starting zlib", name);
        s.zs.next_in = (Bytef *)b; /* zlib's API is not const-correct */
        s.zs.avail_in = size > UINT_MAX ? UINT_MAX : (uInt)size;
        s.zs_on = true;
        s.plain_size = -1;
        s.compressed = size;
    }
    ts_status st = idx_load(&s, out, !gz);
    if (gz) inflateEnd(&s.zs);
    if (st) tsi_idx_release(out);
    return st;
}

static ts_status io_fail(const char *path, int err) {
    return tsi_error_set(TS_ERR_IO, "%s: %s", path, strerror(err));
}

ts_status tsi_idx_read(const char *path, tsi_idx *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_fail(path, errno);
    struct stat sb;
    int err = fstat(fd, &sb) != 0 ? errno : S_ISDIR(sb.st_mode) ? EISDIR : 0;
    if (err) {
        close(fd);
        return io_fail(path, err);
    }
    uint8_t magic[2];
    ssize_t k = pread(fd, magic, 2, 0);
    src s = {.name = path, .fd = fd, .plain_size = (int64_t)sb.st_size};
    if (k == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        s.gz = gzdopen(fd, "rb");
        if (!s.gz) {
            close(fd);
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory starting zlib", path);
        }
        gzbuffer(s.gz, 1 << 18);
        s.plain_size = -1;
        s.compressed = (size_t)sb.st_size;
    }
    ts_status st = idx_load(&s, out, false);
    if (s.gz)
        gzclose(s.gz); /* closes fd too */
    else
        close(fd);
    if (st) tsi_idx_release(out);
    return st;
}

/* ------------------------------------------------------------------ the dataset */
typedef struct idx_ds {
    tsi_idx img, lab;
    int64_t n, h, w;
} idx_ds;

static int64_t idx_len(void *ctx) { return ((idx_ds *)ctx)->n; }

static ts_status idx_get(void *ctx, int64_t i, ts_sample *out) {
    idx_ds *d = ctx;
    size_t px = (size_t)(d->h * d->w);
    out->x = tsi_sample_tensor("idx dataset", TS_SHAPE(d->h, d->w, 1), TS_U8,
                               d->img.payload + (size_t)i * px);
    out->y = tsi_sample_label("idx dataset", d->lab.payload[i]);
    return out->x && out->y ? TS_OK : ts_error();
}

static void idx_raw(void *ctx, int64_t i, tsi_raw_sample *out) {
    idx_ds *d = ctx;
    out->x = d->img.payload + (size_t)i * (size_t)(d->h * d->w);
    out->xdt = TS_U8;
    out->xs = TS_SHAPE(d->h, d->w, 1);
    out->label = d->lab.payload[i];
    out->y = &out->label;
    out->ydt = TS_I64;
    out->ys = TS_SHAPE();
}

static void idx_free(void *ctx) {
    idx_ds *d = ctx;
    tsi_idx_release(&d->img);
    tsi_idx_release(&d->lab);
    free(d);
}

static ts_status expect_magic(const tsi_idx *x, const char *name, uint32_t want) {
    if (x->magic == want) return TS_OK;
    bool img = want == TSI_IDX_IMAGES;
    return tsi_error_set(TS_ERR_FORMAT,
                         "%s: expected %s file (IDX magic 0x%08X: unsigned bytes, %d dim%s) but "
                         "found magic 0x%08X%s",
                         name, img ? "an images" : "a labels", want, img ? 3 : 1, img ? "s" : "",
                         x->magic,
                         x->magic == TSI_IDX_LABELS   ? " (a labels file)"
                         : x->magic == TSI_IDX_IMAGES ? " (an images file)"
                                                      : "");
}

ts_dataset *tsi_idx_dataset_from(tsi_idx *images, tsi_idx *labels, const char *images_name,
                                 const char *labels_name, int64_t classes) {
    idx_ds *d = calloc(1, sizeof *d);
    if (d) {
        d->img = *images;
        d->lab = *labels;
    }
    memset(images, 0, sizeof *images);
    memset(labels, 0, sizeof *labels);
    if (!d) return tsi_error_set(TS_ERR_OOM, "idx dataset: out of host memory"), NULL;
    if (expect_magic(&d->img, images_name, TSI_IDX_IMAGES) ||
        expect_magic(&d->lab, labels_name, TSI_IDX_LABELS))
        goto fail;
    if (d->img.dims[0] != d->lab.dims[0]) {
        tsi_error_set(TS_ERR_FORMAT, "%s has %lld images but %s has %lld labels", images_name,
                      (long long)d->img.dims[0], labels_name, (long long)d->lab.dims[0]);
        goto fail;
    }
    d->n = d->img.dims[0];
    d->h = d->img.dims[1];
    d->w = d->img.dims[2];
    int64_t max = -1;
    for (int64_t i = 0; i < d->n; i++) {
        int64_t v = d->lab.payload[i];
        if (classes > 0 && v >= classes) {
            tsi_error_set(TS_ERR_FORMAT,
                          "%s: label %lld at index %lld is out of range for %lld "
                          "classes",
                          labels_name, (long long)v, (long long)i, (long long)classes);
            goto fail;
        }
        if (v > max) max = v;
    }
    static const ts_dataset_ops ops = {.len = idx_len, .get = idx_get, .free = idx_free};
    ts_dataset *ds = ts_dataset_new(&ops, d);
    if (ds) ds->raw = idx_raw;
    ts_dataset_set_num_classes(ds, classes > 0 ? classes : max + 1);
    return ds;
fail:
    idx_free(d);
    return NULL;
}

ts_dataset *ts_idx_dataset(const char *images_path, const char *labels_path) {
    if (!images_path || !labels_path)
        return tsi_error_set(TS_ERR_ARG, "ts_idx_dataset: %s path is NULL",
                             !images_path ? "images" : "labels"),
               NULL;
    tsi_idx img, lab;
    if (tsi_idx_read(images_path, &img)) return NULL;
    if (tsi_idx_read(labels_path, &lab)) {
        tsi_idx_release(&img);
        return NULL;
    }
    return tsi_idx_dataset_from(&img, &lab, images_path, labels_path, 0);
}

/* dir/base, or dir/base.gz when only that exists; *path names both forms when neither does. */
static bool find_file(const char *dir, const char *base, char *path, size_t cap) {
    struct stat sb;
    int k = snprintf(path, cap, "%s/%s", dir, base);
    if (k < 0 || (size_t)k + 4 > cap) {
        tsi_error_set(TS_ERR_ARG, "ts_mnist: path too long: %s/%s", dir, base);
        return false;
    }
    if (stat(path, &sb) == 0) return true;
    strcat(path, ".gz");
    if (stat(path, &sb) == 0) return true;
    path[k] = '\0';
    tsi_error_set(TS_ERR_IO, "%s[.gz]: %s; " MNIST_HINT, path, strerror(ENOENT));
    return false;
}

ts_dataset *ts_mnist(const char *dir, ts_data_split split) {
    if (!dir) dir = MNIST_DEFAULT_DIR;
    if (split != TS_SPLIT_TRAIN && split != TS_SPLIT_TEST)
        return tsi_error_set(TS_ERR_ARG, "ts_mnist: unknown split %d", (int)split), NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return tsi_error_set(TS_ERR_IO, "%s: %s; " MNIST_HINT, dir, strerror(errno)), NULL;
    const char *pre = split == TS_SPLIT_TRAIN ? "train" : "t10k";
    char base[64], ipath[PATH_MAX], lpath[PATH_MAX];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", pre);
    if (!find_file(dir, base, ipath, sizeof ipath)) return NULL;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", pre);
    if (!find_file(dir, base, lpath, sizeof lpath)) return NULL;
    tsi_idx img, lab;
    if (tsi_idx_read(ipath, &img)) return NULL;
    if (tsi_idx_read(lpath, &lab)) {
        tsi_idx_release(&img);
        return NULL;
    }
    return tsi_idx_dataset_from(&img, &lab, ipath, lpath, 10);
}
