/* test_conformance.c — backend conformance (DESIGN §9.2): every kernel of every non-cpu backend
 * against the cpu backend on the same inputs, with guard bytes around every output buffer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "op_table.h"
#include "ts_test.h"

#define GUARD 64
#define MAXV  4 /* views per call */

static const ts_dtype dtypes[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};
#define NDT 8

static bool is_float(ts_dtype d) {
    return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16;
}
static size_t esz(ts_dtype d) {
    return d == TS_F64 || d == TS_I64    ? 8
           : d == TS_F32 || d == TS_I32  ? 4
           : d == TS_F16 || d == TS_BF16 ? 2
                                         : 1;
}
static unsigned char guard_byte(size_t i) { return (unsigned char)(0x5Au ^ (i * 29u)); }
#define FILL_BYTE 0xCD /* what an output holds where the kernel must not write */

/* ------------------------------------------------------------------ buffers and views */
/* One view over one buffer: shape, strides (elements) and the payload's size. Inputs carry host
 * data; outputs carry optional initial content (scatter_add's destination). */
typedef struct spec {
    ts_dtype dt;
    int nd;
    int64_t shape[TS_MAX_DIMS], strides[TS_MAX_DIMS];
    size_t payload; /* bytes */
    unsigned char *host;
} spec;

static int64_t sp_numel(const spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->nd; i++) n *= s->shape[i];
    return n;
}

/* layout: 0 contiguous, 1 "transposed" (stored with the last two dims swapped), 2 every other
 * element (the gaps must stay untouched) */
static spec mk(ts_dtype dt, int nd, const int64_t *shape, int layout) {
    spec s = {.dt = dt, .nd = nd};
    int64_t stored[TS_MAX_DIMS];
    for (int i = 0; i < nd; i++) s.shape[i] = shape[i], stored[i] = shape[i];
    bool swap = layout == 1 && nd >= 2;
    if (swap) stored[nd - 2] = shape[nd - 1], stored[nd - 1] = shape[nd - 2];
    int64_t st = layout == 2 ? 2 : 1;
    for (int i = nd - 1; i >= 0; i--) s.strides[i] = st, st *= stored[i] > 0 ? stored[i] : 1;
    if (swap) {
        int64_t t = s.strides[nd - 2];
        s.strides[nd - 2] = s.strides[nd - 1], s.strides[nd - 1] = t;
    }
    int64_t maxoff = 0;
    bool empty = false;
    for (int i = 0; i < nd; i++) {
        if (shape[i] == 0)
            empty = true;
        else
            maxoff += (shape[i] - 1) * s.strides[i];
    }
    s.payload = empty ? 0 : (size_t)(maxoff + 1) * esz(dt);
    return s;
}

/* Broadcasts size-1 dims to `to` with stride 0 (the payload stays the small one). */
static spec expand(spec s, const int64_t *to) {
    for (int i = 0; i < s.nd; i++)
        if (s.shape[i] == 1 && to[i] != 1) s.shape[i] = to[i], s.strides[i] = 0;
    return s;
}
#define SHAPE(...)          ((const int64_t[]){__VA_ARGS__})
#define ND(...)             ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define MK(dt, layout, ...) mk(dt, ND(__VA_ARGS__), SHAPE(__VA_ARGS__), layout)
#define MK0(dt)             mk(dt, 0, NULL, 0)

/* ------------------------------------------------------------------ host data */
static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

enum { V_ANY, V_POS, V_NONZERO, V_SMALLNN, V_IDX };

static double value(ts_dtype dt, int kind, double hi) {
    if (kind == V_IDX) return floor(urand() * hi);
    if (dt == TS_BOOL) return kind == V_NONZERO || kind == V_POS ? 1 : (urand() < 0.5);
    bool fl = is_float(dt);
    double v;
    switch (kind) {
    case V_POS:
        v = fl ? 0.1 + 2.9 * urand() : 1 + floor(5 * urand());
        break;
    case V_NONZERO:
        v = fl ? 0.25 + 2.75 * urand() : 1 + floor(5 * urand());
        if (dt != TS_U8 && urand() < 0.5) v = -v;
        break;
    case V_SMALLNN:
        v = fl ? 2 * urand() : floor(4 * urand());
        break;
    default:
        v = fl ? -3 + 6 * urand() : floor(-5 + 11 * urand());
        break;
    }
    if (dt == TS_U8 && v < 0) v = -v;
    return v;
}

/* Fills every element the view can reach (gaps too: inputs have no "untouched" bytes). */
static void fill_host(spec *s, int kind, double hi) {
    size_t es = esz(s->dt), n = s->payload / es;
    s->host = malloc(s->payload + 1);
    for (size_t i = 0; i < n; i++) ot_store(s->host + i * es, s->dt, value(s->dt, kind, hi));
}

/* ------------------------------------------------------------------ running one case */
typedef struct call {
    int nout, nin;
    spec out[MAXV], in[MAXV];
} call;

typedef void (*launch_fn)(const ts_backend *b, const ts_kview *o, const ts_kview *i,
                          const void *ctx);

static const ts_backend *cpu_be, *dev_be;
static const char *dev_name;
static bool exact; /* sim runs the cpu kernels: results must match bit for bit */

static ts_kview view_of(const spec *s, char *data) {
    ts_kview v = {.data = data, .dtype = s->dt, .ndim = s->nd};
    for (int i = 0; i < s->nd; i++) v.shape[i] = s->shape[i], v.strides[i] = s->strides[i];
    return v;
}

/* Runs the call on backend b; out images (guards + payload + guards) come back in img[]. */
static void run_on(const ts_backend *b, const call *c, launch_fn fn, const void *ctx,
                   unsigned char **img) {
    void *din[MAXV], *dout[MAXV];
    ts_kview vin[MAXV], vout[MAXV];
    for (int i = 0; i < c->nin; i++) {
        size_t n = c->in[i].payload;
        din[i] = b->raw_alloc(b, 0, n ? n : 1);
        if (n) b->copy_h2d(b, 0, din[i], c->in[i].host, n);
        vin[i] = view_of(&c->in[i], din[i]);
    }
    for (int i = 0; i < c->nout; i++) {
        size_t n = c->out[i].payload, tot = n + 2 * GUARD;
        unsigned char *h = malloc(tot);
        for (size_t k = 0; k < GUARD; k++)
            h[k] = guard_byte(k), h[GUARD + n + k] = guard_byte(k + GUARD);
        if (c->out[i].host)
            memcpy(h + GUARD, c->out[i].host, n);
        else
            memset(h + GUARD, FILL_BYTE, n);
        dout[i] = b->raw_alloc(b, 0, tot);
        b->copy_h2d(b, 0, dout[i], h, tot);
        free(h);
        vout[i] = view_of(&c->out[i], (char *)dout[i] + GUARD);
    }
    fn(b, vout, vin, ctx);
    b->synchronize(b, 0);
    for (int i = 0; i < c->nout; i++) {
        size_t tot = c->out[i].payload + 2 * GUARD;
        img[i] = malloc(tot);
        b->copy_d2h(b, 0, img[i], dout[i], tot);
        b->raw_free(b, 0, dout[i], tot);
    }
    for (int i = 0; i < c->nin; i++)
        b->raw_free(b, 0, din[i], c->in[i].payload ? c->in[i].payload : 1);
}

static bool guards_ok(const unsigned char *img, size_t n) {
    for (size_t k = 0; k < GUARD; k++)
        if (img[k] != guard_byte(k) || img[GUARD + n + k] != guard_byte(k + GUARD)) return false;
    return true;
}

static void tol(ts_dtype dt, double *rtol, double *atol) {
    *rtol = dt == TS_F32    ? 1.3e-6
            : dt == TS_F64  ? 1e-7
            : dt == TS_F16  ? 1e-3
            : dt == TS_BF16 ? 1.6e-2
                            : 0;
    *atol = dt == TS_F64 ? 1e-7 : is_float(dt) ? 1e-5 : 0;
}

/* Compares one output: the view's elements (bitwise, or within tolerance for cuda) and every other
 * byte of the buffer (must be untouched on both). */
static bool compare_out(const spec *s, const unsigned char *ref, const unsigned char *got,
                        char *msg, size_t len) {
    size_t n = s->payload;
    if (!guards_ok(ref, n))
        return snprintf(msg, len, "cpu backend wrote outside its buffer"), false;
    if (!guards_ok(got, n))
        return snprintf(msg, len, "guard bytes overwritten (out-of-bounds write)"), false;
    if (exact) {
        if (memcmp(ref, got, n + 2 * GUARD) == 0) return true;
        for (size_t k = 0; k < n; k++)
            if (ref[GUARD + k] != got[GUARD + k]) {
                size_t e = k / esz(s->dt);
                snprintf(msg, len,
                         "differs from cpu at byte %zu (element %zu of the buffer): cpu %g, %s %g",
                         k, e, ot_load(ref + GUARD + e * esz(s->dt), s->dt), dev_name,
                         ot_load(got + GUARD + e * esz(s->dt), s->dt));
                return false;
            }
        return false;
    }
    unsigned char *mask = calloc(n + 1, 1);
    int64_t idx[TS_MAX_DIMS] = {0}, total = sp_numel(s);
    double rtol, atol;
    tol(s->dt, &rtol, &atol);
    bool ok = true;
    size_t es = esz(s->dt);
    for (int64_t k = 0; k < total && ok; k++) {
        int64_t off = 0;
        for (int i = 0; i < s->nd; i++) off += idx[i] * s->strides[i];
        size_t b = (size_t)off * es;
        memset(mask + b, 1, es);
        double r = ot_load(ref + GUARD + b, s->dt), g = ot_load(got + GUARD + b, s->dt);
        bool same =
            (isnan(r) && isnan(g)) || r == g || (!isinf(r) && fabs(g - r) <= atol + rtol * fabs(r));
        if (!same) {
            snprintf(msg, len, "element %lld: cpu %.9g, %s %.9g", (long long)k, r, dev_name, g);
            ok = false;
        }
        for (int i = s->nd - 1; i >= 0; i--) {
            if (++idx[i] < s->shape[i]) break;
            idx[i] = 0;
        }
    }
    for (size_t k = 0; k < n && ok; k++)
        if (!mask[k] && got[GUARD + k] != ref[GUARD + k]) {
            snprintf(msg, len, "wrote byte %zu, which is outside the output view", k);
            ok = false;
        }
    free(mask);
    return ok;
}

/* ------------------------------------------------------------------ per-kernel bookkeeping */
static int k_cases, k_failed;

static void check(const char *what, call *c, launch_fn fn, const void *ctx) {
    unsigned char *ref[MAXV], *got[MAXV];
    run_on(cpu_be, c, fn, ctx, ref);
    run_on(dev_be, c, fn, ctx, got);
    char msg[256] = "";
    bool ok = true;
    for (int i = 0; i < c->nout && ok; i++)
        ok = compare_out(&c->out[i], ref[i], got[i], msg, sizeof msg);
    k_cases++;
    if (!ok && k_failed++ < 5) printf("     %s: %s\n", what, msg);
    for (int i = 0; i < c->nout; i++) free(ref[i]), free(got[i]), free(c->out[i].host);
    for (int i = 0; i < c->nin; i++) free(c->in[i].host);
}

static void kernel_begin(void) { k_cases = 0, k_failed = 0; }
static void kernel_end(const char *name) {
    ts_test_record(k_failed == 0);
    printf("%-4s %-14s %-7s %d cases%s\n", k_failed ? "FAIL" : "ok", name, dev_name, k_cases, "");
    if (k_failed) printf("     ^ %d of %d cases failed\n", k_failed, k_cases);
    fflush(stdout);
}
static bool present(const char *name, const void *entry) {
    if (entry) return true;
    printf("skip %-14s %-7s entry is NULL (the front end must have a composite fallback)\n", name,
           dev_name);
    return false;
}

static char what_buf[160];
static const char *what(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *what(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what_buf, sizeof what_buf, fmt, ap);
    va_end(ap);
    return what_buf;
}

/* ------------------------------------------------------------------ launchers */
typedef struct kctx {
    int op, dim, nred;
    double p0, p1;
    bool log;
    size_t bytes;
} kctx;

#define KC(p) const kctx *k = (const kctx *)(p)
static void l_copy(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->copy(b, 0, &o[0], &i[0]);
}
static void l_fill(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->fill(b, 0, &o[0], k->p0);
}
static void l_unary(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->unary(b, 0, (ts_unary_op)k->op, &o[0], &i[0], k->p0, k->p1);
}
static void l_binary(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->binary(b, 0, (ts_binary_op)k->op, &o[0], &i[0], &i[1]);
}
static void l_bscalar(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->binary_scalar(b, 0, (ts_binary_op)k->op, &o[0], &i[0], k->p0);
}
static void l_where(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->where(b, 0, &o[0], &i[0], &i[1], &i[2]);
}
static void l_reduce(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->reduce(b, 0, (ts_reduce_op)k->op, &o[0], &i[0], k->nred, k->p0);
}
static void l_matmul(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->matmul(b, 0, &o[0], &i[0], &i[1]);
}
static void l_isel(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->index_select(b, 0, &o[0], &i[0], k->dim, &i[1]);
}
static void l_gather(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->gather(b, 0, &o[0], &i[0], k->dim, &i[1]);
}
static void l_scatter(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->scatter_add(b, 0, &o[0], k->dim, &i[0], &i[1]);
}
static void l_softmax(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->softmax(b, 0, &o[0], &i[0], k->dim, k->log);
}
static void l_random(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->random(b, 0, (ts_random_kind)k->op, &o[0], k->p0, k->p1, 1234, 8);
}
static void l_memset(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->memset_zero(b, 0, o[0].data, k->bytes);
}
static void l_d2d(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->copy_d2d(b, 0, o[0].data, 0, i[0].data, k->bytes);
}

/* ------------------------------------------------------------------ cases */
static const int64_t S57[] = {5, 7}, S34[] = {3, 4}, SBIG[] = {130, 260}; /* big: OpenMP paths */

static call one_in(spec out, spec in, int kind, double hi) {
    call c = {.nout = 1, .nin = 1, .out = {out}, .in = {in}};
    fill_host(&c.in[0], kind, hi);
    return c;
}

static void test_memory(void) {
    kernel_begin();
    for (int n = 1; n <= 1000; n += 333) {
        kctx k = {.bytes = (size_t)n};
        call c = {.nout = 1, .out = {mk(TS_U8, 1, (int64_t[]){n}, 0)}};
        check(what("memset_zero %d bytes", n), &c, l_memset, &k);
        call d = one_in(mk(TS_U8, 1, (int64_t[]){n}, 0), mk(TS_U8, 1, (int64_t[]){n}, 0), V_ANY, 0);
        check(what("copy_d2d %d bytes", n), &d, l_d2d, &k);
    }
    kernel_end("memory");
}

static void test_copy(void) {
    if (!present("copy", dev_be->copy)) return;
    kernel_begin();
    for (int a = 0; a < NDT; a++)
        for (int b = 0; b < NDT; b++) {
            ts_dtype src = dtypes[a], dst = dtypes[b];
            /* values every conversion defines: no negative or fractional into u8 from floats */
            int kind = dst == TS_U8 ? V_SMALLNN : V_ANY;
            const char *sn = ts_dtype_name(src), *dn = ts_dtype_name(dst);
            call c = one_in(mk(dst, 2, S57, 0), mk(src, 2, S57, 0), kind, 0);
            check(what("%s -> %s contiguous", sn, dn), &c, l_copy, NULL);
            c = one_in(mk(dst, 2, S57, 2), mk(src, 2, S57, 1), kind, 0);
            check(what("%s -> %s transposed into strided", sn, dn), &c, l_copy, NULL);
            c = one_in(mk(dst, 2, S57, 0), expand(mk(src, 2, (int64_t[]){1, 7}, 0), S57), kind, 0);
            check(what("%s -> %s broadcast source", sn, dn), &c, l_copy, NULL);
            c = one_in(MK0(dst), MK0(src), kind, 0);
            check(what("%s -> %s 0-dim", sn, dn), &c, l_copy, NULL);
            if (a == b || (src == TS_F32 && (dst == TS_F16 || dst == TS_BF16))) {
                c = one_in(mk(dst, 2, SBIG, 0), mk(src, 2, SBIG, 1), kind, 0);
                check(what("%s -> %s large transposed", sn, dn), &c, l_copy, NULL);
            }
        }
    kernel_end("copy");
}

static void test_fill(void) {
    if (!present("fill", dev_be->fill)) return;
    kernel_begin();
    for (int a = 0; a < NDT; a++) {
        ts_dtype dt = dtypes[a];
        kctx k = {.p0 = is_float(dt) ? 2.5 : dt == TS_BOOL ? 1 : 7};
        for (int lay = 0; lay < 3; lay += 2) {
            call c = {.nout = 1, .out = {mk(dt, 2, S57, lay)}};
            check(what("%s layout %d", ts_dtype_name(dt), lay), &c, l_fill, &k);
        }
        call c = {.nout = 1, .out = {MK0(dt)}};
        check(what("%s 0-dim", ts_dtype_name(dt)), &c, l_fill, &k);
        c = (call){.nout = 1, .out = {mk(dt, 2, SBIG, 2)}};
        check(what("%s large strided", ts_dtype_name(dt)), &c, l_fill, &k);
    }
    kernel_end("fill");
}

static const char *unary_names[] = {
    "neg",   "abs",  "exp",     "log",        "log1p",  "sqrt",        "rsqrt",    "sin",
    "cos",   "tanh", "sigmoid", "relu",       "gelu",   "silu",        "softplus", "sign",
    "floor", "ceil", "round",   "reciprocal", "square", "logical_not", "clamp"};

static void test_unary(void) {
    if (!present("unary", dev_be->unary)) return;
    kernel_begin();
    for (int op = 0; op < TS_U_COUNT; op++)
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a], odt = op == TS_U_LOGICAL_NOT ? TS_BOOL : dt;
            bool pos = op == TS_U_LOG || op == TS_U_LOG1P || op == TS_U_SQRT || op == TS_U_RSQRT;
            int kind = pos ? V_POS : op == TS_U_RECIPROCAL ? V_NONZERO : V_ANY;
            const char *on = unary_names[op], *dn = ts_dtype_name(dt);
            kctx k = {.op = op, .p0 = -1, .p1 = 2};
            call c = one_in(mk(odt, 2, S57, 0), mk(dt, 2, S57, 0), kind, 0);
            check(what("%s %s contiguous", on, dn), &c, l_unary, &k);
            c = one_in(mk(odt, 2, S57, 2), mk(dt, 2, S57, 1), kind, 0);
            check(what("%s %s transposed into strided", on, dn), &c, l_unary, &k);
            c = one_in(mk(odt, 2, S57, 0), expand(mk(dt, 2, (int64_t[]){5, 1}, 0), S57), kind, 0);
            check(what("%s %s broadcast input", on, dn), &c, l_unary, &k);
            c = one_in(mk(odt, 2, SBIG, 0), mk(dt, 2, SBIG, 0), kind, 0);
            check(what("%s %s large", on, dn), &c, l_unary, &k);
            if (op == TS_U_CLAMP) {
                kctx k2 = {.op = op, .p0 = NAN, .p1 = 1};
                c = one_in(mk(odt, 2, S57, 0), mk(dt, 2, S57, 1), kind, 0);
                check(what("clamp %s no lower bound", dn), &c, l_unary, &k2);
            }
        }
    kernel_end("unary");
}

static const char *binary_names[] = {"add",  "sub", "mul",  "div",  "pow", "max", "min",
                                     "fmod", "eq",  "ne",   "lt",   "le",  "gt",  "ge",
                                     "and",  "or",  "rsub", "rdiv", "rpow"};

static bool is_cmp(int op) { return op >= TS_B_EQ && op <= TS_B_OR; }

/* Operand ranges that keep every op defined: divisors non-zero, integer exponents >= 0. */
static void binary_kinds(int op, ts_dtype dt, int *ka, int *kb) {
    bool fl = is_float(dt);
    *ka = *kb = V_NONZERO;
    if (op == TS_B_POW) *ka = fl ? V_POS : V_ANY, *kb = V_SMALLNN;
    if (op == TS_B_RPOW) *ka = V_SMALLNN, *kb = fl ? V_POS : V_ANY;
    if (dt == TS_BOOL && (op == TS_B_DIV || op == TS_B_FMOD)) *kb = V_NONZERO;
    if (dt == TS_BOOL && op == TS_B_RDIV) *ka = V_NONZERO;
    if (dt == TS_BOOL && !(op == TS_B_DIV || op == TS_B_FMOD || op == TS_B_RDIV)) *ka = *kb = V_ANY;
}

static call two_in(spec out, spec a, spec b, int ka, int kb) {
    call c = {.nout = 1, .nin = 2, .out = {out}, .in = {a, b}};
    fill_host(&c.in[0], ka, 0);
    fill_host(&c.in[1], kb, 0);
    return c;
}

static void test_binary(void) {
    if (!present("binary", dev_be->binary)) return;
    kernel_begin();
    for (int op = 0; op < TS_B_COUNT; op++)
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a], odt = is_cmp(op) ? TS_BOOL : dt;
            int ka, kb;
            binary_kinds(op, dt, &ka, &kb);
            const char *on = binary_names[op], *dn = ts_dtype_name(dt);
            kctx k = {.op = op};
            call c = two_in(mk(odt, 2, S57, 0), mk(dt, 2, S57, 0), mk(dt, 2, S57, 0), ka, kb);
            check(what("%s %s contiguous", on, dn), &c, l_binary, &k);
            c = two_in(mk(odt, 2, S34, 0), expand(mk(dt, 2, (int64_t[]){3, 1}, 0), S34),
                       expand(mk(dt, 2, (int64_t[]){1, 4}, 0), S34), ka, kb);
            check(what("%s %s broadcast [3,1] [1,4]", on, dn), &c, l_binary, &k);
            c = two_in(mk(odt, 2, S57, 2), mk(dt, 2, S57, 1), mk(dt, 2, S57, 2), ka, kb);
            check(what("%s %s strided", on, dn), &c, l_binary, &k);
            c = two_in(mk(odt, 2, SBIG, 0), mk(dt, 2, SBIG, 0),
                       expand(mk(dt, 2, (int64_t[]){1, 260}, 0), SBIG), ka, kb);
            check(what("%s %s large, broadcast row", on, dn), &c, l_binary, &k);
            c = two_in(mk(odt, 2, SBIG, 0), mk(dt, 2, SBIG, 1), mk(dt, 2, SBIG, 0), ka, kb);
            check(what("%s %s large transposed", on, dn), &c, l_binary, &k);
        }
    kernel_end("binary");
}

static void test_binary_scalar(void) {
    if (!present("binary_scalar", dev_be->binary_scalar)) return;
    kernel_begin();
    static const double scalars[] = {2, 0.5, 3};
    for (int op = 0; op < TS_B_COUNT; op++)
        for (int a = 0; a < NDT; a++)
            for (int si = 0; si < 3; si++) {
                ts_dtype dt = dtypes[a], odt = is_cmp(op) ? TS_BOOL : dt;
                if (!is_float(dt) && scalars[si] != floor(scalars[si])) continue;
                int ka, kb;
                binary_kinds(op, dt, &ka, &kb);
                const char *on = binary_names[op], *dn = ts_dtype_name(dt);
                kctx k = {.op = op, .p0 = scalars[si]};
                call c = one_in(mk(odt, 2, S57, 0), mk(dt, 2, S57, 0), ka, 0);
                check(what("%s %s s=%g contiguous", on, dn, k.p0), &c, l_bscalar, &k);
                c = one_in(mk(odt, 2, S57, 2), mk(dt, 2, S57, 1), ka, 0);
                check(what("%s %s s=%g strided", on, dn, k.p0), &c, l_bscalar, &k);
                c = one_in(mk(odt, 2, SBIG, 0), mk(dt, 2, SBIG, 0), ka, 0);
                check(what("%s %s s=%g large", on, dn, k.p0), &c, l_bscalar, &k);
            }
    kernel_end("binary_scalar");
}

static void test_where(void) {
    if (!present("where", dev_be->where)) return;
    kernel_begin();
    for (int a = 0; a < NDT; a++) {
        ts_dtype dt = dtypes[a];
        const char *dn = ts_dtype_name(dt);
        call c = {.nout = 1,
                  .nin = 3,
                  .out = {mk(dt, 2, S34, 0)},
                  .in = {expand(mk(TS_BOOL, 2, (int64_t[]){3, 1}, 0), S34),
                         expand(mk(dt, 2, (int64_t[]){1, 4}, 0), S34), mk(dt, 2, S34, 1)}};
        for (int i = 0; i < 3; i++) fill_host(&c.in[i], V_ANY, 0);
        check(what("%s broadcast", dn), &c, l_where, NULL);
        c = (call){.nout = 1,
                   .nin = 3,
                   .out = {mk(dt, 2, S57, 2)},
                   .in = {mk(TS_BOOL, 2, S57, 1), mk(dt, 2, S57, 0), mk(dt, 2, S57, 2)}};
        for (int i = 0; i < 3; i++) fill_host(&c.in[i], V_ANY, 0);
        check(what("%s strided", dn), &c, l_where, NULL);
        c = (call){.nout = 1,
                   .nin = 3,
                   .out = {mk(dt, 2, SBIG, 0)},
                   .in = {mk(TS_BOOL, 2, SBIG, 0), mk(dt, 2, SBIG, 1), mk(dt, 2, SBIG, 0)}};
        for (int i = 0; i < 3; i++) fill_host(&c.in[i], V_ANY, 0);
        check(what("%s large", dn), &c, l_where, NULL);
    }
    kernel_end("where");
}

static const char *reduce_names[] = {"sum", "prod", "mean",      "max",    "min",
                                     "var", "std",  "logsumexp", "argmax", "argmin"};

static void test_reduce(void) {
    if (!present("reduce", dev_be->reduce)) return;
    kernel_begin();
    static const int64_t s345[] = {3, 4, 5}, s30[] = {3, 0};
    for (int op = 0; op < TS_R_COUNT; op++)
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a];
            bool float_op =
                op == TS_R_MEAN || op == TS_R_VAR || op == TS_R_STD || op == TS_R_LOGSUMEXP;
            if (float_op && !is_float(dt)) continue; /* the front end never asks for these */
            ts_dtype odt = op == TS_R_ARGMAX || op == TS_R_ARGMIN                 ? TS_I64
                           : (op == TS_R_SUM || op == TS_R_PROD) && !is_float(dt) ? TS_I64
                                                                                  : dt;
            int kind = op == TS_R_PROD ? V_NONZERO : V_ANY;
            const char *on = reduce_names[op], *dn = ts_dtype_name(dt);
            for (int nred = 1; nred <= 3; nred++)
                for (int lay = 0; lay < 2; lay++) {
                    kctx k = {.op = op, .nred = nred, .p0 = lay ? 0 : 1};
                    call c =
                        one_in(mk(odt, 3 - nred, s345, lay ? 2 : 0), mk(dt, 3, s345, lay), kind, 0);
                    check(what("%s %s nred %d layout %d", on, dn, nred, lay), &c, l_reduce, &k);
                }
            kctx k = {.op = op, .nred = 1, .p0 = 1};
            call c = one_in(mk(odt, 1, SBIG, 0), mk(dt, 2, SBIG, 0), kind, 0);
            check(what("%s %s large rows", on, dn), &c, l_reduce, &k);
            c = one_in(mk(odt, 1, SBIG, 2), mk(dt, 2, SBIG, 1), kind, 0);
            check(what("%s %s large columns", on, dn), &c, l_reduce, &k);
            bool needs_elems =
                op == TS_R_MAX || op == TS_R_MIN || op == TS_R_ARGMAX || op == TS_R_ARGMIN;
            if (!needs_elems) {
                c = one_in(mk(odt, 1, s30, 0), mk(dt, 2, s30, 0), kind, 0);
                check(what("%s %s over zero elements", on, dn), &c, l_reduce, &k);
            }
        }
    kernel_end("reduce");
}

static void test_matmul(void) {
    if (!present("matmul", dev_be->matmul)) return;
    kernel_begin();
    for (int a = 0; a < NDT; a++) {
        ts_dtype dt = dtypes[a];
        if (dt == TS_BOOL) continue;
        const char *dn = ts_dtype_name(dt);
        static const int64_t sa[] = {2, 3, 4}, sb[] = {2, 4, 5}, so[] = {2, 3, 5};
        for (int la = 0; la < 2; la++)
            for (int lb = 0; lb < 2; lb++) {
                call c = two_in(mk(dt, 3, so, la ? 2 : 0), mk(dt, 3, sa, la), mk(dt, 3, sb, lb),
                                V_ANY, V_ANY);
                check(what("%s a layout %d b layout %d", dn, la, lb), &c, l_matmul, NULL);
            }
        call c = two_in(mk(dt, 3, so, 0), mk(dt, 3, sa, 0),
                        expand(mk(dt, 3, (int64_t[]){1, 4, 5}, 1), sb), V_ANY, V_ANY);
        check(what("%s broadcast batch", dn), &c, l_matmul, NULL);
        c = two_in(mk(dt, 3, so, 0), mk(dt, 3, (int64_t[]){2, 3, 0}, 0),
                   mk(dt, 3, (int64_t[]){2, 0, 5}, 0), V_ANY, V_ANY);
        check(what("%s K = 0", dn), &c, l_matmul, NULL);
        c = two_in(mk(dt, 3, (int64_t[]){3, 33, 17}, 0), mk(dt, 3, (int64_t[]){3, 33, 65}, 1),
                   mk(dt, 3, (int64_t[]){3, 65, 17}, 0), V_ANY, V_ANY);
        check(what("%s larger", dn), &c, l_matmul, NULL);
    }
    kernel_end("matmul");
}

static void test_indexing(void) {
    static const int64_t s45[] = {4, 5};
    if (present("index_select", dev_be->index_select)) {
        kernel_begin();
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t os[2] = {4, 5};
                    os[dim] = 7;
                    call c = {
                        .nout = 1,
                        .nin = 2,
                        .out = {mk(dt, 2, os, lay ? 2 : 0)},
                        .in = {mk(dt, 2, s45, lay), mk(TS_I64, 1, (int64_t[]){7}, lay ? 2 : 0)}};
                    fill_host(&c.in[0], V_ANY, 0);
                    fill_host(&c.in[1], V_IDX, (double)s45[dim]);
                    kctx k = {.dim = dim};
                    check(what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c, l_isel, &k);
                }
        }
        kernel_end("index_select");
    }
    if (present("gather", dev_be->gather)) {
        kernel_begin();
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t is[2] = {4, 5};
                    is[dim] = 7;
                    if (lay) is[1 - dim] = 3; /* index smaller than the input in the other dim */
                    call c = {.nout = 1,
                              .nin = 2,
                              .out = {mk(dt, 2, is, lay ? 2 : 0)},
                              .in = {mk(dt, 2, s45, lay), mk(TS_I64, 2, is, lay)}};
                    fill_host(&c.in[0], V_ANY, 0);
                    fill_host(&c.in[1], V_IDX, (double)s45[dim]);
                    kctx k = {.dim = dim};
                    check(what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c, l_gather,
                          &k);
                }
        }
        kernel_end("gather");
    }
    if (present("scatter_add", dev_be->scatter_add)) {
        kernel_begin();
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t is[2] = {4, 5};
                    is[dim] = 3;
                    call c = {.nout = 1,
                              .nin = 2,
                              .out = {mk(dt, 2, s45, lay ? 2 : 0)},
                              .in = {mk(TS_I64, 2, is, lay), mk(dt, 2, is, lay)}};
                    fill_host(&c.out[0], V_ANY, 0); /* the destination's initial values */
                    fill_host(&c.in[0], V_IDX, (double)s45[dim]);
                    fill_host(&c.in[1], dt == TS_BOOL ? V_ANY : V_NONZERO, 0);
                    kctx k = {.dim = dim};
                    check(what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c, l_scatter,
                          &k);
                }
        }
        kernel_end("scatter_add");
    }
}

static void test_softmax(void) {
    if (!present("softmax", dev_be->softmax)) return;
    kernel_begin();
    static const int64_t s345[] = {3, 4, 5};
    for (int a = 0; a < 4; a++) /* float dtypes */
        for (int log = 0; log < 2; log++) {
            ts_dtype dt = dtypes[a];
            const char *dn = ts_dtype_name(dt), *mode = log ? "log_softmax" : "softmax";
            for (int dim = 0; dim < 3; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    kctx k = {.dim = dim, .log = log};
                    call c = one_in(mk(dt, 3, s345, lay ? 2 : 0), mk(dt, 3, s345, lay), V_ANY, 0);
                    check(what("%s %s dim %d layout %d", mode, dn, dim, lay), &c, l_softmax, &k);
                }
            for (int dim = 0; dim < 2; dim++) {
                kctx k = {.dim = dim, .log = log};
                call c = one_in(mk(dt, 2, SBIG, 0), mk(dt, 2, SBIG, dim), V_ANY, 0);
                check(what("%s %s large dim %d", mode, dn, dim), &c, l_softmax, &k);
            }
        }
    kernel_end("softmax");
}

static void test_random(void) {
    if (!present("random", dev_be->random)) return;
    kernel_begin();
    static const char *kinds[] = {"uniform", "normal", "bernoulli", "randint"};
    for (int kind = 0; kind < 4; kind++)
        for (int a = 0; a < NDT; a++) {
            ts_dtype dt = dtypes[a];
            if (kind <= TS_RAND_NORMAL && !is_float(dt)) continue;
            kctx k = {.op = kind,
                      .p0 = kind == TS_RAND_BERNOULLI ? 0.3
                            : kind == TS_RAND_NORMAL  ? 1
                                                      : -2,
                      .p1 = kind == TS_RAND_NORMAL ? 2 : 5};
            if (kind == TS_RAND_RANDINT && (dt == TS_U8 || dt == TS_BOOL))
                k.p0 = 0, k.p1 = dt == TS_BOOL ? 2 : 200;
            for (int lay = 0; lay < 3; lay += 2) {
                call c = {.nout = 1, .out = {mk(dt, 2, S57, lay)}};
                check(what("%s %s layout %d", kinds[kind], ts_dtype_name(dt), lay), &c, l_random,
                      &k);
            }
            call c = {.nout = 1, .out = {mk(dt, 2, SBIG, 0)}};
            check(what("%s %s large", kinds[kind], ts_dtype_name(dt)), &c, l_random, &k);
        }
    kernel_end("random");
}

static void run_backend(const ts_backend *be, const char *name, bool bitwise) {
    dev_be = be, dev_name = name, exact = bitwise;
    printf("== %s backend against cpu (%s)\n", be->name,
           bitwise ? "bitwise" : "PyTorch tolerances");
    test_memory();
    test_copy();
    test_fill();
    test_unary();
    test_binary();
    test_binary_scalar();
    test_where();
    test_reduce();
    test_matmul();
    test_indexing();
    test_softmax();
    test_random();
}

int main(void) {
    int nsim = ts_device_count(TS_SIM); /* also starts the library and registers the backends */
    if (nsim < 1 && ts_sim_configure(1, 0) == TS_OK) nsim = 1;
    cpu_be = ts_backend_for(TS_CPU);
    if (!cpu_be) {
        printf("no cpu backend registered\n");
        return 1;
    }
    const ts_backend *sim = ts_backend_for(TS_SIM);
    CHECK(sim != NULL);
    if (sim && nsim >= 1) run_backend(sim, "sim:0", true);
    const ts_backend *cuda = ts_cuda_is_available() ? ts_backend_for(TS_CUDA) : NULL;
    if (cuda)
        run_backend(cuda, "cuda:0", false);
    else
        printf("cuda: not available, its conformance is not checked here\n");
    return ts_test_finish();
}
