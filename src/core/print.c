/* print.c — tensors as text, character for character in PyTorch 1.13's repr format. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/strbuf.h"

/* The rules mirror torch/_tensor_str.py (_Formatter, _vector_str, _tensor_str_with_formatter,
 * get_summarized_data, _str_intern, _add_suffixes); comments name the Python they follow. */

static atomic_int opt_precision = 4;
static atomic_int opt_threshold = 1000;
static atomic_int opt_edgeitems = 3;
static atomic_int opt_linewidth = 80;

/* Bounds the text of one number: fixed notation only ever sees |v| <= 1e8 (larger values force
 * scientific notation), so sign + 9 digits + point + precision fits with room to spare. */
#define MAX_PRECISION 100
#define NUM_BUF       160

typedef struct print_opts {
    int precision, threshold, edgeitems, linewidth;
} print_opts;

ts_status ts_print_options(int precision, int threshold, int edgeitems, int linewidth) {
    if (precision < 0 || precision > MAX_PRECISION || threshold < 0 || edgeitems < 1 ||
        linewidth < 1)
        return tsi_error_set(TS_ERR_ARG,
                             "print_options: expected 0 <= precision <= %d, threshold >= 0, "
                             "edgeitems >= 1 and linewidth >= 1, got %d, %d, %d, %d",
                             MAX_PRECISION, precision, threshold, edgeitems, linewidth);
    atomic_store(&opt_precision, precision);
    atomic_store(&opt_threshold, threshold);
    atomic_store(&opt_edgeitems, edgeitems);
    atomic_store(&opt_linewidth, linewidth);
    return TS_OK;
}

/* ------------------------------------------------------------------ numbers */
/* Python's '{:.Nf}' / '{:.Ne}': like printf except that every NaN prints as "nan" (printf writes
 * "-nan" for a negative one). */
static int fmt_float(char *buf, double v, char conv, int precision) {
    if (isnan(v)) return snprintf(buf, NUM_BUF, "nan");
    if (isinf(v)) return snprintf(buf, NUM_BUF, v < 0 ? "-inf" : "inf");
    return snprintf(buf, NUM_BUF, conv == 'e' ? "%.*e" : "%.*f", precision, v);
}

/* _Formatter: one layout (int_mode / sci_mode / fixed) and one width for every element shown. */
typedef struct formatter {
    bool floating, int_mode, sci_mode, is_bool, is_unsigned; /* unsigned: uint64's bits in iv */
    int max_width, precision;
} formatter;

/* an integer element: uint64 values past 2^63 arrive as int64 bits */
static int format_int(char *buf, size_t len, const formatter *fm, int64_t v) {
    return fm->is_unsigned ? snprintf(buf, len, "%llu", (unsigned long long)(uint64_t)v)
                           : snprintf(buf, len, "%lld", (long long)v);
}

static formatter formatter_make(const double *f, const int64_t *iv, int64_t n, ts_dtype dt,
                                int precision) {
    formatter fm = {.floating = f != NULL,
                    .int_mode = true,
                    .is_bool = dt == TS_BOOL,
                    .is_unsigned = dt == TS_U64,
                    .max_width = 1,
                    .precision = precision};
    char buf[NUM_BUF];
    if (!fm.floating) {
        for (int64_t i = 0; i < n; i++) {
            int len = fm.is_bool ? (iv[i] ? 4 : 5) : format_int(buf, sizeof buf, &fm, iv[i]);
            if (len > fm.max_width) fm.max_width = len;
        }
        return fm;
    }
    double lo = INFINITY, hi = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = f[i];
        if (!isfinite(v) || v == 0.0) continue;
        double a = fabs(v);
        if (a < lo) lo = a;
        if (a > hi) hi = a;
        if (v != ceil(v)) fm.int_mode = false;
        count++;
    }
    if (count == 0) return fm; /* torch returns early here: int_mode, width 1 */
    if (fm.int_mode) {
        fm.sci_mode = hi / lo > 1000.0 || hi > 1.0e8;
    } else {
        fm.sci_mode = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = f[i];
        if (!isfinite(v) || v == 0.0) continue;
        int len;
        if (fm.sci_mode)
            len = fmt_float(buf, v, 'e', precision);
        else if (fm.int_mode)
            len = fmt_float(buf, v, 'f', 0) + 1; /* room for the trailing "." */
        else
            len = fmt_float(buf, v, 'f', precision);
        if (len > fm.max_width) fm.max_width = len;
    }
    return fm;
}

/* _Formatter.format's text without the padding; its length */
static int value_text(char *buf, size_t cap, const formatter *fm, const double *f,
                      const int64_t *iv, int64_t i) {
    int len;
    if (!fm->floating) {
        if (fm->is_bool)
            len = snprintf(buf, cap, "%s", iv[i] ? "True" : "False");
        else
            len = format_int(buf, cap, fm, iv[i]);
    } else if (fm->sci_mode) {
        len = fmt_float(buf, f[i], 'e', fm->precision);
    } else if (fm->int_mode) {
        len = fmt_float(buf, f[i], 'f', 0);
        if (isfinite(f[i])) {
            buf[len++] = '.';
            buf[len] = '\0';
        }
    } else {
        len = fmt_float(buf, f[i], 'f', fm->precision);
    }
    return len;
}

/* _Formatter.format: the element's text, right-aligned to max_width. */
static void format_value(tsi_strbuf *b, const formatter *fm, const double *f, const int64_t *iv,
                         int64_t i) {
    char buf[NUM_BUF + 2];
    int len = value_text(buf, sizeof buf, fm, f, iv, i);
    if (len < fm->max_width) tsi_sb_repeat(b, ' ', fm->max_width - len);
    tsi_sb_putn(b, buf, (size_t)len);
}

/* a complex element as torch writes it: the real part right-aligned, then the imaginary part
 * with its sign and "j" ("10.+0.j", "-2.-2.j") */
static void format_complex(tsi_strbuf *b, const formatter *re, const formatter *im,
                           const double *fr, const double *fi, int64_t i) {
    format_value(b, re, fr, NULL, i);
    char buf[NUM_BUF + 2];
    int len = value_text(buf, sizeof buf, im, fi, NULL, i);
    if (buf[0] != '-' && buf[0] != '+') tsi_sb_putn(b, "+", 1);
    tsi_sb_putn(b, buf, (size_t)len);
    tsi_sb_putn(b, "j", 1);
}

/* ------------------------------------------------------------------ layout */
/* The host copy holds exactly the elements torch shows (get_summarized_data): along a cut dim,
 * the first and last edgeitems entries; "..." goes between the two halves. */
typedef struct printer {
    tsi_strbuf *b;
    const double *f;
    const int64_t *iv;
    formatter fm;
    const double *fi; /* complex: the imaginary parts (f the real ones), formatted by fm_im */
    formatter fm_im;
    print_opts o;
    int ndim;
    int64_t dims[TS_MAX_DIMS], strides[TS_MAX_DIMS];
    bool cut[TS_MAX_DIMS];
} printer;

/* _vector_str */
static void print_vector(const printer *p, int64_t base, int indent) {
    tsi_strbuf *b = p->b;
    int d = p->ndim - 1;
    int element_length = p->fm.max_width + 2 + (p->fi ? p->fm_im.max_width + 2 : 0);
    int per_line = (int)floor((double)(p->o.linewidth - indent) / element_length);
    if (per_line < 1) per_line = 1;
    int64_t items = p->dims[d] + (p->cut[d] ? 1 : 0);
    int64_t e = p->o.edgeitems;
    tsi_sb_putn(b, "[", 1);
    for (int64_t j = 0, k = 0; j < items; j++) {
        if (j > 0) {
            if (j % per_line == 0) {
                tsi_sb_putn(b, ",\n", 2);
                tsi_sb_repeat(b, ' ', indent + 1);
            } else {
                tsi_sb_putn(b, ", ", 2);
            }
        }
        if (p->cut[d] && j == e) {
            tsi_sb_putn(b, " ...", 4);
        } else {
            if (p->fi)
                format_complex(b, &p->fm, &p->fm_im, p->f, p->fi, base + k * p->strides[d]);
            else
                format_value(b, &p->fm, p->f, p->iv, base + k * p->strides[d]);
            k++;
        }
    }
    tsi_sb_putn(b, "]", 1);
}

/* _tensor_str_with_formatter for dims d.. of the host copy */
static void print_dims(const printer *p, int d, int64_t base, int indent) {
    if (d == p->ndim - 1) {
        print_vector(p, base, indent);
        return;
    }
    tsi_strbuf *b = p->b;
    int sub_dims = p->ndim - d; /* dim() of this slice */
    int64_t items = p->dims[d] + (p->cut[d] ? 1 : 0);
    int64_t e = p->o.edgeitems;
    tsi_sb_putn(b, "[", 1);
    for (int64_t j = 0, k = 0; j < items; j++) {
        if (j > 0) {
            tsi_sb_putn(b, ",", 1);
            tsi_sb_repeat(b, '\n', sub_dims - 1);
            tsi_sb_repeat(b, ' ', indent + 1);
        }
        if (p->cut[d] && j == e) {
            tsi_sb_putn(b, "...", 3);
        } else {
            print_dims(p, d + 1, base + k * p->strides[d], indent + 1);
            k++;
        }
    }
    tsi_sb_putn(b, "]", 1);
}

/* ------------------------------------------------------------------ data */
/* Copies the shown elements of t (as f64 for float dtypes, i64 otherwise) into host memory: one
 * device tensor of the summarised shape, filled block by block (2^cut-dims corner blocks) with the
 * backend's strided casting copy, then a single device-to-host transfer. Only the shown elements
 * ever move, so printing a huge tensor stays cheap. */
static bool gather(ts_tensor *t, const printer *p, ts_dtype host_dt, void *host) {
    ts_shape out_shape = {.ndim = p->ndim};
    int cut_dims[TS_MAX_DIMS], ncut = 0;
    for (int d = 0; d < p->ndim; d++) {
        out_shape.dims[d] = p->dims[d];
        if (p->cut[d]) cut_dims[ncut++] = d;
    }
    ts_tensor *out = tsi_new("print", out_shape, host_dt, tsi_device(t));
    if (!out) return false;
    const ts_backend *be = tsi_be(t);
    ts_kview src0 = tsi_kview(t), dst0 = tsi_kview(out);
    size_t src_es = tsi_dtype_size(t->dtype), dst_es = tsi_dtype_size(host_dt);
    int64_t e = p->o.edgeitems;
    for (int mask = 0; mask < (1 << ncut); mask++) {
        ts_kview src = src0, dst = dst0;
        for (int c = 0; c < ncut; c++) {
            int d = cut_dims[c];
            src.shape[d] = dst.shape[d] = e;
            if (mask & (1 << c)) {
                src.data += (size_t)((t->shape.dims[d] - e) * src.strides[d]) * src_es;
                dst.data += (size_t)(e * dst.strides[d]) * dst_es;
            }
        }
        be->copy(be, tsi_dev_index(t), &dst, &src);
    }
    ts_status st = ts_copy_to_host(out, host, (size_t)tsi_numel(out_shape) * dst_es);
    ts_release(out);
    return st == TS_OK;
}

/* ------------------------------------------------------------------ suffixes */
/* _add_suffixes: a suffix goes on its own line when it would pass linewidth. */
static void add_suffixes(tsi_strbuf *b, const char suffixes[][64], int n, int indent,
                         int linewidth) {
    const char *nl = b->failed ? NULL : strrchr(b->s, '\n');
    /* Python: len(s) - s.rfind("\n") + 1, where rfind gives -1 when there is no newline */
    long last_line_len = nl ? (long)b->len - (long)(nl - b->s) + 1 : (long)b->len + 2;
    for (int i = 0; i < n; i++) {
        long len = (long)strlen(suffixes[i]);
        if (last_line_len + len + 2 > linewidth) {
            tsi_sb_putn(b, ",\n", 2);
            tsi_sb_repeat(b, ' ', indent);
            last_line_len = indent + len;
        } else {
            tsi_sb_putn(b, ", ", 2);
            last_line_len += len + 2;
        }
        tsi_sb_puts(b, suffixes[i]);
    }
    tsi_sb_putn(b, ")", 1);
}

static void shape_tuple(char *out, size_t cap, ts_shape s) {
    size_t n = (size_t)snprintf(out, cap, "size=(");
    for (int d = 0; d < s.ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, d ? ", %lld" : "%lld", (long long)s.dims[d]);
    if (n < cap) snprintf(out + n, cap - n, s.ndim == 1 ? ",)" : ")");
}

/* ------------------------------------------------------------------ entry points */
char *ts_to_string(ts_tensor *t) {
    if (!t) {
        char *s = malloc(sizeof "tensor(NULL)");
        if (s) memcpy(s, "tensor(NULL)", sizeof "tensor(NULL)");
        return s;
    }
    print_opts o = {atomic_load(&opt_precision), atomic_load(&opt_threshold),
                    atomic_load(&opt_edgeitems), atomic_load(&opt_linewidth)};
    const char *prefix = "tensor(";
    int indent = (int)strlen(prefix);
    tsi_strbuf b = {0};
    tsi_sb_puts(&b, prefix);

    char suffixes[4][64];
    int nsuf = 0;
    ts_device dev = tsi_device(t);
    if (dev.type != TS_CPU) snprintf(suffixes[nsuf++], 64, "device='%s'", ts_device_str(dev));

    int64_t numel = tsi_numel(t->shape);
    bool ok = true;
    if (dev.type == TS_META) { /* no values: torch's "..." with the size and any other dtype */
        shape_tuple(suffixes[nsuf++], 64, t->shape);
        if (t->dtype != TS_F32)
            snprintf(suffixes[nsuf++], 64, "dtype=torch.%s", ts_dtype_name(t->dtype));
        tsi_sb_puts(&b, "...");
    } else if (numel == 0) {
        /* torch names the shape unless it is (0,), and the dtype unless it is the default float
         * one: nothing in "[]" tells an empty int64 tensor apart. */
        if (t->shape.ndim != 1) shape_tuple(suffixes[nsuf++], 64, t->shape);
        if (t->dtype != TS_F32)
            snprintf(suffixes[nsuf++], 64, "dtype=torch.%s", ts_dtype_name(t->dtype));
        tsi_sb_puts(&b, "[]");
    } else if (!TSI_QUANT_GATE("print", t->dtype, t)) { /* no kernel reads its integers here */
        ok = false;
    } else {
        if (t->dtype != TS_F32 && t->dtype != TS_I64 && t->dtype != TS_BOOL && t->dtype != TS_C64)
            snprintf(suffixes[nsuf++], 64, "dtype=torch.%s", ts_dtype_name(t->dtype));
        printer p = {.b = &b, .o = o, .ndim = t->shape.ndim};
        bool summarize = numel > o.threshold;
        int64_t shown = 1;
        for (int d = p.ndim - 1; d >= 0; d--) {
            p.cut[d] = summarize && t->shape.dims[d] > 2 * (int64_t)o.edgeitems;
            p.dims[d] = p.cut[d] ? 2 * (int64_t)o.edgeitems : t->shape.dims[d];
            p.strides[d] = shown;
            shown *= p.dims[d];
        }
        const bool cx = tsi_is_complex(t->dtype), floating = tsi_is_float(t->dtype) || cx;
        void *host = malloc((size_t)shown * (cx ? 32 : 8)); /* complex: pairs, then the parts */
        ok = host && gather(t, &p, cx ? TS_C128 : floating ? TS_F64 : TS_I64, host);
        if (!host) tsi_error_set(TS_ERR_OOM, "print: out of host memory");
        if (ok) {
            if (cx) { /* the parts apart, each with its formatter (torch's _Formatter pair) */
                double *pairs = host, *re = pairs + 2 * shown, *im = re + shown;
                for (int64_t i = 0; i < shown; i++) re[i] = pairs[2 * i], im[i] = pairs[2 * i + 1];
                p.f = re;
                p.fi = im;
                p.fm_im = formatter_make(im, NULL, shown, TS_F64, o.precision);
            } else if (floating) {
                p.f = host;
            } else {
                p.iv = host;
            }
            p.fm = formatter_make(p.f, p.iv, shown, t->dtype, o.precision);
            if (p.ndim == 0 && cx)
                format_complex(&b, &p.fm, &p.fm_im, p.f, p.fi, 0);
            else if (p.ndim == 0)
                format_value(&b, &p.fm, p.f, p.iv, 0); /* _scalar_str */
            else
                print_dims(&p, 0, 0, indent);
        }
        free(host);
    }
    /* torch prints grad_fn=<...> instead for tensors with a grad_fn; that arrives with autograd */
    if (t->requires_grad) snprintf(suffixes[nsuf++], 64, "requires_grad=True");
    add_suffixes(&b, (const char(*)[64])suffixes, nsuf, indent, o.linewidth);

    if (!ok || b.failed) {
        if (ok) tsi_error_set(TS_ERR_OOM, "print: out of host memory");
        free(b.s);
        return NULL;
    }
    return b.s;
}

void ts_print(ts_tensor *t) {
    char *s = ts_to_string(t);
    if (!s) return;
    fputs(s, stdout);
    fputc('\n', stdout);
    free(s);
}
