/* csv.c — numeric CSV files: one sample per row, a chosen target column, every cell checked with
 * its line and column in the message. The text is never assumed NUL-terminated (fuzzed bytes). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"

#define MAX_CLASS   16777215.0 /* 2^24 - 1: class indices stay exact in f32 too */
#define MAX_COLUMNS (1 << 24)

typedef struct field {
    const char *s;
    size_t n;
    bool esc; /* quoted with "" inside: unescape when reading */
} field;

typedef struct parser {
    const char *name;
    char delim;
    int line;
    field *f;
    int nf, capf;
} parser;

static bool is_space(const parser *P, char c) {
    return (c == ' ' || c == '\t' || c == '\r') && c != P->delim;
}

/* At most 40 printable characters of a cell, for messages. */
static const char *show(const field *c) {
    char *b = tsi_fmt_buf();
    size_t k = 0;
    for (size_t i = 0; i < c->n && k < 40; i++)
        b[k++] = isprint((unsigned char)c->s[i]) ? c->s[i] : '?';
    if (c->n > 40) memcpy(b + k, "...", 3), k += 3;
    b[k] = '\0';
    return b;
}

/* The cell's text, unescaped, NUL-terminated in buf; false when longer than cap - 1. */
static bool cell_text(const field *c, char *buf, size_t cap, size_t *len) {
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (k + 1 >= cap) return false;
        buf[k++] = c->s[i];
        if (c->esc && c->s[i] == '"') i++; /* "" -> " */
    }
    buf[k] = '\0';
    *len = k;
    return true;
}

/* A number as C's strtod reads it (decimal, hexadecimal, inf, nan), with white space allowed on
 * both sides: strtod skips it before the number, and the same is allowed after it (a quoted cell
 * keeps its spaces). tests/fuzz/fuzz_csv_num.c checks this against a reference of its own. */
static bool parse_num(const field *c, double *out) {
    char buf[512];
    size_t len;
    if (!c->n || !cell_text(c, buf, sizeof buf, &len)) return false;
    while (len > 0 && isspace((unsigned char)buf[len - 1])) buf[--len] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return end == buf + len && len > 0;
}

static ts_status __attribute__((format(printf, 2, 3)))
fail_at(const parser *P, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tsi_error_set(TS_ERR_FORMAT, "%s:%d: %s", P->name, P->line, what);
}

/* Splits [p, eol) into P->f. */
static ts_status split(parser *P, const char *p, const char *eol) {
    P->nf = 0;
    for (;;) {
        if (P->nf == P->capf) {
            if (P->capf >= MAX_COLUMNS) return fail_at(P, "more than %d columns", MAX_COLUMNS);
            int ncap = P->capf ? 2 * P->capf : 16;
            field *nf = realloc(P->f, (size_t)ncap * sizeof *nf);
            if (!nf) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", P->name);
            P->f = nf;
            P->capf = ncap;
        }
        field *c = &P->f[P->nf++];
        *c = (field){0};
        while (p < eol && is_space(P, *p)) p++;
        if (p < eol && *p == '"') {
            c->s = ++p;
            for (;;) {
                if (p >= eol) return fail_at(P, "column %d: unterminated quote", P->nf);
                if (*p == '"') {
                    if (p + 1 < eol && p[1] == '"') {
                        c->esc = true;
                        p += 2;
                        continue;
                    }
                    break;
                }
                p++;
            }
            c->n = (size_t)(p - c->s);
            p++;
            while (p < eol && is_space(P, *p)) p++;
            if (p < eol && *p != P->delim)
                return fail_at(P, "column %d: text after the closing quote", P->nf);
        } else {
            c->s = p;
            while (p < eol && *p != P->delim) p++;
            const char *e = p;
            while (e > c->s && is_space(P, e[-1])) e--;
            c->n = (size_t)(e - c->s);
        }
        if (p >= eol) return TS_OK;
        p++; /* the delimiter */
    }
}

static bool blank(const parser *P, const char *p, const char *eol) {
    while (p < eol && is_space(P, *p)) p++;
    return p == eol;
}

static bool field_is(const field *c, const char *s) {
    char buf[512];
    size_t len;
    return cell_text(c, buf, sizeof buf, &len) && len == strlen(s) && !memcmp(buf, s, len);
}

/* Room for need elements in *a (capacity *cap, doubled as rows arrive: never more than twice what
 * the rows read so far take). */
static ts_status grow(const parser *P, void *a, size_t elem, int64_t *cap, int64_t need) {
    if (need <= *cap) return TS_OK;
    int64_t ncap = *cap ? *cap : 64;
    while (ncap < need) ncap *= 2;
    void *old;
    memcpy(&old, a, sizeof old); /* a is a float ** or an int64_t **: no aliasing through void ** */
    void *m = realloc(old, (size_t)ncap * elem);
    if (!m) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", P->name);
    memcpy(a, &m, sizeof m);
    *cap = ncap;
    return TS_OK;
}

/* The target's index among the first line's n cells. */
static ts_status target_index(const parser *P, const ts_csv_opts *o, bool header, int n, int *out) {
    if (o->target_name) {
        if (!header)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: target column '%s' asked by name but the file has no "
                                 "header line",
                                 P->name, o->target_name);
        for (int i = 0; i < n; i++)
            if (field_is(&P->f[i], o->target_name)) return *out = i, TS_OK;
        return tsi_error_set(TS_ERR_ARG, "%s: no column named '%s' in the header (%d columns)",
                             P->name, o->target_name, n);
    }
    int t = o->target_column < 0 ? o->target_column + n : o->target_column;
    if (t < 0 || t >= n)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: target column %d is out of range for %d columns (0..%d, or -1 "
                             "for the last)",
                             P->name, o->target_column, n, n - 1);
    *out = t;
    return TS_OK;
}

static ts_status parse(parser *P, const char *p, const char *end, const ts_csv_opts *o,
                       tsi_csv *out) {
    if (end - p >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* a UTF-8 byte order mark */
    int ncols = 0, target = 0;
    bool first = true, header = false;
    int64_t cap_x = 0, cap_y = 0, rows = 0, F = 0;
    double max_class = -1;
    ts_status st;
    for (P->line = 1; p < end; P->line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (blank(P, p, eol)) {
            p = next;
            continue;
        }
        if ((st = split(P, p, eol))) return st;
        p = next;
        if (first) {
            first = false;
            ncols = P->nf;
            if (ncols < 2)
                return tsi_error_set(TS_ERR_FORMAT,
                                     "%s:%d: 1 column: a sample needs at least 2 (features and "
                                     "a target)",
                                     P->name, P->line);
            double v;
            for (int i = 0; i < ncols && !o->no_header && !header; i++)
                header = !parse_num(&P->f[i], &v);
            if ((st = target_index(P, o, header, ncols, &target))) return st;
            F = ncols - 1;
            if (header) continue;
        }
        if (P->nf != ncols)
            return tsi_error_set(TS_ERR_FORMAT, "%s:%d: %d columns where the first line has %d",
                                 P->name, P->line, P->nf, ncols);
        if ((st = grow(P, &out->x, sizeof(float), &cap_x, (rows + 1) * F)) ||
            (st = grow(P, o->regression ? (void *)&out->reg : (void *)&out->cls,
                       o->regression ? sizeof(float) : sizeof(int64_t), &cap_y, rows + 1)))
            return st;
        float *x = out->x + rows * F;
        for (int i = 0; i < ncols; i++) {
            double v;
            const field *c = &P->f[i];
            if (!parse_num(c, &v))
                return c->n ? fail_at(P, "column %d: '%s' is not a number", i + 1, show(c))
                            : fail_at(P, "column %d is empty", i + 1);
            if (i != target) {
                *x++ = (float)v;
            } else if (o->regression) {
                out->reg[rows] = (float)v;
            } else {
                if (!(v >= 0 && v == floor(v) && v <= MAX_CLASS))
                    return v > MAX_CLASS && v == floor(v)
                               ? fail_at(P, "column %d: class '%s' is too large (at most %.0f)",
                                         i + 1, show(c), MAX_CLASS)
                               : fail_at(P,
                                         "column %d: class '%s' is not a non-negative integer "
                                         "(set regression for real-valued targets)",
                                         i + 1, show(c));
                out->cls[rows] = (int64_t)v;
                if (v > max_class) max_class = v;
            }
        }
        rows++;
    }
    if (rows == 0)
        return tsi_error_set(TS_ERR_FORMAT, "%s: no data rows%s", P->name,
                             first ? " (empty file)" : " after the header");
    out->rows = rows;
    out->features = F;
    out->num_classes = o->regression ? 0 : (int64_t)max_class + 1;
    return TS_OK;
}

void tsi_csv_release(tsi_csv *c) {
    if (!c) return;
    free(c->x);
    free(c->cls);
    free(c->reg);
    memset(c, 0, sizeof *c);
}

ts_status tsi_csv_parse(const char *buf, size_t size, const char *name, const ts_csv_opts *o,
                        tsi_csv *out) {
    memset(out, 0, sizeof *out);
    if (!buf && size) return tsi_error_set(TS_ERR_ARG, "%s: buffer is NULL", name);
    char d = o->delimiter ? o->delimiter : ',';
    if (isalnum((unsigned char)d) || strchr(".+-\"\r\n", d))
        return tsi_error_set(TS_ERR_ARG, "%s: delimiter '%c' cannot separate numbers", name, d);
    parser P = {.name = name, .delim = d};
    ts_status st = parse(&P, buf ? buf : "", (buf ? buf : "") + size, o, out);
    free(P.f);
    if (st) tsi_csv_release(out);
    return st;
}

/* ------------------------------------------------------------------ the dataset */
static int64_t csv_len(void *ctx) { return ((tsi_csv *)ctx)->rows; }

static ts_status csv_get(void *ctx, int64_t i, ts_sample *out) {
    tsi_csv *c = ctx;
    out->x =
        tsi_sample_tensor("csv dataset", TS_SHAPE(c->features), TS_F32, c->x + i * c->features);
    out->y = c->reg ? tsi_sample_tensor("csv dataset", TS_SHAPE(1), TS_F32, &c->reg[i])
                    : tsi_sample_label("csv dataset", c->cls[i]);
    return out->x && out->y ? TS_OK : ts_error();
}

static void csv_free(void *ctx) {
    tsi_csv_release(ctx);
    free(ctx);
}

ts_dataset *tsi_csv_dataset_from(tsi_csv *c) {
    tsi_csv *d = malloc(sizeof *d);
    if (!d) {
        tsi_csv_release(c);
        return tsi_error_set(TS_ERR_OOM, "csv dataset: out of host memory"), NULL;
    }
    *d = *c;
    memset(c, 0, sizeof *c);
    static const ts_dataset_ops ops = {.len = csv_len, .get = csv_get, .free = csv_free};
    ts_dataset *ds = ts_dataset_new(&ops, d);
    ts_dataset_set_num_classes(ds, d ? d->num_classes : 0);
    return ds;
}

ts_dataset *ts_csv_dataset(const char *path, ts_csv_opts o) {
    if (!path) return tsi_error_set(TS_ERR_ARG, "ts_csv_dataset: path is NULL"), NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tsi_error_set(TS_ERR_IO, "%s: %s", path, strerror(errno)), NULL;
    struct stat sb;
    int err = fstat(fd, &sb) != 0 ? errno : S_ISDIR(sb.st_mode) ? EISDIR : 0;
    char *buf = err ? NULL : malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    if (!err && !buf) {
        close(fd);
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory (%lld bytes)", path,
                             (long long)sb.st_size),
               NULL;
    }
    while (!err && got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (err) {
        free(buf);
        return tsi_error_set(TS_ERR_IO, "%s: %s", path, strerror(err)), NULL;
    }
    tsi_csv c;
    ts_status st = tsi_csv_parse(buf, got, path, &o, &c);
    free(buf);
    return st ? NULL : tsi_csv_dataset_from(&c);
}
