/* test_pool_norm_nd.c — include/tessera/pool_norm.h on every test device: 1-d / 3-d max and avg
 * pooling (padding, stride, dilation, ceil_mode, count_include_pad, divisor_override, unbatched),
 * adaptive avg / max pooling with indices, max unpooling, lp pooling, group / instance / local
 * response norms against float64 reference loops written here; gradients by ts_gradcheck; the
 * instance norm's running statistics; the error paths. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/pool_norm.h"
#include "ts_test.h"

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static double urand(void) { /* [-1, 1) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}
static double *rand_vec(int64_t n) {
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = urand();
    return v;
}
static double *host(ts_tensor *t) {
    int64_t n = t ? ts_numel(t) : 1;
    double *h = calloc((size_t)(n > 0 ? n : 1), sizeof *h);
    if (!t || ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h) != TS_OK)
        h[0] = NAN;
    return h;
}
static ts_tensor *leaf(ts_shape s, const double *v, ts_dtype dt, ts_device dev, bool rg) {
    ts_tensor *t = ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.device = dev}), dt);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
/* every value within tol (relative to max(1, |ref|)) */
static bool close_all(const double *got, const double *ref, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * fmax(1.0, fabs(ref[i])))) {
            printf("  element %lld: got %.17g, want %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

/* ------------------------------------------------------------------ pooling references */
/* A pool of nd dims seen on 3 (leading dims of size 1, kernel 1, stride 1) */
typedef struct pcase {
    int nd;
    bool avg, unbatched;
    int64_t n, c, in[3];
    ts_pool_opts o;
} pcase;

typedef struct g3 {
    int64_t in[3], out[3];
    int k[3], s[3], p[3], d[3];
} g3;

static int64_t out_len(int64_t in, int k, int p, int s, int d, bool ceil) {
    const int64_t span = in + 2 * p - (int64_t)d * (k - 1) - 1;
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= in + p) o--;
    return o;
}

static g3 geom(const pcase *c) {
    g3 g;
    const int off = 3 - c->nd;
    for (int i = 0; i < 3; i++) {
        const int j = i - off;
        g.in[i] = j < 0 ? 1 : c->in[j];
        g.k[i] = j < 0 ? 1 : c->o.kernel[j];
        g.s[i] = j < 0 ? 1 : (c->o.stride[j] ? c->o.stride[j] : c->o.kernel[j]);
        g.p[i] = j < 0 ? 0 : c->o.padding[j];
        g.d[i] = j < 0 ? 1 : (c->o.dilation[j] ? c->o.dilation[j] : 1);
        g.out[i] = out_len(g.in[i], g.k[i], g.p[i], g.s[i], g.d[i], c->o.ceil_mode);
    }
    return g;
}

/* PyTorch's CPU loops: max (first maximum in (d, h, w) order) with flat indices; avg with the
 * window clipped to input + padding for the divisor, or to the input (exclude_pad) */
static void ref_pool(const pcase *c, const g3 *g, const double *x, double *y, int64_t *idx) {
    const int64_t plane = g->in[0] * g->in[1] * g->in[2],
                  oplane = g->out[0] * g->out[1] * g->out[2];
    for (int64_t nc = 0; nc < c->n * c->c; nc++)
        for (int64_t o = 0; o < oplane; o++) {
            const int64_t oi[3] = {o / (g->out[1] * g->out[2]), o / g->out[2] % g->out[1],
                                   o % g->out[2]};
            int64_t st[3], en[3], cnt_pad = 1, cnt = 1;
            for (int a = 0; a < 3; a++) {
                st[a] = oi[a] * g->s[a] - g->p[a];
                en[a] = c->avg ? fmin(st[a] + g->k[a], g->in[a] + g->p[a]) : 0;
                cnt_pad *= en[a] - st[a];
            }
            double best = -INFINITY, sum = 0;
            int64_t bi = -1;
            if (c->avg) {
                for (int a = 0; a < 3; a++) {
                    const int64_t s0 = st[a] < 0 ? 0 : st[a],
                                  e0 = en[a] > g->in[a] ? g->in[a] : en[a];
                    cnt *= e0 - s0;
                }
            }
            for (int kd = 0; kd < g->k[0]; kd++)
                for (int kh = 0; kh < g->k[1]; kh++)
                    for (int kw = 0; kw < g->k[2]; kw++) {
                        const int64_t pos[3] = {st[0] + (int64_t)kd * g->d[0],
                                                st[1] + (int64_t)kh * g->d[1],
                                                st[2] + (int64_t)kw * g->d[2]};
                        bool in = true;
                        for (int a = 0; a < 3; a++) in = in && pos[a] >= 0 && pos[a] < g->in[a];
                        if (!in) continue;
                        const int64_t f = (pos[0] * g->in[1] + pos[1]) * g->in[2] + pos[2];
                        const double v = x[nc * plane + f];
                        sum += v;
                        if (v > best) best = v, bi = f;
                    }
            if (c->avg) {
                const double div = c->o.divisor_override ? c->o.divisor_override
                                   : c->o.exclude_pad    ? (double)cnt
                                                         : (double)cnt_pad;
                y[nc * oplane + o] = sum / div;
            } else {
                y[nc * oplane + o] = best;
                idx[nc * oplane + o] = bi;
            }
        }
}

static ts_shape shape_of(const pcase *c, const int64_t *sp) {
    int64_t d[TS_MAX_DIMS] = {0};
    int k = 0;
    if (!c->unbatched) d[k++] = c->n;
    d[k++] = c->c;
    for (int i = 0; i < c->nd; i++) d[k++] = sp[i];
    return ts_shape_make((size_t)k, d);
}

static ts_tensor *call_pool(const pcase *c, ts_tensor *x, ts_tensor **idx) {
    return c->avg ? ts_avg_pool_nd(x, c->nd, c->o) : ts_max_pool_nd(x, c->nd, c->o, idx);
}

static void run_pool(const pcase *c, ts_device dev, ts_dtype dt, int ci) {
    ts_scope_begin();
    const g3 g = geom(c);
    const int64_t nx = c->n * c->c * g.in[0] * g.in[1] * g.in[2];
    const int64_t ny = c->n * c->c * g.out[0] * g.out[1] * g.out[2];
    double *x = rand_vec(nx), *ref = calloc((size_t)ny, sizeof *ref);
    int64_t *ridx = calloc((size_t)ny, sizeof *ridx);
    if (dt == TS_F32)
        for (int64_t i = 0; i < nx; i++) x[i] = (float)x[i];
    ref_pool(c, &g, x, ref, ridx);
    ts_tensor *idx = NULL;
    ts_tensor *y = call_pool(c, leaf(shape_of(c, c->in), x, dt, dev, false), c->avg ? NULL : &idx);
    CHECK_OK();
    int64_t osp[3];
    for (int i = 0; i < c->nd; i++) osp[i] = g.out[3 - c->nd + i];
    const ts_shape want = shape_of(c, osp);
    bool shape_ok = y && ts_shape_of(y).ndim == want.ndim;
    for (int i = 0; shape_ok && i < want.ndim; i++)
        shape_ok = ts_shape_of(y).dims[i] == want.dims[i];
    if (!shape_ok) printf("  case %d: wrong output shape\n", ci);
    CHECK(shape_ok);
    if (shape_ok) {
        double *got = host(y);
        const bool ok = close_all(got, ref, ny, dt == TS_F64 ? 1e-12 : 2e-6);
        if (!ok) printf("  case %d (%s) values differ\n", ci, dt == TS_F64 ? "f64" : "f32");
        CHECK(ok);
        free(got);
        if (!c->avg) {
            double *gi = host(idx);
            bool iok = idx && ts_dtype_of(idx) == TS_I64;
            for (int64_t i = 0; iok && i < ny; i++) iok = gi[i] == (double)ridx[i];
            if (!iok) printf("  case %d: indices differ\n", ci);
            CHECK(iok);
            free(gi);
        }
    }
    free(x), free(ref), free(ridx);
    ts_scope_end();
}

static ts_tensor *pool_grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return call_pool((const pcase *)ctx, in[0], NULL);
}

static void run_pool_grad(const pcase *c, ts_device dev) {
    ts_scope_begin();
    const g3 g = geom(c);
    const int64_t nx = c->n * c->c * g.in[0] * g.in[1] * g.in[2];
    double *x = rand_vec(nx);
    ts_tensor *in = leaf(shape_of(c, c->in), x, TS_F64, dev, true);
    const bool ok = ts_gradcheck(pool_grad_fn, (void *)c, &in, 1, (ts_gradcheck_opts){0});
    CHECK(ok);
    CHECK_OK();
    free(x);
    ts_scope_end();
}

/* clang-format off */
static const pcase pcases[] = {
    {3, false, false, 2, 2, {4, 5, 6}, {.kernel = {2, 3, 2}, .stride = {2, 1, 2}, .padding = {1, 1, 0},
                                        .dilation = {1, 1, 2}, .ceil_mode = true}},
    {3, false, true, 1, 3, {3, 4, 4}, {.kernel = {3, 2, 2}, .padding = {1, 1, 1}}},
    {1, false, false, 2, 3, {9}, {.kernel = {3}, .stride = {2}, .padding = {1}, .dilation = {2}}},
    {1, false, true, 1, 2, {7}, {.kernel = {2}, .ceil_mode = true}},
    {3, true, false, 2, 2, {5, 4, 6}, {.kernel = {3, 2, 2}, .stride = {2, 2, 1}, .padding = {1, 1, 1},
                                       .ceil_mode = true}},
    {3, true, false, 1, 2, {5, 4, 6}, {.kernel = {3, 2, 2}, .stride = {2, 2, 1}, .padding = {1, 1, 1},
                                       .ceil_mode = true, .exclude_pad = true}},
    {3, true, true, 1, 2, {4, 4, 5}, {.kernel = {2, 2, 3}, .padding = {1, 0, 1}, .divisor_override = 5}},
    {1, true, false, 2, 2, {8}, {.kernel = {3}, .stride = {2}, .padding = {1}, .ceil_mode = true,
                                 .exclude_pad = true}},
    {1, true, true, 1, 3, {6}, {.kernel = {2}, .divisor_override = -3}},
    {2, true, false, 1, 2, {5, 6}, {.kernel = {2, 3}, .padding = {1, 1}, .divisor_override = -4}},
    {2, false, true, 1, 2, {5, 6}, {.kernel = {2, 3}, .stride = {1, 2}, .dilation = {2, 1}}},
    /* max over whole windows of one row (kern_pool.c's row path): 1-d, overlapping; 2-d 1 x k */
    {1, false, false, 2, 3, {11}, {.kernel = {3}, .stride = {2}}},
    {1, false, true, 1, 2, {9}, {.kernel = {4}, .stride = {1}}},
    {2, false, false, 1, 2, {3, 8}, {.kernel = {1, 3}, .stride = {2, 2}}},
};
/* clang-format on */
#define N_PCASES (int)(sizeof pcases / sizeof pcases[0])

/* ------------------------------------------------------------------ adaptive pooling */
static void ref_adaptive(int nd, bool max, int64_t nc, const int64_t *in, const int64_t *out,
                         const double *x, double *y, int64_t *idx) {
    int64_t i3[3] = {1, 1, 1}, o3[3] = {1, 1, 1};
    for (int i = 0; i < nd; i++) i3[3 - nd + i] = in[i], o3[3 - nd + i] = out[i];
    const int64_t plane = i3[0] * i3[1] * i3[2], oplane = o3[0] * o3[1] * o3[2];
    for (int64_t p = 0; p < nc; p++)
        for (int64_t o = 0; o < oplane; o++) {
            const int64_t oi[3] = {o / (o3[1] * o3[2]), o / o3[2] % o3[1], o % o3[2]};
            int64_t s[3], e[3];
            for (int a = 0; a < 3; a++) {
                s[a] = (int64_t)floor((double)(oi[a] * i3[a]) / (double)o3[a]);
                e[a] = (int64_t)ceil((double)((oi[a] + 1) * i3[a]) / (double)o3[a]);
            }
            double best = -INFINITY, sum = 0;
            int64_t bi = -1, cnt = 0;
            for (int64_t d = s[0]; d < e[0]; d++)
                for (int64_t h = s[1]; h < e[1]; h++)
                    for (int64_t w = s[2]; w < e[2]; w++) {
                        const int64_t f = (d * i3[1] + h) * i3[2] + w;
                        const double v = x[p * plane + f];
                        sum += v, cnt++;
                        if (v > best) best = v, bi = f;
                    }
            y[p * oplane + o] = max ? best : sum / (double)cnt;
            if (max) idx[p * oplane + o] = bi;
        }
}

typedef struct acase {
    int nd;
    bool max;
    int64_t n, c, in[3], out[3];
} acase;

static ts_tensor *call_adaptive(const acase *c, ts_tensor *x, ts_tensor **idx) {
    return c->max ? ts_adaptive_max_pool_nd(x, c->nd, c->out, idx)
                  : ts_adaptive_avg_pool_nd(x, c->nd, c->out);
}

static ts_tensor *adaptive_grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return call_adaptive((const acase *)ctx, in[0], NULL);
}

static void run_adaptive(const acase *c, ts_device dev) {
    ts_scope_begin();
    int64_t nx = c->n * c->c, ny = c->n * c->c, xs[TS_MAX_DIMS] = {c->n, c->c},
            ys[TS_MAX_DIMS] = {c->n, c->c};
    for (int i = 0; i < c->nd; i++)
        nx *= c->in[i], ny *= c->out[i], xs[2 + i] = c->in[i], ys[2 + i] = c->out[i];
    double *x = rand_vec(nx), *ref = calloc((size_t)ny, sizeof *ref);
    int64_t *ridx = calloc((size_t)ny, sizeof *ridx);
    ref_adaptive(c->nd, c->max, c->n * c->c, c->in, c->out, x, ref, ridx);
    ts_tensor *idx = NULL;
    ts_tensor *xt = leaf(ts_shape_make((size_t)c->nd + 2, xs), x, TS_F64, dev, true);
    ts_tensor *y = call_adaptive(c, xt, c->max ? &idx : NULL);
    CHECK_OK();
    CHECK(y && ts_numel(y) == ny && ts_shape_of(y).ndim == c->nd + 2 &&
          ts_shape_of(y).dims[c->nd + 1] == ys[c->nd + 1]);
    double *got = host(y);
    CHECK(close_all(got, ref, ny, 1e-12));
    if (c->max) {
        double *gi = host(idx);
        bool iok = true;
        for (int64_t i = 0; i < ny; i++) iok = iok && gi[i] == (double)ridx[i];
        CHECK(iok);
        free(gi);
    }
    CHECK(ts_gradcheck(adaptive_grad_fn, (void *)c, &xt, 1, (ts_gradcheck_opts){0}));
    CHECK_OK();
    free(got), free(x), free(ref), free(ridx);
    ts_scope_end();
}

static const acase acases[] = {
    {1, true, 2, 2, {7}, {3}},
    {2, true, 1, 2, {5, 7}, {3, 4}},
    {3, true, 2, 1, {4, 5, 3}, {3, 2, 2}},
    {1, false, 2, 3, {7}, {4}},
    {3, false, 1, 2, {5, 4, 6}, {2, 3, 4}},
    {2, true, 1, 1, {3, 3}, {5, 2}},
};
#define N_ACASES (int)(sizeof acases / sizeof acases[0])

/* ------------------------------------------------------------------ unpool, lp pool */
static ts_tensor *unpool_grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const int64_t out[2] = {5, 6};
    return ts_max_unpool_nd(in[0], (ts_tensor *)ctx, 2, out);
}

static void test_unpool(ts_device dev) {
    ts_scope_begin();
    const int64_t out[2] = {5, 6};
    double *x = rand_vec(2 * 2 * 4 * 4);
    /* indices with a repeat: every input still gets the gradient at its index */
    int64_t iv[2 * 2 * 4 * 4];
    for (int i = 0; i < 64; i++) iv[i] = (i * 7 + 3) % 30; /* distinct within each plane */
    ts_tensor *distinct = ts_from_data(TS_SHAPE(2, 2, 4, 4), TS_I64, iv, (ts_opts){.device = dev});
    iv[5] = iv[4];
    ts_tensor *xt = leaf(TS_SHAPE(2, 2, 4, 4), x, TS_F64, dev, true);
    ts_tensor *it = ts_from_data(TS_SHAPE(2, 2, 4, 4), TS_I64, iv, (ts_opts){.device = dev});
    ts_tensor *y = ts_max_unpool_nd(xt, it, 2, out);
    CHECK_OK();
    CHECK(y && ts_numel(y) == 2 * 2 * 30);
    double *got = host(y), ref[120] = {0};
    for (int i = 0; i < 64; i++) ref[(i / 16) * 30 + iv[i]] = x[i]; /* the last write wins */
    /* the repeated position holds one of the two values written there */
    const int rep = (5 / 16) * 30 + (int)iv[5];
    if (got[rep] == x[4]) ref[rep] = x[4];
    CHECK(close_all(got, ref, 120, 0));
    /* backward: gradient of sum(y * g) is g at each index, the repeat included */
    ts_tensor *gw = ts_tensor_f64(TS_SHAPE(2, 2, 5, 6), ref, (ts_opts){.device = dev});
    ts_backward(ts_sum(ts_mul(y, gw)));
    double *gx = host(ts_grad(xt));
    bool gok = true;
    for (int i = 0; i < 64; i++) gok = gok && gx[i] == ref[(i / 16) * 30 + iv[i]];
    CHECK(gok);
    CHECK(ts_gradcheck(unpool_grad_fn, distinct, &xt, 1, (ts_gradcheck_opts){0}));
    /* round trip: unpool(max_pool(x)) keeps each window's maximum at its place */
    ts_tensor *idx = NULL;
    ts_tensor *p = ts_max_pool_nd(ts_detach(xt), 2, (ts_pool_opts){.kernel = {2, 2}}, &idx);
    const int64_t o4[2] = {4, 4};
    ts_tensor *u = ts_max_unpool_nd(p, idx, 2, o4);
    double *hu = host(u), *hp = host(p);
    double ssum = 0, psum = 0;
    for (int i = 0; i < 64; i++) ssum += hu[i];
    for (int i = 0; i < 16; i++) psum += hp[i];
    CHECK(fabs(ssum - psum) < 1e-12);
    /* an index outside the output */
    iv[0] = 30;
    ts_tensor *bad = ts_from_data(TS_SHAPE(2, 2, 4, 4), TS_I64, iv, (ts_opts){.device = dev});
    CHECK(!ts_max_unpool_nd(xt, bad, 2, out));
    CHECK_ERR_HAS(TS_ERR_ARG, "invalid max index: 30");
    CHECK(!ts_max_unpool_nd(xt, ts_to_dtype(it, TS_I32), 2, out));
    CHECK_ERR(TS_ERR_DTYPE);
    free(got), free(gx), free(x), free(hu), free(hp);
    ts_scope_end();
}

static ts_tensor *lp_grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_lp_pool_nd(in[0], 3, 2.0, (ts_pool_opts){.kernel = {2, 2, 2}, .stride = {1, 2, 1}});
}

static void test_lp(ts_device dev) {
    ts_scope_begin();
    /* 1-d, p = 3 on positive values, ceil off: (sum x^3 over the window)^(1/3) */
    double *x = rand_vec(2 * 9);
    for (int i = 0; i < 18; i++) x[i] = fabs(x[i]) + 0.1;
    ts_tensor *y = ts_lp_pool_nd(leaf(TS_SHAPE(2, 9), x, TS_F64, dev, false), 1, 3.0,
                                 (ts_pool_opts){.kernel = {3}, .stride = {2}});
    CHECK_OK();
    double ref[8], *got = host(y);
    for (int c = 0; c < 2; c++)
        for (int o = 0; o < 4; o++) {
            double s = 0;
            for (int k = 0; k < 3; k++) s += pow(x[c * 9 + o * 2 + k], 3);
            ref[c * 4 + o] = cbrt(s);
        }
    CHECK(y && ts_numel(y) == 8 && close_all(got, ref, 8, 1e-12));
    double *x3 = rand_vec(1 * 2 * 3 * 4 * 3);
    for (int i = 0; i < 72; i++) x3[i] = fabs(x3[i]) + 0.1;
    ts_tensor *xt = leaf(TS_SHAPE(1, 2, 3, 4, 3), x3, TS_F64, dev, true);
    CHECK(ts_gradcheck(lp_grad_fn, NULL, &xt, 1, (ts_gradcheck_opts){0}));
    CHECK(!ts_lp_pool_nd(xt, 3, 2.0, (ts_pool_opts){.kernel = {2, 2, 2}, .padding = {1, 0, 0}}));
    CHECK_ERR(TS_ERR_ARG);
    free(x), free(got), free(x3);
    ts_scope_end();
}

/* ------------------------------------------------------------------ norms */
typedef struct gn_ctx {
    int64_t groups;
} gn_ctx;

static ts_tensor *gn_fn(ts_tensor *const *in, int n, void *ctx) {
    return ts_group_norm(in[0], ((gn_ctx *)ctx)->groups, n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL,
                         1e-5, NULL, NULL);
}

static void test_group_norm(ts_device dev) {
    ts_scope_begin();
    const int64_t N = 2, C = 6, S = 5, G = 3;
    double *x = rand_vec(N * C * S), *w = rand_vec(C), *b = rand_vec(C), ref[60], rm[6], rr[6];
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const double *p = x + (n * C + g * (C / G)) * S;
            const int64_t m = (C / G) * S;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < m; i++) mean += p[i];
            mean /= (double)m;
            for (int64_t i = 0; i < m; i++) var += (p[i] - mean) * (p[i] - mean);
            var /= (double)m; /* biased */
            const double r = 1 / sqrt(var + 1e-5);
            rm[n * G + g] = mean, rr[n * G + g] = r;
            for (int64_t i = 0; i < m; i++) {
                const int64_t c = g * (C / G) + i / S;
                ref[(n * C) * S + g * m + i] = (p[i] - mean) * r * w[c] + b[c];
            }
        }
    ts_tensor *in[3] = {leaf(TS_SHAPE(N, C, S), x, TS_F64, dev, true),
                        leaf(TS_SHAPE(C), w, TS_F64, dev, true),
                        leaf(TS_SHAPE(C), b, TS_F64, dev, true)};
    ts_tensor *mean = NULL, *rstd = NULL;
    ts_tensor *y = ts_group_norm(in[0], G, in[1], in[2], 1e-5, &mean, &rstd);
    CHECK_OK();
    double *got = host(y), *gm = host(mean), *gr = host(rstd);
    CHECK(close_all(got, ref, N * C * S, 1e-12));
    CHECK(close_all(gm, rm, N * G, 1e-12) && close_all(gr, rr, N * G, 1e-12));
    gn_ctx ctx = {G};
    CHECK(ts_gradcheck(gn_fn, &ctx, in, 3, (ts_gradcheck_opts){0}));
    CHECK(!ts_group_norm(in[0], 4, NULL, NULL, 1e-5, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "divisible by num_groups");
    CHECK(!ts_group_norm(in[0], G, in[2],
                         ts_zeros(TS_SHAPE(5), (ts_opts){.dtype = TS_F64, .device = dev}), 1e-5,
                         NULL, NULL));
    CHECK_ERR(TS_ERR_SHAPE);
    /* native_group_norm: the same statistics; they require grad when the output does */
    ts_tensor *x0 = leaf(TS_SHAPE(N, C, S), x, TS_F64, dev, false), *nm = NULL, *nr = NULL;
    ts_tensor *ny = ts_native_group_norm(x0, in[1], NULL, N, C, S, G, 1e-5, &nm, &nr);
    CHECK_OK();
    double *hm = host(nm), *hr = host(nr);
    CHECK(close_all(hm, rm, N * G, 1e-12) && close_all(hr, rr, N * G, 1e-12));
    CHECK(ny && ts_requires_grad(ny) && ts_requires_grad(nm) && ts_requires_grad(nr));
    CHECK(!ts_native_group_norm(x0, NULL, NULL, N, C, S + 1, G, 1e-5, &nm, &nr) && !nm && !nr);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "HxW=6");
    free(hm), free(hr);
    free(x), free(w), free(b), free(got), free(gm), free(gr);
    ts_scope_end();
}

static ts_tensor *in_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_instance_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}

static void test_instance_norm(ts_device dev) {
    ts_scope_begin();
    const int64_t N = 3, C = 2, S = 4 * 3;
    double *x = rand_vec(N * C * S), *w = rand_vec(C), *b = rand_vec(C), ref[72];
    double rm0[2] = {0.5, -0.25}, rv0[2] = {1.5, 0.75}, rm[2] = {0}, rv[2] = {0};
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            const double *p = x + (n * C + c) * S;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < S; i++) mean += p[i];
            mean /= (double)S;
            for (int64_t i = 0; i < S; i++) var += (p[i] - mean) * (p[i] - mean);
            for (int64_t i = 0; i < S; i++)
                ref[(n * C + c) * S + i] = (p[i] - mean) / sqrt(var / S + 1e-5) * w[c] + b[c];
            /* PyTorch: each instance's update (unbiased variance), averaged over N */
            rm[c] += (0.9 * rm0[c] + 0.1 * mean) / N;
            rv[c] += (0.9 * rv0[c] + 0.1 * var / (S - 1)) / N;
        }
    ts_tensor *in[3] = {leaf(TS_SHAPE(N, C, 4, 3), x, TS_F64, dev, true),
                        leaf(TS_SHAPE(C), w, TS_F64, dev, true),
                        leaf(TS_SHAPE(C), b, TS_F64, dev, true)};
    ts_tensor *trm = leaf(TS_SHAPE(C), rm0, TS_F64, dev, false);
    ts_tensor *trv = leaf(TS_SHAPE(C), rv0, TS_F64, dev, false);
    ts_tensor *y = ts_instance_norm(in[0], trm, trv, in[1], in[2], true, 0.1, 1e-5);
    CHECK_OK();
    double *got = host(y), *grm = host(trm), *grv = host(trv);
    CHECK(close_all(got, ref, N * C * S, 1e-12));
    CHECK(close_all(grm, rm, C, 1e-12) && close_all(grv, rv, C, 1e-12));
    /* evaluation: the running statistics normalise */
    ts_tensor *ye = ts_instance_norm(in[0], trm, trv, NULL, NULL, false, 0.1, 1e-5);
    double *ge = host(ye);
    bool eok = true;
    for (int64_t i = 0; i < N * C * S; i++) {
        const int64_t c = i / S % C;
        eok = eok && fabs(ge[i] - (x[i] - rm[c]) / sqrt(rv[c] + 1e-5)) < 1e-12;
    }
    CHECK(eok);
    CHECK(ts_gradcheck(in_fn, NULL, in, 3, (ts_gradcheck_opts){0}));
    CHECK(!ts_instance_norm(in[0], NULL, NULL, NULL, NULL, false, 0.1, 1e-5));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_instance_norm(ts_reshape(in[0], TS_SHAPE(N, C * S)), NULL, NULL, NULL, NULL, true,
                            0.1, 1e-5));
    CHECK_ERR(TS_ERR_SHAPE);
    free(x), free(w), free(b), free(got), free(grm), free(grv), free(ge);
    ts_scope_end();
}

static ts_tensor *lrn_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_local_response_norm(in[0], 3, 0.5, 0.75, 2.0);
}

static void test_lrn(ts_device dev) {
    ts_scope_begin();
    const int64_t N = 2, C = 5, S = 6;
    double *x = rand_vec(N * C * S), ref[60];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                double sum = 0; /* channels c - 1 .. c + 1 (size 3), zero outside */
                for (int64_t j = c - 1; j <= c + 1; j++)
                    if (j >= 0 && j < C) sum += x[(n * C + j) * S + s] * x[(n * C + j) * S + s];
                ref[(n * C + c) * S + s] = x[(n * C + c) * S + s] / pow(2.0 + 0.5 * sum / 3, 0.75);
            }
    ts_tensor *xt = leaf(TS_SHAPE(N, C, 2, 3), x, TS_F64, dev, true);
    ts_tensor *y = ts_local_response_norm(xt, 3, 0.5, 0.75, 2.0);
    CHECK_OK();
    double *got = host(y);
    CHECK(close_all(got, ref, N * C * S, 1e-12));
    CHECK(ts_gradcheck(lrn_fn, NULL, &xt, 1, (ts_gradcheck_opts){0}));
    CHECK(!ts_local_response_norm(ts_reshape(xt, TS_SHAPE(N, C * S)), 3, 1, 1, 1));
    CHECK_ERR(TS_ERR_SHAPE);
    free(x), free(got);
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
/* float32 max_pool1d without indices (the CPU's row paths: pairs for k = s = 2, any window else)
 * over rows with NaNs at even and odd places and -inf: NaN wins its window, as PyTorch */
static void test_max_pool1d_nan(ts_device dev) {
    ts_scope_begin();
    enum { L = 37 };
    double v[2 * L];
    for (int i = 0; i < 2 * L; i++) v[i] = urand();
    v[4] = NAN, v[9] = NAN, v[L + 20] = NAN, v[L + 3] = -INFINITY, v[L + 30] = INFINITY;
    ts_tensor *x = leaf(TS_SHAPE(1, 2, L), v, TS_F32, dev, false);
    const int ks[][2] = {{2, 2}, {3, 1}, {3, 2}, {1, 1}};
    for (int c = 0; c < 4; c++) {
        const int k = ks[c][0], s = ks[c][1], ol = (L - k) / s + 1;
        ts_tensor *y = ts_max_pool_nd(x, 1, (ts_pool_opts){.kernel = {k}, .stride = {s}}, NULL);
        CHECK(y && ts_numel(y) == 2 * ol);
        double *got = host(y);
        for (int r = 0; r < 2; r++)
            for (int o = 0; o < ol; o++) {
                float m = (float)v[r * L + o * s];
                for (int j = 1; j < k; j++) {
                    const float a = (float)v[r * L + o * s + j];
                    m = (a > m || a != a) && m == m ? a : m;
                }
                const double g = got[r * ol + o];
                CHECK(m != m ? g != g : g == m);
            }
        free(got);
    }
    CHECK_OK();
    ts_scope_end();
}

/* float32 average pooling with every window inside (the CPU's whole-window paths: 2x2 windows of
 * stride 2, and the 3-d pool's depth pass as whole rows) against a float64 mean: each result is
 * a float sum of at most 12 terms of |x| < 1 and a division, so within 16 float epsilons */
static void test_avg_pool_full_f32(ts_device dev) {
    ts_scope_begin();
    struct {
        int nd;
        int64_t sh[5], k[3], s[3];
        int divisor;
    } cases[] = {{2, {2, 3, 6, 8}, {2, 2}, {2, 2}, 0},
                 {2, {1, 2, 7, 9}, {2, 2}, {2, 2}, 3},
                 {3, {1, 2, 4, 6, 4}, {2, 2, 2}, {2, 2, 2}, 0},
                 {3, {2, 1, 5, 4, 6}, {3, 2, 2}, {1, 2, 2}, 0},
                 {3, {1, 2, 6, 4, 4}, {3, 2, 2}, {2, 2, 2}, 5},
                 {2, {1, 2, 6, 8}, {2, 1}, {2, 2}, 0}}; /* the generic loop: not a 2x2 window */
    for (int c = 0; c < 6; c++) {
        const int nd = cases[c].nd;
        const int64_t *sh = cases[c].sh;
        int64_t in_sp[3] = {1, 1, 1}, out_sp[3] = {1, 1, 1}, n = sh[0] * sh[1], total = n;
        ts_pool_opts o = {.divisor_override = cases[c].divisor};
        for (int i = 0; i < nd; i++) {
            in_sp[3 - nd + i] = sh[2 + i];
            out_sp[3 - nd + i] = (sh[2 + i] - cases[c].k[i]) / cases[c].s[i] + 1;
            o.kernel[i] = cases[c].k[i], o.stride[i] = cases[c].s[i];
            total *= sh[2 + i];
        }
        int64_t k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1};
        for (int i = 0; i < nd; i++) k3[3 - nd + i] = cases[c].k[i], s3[3 - nd + i] = cases[c].s[i];
        double *v = rand_vec(total);
        ts_tensor *x = leaf(ts_shape_make(2 + nd, sh), v, TS_F32, dev, false);
        ts_tensor *y = ts_avg_pool_nd(x, nd, o);
        const int64_t on = n * out_sp[0] * out_sp[1] * out_sp[2];
        CHECK(y && ts_numel(y) == on);
        double *got = host(y);
        const double div = cases[c].divisor ? cases[c].divisor : (double)(k3[0] * k3[1] * k3[2]);
        bool ok = true;
        for (int64_t q = 0; q < on && ok; q++) {
            int64_t r = q, od[3];
            for (int i = 2; i >= 0; i--) od[i] = r % out_sp[i], r /= out_sp[i];
            double s = 0;
            for (int64_t a = 0; a < k3[0]; a++)
                for (int64_t b = 0; b < k3[1]; b++)
                    for (int64_t e = 0; e < k3[2]; e++) {
                        const int64_t iz = od[0] * s3[0] + a, iy = od[1] * s3[1] + b,
                                      ix = od[2] * s3[2] + e;
                        s +=
                            (double)(float)v[((r * in_sp[0] + iz) * in_sp[1] + iy) * in_sp[2] + ix];
                    }
            ok = fabs(got[q] - s / div) <= 16 * FLT_EPSILON;
            if (!ok)
                printf("  avg case %d output %lld: got %.9g want %.9g\n", c, (long long)q, got[q],
                       s / div);
        }
        CHECK(ok);
        free(got);
        free(v);
    }
    CHECK_OK();
    ts_scope_end();
}

static void test_errors(ts_device dev, bool other_dev) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(2, 3, 4, 4, 4), (ts_opts){.device = dev});
    CHECK(!ts_max_pool_nd(x, 3, (ts_pool_opts){.kernel = {0, 2, 2}}, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "max_pool3d");
    CHECK(!ts_max_pool_nd(x, 3, (ts_pool_opts){.kernel = {2, 2, 2}, .padding = {2, 0, 0}}, NULL));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_avg_pool_nd(x, 3, (ts_pool_opts){.kernel = {2, 2, 2}, .dilation = {2, 1, 1}}));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_max_pool_nd(x, 1, (ts_pool_opts){.kernel = {2}}, NULL)); /* 5-d is not 1-d */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "max_pool1d");
    CHECK(!ts_max_pool_nd(x, 3, (ts_pool_opts){.kernel = {5, 2, 2}}, NULL)); /* output 0 */
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_max_pool_nd(x, 4, (ts_pool_opts){.kernel = {2, 2, 2}}, NULL));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_max_pool_nd(ts_zeros(TS_SHAPE(2, 3, 8), (ts_opts){.dtype = TS_I64, .device = dev}), 1,
                          (ts_pool_opts){.kernel = {2}}, NULL));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_adaptive_max_pool_nd(x, 3, (const int64_t[]){2, -1, 2}, NULL));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_adaptive_max_pool_nd(NULL, 3, (const int64_t[]){2, 2, 2}, NULL));
    CHECK_ERR(TS_ERR_ARG);
    if (other_dev) { /* x here, indices on the cpu */
        ts_tensor *i = ts_zeros(TS_SHAPE(2, 3, 4, 4, 4), (ts_opts){.dtype = TS_I64});
        CHECK(!ts_max_unpool_nd(x, i, 3, (const int64_t[]){4, 4, 4}));
        CHECK_ERR(TS_ERR_DEVICE);
        ts_tensor *w = ts_ones(TS_SHAPE(3), (ts_opts){0});
        CHECK(!ts_group_norm(x, 3, w, NULL, 1e-5, NULL, NULL));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < nd; di++) {
        for (int i = 0; i < N_PCASES; i++) {
            run_pool(&pcases[i], devs[di], TS_F64, i);
            run_pool(&pcases[i], devs[di], TS_F32, i);
            run_pool_grad(&pcases[i], devs[di]);
        }
        for (int i = 0; i < N_ACASES; i++) run_adaptive(&acases[i], devs[di]);
        test_unpool(devs[di]);
        test_lp(devs[di]);
        test_group_norm(devs[di]);
        test_instance_norm(devs[di]);
        test_lrn(devs[di]);
        test_max_pool1d_nan(devs[di]);
        test_avg_pool_full_f32(devs[di]);
        test_errors(devs[di], di > 0);
    }
    return ts_test_finish();
}
