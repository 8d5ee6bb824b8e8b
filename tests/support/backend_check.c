/* backend_check.c — the machinery of the backend conformance test: guarded device buffers, strided
 * views, running one call on two backends and comparing the results byte for byte. */
#include "backend_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_table.h"
#include "ts_test.h"

const ts_dtype bc_dtypes[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};

bool bc_is_float(ts_dtype d) { return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16; }
size_t bc_esz(ts_dtype d) {
    return d == TS_F64 || d == TS_I64    ? 8
           : d == TS_F32 || d == TS_I32  ? 4
           : d == TS_F16 || d == TS_BF16 ? 2
                                         : 1;
}
static unsigned char guard_byte(size_t i) { return (unsigned char)(0x5Au ^ (i * 29u)); }
#define FILL_BYTE 0xCD /* what an output holds where the kernel must not write */

/* ------------------------------------------------------------------ buffers and views */

int64_t bc_numel(const bc_spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->nd; i++) n *= s->shape[i];
    return n;
}

/* layout: 0 contiguous, 1 "transposed" (stored with the last two dims swapped), 2 every other
 * element (the gaps must stay untouched) */
bc_spec bc_mk(ts_dtype dt, int nd, const int64_t *shape, int layout) {
    bc_spec s = {.dt = dt, .nd = nd};
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
    s.payload = empty ? 0 : (size_t)(maxoff + 1) * bc_esz(dt);
    return s;
}

/* Broadcasts size-1 dims to `to` with stride 0 (the payload stays the small one). */
bc_spec bc_expand(bc_spec s, const int64_t *to) {
    for (int i = 0; i < s.nd; i++)
        if (s.shape[i] == 1 && to[i] != 1) s.shape[i] = to[i], s.strides[i] = 0;
    return s;
}

/* ------------------------------------------------------------------ host data */
static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static double value(ts_dtype dt, int kind, double hi) {
    if (kind == BC_IDX) return floor(urand() * hi);
    if (dt == TS_BOOL) return kind == BC_NONZERO || kind == BC_POS ? 1 : (urand() < 0.5);
    bool fl = bc_is_float(dt);
    double v;
    switch (kind) {
    case BC_POS:
        v = fl ? 0.1 + 2.9 * urand() : 1 + floor(5 * urand());
        break;
    case BC_NONZERO:
        v = fl ? 0.25 + 2.75 * urand() : 1 + floor(5 * urand());
        if (dt != TS_U8 && urand() < 0.5) v = -v;
        break;
    case BC_SMALLNN:
        v = fl ? 2 * urand() : floor(4 * urand());
        break;
    case BC_UNIT:
        v = fl ? -0.99 + 1.98 * urand() : floor(-1 + 3 * urand());
        break;
    case BC_GE1:
        v = fl ? 1 + 3 * urand() : 1 + floor(4 * urand());
        break;
    default:
        v = fl ? -3 + 6 * urand() : floor(-5 + 11 * urand());
        break;
    }
    if (dt == TS_U8 && v < 0) v = -v;
    return v;
}

/* Fills every element the view can reach (gaps too: inputs have no "untouched" bytes). */
void bc_fill_host(bc_spec *s, int kind, double hi) {
    size_t es = bc_esz(s->dt), n = s->payload / es;
    s->host = malloc(s->payload + 1);
    for (size_t i = 0; i < n; i++) ot_store(s->host + i * es, s->dt, value(s->dt, kind, hi));
}

/* ------------------------------------------------------------------ running one case */

bc_state_t bc_state;

static ts_kview view_of(const bc_spec *s, char *data) {
    ts_kview v = {.data = data, .dtype = s->dt, .ndim = s->nd};
    for (int i = 0; i < s->nd; i++) v.shape[i] = s->shape[i], v.strides[i] = s->strides[i];
    return v;
}

/* Runs the call on backend b; out images (guards + payload + guards) come back in img[]. */
static void run_on(const ts_backend *b, const bc_call *c, bc_launch fn, const void *ctx,
                   unsigned char **img) {
    void *din[BC_MAXV], *dout[BC_MAXV];
    ts_kview vin[BC_MAXV], vout[BC_MAXV];
    for (int i = 0; i < c->nin; i++) {
        size_t n = c->in[i].payload;
        din[i] = b->raw_alloc(b, 0, n ? n : 1);
        if (n) b->copy_h2d(b, 0, din[i], c->in[i].host, n);
        vin[i] = view_of(&c->in[i], din[i]);
    }
    for (int i = 0; i < c->nout; i++) {
        size_t n = c->out[i].payload, tot = n + 2 * BC_GUARD;
        unsigned char *h = malloc(tot);
        for (size_t k = 0; k < BC_GUARD; k++)
            h[k] = guard_byte(k), h[BC_GUARD + n + k] = guard_byte(k + BC_GUARD);
        if (c->out[i].host)
            memcpy(h + BC_GUARD, c->out[i].host, n);
        else
            memset(h + BC_GUARD, FILL_BYTE, n);
        dout[i] = b->raw_alloc(b, 0, tot);
        b->copy_h2d(b, 0, dout[i], h, tot);
        free(h);
        vout[i] = view_of(&c->out[i], (char *)dout[i] + BC_GUARD);
    }
    fn(b, vout, vin, ctx);
    b->synchronize(b, 0);
    for (int i = 0; i < c->nout; i++) {
        size_t tot = c->out[i].payload + 2 * BC_GUARD;
        img[i] = malloc(tot);
        b->copy_d2h(b, 0, img[i], dout[i], tot);
        b->raw_free(b, 0, dout[i], tot);
    }
    for (int i = 0; i < c->nin; i++)
        b->raw_free(b, 0, din[i], c->in[i].payload ? c->in[i].payload : 1);
}

static bool guards_ok(const unsigned char *img, size_t n) {
    for (size_t k = 0; k < BC_GUARD; k++)
        if (img[k] != guard_byte(k) || img[BC_GUARD + n + k] != guard_byte(k + BC_GUARD))
            return false;
    return true;
}

static void tol(ts_dtype dt, double *rtol, double *atol) {
    *rtol = dt == TS_F32    ? 1.3e-6
            : dt == TS_F64  ? 1e-7
            : dt == TS_F16  ? 1e-3
            : dt == TS_BF16 ? 1.6e-2
                            : 0;
    *atol = dt == TS_F64 ? 1e-7 : bc_is_float(dt) ? 1e-5 : 0;
}

/* Compares one output: the view's elements (bitwise, or within tolerance for cuda) and every other
 * byte of the buffer (must be untouched on both). */
static bool compare_out(const bc_spec *s, const unsigned char *ref, const unsigned char *got,
                        char *msg, size_t len) {
    size_t n = s->payload;
    if (!guards_ok(ref, n))
        return snprintf(msg, len, "cpu backend wrote outside its buffer"), false;
    if (!guards_ok(got, n))
        return snprintf(msg, len, "guard bytes overwritten (out-of-bounds write)"), false;
    if (bc_state.exact && !(bc_state.device_math && bc_state.math_case)) {
        if (memcmp(ref, got, n + 2 * BC_GUARD) == 0) return true;
        for (size_t k = 0; k < n; k++)
            if (ref[BC_GUARD + k] != got[BC_GUARD + k]) {
                size_t e = k / bc_esz(s->dt);
                snprintf(msg, len,
                         "differs from cpu at byte %zu (element %zu of the buffer): cpu %g, %s %g",
                         k, e, ot_load(ref + BC_GUARD + e * bc_esz(s->dt), s->dt),
                         bc_state.dev_name, ot_load(got + BC_GUARD + e * bc_esz(s->dt), s->dt));
                return false;
            }
        return false;
    }
    unsigned char *mask = calloc(n + 1, 1);
    int64_t idx[TS_MAX_DIMS] = {0}, total = bc_numel(s);
    double rtol, atol;
    tol(s->dt, &rtol, &atol);
    bool ok = true;
    size_t es = bc_esz(s->dt);
    for (int64_t k = 0; k < total && ok; k++) {
        int64_t off = 0;
        for (int i = 0; i < s->nd; i++) off += idx[i] * s->strides[i];
        size_t b = (size_t)off * es;
        memset(mask + b, 1, es);
        double r = ot_load(ref + BC_GUARD + b, s->dt), g = ot_load(got + BC_GUARD + b, s->dt);
        bool same =
            (isnan(r) && isnan(g)) || r == g || (!isinf(r) && fabs(g - r) <= atol + rtol * fabs(r));
        if (!same) {
            snprintf(msg, len, "element %lld: cpu %.9g, %s %.9g", (long long)k, r,
                     bc_state.dev_name, g);
            ok = false;
        }
        for (int i = s->nd - 1; i >= 0; i--) {
            if (++idx[i] < s->shape[i]) break;
            idx[i] = 0;
        }
    }
    for (size_t k = 0; k < n && ok; k++)
        if (!mask[k] && got[BC_GUARD + k] != ref[BC_GUARD + k]) {
            snprintf(msg, len, "wrote byte %zu, which is outside the output view", k);
            ok = false;
        }
    free(mask);
    return ok;
}

/* ------------------------------------------------------------------ per-kernel bookkeeping */

void bc_check(const char *what, bc_call *c, bc_launch fn, const void *ctx) {
    unsigned char *ref[BC_MAXV], *got[BC_MAXV];
    run_on(bc_state.ref, c, fn, ctx, ref);
    run_on(bc_state.dev, c, fn, ctx, got);
    char msg[256] = "";
    bool ok = true;
    for (int i = 0; i < c->nout && ok; i++)
        ok = compare_out(&c->out[i], ref[i], got[i], msg, sizeof msg);
    bc_state.cases++;
    if (!ok && bc_state.failed++ < 5 && !bc_state.quiet) printf("     %s: %s\n", what, msg);
    for (int i = 0; i < c->nout; i++) free(ref[i]), free(got[i]), free(c->out[i].host);
    for (int i = 0; i < c->nin; i++) free(c->in[i].host);
}

void bc_kernel_begin(void) { bc_state.cases = 0, bc_state.failed = 0; }
void bc_kernel_end(const char *name) {
    if (bc_state.quiet) return;
    ts_test_record(bc_state.failed == 0);
    printf("%-4s %-14s %-7s %d cases%s\n", bc_state.failed ? "FAIL" : "ok", name, bc_state.dev_name,
           bc_state.cases, "");
    if (bc_state.failed) printf("     ^ %d of %d cases failed\n", bc_state.failed, bc_state.cases);
    fflush(stdout);
}
bool bc_present(const char *name, const void *entry) {
    if (entry) return true;
    printf("skip %-14s %-7s entry is NULL (the front end must have a composite fallback)\n", name,
           bc_state.dev_name);
    return false;
}

static char what_buf[160];
const char *bc_what(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what_buf, sizeof what_buf, fmt, ap);
    va_end(ap);
    return what_buf;
}

#ifndef TS_TEST_CUDA_EMULATION /* built without CUDA: support/cuda_emulation.cu is not compiled */
const ts_backend *bc_cuda_emulation(int mode) {
    (void)mode;
    return NULL;
}
const ts_backend *bc_cuda_emulation_reduce(void) { return NULL; }
#endif
