/* npy.c — NumPy .npy files (format versions 1.0, 2.0 and 3.0): a strict hand-written reader of the
 * header's Python dict literal for untrusted files, and a writer whose bytes equal np.save's. */
#define _POSIX_C_SOURCE 200809L
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
#include "io/atomic_file.h"

/* NumPy's format.py: "\x93NUMPY", major, minor, then the header length (uint16 in 1.0, uint32 in
 * 2.0 and 3.0), the header, the data; magic + length + header is a multiple of ARRAY_ALIGN. */
#define NPY_MAGIC      "\x93NUMPY"
#define NPY_MAGIC_LEN  6
#define NPY_ALIGN      64
#define NPY_GROWTH_PAD 21 /* np.save's GROWTH_AXIS_MAX_DIGITS: room to grow shape[0] in place */
#define NPY_CHUNK      ((size_t)4 << 20) /* host buffers for byte swaps and device reads */
#define NPY_MAX_DESCR  32                /* longer descr strings are quoted cut in messages */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_NATIVE '>'
#else
#define NPY_NATIVE '<'
#endif

/* The NumPy dtypes Tessera holds, by typestr kind and item size. */
typedef struct npy_dtype {
    char kind;
    unsigned size;
    ts_dtype dt;
} npy_dtype;
static const npy_dtype npy_dtypes[] = {
    {'f', 4, TS_F32}, {'f', 8, TS_F64}, {'f', 2, TS_F16},  {'i', 8, TS_I64},
    {'i', 4, TS_I32}, {'u', 1, TS_U8},  {'b', 1, TS_BOOL}, {'i', 1, TS_I8},
    {'i', 2, TS_I16}, {'u', 2, TS_U16}, {'u', 4, TS_U32},  {'u', 8, TS_U64},
};
#define NPY_SUPPORTED                                                                              \
    "float32 '<f4', float64 '<f8', float16 '<f2', int64 '<i8', int32 '<i4', int16 '<i2', int8 "    \
    "'|i1', uint64 '<u8', uint32 '<u4', uint16 '<u2', uint8 '|u1' and bool '|b1', in either byte " \
    "order"

/* What the header says, and where the parser is in it. */
typedef struct npy_hdr {
    const char *file; /* for messages: the path or "<memory>" */
    const unsigned char *text;
    size_t n;    /* header bytes */
    size_t base; /* file offset of text[0]: messages give offsets in the file */
    size_t at;
    int major;
    /* results */
    char descr[NPY_MAX_DESCR + 1]; /* as written (cut), for messages */
    const npy_dtype *dtype;        /* NULL: not one Tessera holds */
    bool descr_known;              /* a NumPy dtype, held or not */
    bool swap;                     /* the data's byte order is not the host's */
    bool fortran;
    int64_t ndim; /* as in the file: may pass TS_MAX_DIMS (refused after the other checks) */
    int64_t dims[TS_MAX_DIMS];
    uint64_t nz_product; /* product of the nonzero dims (NumPy's overflow rule) */
    bool overflow;       /* ... passes INT64_MAX */
    bool has_zero;
} npy_hdr;

/* "<file>: <what>" as TS_ERR_FORMAT (or another code), like the safetensors reader's messages. */
static ts_status __attribute__((format(printf, 3, 4)))
npy_fail(ts_status code, const npy_hdr *h, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tsi_error_set(code, "%s: %s", h->file, what);
}

/* ------------------------------------------------------------------ header lexing */
static bool at_end(const npy_hdr *h) { return h->at >= h->n; }
static int peek(const npy_hdr *h) { return at_end(h) ? -1 : h->text[h->at]; }
static size_t offset(const npy_hdr *h) { return h->base + h->at; }
static bool is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident(int c) {
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static void skip_space(npy_hdr *h) {
    while (!at_end(h) && is_space(h->text[h->at])) h->at++;
}

/* What stands at the cursor, for "expected X, found Y". */
static const char *found(const npy_hdr *h) {
    char *buf = tsi_fmt_buf();
    if (at_end(h))
        snprintf(buf, TSI_FMT_BUF_LEN, "the end of the header");
    else
        snprintf(buf, TSI_FMT_BUF_LEN, "'%c' at byte %zu", h->text[h->at], offset(h));
    return buf;
}

/* The whole header is checked first, so the grammar below sees printable ASCII and white space
 * only: NumPy decodes 1.0 and 2.0 headers as latin-1 and 3.0 as UTF-8, but a header of the dtypes
 * Tessera reads has no other byte. */
static ts_status check_ascii(const npy_hdr *h) {
    for (size_t i = 0; i < h->n; i++) {
        unsigned c = h->text[i];
        if (c >= 0x80)
            return npy_fail(TS_ERR_FORMAT, h, "header byte 0x%02x at byte %zu is not ASCII", c,
                            h->base + i);
        if ((c < 0x20 && !is_space((int)c)) || c == 0x7f)
            return npy_fail(TS_ERR_FORMAT, h, "header holds control byte 0x%02x at byte %zu", c,
                            h->base + i);
    }
    return TS_OK;
}

/* A Python string literal without prefix or escapes: '...' or "..." on one line. */
static ts_status parse_string(npy_hdr *h, const char *what, const unsigned char **s, size_t *len) {
    int q = peek(h);
    if (q != '\'' && q != '"')
        return npy_fail(TS_ERR_FORMAT, h, "expected %s as a quoted string, found %s", what,
                        found(h));
    size_t start = ++h->at;
    while (!at_end(h) && h->text[h->at] != q) {
        int c = h->text[h->at];
        if (c == '\\')
            return npy_fail(TS_ERR_FORMAT, h,
                            "%s holds a backslash at byte %zu (escape sequences are not "
                            "supported)",
                            what, offset(h));
        if (c == '\n' || c == '\r') break;
        h->at++;
    }
    if (peek(h) != q)
        return npy_fail(TS_ERR_FORMAT, h, "%s: the string opened at byte %zu is not closed", what,
                        h->base + start - 1);
    *s = h->text + start;
    *len = h->at - start;
    h->at++;
    return TS_OK;
}

static bool word_is(const unsigned char *s, size_t n, const char *w) {
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

/* ------------------------------------------------------------------ the three values */
/* A typestr: optional byte order, kind, item size (NumPy's dtype.str). Tessera's dtypes are
 * recognised; other NumPy dtypes are told apart from garbage so the message can say which it is. */
static void classify_descr(npy_hdr *h, const unsigned char *s, size_t n) {
    snprintf(h->descr, sizeof h->descr, "%.*s", (int)(n < NPY_MAX_DESCR ? n : NPY_MAX_DESCR),
             (const char *)s);
    size_t i = 0;
    char order = '=';
    if (n > 0 && strchr("<>=|", s[0])) order = (char)s[i++];
    if (i >= n) return;
    char kind = (char)s[i++];
    /* the item size: decimal digits, no sign, no leading zero */
    uint64_t size = 0;
    size_t digits = 0;
    while (i < n && is_digit(s[i]) && digits < 6)
        size = size * 10 + (uint64_t)(s[i++] - '0'), digits++;
    bool leading_zero = digits > 1 && s[i - digits] == '0';
    if (leading_zero) return;
    if (i < n && s[i] == '[' && (kind == 'M' || kind == 'm') && size == 8 && s[n - 1] == ']') {
        h->descr_known = true; /* datetime64 / timedelta64 with a unit: '<M8[ns]' */
        return;
    }
    if (i != n) return;
    for (size_t k = 0; k < sizeof npy_dtypes / sizeof npy_dtypes[0]; k++)
        if (npy_dtypes[k].kind == kind && npy_dtypes[k].size == size) {
            h->dtype = &npy_dtypes[k];
            h->descr_known = true;
            /* '|' (not applicable) and '=' are the host's order, as np.dtype reads them */
            h->swap = size > 1 && (order == '<' || order == '>') && order != NPY_NATIVE;
            return;
        }
    /* other NumPy dtypes: the sizes np.dtype accepts for each kind */
    switch (kind) {
    case 'i':
    case 'u':
        h->descr_known = size == 1 || size == 2 || size == 4 || size == 8;
        break;
    case 'f':
        h->descr_known = size == 16; /* long double */
        break;
    case 'c':
        h->descr_known = size == 8 || size == 16 || size == 32;
        break;
    case 'O':
        h->descr_known = digits == 0 || size == 8;
        break;
    case 'S':
    case 'U':
    case 'V':
    case 'a':
        h->descr_known = true; /* bytes, str, void of any size: ml_dtypes' bfloat16 is '<V2' */
        break;
    default:
        break;
    }
}

static ts_status parse_descr(npy_hdr *h) {
    if (peek(h) == '[')
        return npy_fail(TS_ERR_UNSUPPORTED, h,
                        "'descr' at byte %zu is a structured dtype (a list of fields); Tessera "
                        "reads %s",
                        offset(h), NPY_SUPPORTED);
    const unsigned char *s;
    size_t n;
    ts_status st = parse_string(h, "the value of 'descr'", &s, &n);
    if (!st) classify_descr(h, s, n);
    return st;
}

static ts_status parse_bool(npy_hdr *h) {
    size_t start = h->at;
    while (!at_end(h) && is_ident(h->text[h->at])) h->at++;
    const unsigned char *w = h->text + start;
    size_t n = h->at - start;
    if (word_is(w, n, "True") || word_is(w, n, "False")) {
        h->fortran = n == 4;
        return TS_OK;
    }
    h->at = start;
    return npy_fail(TS_ERR_FORMAT, h,
                    "the value of 'fortran_order' is not True or False (found %s)", found(h));
}

/* One dim: a Python int literal, optionally signed; Python 2 writers of 1.0 and 2.0 files add
 * an 'L' (NumPy strips it too). Negative values and values past INT64_MAX are refused here. */
static ts_status parse_dim(npy_hdr *h) {
    int64_t k = h->ndim;
    int sign = peek(h);
    if (sign == '-' || sign == '+') {
        h->at++;
        skip_space(h);
    }
    size_t start = h->at;
    uint64_t v = 0;
    bool big = false;
    while (!at_end(h) && is_digit(h->text[h->at])) {
        unsigned d = h->text[h->at++] - '0';
        if (v > ((uint64_t)INT64_MAX - d) / 10) big = true;
        if (!big) v = v * 10 + d;
    }
    size_t len = h->at - start;
    if (len == 0)
        return npy_fail(TS_ERR_FORMAT, h, "'shape' element %lld is not an integer (found %s)",
                        (long long)k, found(h));
    if (len > 1 && h->text[start] == '0') {
        h->at = start;
        return npy_fail(TS_ERR_FORMAT, h,
                        "'shape' element %lld at byte %zu has a leading zero (not a Python "
                        "integer)",
                        (long long)k, offset(h));
    }
    if (h->major < 3 && (peek(h) == 'L' || peek(h) == 'l')) h->at++;
    if (!at_end(h) && (is_ident(h->text[h->at]) || h->text[h->at] == '.'))
        return npy_fail(TS_ERR_FORMAT, h, "'shape' element %lld is not an integer (found %s)",
                        (long long)k, found(h));
    const char *digits = (const char *)h->text + start;
    int shown = len < 40 ? (int)len : 40;
    if (big)
        return npy_fail(TS_ERR_FORMAT, h, "'shape' element %lld (%.*s%s) is larger than 2^63 - 1",
                        (long long)k, shown, digits, len > 40 ? "..." : "");
    if (sign == '-' && v != 0)
        return npy_fail(TS_ERR_FORMAT, h, "'shape' element %lld is negative (-%.*s)", (long long)k,
                        shown, digits);
    if (k < TS_MAX_DIMS) h->dims[k] = (int64_t)v;
    h->ndim++;
    if (v == 0)
        h->has_zero = true;
    else if (__builtin_mul_overflow(h->nz_product, v, &h->nz_product) ||
             h->nz_product > (uint64_t)INT64_MAX)
        h->overflow = true;
    return TS_OK;
}

/* A tuple of ints: (), (3,), (2, 3) or (2, 3,); (3) is an int in Python, not a shape. */
static ts_status parse_shape(npy_hdr *h) {
    if (peek(h) != '(')
        return npy_fail(TS_ERR_FORMAT, h, "the value of 'shape' is not a tuple (found %s)",
                        found(h));
    h->at++;
    h->ndim = 0;
    h->nz_product = 1;
    skip_space(h);
    bool comma = false;
    while (peek(h) != ')') {
        ts_status st = parse_dim(h);
        if (st) return st;
        skip_space(h);
        comma = peek(h) == ',';
        if (comma) {
            h->at++;
            skip_space(h);
        } else if (peek(h) != ')') {
            return npy_fail(TS_ERR_FORMAT, h, "expected ',' or ')' in 'shape', found %s", found(h));
        }
    }
    if (h->ndim == 1 && !comma)
        return npy_fail(TS_ERR_FORMAT, h,
                        "'shape' (%lld) is an integer, not a tuple: a 1-dim shape is written "
                        "(%lld,)",
                        (long long)h->dims[0], (long long)h->dims[0]);
    h->at++;
    return TS_OK;
}

/* Outside the braces Python's tokenizer sees lines, and NumPy's reader refuses a '{' indented
 * after a line break (IndentationError, in every version; trailing white space after a break only
 * in 3.0, whose headers skip the Python 2 clean-up, so that one is let through). Returns the index
 * of the first indenting byte after the last line break in [from, to), or 0. */
static size_t indent_after_break(const npy_hdr *h, size_t from, size_t to) {
    size_t brk = 0;
    bool any = false;
    for (size_t i = from; i < to; i++)
        if (h->text[i] == '\n' || h->text[i] == '\r') {
            brk = i + 1;
            any = true;
        }
    return any && brk < to ? brk : 0;
}

/* {'descr': ..., 'fortran_order': ..., 'shape': ...}: the three keys once each, in any order,
 * quoted either way, white space anywhere between tokens, an optional trailing comma, and nothing
 * but white space (np.save's padding and newline) after the closing brace. */
static ts_status parse_header(npy_hdr *h) {
    ts_status st = check_ascii(h);
    if (st) return st;
    skip_space(h);
    size_t indent = indent_after_break(h, 0, h->at);
    if (indent && peek(h) == '{')
        return npy_fail(TS_ERR_FORMAT, h,
                        "the header's '{' is indented after a line break (byte %zu): Python "
                        "refuses it",
                        h->base + indent);
    if (peek(h) != '{')
        return npy_fail(TS_ERR_FORMAT, h, "the header is not a Python dict: expected '{', found %s",
                        found(h));
    h->at++;
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    bool seen[3] = {false, false, false};
    for (;;) {
        skip_space(h);
        if (peek(h) == '}') break;
        size_t key_at = offset(h);
        const unsigned char *key;
        size_t len;
        st = parse_string(h, "a key", &key, &len);
        if (st) return st;
        int k = 0;
        while (k < 3 && !word_is(key, len, keys[k])) k++;
        if (k == 3)
            return npy_fail(TS_ERR_FORMAT, h,
                            "unexpected key '%.*s' at byte %zu (a .npy header holds 'descr', "
                            "'fortran_order' and 'shape')",
                            (int)(len < 40 ? len : 40), (const char *)key, key_at);
        if (seen[k])
            return npy_fail(TS_ERR_FORMAT, h, "key '%s' appears twice (byte %zu)", keys[k], key_at);
        seen[k] = true;
        skip_space(h);
        if (peek(h) != ':')
            return npy_fail(TS_ERR_FORMAT, h, "expected ':' after '%s', found %s", keys[k],
                            found(h));
        h->at++;
        skip_space(h);
        st = k == 0 ? parse_descr(h) : k == 1 ? parse_bool(h) : parse_shape(h);
        if (st) return st;
        skip_space(h);
        if (peek(h) == ',') {
            h->at++;
        } else if (peek(h) != '}') {
            return npy_fail(TS_ERR_FORMAT, h,
                            "expected ',' or '}' after the value of '%s', found %s", keys[k],
                            found(h));
        }
    }
    h->at++;
    skip_space(h);
    if (!at_end(h))
        return npy_fail(TS_ERR_FORMAT, h, "unexpected %s after the header's closing '}'", found(h));

    for (int k = 0; k < 3; k++)
        if (!seen[k]) return npy_fail(TS_ERR_FORMAT, h, "the header has no '%s' key", keys[k]);
    return TS_OK;
}

/* "(2, 3)" as NumPy prints a shape; "(N dims)" past TS_MAX_DIMS, whose dims are not kept. */
static const char *shape_str(const npy_hdr *h) {
    char *buf = tsi_fmt_buf();
    if (h->ndim > TS_MAX_DIMS) {
        snprintf(buf, TSI_FMT_BUF_LEN, "(%lld dims)", (long long)h->ndim);
        return buf;
    }
    size_t k = (size_t)snprintf(buf, TSI_FMT_BUF_LEN, "(");
    for (int i = 0; i < h->ndim && k < TSI_FMT_BUF_LEN; i++)
        k += (size_t)snprintf(buf + k, TSI_FMT_BUF_LEN - k, "%s%lld", i ? ", " : "",
                              (long long)h->dims[i]);
    if (k < TSI_FMT_BUF_LEN) snprintf(buf + k, TSI_FMT_BUF_LEN - k, h->ndim == 1 ? ",)" : ")");
    return buf;
}

/* ------------------------------------------------------------------ reading */
/* Magic, version and header length; *hdr_at and *hdr_len locate the header in the buffer. */
static ts_status parse_preamble(npy_hdr *h, const unsigned char *b, size_t size, size_t *hdr_at,
                                size_t *hdr_len) {
    size_t cmp = size < NPY_MAGIC_LEN ? size : NPY_MAGIC_LEN;
    if (memcmp(b, NPY_MAGIC, cmp) != 0)
        return npy_fail(TS_ERR_FORMAT, h, "not a .npy file: it does not start with \"\\x93NUMPY\"");
    if (size < NPY_MAGIC_LEN + 2)
        return npy_fail(TS_ERR_FORMAT, h,
                        "%zu bytes is too short for the magic string and format version", size);
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return npy_fail(TS_ERR_FORMAT, h,
                        "format version %u.%u is not supported (1.0, 2.0 and "
                        "3.0 are)",
                        major, minor);
    h->major = (int)major;
    size_t len_bytes = major == 1 ? 2 : 4;
    size_t pre = NPY_MAGIC_LEN + 2 + len_bytes;
    if (size < pre)
        return npy_fail(TS_ERR_FORMAT, h,
                        "%zu bytes is too short for the %zu-byte preamble of a version %u.0 file",
                        size, pre, major);
    uint64_t len = 0;
    for (size_t i = len_bytes; i-- > 0;) len = len << 8 | b[8 + i];
    if (len > size - pre)
        return npy_fail(TS_ERR_FORMAT, h, "header length %llu is more than the %zu bytes after it",
                        (unsigned long long)len, size - pre);
    *hdr_at = pre;
    *hdr_len = (size_t)len;
    return TS_OK;
}

/* Everything about the file that does not need the tensor: the header, then the data's size and
 * (for bool) its bytes. Errors that mean "malformed" win over "not supported". */
static ts_status validate(npy_hdr *h, const unsigned char *b, size_t size, size_t *data_at,
                          size_t *nbytes) {
    size_t hdr_at = 0, hdr_len = 0;
    ts_status st = parse_preamble(h, b, size, &hdr_at, &hdr_len);
    if (st) return st;
    h->text = b + hdr_at;
    h->n = hdr_len;
    h->base = hdr_at;
    st = parse_header(h);
    if (st) return st;
    if (!h->descr_known)
        return npy_fail(TS_ERR_FORMAT, h,
                        "unknown descr '%s' (np.save writes a NumPy typestr such as '<f4')",
                        h->descr);
    if (h->overflow)
        return npy_fail(TS_ERR_FORMAT, h, "shape %s holds more than 2^63 - 1 elements",
                        shape_str(h));
    if (!h->dtype)
        return npy_fail(TS_ERR_UNSUPPORTED, h,
                        "dtype '%s' is not supported by Tessera (it reads %s)", h->descr,
                        NPY_SUPPORTED);
    /* NumPy's rule ("array is too big"): the nonzero dims times the item size fit in an intp,
     * also when another dim is 0 */
    uint64_t nz_bytes;
    if (__builtin_mul_overflow(h->nz_product, (uint64_t)h->dtype->size, &nz_bytes) ||
        nz_bytes > (uint64_t)INT64_MAX || nz_bytes > SIZE_MAX)
        return npy_fail(
            TS_ERR_FORMAT, h, "shape %s of '%s' needs more than %llu bytes", shape_str(h), h->descr,
            (unsigned long long)((uint64_t)INT64_MAX < SIZE_MAX ? (uint64_t)INT64_MAX : SIZE_MAX));
    uint64_t need = h->has_zero ? 0 : nz_bytes;
    size_t at = hdr_at + hdr_len, have = size - at;
    if (have != need)
        return npy_fail(TS_ERR_FORMAT, h,
                        "the data holds %zu bytes but shape %s of '%s' needs %llu (%s)", have,
                        shape_str(h), h->descr, (unsigned long long)need,
                        have < need ? "the file is truncated" : "bytes follow the data");
    if (h->dtype->dt == TS_BOOL) /* kernels assume a bool byte is 0 or 1 */
        for (size_t i = 0; i < have; i++)
            if (b[at + i] > 1)
                return npy_fail(TS_ERR_FORMAT, h, "bool element %zu holds %u (not 0 or 1)", i,
                                b[at + i]);
    if (h->ndim > TS_MAX_DIMS)
        return npy_fail(TS_ERR_SHAPE, h, "%lld dims; Tessera tensors have at most %d",
                        (long long)h->ndim, TS_MAX_DIMS);
    *data_at = at;
    *nbytes = (size_t)need;
    return TS_OK;
}

static void swap_bytes(unsigned char *p, size_t n, unsigned size) {
    for (size_t i = 0; i + size <= n; i += size)
        for (unsigned a = 0, z = size - 1; a < z; a++, z--) {
            unsigned char c = p[i + a];
            p[i + a] = p[i + z];
            p[i + z] = c;
        }
}

/* The data into t's storage; byte-swapped through a bounded host buffer when the file's order is
 * not the host's (a device cannot swap what it is handed). */
static ts_status fill(const char *op, ts_tensor *t, const npy_hdr *h, const unsigned char *src,
                      size_t n) {
    const ts_backend *be = tsi_be(t);
    char *dst = tsi_kview(t).data;
    if (!h->swap) {
        if (n) be->copy_h2d(be, tsi_dev_index(t), dst, src, n);
        return TS_OK;
    }
    size_t cap = n < NPY_CHUNK ? n : NPY_CHUNK;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf)
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory for a %zu-byte byte-swap buffer", op,
                             cap);
    for (size_t off = 0; off < n; off += cap) {
        size_t k = n - off < cap ? n - off : cap;
        memcpy(buf, src + off, k);
        swap_bytes(buf, k, h->dtype->size);
        be->copy_h2d(be, tsi_dev_index(t), dst + off, buf, k);
    }
    free(buf);
    return TS_OK;
}

static ts_tensor *parse_named(const char *op, const char *file, const void *data, size_t size,
                              ts_device dev) {
    tsi_init();
    if (!data && size) return tsi_error_set(TS_ERR_ARG, "%s: data is NULL", op), NULL;
    dev = tsi_resolve_device(dev);
    if (dev.type != TS_CPU && !tsi_check_device(op, dev)) return NULL;
    npy_hdr h = {.file = file};
    size_t at = 0, nbytes = 0;
    const unsigned char *b = data ? data : (const unsigned char *)"";
    if (validate(&h, b, size, &at, &nbytes)) return NULL;
    ts_shape s = ts_shape_make((size_t)h.ndim, h.dims);
    ts_tensor *t = tsi_new(op, s, h.dtype->dt, dev);
    if (!t) return NULL;
    if (h.fortran && h.ndim > 1 && nbytes > 0) {
        /* the bytes land as they are, seen through column-major strides; the copy below makes
         * the tensor row-major (an empty array has nothing to reorder, and its other dims may be
         * as large as int64 allows: no copy kernel is asked to walk them) */
        int64_t st = 1;
        for (int i = 0; i < s.ndim; i++) {
            t->strides[i] = st;
            st *= s.dims[i];
        }
    }
    if (fill(op, t, &h, b + at, nbytes)) {
        ts_release(t);
        return NULL;
    }
    ts_tensor *c = tsi_contiguous(op, t);
    ts_release(t);
    return tsi_own(c);
}

ts_tensor *ts_npy_parse(const void *data, size_t size, ts_device dev) {
    return parse_named("npy_parse", "<memory>", data, size, dev);
}

ts_tensor *ts_npy_load(const char *path, ts_device dev) {
    const char *op = "npy_load";
    tsi_init();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op), NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open '%s': %s", op, path, strerror(errno)),
               NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tsi_error_set(TS_ERR_IO, "%s: '%s' is not a regular file", op, path);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)sb.st_size;
    /* mapped, not read: a large array is not held twice in host memory */
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return tsi_error_set(TS_ERR_IO, "%s: cannot map '%s': %s", op, path, strerror(err)), NULL;
    ts_tensor *t = parse_named(op, path, map, size, dev);
    if (map) munmap(map, size);
    return t;
}

/* ------------------------------------------------------------------ writing */
/* np.save's header for a C-order array: the dict with sorted keys and repr'd values, spaces
 * for shape[0] to grow in place, then spaces and '\n' up to a multiple of 64 bytes counted from
 * the start of the file. Returns the preamble + header length written to out. */
static size_t build_header(unsigned char *out, size_t cap, const ts_tensor *t) {
    char dict[512];
    const npy_dtype *d = NULL;
    for (size_t k = 0; k < sizeof npy_dtypes / sizeof npy_dtypes[0]; k++)
        if (npy_dtypes[k].dt == t->dtype) d = &npy_dtypes[k];
    size_t n = (size_t)snprintf(dict, sizeof dict,
                                "{'descr': '%c%c%u', 'fortran_order': False, "
                                "'shape': (",
                                d->size == 1 ? '|' : NPY_NATIVE, d->kind, d->size);
    for (int i = 0; i < t->shape.ndim; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%s%lld", i ? ", " : "",
                              (long long)t->shape.dims[i]);
    n += (size_t)snprintf(dict + n, sizeof dict - n, "%s), }", t->shape.ndim == 1 ? "," : "");
    if (t->shape.ndim > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%lld", (long long)t->shape.dims[0]);
        for (int i = digits; i < NPY_GROWTH_PAD; i++) dict[n++] = ' ';
    }
    size_t hlen = n + 1; /* with the '\n' */
    /* version 1.0 unless its 16-bit length cannot hold the header (never for 8 dims, but the
     * rule is NumPy's) */
    int major = 1;
    size_t len_bytes = 2;
    size_t pad = NPY_ALIGN - (NPY_MAGIC_LEN + 2 + len_bytes + hlen) % NPY_ALIGN;
    if (hlen + pad > 65535) {
        major = 2;
        len_bytes = 4;
        pad = NPY_ALIGN - (NPY_MAGIC_LEN + 2 + len_bytes + hlen) % NPY_ALIGN;
    }
    size_t total = NPY_MAGIC_LEN + 2 + len_bytes + hlen + pad;
    if (total > cap) return 0;
    memcpy(out, NPY_MAGIC, NPY_MAGIC_LEN);
    out[6] = (unsigned char)major;
    out[7] = 0;
    for (size_t i = 0; i < len_bytes; i++) out[8 + i] = (unsigned char)((hlen + pad) >> (8 * i));
    size_t k = NPY_MAGIC_LEN + 2 + len_bytes;
    memcpy(out + k, dict, n);
    memset(out + k + n, ' ', pad);
    out[total - 1] = '\n';
    return total;
}

ts_status ts_npy_save(const char *path, ts_tensor *t) {
    const char *op = "npy_save";
    tsi_init();
    if (!tsi_check_input(op, t, "tensor")) return ts_error();
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", op);
    if (t->dtype == TS_BF16)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: '%s': NumPy has no bfloat16 dtype; convert first, e.g. "
                             "ts_npy_save(path, ts_to_dtype(t, TS_F32))",
                             op, path);
    unsigned char hdr[640];
    size_t hn = build_header(hdr, sizeof hdr, t);
    if (!hn) return tsi_error_set(TS_ERR_STATE, "%s: header does not fit its buffer", op);
    size_t n = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    if (!tsi_meta_refuse(op, t)) return ts_error(); /* no bytes to write */
    ts_tensor *c = n ? tsi_contiguous(op, t) : ts_retain(t);
    if (!c) return ts_error();
    tsi_afile f;
    ts_status st = tsi_afile_open(&f, op, path);
    if (!st) st = tsi_afile_write(&f, hdr, hn);
    char *scratch = NULL;
    const char *src = n ? tsi_kview(c).data : NULL;
    if (!st && n && tsi_device(c).type == TS_CPU) {
        st = tsi_afile_write(&f, src, n);
    } else if (!st && n) {
        /* device memory goes through a bounded host buffer */
        size_t chunk = n < NPY_CHUNK ? n : NPY_CHUNK;
        if (!(scratch = malloc(chunk)))
            st = tsi_error_set(TS_ERR_OOM, "%s: out of memory for a %zu-byte staging buffer", op,
                               chunk);
        for (size_t off = 0; off < n && !st; off += chunk) {
            size_t k = n - off < chunk ? n - off : chunk;
            tsi_be(c)->copy_d2h(tsi_be(c), tsi_dev_index(c), scratch, src + off, k);
            st = tsi_afile_write(&f, scratch, k);
        }
    }
    free(scratch);
    ts_release(c);
    if (st == TS_OK) return tsi_afile_commit(&f);
    if (f.tmp) tsi_afile_abort(&f);
    return st;
}
