/* test_conv_nd.c — conv1d, conv3d, conv_transpose1d / 2d / 3d, im2col / col2im and the modules of
 * include/tessera/conv.h on every test device: forward against float64 reference loops written
 * here (groups, stride, padding, dilation, output_padding, unbatched), gradients by ts_gradcheck,
 * the modules' parameters, padding modes and 'same', and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/conv.h"
#include "ts_test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
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
    int64_t n = ts_numel(t);
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

static bool ts_shape_eq(ts_shape a, ts_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dims[i] != b.dims[i]) return false;
    return true;
}

/* ------------------------------------------------------------------ references */
/* A k-dim case seen as 3 spatial dims (the missing leading ones of size 1). */
typedef struct conv_case {
    int k;
    bool transposed, unbatched, bias;
    int64_t n, cin, cout, groups, in[3], ker[3];
    int s[3], p[3], d[3], op[3];
} conv_case;

static int64_t prod3(const int64_t v[3]) { return v[0] * v[1] * v[2]; }

/* the case's sizes on 3 dims: in3 / ker3 / out3, and the params padded with identity entries */
typedef struct geom3 {
    int64_t in[3], ker[3], out[3];
    int s[3], p[3], d[3], op[3];
} geom3;

static geom3 geom_of(const conv_case *c) {
    geom3 g;
    const int lead = 3 - c->k;
    for (int i = 0; i < 3; i++) {
        const bool real = i >= lead;
        const int j = i - lead;
        g.in[i] = real ? c->in[j] : 1;
        g.ker[i] = real ? c->ker[j] : 1;
        g.s[i] = real && c->s[j] ? c->s[j] : 1;
        g.p[i] = real ? c->p[j] : 0;
        g.d[i] = real && c->d[j] ? c->d[j] : 1;
        g.op[i] = real ? c->op[j] : 0;
        const int64_t eff = (int64_t)g.d[i] * (g.ker[i] - 1) + 1;
        g.out[i] = c->transposed ? (g.in[i] - 1) * g.s[i] - 2 * g.p[i] + eff + g.op[i]
                                 : (g.in[i] + 2 * g.p[i] - eff) / g.s[i] + 1;
    }
    return g;
}

/* y and |terms| sums (for the tolerance) of the convolution or transposed convolution */
static void reference(const conv_case *c, const geom3 *g, const double *x, const double *w,
                      const double *b, double *y, double *mag) {
    const int64_t IS = prod3(g->in), OS = prod3(g->out), KS = prod3(g->ker);
    const int64_t cig = c->cin / c->groups, cog = c->cout / c->groups;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t o = 0; o < c->cout; o++)
            for (int64_t i = 0; i < OS; i++) {
                y[(n * c->cout + o) * OS + i] = c->bias ? b[o] : 0;
                mag[(n * c->cout + o) * OS + i] = c->bias ? fabs(b[o]) : 0;
            }
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t gr = 0; gr < c->groups; gr++)
            for (int64_t ci = 0; ci < cig; ci++)
                for (int64_t co = 0; co < cog; co++)
                    for (int64_t kk = 0; kk < KS; kk++) {
                        const int64_t kq[3] = {kk / (g->ker[1] * g->ker[2]),
                                               kk / g->ker[2] % g->ker[1], kk % g->ker[2]};
                        const int64_t cin = gr * cig + ci, cout = gr * cog + co;
                        const double wv = c->transposed ? w[(cin * cog + co) * KS + kk]
                                                        : w[(cout * cig + ci) * KS + kk];
                        /* each output position: its input position (conv: o*s - p + k*d = i;
                         * transposed: i*s - p + k*d = o) */
                        for (int64_t q = 0; q < OS; q++) {
                            const int64_t oq[3] = {q / (g->out[1] * g->out[2]),
                                                   q / g->out[2] % g->out[1], q % g->out[2]};
                            int64_t iq[3];
                            bool ok = true;
                            for (int t = 0; t < 3 && ok; t++) {
                                if (!c->transposed) {
                                    iq[t] = oq[t] * g->s[t] - g->p[t] + kq[t] * g->d[t];
                                } else {
                                    const int64_t num = oq[t] + g->p[t] - kq[t] * g->d[t];
                                    ok = num >= 0 && num % g->s[t] == 0;
                                    iq[t] = num / g->s[t];
                                }
                                ok = ok && iq[t] >= 0 && iq[t] < g->in[t];
                            }
                            if (!ok) continue;
                            const double xv = x[(n * c->cin + cin) * IS +
                                                (iq[0] * g->in[1] + iq[1]) * g->in[2] + iq[2]];
                            y[(n * c->cout + cout) * OS + q] += xv * wv;
                            mag[(n * c->cout + cout) * OS + q] += fabs(xv * wv);
                        }
                    }
}

/* ------------------------------------------------------------------ calls */
static ts_convnd_opts opts_of(const conv_case *c) {
    ts_convnd_opts o = {.groups = (int)c->groups};
    for (int i = 0; i < c->k; i++) {
        o.stride[i] = c->s[i], o.padding[i] = c->p[i], o.dilation[i] = c->d[i];
        o.output_padding[i] = c->op[i];
    }
    return o;
}

static ts_tensor *call(const conv_case *c, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    const ts_convnd_opts o = opts_of(c);
    if (!c->transposed) {
        if (c->k == 2) {
            const ts_conv2d_opts o2 = {.stride = {o.stride[0], o.stride[1]},
                                       .padding = {o.padding[0], o.padding[1]},
                                       .dilation = {o.dilation[0], o.dilation[1]},
                                       .groups = o.groups};
            return ts_conv2d(x, w, b, o2);
        }
        return c->k == 1 ? ts_conv1d(x, w, b, o) : ts_conv3d(x, w, b, o);
    }
    return c->k == 1   ? ts_conv_transpose1d(x, w, b, o)
           : c->k == 2 ? ts_conv_transpose2d(x, w, b, o)
                       : ts_conv_transpose3d(x, w, b, o);
}

static ts_shape shape_nc(int64_t n, int64_t ch, const int64_t *sp, int k, bool unbatched) {
    ts_shape s = {.ndim = 0};
    if (!unbatched) s.dims[s.ndim++] = n;
    s.dims[s.ndim++] = ch;
    for (int i = 0; i < k; i++) s.dims[s.ndim++] = sp[i];
    return s;
}

static ts_shape weight_shape(const conv_case *c) {
    return c->transposed ? shape_nc(c->cin, c->cout / c->groups, c->ker, c->k, false)
                         : shape_nc(c->cout, c->cin / c->groups, c->ker, c->k, false);
}

static void run_case(const conv_case *c, ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const geom3 g = geom_of(c);
    const ts_shape xs = shape_nc(c->n, c->cin, c->in, c->k, c->unbatched);
    const ts_shape ws = weight_shape(c);
    const int64_t nx = c->n * c->cin * prod3(g.in),
                  nw = c->cin * (c->cout / c->groups) * prod3(g.ker);
    const int64_t ny = c->n * c->cout * prod3(g.out);
    double *x = rand_vec(nx), *w = rand_vec(nw), *b = rand_vec(c->cout);
    double *ref = calloc((size_t)ny, sizeof *ref), *mag = calloc((size_t)ny, sizeof *mag);
    reference(c, &g, x, w, b, ref, mag);
    ts_tensor *y = call(c, leaf(xs, x, dt, dev, false), leaf(ws, w, dt, dev, false),
                        c->bias ? leaf(TS_SHAPE(c->cout), b, dt, dev, false) : NULL);
    CHECK_OK();
    const ts_shape want = shape_nc(c->n, c->cout, &g.out[3 - c->k], c->k, c->unbatched);
    CHECK(y && ts_shape_eq(ts_shape_of(y), want));
    if (y && ts_numel(y) == ny) {
        double *h = host(y);
        /* rounding: each product and sum of the inputs' magnitudes, u per operation, times the
         * terms summed (the half-open reduction lengths are below 64 here) */
        const double u = dt == TS_F64 ? 0x1p-53 : 0x1p-24;
        const int64_t terms = (c->cin / c->groups) * prod3(g.ker) + 2;
        int bad = 0;
        for (int64_t i = 0; i < ny; i++) {
            const double tol = 2.0 * u * (double)terms * mag[i] + (dt == TS_F64 ? 0 : 2 * u);
            if (!(fabs(h[i] - ref[i]) <= tol) && bad++ < 3)
                printf("  k=%d transposed=%d %s: y[%lld] = %.17g, reference %.17g (tol %.3g)\n",
                       c->k, c->transposed, ts_dtype_name(dt), (long long)i, h[i], ref[i], tol);
        }
        CHECK(bad == 0);
        free(h);
    }
    free(x), free(w), free(b), free(ref), free(mag);
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradients */
static ts_tensor *grad_fn(ts_tensor *const *in, int n, void *ctx) {
    return call((const conv_case *)ctx, in[0], in[1], n > 2 ? in[2] : NULL);
}

static void run_gradcheck(const conv_case *case_in, ts_device dev) {
    conv_case one = *case_in; /* batch 1: central differences cost two forwards per element */
    one.n = 1;
    const conv_case *c = &one;
    ts_scope_begin();
    const geom3 g = geom_of(c);
    const int64_t nx = c->n * c->cin * prod3(g.in),
                  nw = c->cin * (c->cout / c->groups) * prod3(g.ker);
    double *x = rand_vec(nx), *w = rand_vec(nw), *b = rand_vec(c->cout);
    ts_tensor *in[3] = {
        leaf(shape_nc(c->n, c->cin, c->in, c->k, c->unbatched), x, TS_F64, dev, true),
        leaf(weight_shape(c), w, TS_F64, dev, true), leaf(TS_SHAPE(c->cout), b, TS_F64, dev, true)};
    const bool ok = ts_gradcheck(grad_fn, (void *)c, in, c->bias ? 3 : 2, (ts_gradcheck_opts){0});
    if (!ok) printf("  gradcheck failed: k=%d transposed=%d\n", c->k, c->transposed);
    CHECK(ok);
    CHECK_OK();
    free(x), free(w), free(b);
    ts_scope_end();
}

/* clang-format off */
static const conv_case cases[] = {
    /* k  tr     unb    bias   n  cin cout g  in          ker        s          p          d          op */
    {1, false, false, true,  2, 4, 6, 2, {9},        {3},       {2},       {1},       {2},       {0}},
    {1, false, true,  false, 1, 3, 2, 1, {7},        {2},       {1},       {0},       {1},       {0}},
    {3, false, false, true,  2, 4, 4, 2, {5, 4, 6},  {3, 2, 2}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, {0}},
    {3, false, true,  true,  1, 2, 3, 1, {4, 5, 3},  {2, 3, 1}, {1, 2, 1}, {0, 1, 0}, {2, 1, 1}, {0}},
    {1, true,  false, true,  2, 4, 6, 2, {5},        {3},       {2},       {1},       {1},       {1}},
    {1, true,  true,  false, 1, 3, 2, 1, {4},        {2},       {3},       {0},       {2},       {2}},
    {2, true,  false, true,  2, 4, 6, 2, {3, 4},     {3, 2},    {2, 1},    {1, 0},    {1, 2},    {1, 0}},
    {2, true,  false, true,  1, 2, 2, 1, {3, 3},     {2, 2},    {1, 1},    {1, 1},    {3, 2},    {2, 1}},
    {2, true,  true,  true,  1, 3, 3, 3, {4, 3},     {3, 3},    {2, 2},    {2, 1},    {1, 1},    {0, 1}},
    {3, true,  false, true,  2, 4, 2, 2, {3, 2, 3},  {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, {1, 0, 1}},
    {3, true,  true,  false, 1, 2, 3, 1, {2, 3, 2},  {3, 1, 2}, {1, 2, 1}, {0, 0, 1}, {2, 1, 1}, {1, 1, 0}},
    {3, true,  false, true,  1, 2, 2, 1, {2, 2, 2},  {2, 2, 2}, {1, 1, 1}, {1, 0, 0}, {3, 1, 1}, {2, 0, 0}},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof *cases))

/* ------------------------------------------------------------------ unfold / fold */
static void test_fold(ts_device dev) {
    ts_scope_begin();
    const int kernel[2] = {2, 3};
    const ts_conv2d_opts o = {.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}};
    const int64_t N = 2, C = 3, H = 5, W = 6;
    const int64_t LH = (H + 2 - 2) / 2 + 1, LW = (W - 5) / 1 + 1, K = 6, L = LH * LW;
    double *x = rand_vec(N * C * H * W);
    ts_tensor *xt = leaf(TS_SHAPE(N, C, H, W), x, TS_F64, dev, false);
    ts_tensor *cols = ts_im2col(xt, kernel, o);
    CHECK_OK();
    CHECK(cols && ts_shape_eq(ts_shape_of(cols), TS_SHAPE(N, C * K, L)));
    double *hc = host(cols);
    double *fref = calloc((size_t)(N * C * H * W), sizeof *fref); /* fold(cols) reference */
    int bad = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < kernel[0]; i++)
                for (int64_t j = 0; j < kernel[1]; j++)
                    for (int64_t l = 0; l < L; l++) {
                        const int64_t h = l / LW * 2 - 1 + i, w = l % LW + 2 * j;
                        const double v = h >= 0 && h < H ? x[((n * C + c) * H + h) * W + w] : 0;
                        const double got = hc[(n * C * K + c * K + i * kernel[1] + j) * L + l];
                        bad += got != v;
                        if (h >= 0 && h < H) fref[((n * C + c) * H + h) * W + w] += got;
                    }
    CHECK(bad == 0);
    const int64_t size[2] = {H, W};
    ts_tensor *back = ts_col2im(cols, size, kernel, o);
    CHECK_OK();
    CHECK(back && ts_shape_eq(ts_shape_of(back), TS_SHAPE(N, C, H, W)));
    double *hb = host(back);
    bad = 0;
    for (int64_t i = 0; i < N * C * H * W; i++) bad += !(fabs(hb[i] - fref[i]) <= 1e-15 * 8);
    CHECK(bad == 0);
    /* errors: fold's block count, unfold's ndim */
    const int64_t wrong[2] = {H + 3, W};
    CHECK(!ts_col2im(cols, wrong, kernel, o));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "sliding blocks");
    CHECK(!ts_im2col(ts_select(cols, 0, 0), kernel, o));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "unfold");
    free(x), free(hc), free(hb), free(fref);
    ts_scope_end();
}

static ts_tensor *unfold_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    const int kernel[2] = {2, 2};
    const ts_conv2d_opts o = {.stride = {1, 2}, .padding = {1, 1}};
    const int64_t size[2] = {4, 5};
    ts_tensor *c = ts_im2col(in[0], kernel, o);
    return ts_mul(c, ts_im2col(ts_col2im(c, size, kernel, o), kernel, o));
}

/* ------------------------------------------------------------------ modules */
static void test_modules(ts_device dev) {
    ts_scope_begin();
    const int k1[1] = {3}, k3[3] = {2, 3, 1};
    ts_module *m = ts_conv1d_new(4, 6, k1, (ts_convnd_opts){.groups = 2, .stride = {2}});
    CHECK_OK();
    ts_tensor *w = ts_module_get(m, "weight"), *b = ts_module_get(m, "bias");
    CHECK(w && ts_shape_eq(ts_shape_of(w), TS_SHAPE(6, 2, 3)));
    CHECK(b && ts_shape_eq(ts_shape_of(b), TS_SHAPE(6)));
    /* kaiming_uniform_(a=sqrt(5)): bound 1/sqrt(fan_in) with fan_in = 2 * 3, as the bias */
    double *hw = host(w);
    double mx = 0;
    for (int i = 0; i < 36; i++) mx = fmax(mx, fabs(hw[i]));
    CHECK(mx <= 1 / sqrt(6.0) && mx > 0.2);
    free(hw);
    char *repr = ts_module_repr(m);
    CHECK(repr && strstr(repr, "Conv1d(4, 6, kernel_size=(3,), stride=(2,), groups=2)") != NULL);
    if (repr && !strstr(repr, "Conv1d(4, 6, kernel_size=(3,), stride=(2,), groups=2)"))
        printf("  repr: %s\n", repr);
    free(repr);
    ts_module *t = ts_conv_transpose3d_new(2, 4, k3, (ts_convnd_opts){.no_bias = true});
    CHECK(t && !ts_module_get(t, "bias"));
    CHECK(ts_shape_eq(ts_shape_of(ts_module_get(t, "weight")), TS_SHAPE(2, 4, 2, 3, 1)));
    ts_module_free(m);
    ts_module_free(t);
    ts_error_clear();
    /* padding modes: the module equals ts_pad then the convolution without padding */
    const ts_pad_mode modes[4] = {TS_PAD_CONSTANT, TS_PAD_REFLECT, TS_PAD_REPLICATE,
                                  TS_PAD_CIRCULAR};
    for (int i = 0; i < 4; i++) {
        for (int same = 0; same < 2; same++) {
            const int kk[3] = {3, 2, 2};
            ts_convnd_opts o = {.padding = {1, 1, 0},
                                .dilation = {1, 2, 1},
                                .padding_mode = modes[i],
                                .padding_same = same};
            ts_module *c3 = ts_conv3d_new(2, 3, kk, o);
            CHECK_OK();
            ts_module_to(c3, dev);
            double *xv = rand_vec(2 * 2 * 4 * 5 * 3);
            ts_tensor *x = leaf(TS_SHAPE(2, 2, 4, 5, 3), xv, TS_F32, dev, false);
            ts_tensor *y = ts_forward(c3, x);
            CHECK_OK();
            /* same: totals d * (k - 1) = 2, 2, 1: (1, 1), (1, 1), (0, 1) */
            const int64_t pad[6] = {same ? 0 : 0, same ? 1 : 0, 1, 1, 1, 1};
            ts_tensor *ref =
                ts_conv3d(ts_pad(x, pad, 6, modes[i], 0.0), ts_module_get(c3, "weight"),
                          ts_module_get(c3, "bias"), (ts_convnd_opts){.dilation = {1, 2, 1}});
            CHECK_OK();
            CHECK(y && ref && ts_shape_eq(ts_shape_of(y), ts_shape_of(ref)));
            double *hy = host(y), *hr = host(ref);
            int bad = 0;
            for (int64_t j = 0; y && j < ts_numel(y); j++) bad += hy[j] != hr[j];
            CHECK(bad == 0);
            free(xv), free(hy), free(hr);
            ts_module_free(c3);
        }
    }
    /* module errors */
    CHECK(!ts_conv1d_new(3, 4, k1, (ts_convnd_opts){.groups = 2}));
    CHECK_ERR_HAS(TS_ERR_ARG, "divisible by groups");
    CHECK(!ts_conv_transpose1d_new(2, 2, k1, (ts_convnd_opts){.padding_mode = TS_PAD_REFLECT}));
    CHECK_ERR_HAS(TS_ERR_ARG, "zeros");
    CHECK(!ts_conv1d_new(2, 2, k1, (ts_convnd_opts){.stride = {2}, .padding_same = true}));
    CHECK_ERR_HAS(TS_ERR_ARG, "strided");
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_errors(ts_device dev, bool other) {
    ts_scope_begin();
    const ts_opts to = {.device = dev};
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 4, 5), to), *w = ts_zeros(TS_SHAPE(6, 2, 3), to);
    CHECK(!ts_conv1d(ts_zeros(TS_SHAPE(1, 1, 4, 5), to), w, NULL, (ts_convnd_opts){.groups = 2}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected 2D (unbatched) or 3D (batched) input to conv1d");
    CHECK(!ts_conv1d(x, w, NULL, (ts_convnd_opts){.groups = 4}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "conv1d: given groups=4");
    CHECK(!ts_conv3d(ts_zeros(TS_SHAPE(1, 3, 2, 2, 2), to), ts_zeros(TS_SHAPE(4, 2, 1, 1, 1), to),
                     NULL, (ts_convnd_opts){.groups = 2}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected input");
    CHECK(!ts_conv_transpose2d(ts_zeros(TS_SHAPE(1, 3, 4, 4), to),
                               ts_zeros(TS_SHAPE(3, 2, 2, 2), to), NULL,
                               (ts_convnd_opts){.groups = 2}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "divisible");
    CHECK(!ts_conv_transpose1d(
        x, ts_zeros(TS_SHAPE(4, 2, 3), to), NULL,
        (ts_convnd_opts){.stride = {2}, .dilation = {2}, .output_padding = {2}}));
    CHECK_ERR_HAS(TS_ERR_ARG, "output padding must be smaller than either stride or dilation");
    CHECK(!ts_conv1d(x, w, ts_zeros(TS_SHAPE(5), to), (ts_convnd_opts){.groups = 2}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "bias");
    CHECK(!ts_conv3d(ts_zeros(TS_SHAPE(1, 2, 1, 4, 4), to), ts_zeros(TS_SHAPE(2, 2, 2, 1, 1), to),
                     NULL, (ts_convnd_opts){0}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Kernel size can't be greater");
    CHECK(!ts_conv_transpose1d(
        x, ts_zeros(TS_SHAPE(4, 2, 3), (ts_opts){.device = dev, .dtype = TS_F64}), NULL,
        (ts_convnd_opts){0}));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_conv1d(x, w, NULL, (ts_convnd_opts){.output_padding = {1}, .groups = 2}));
    CHECK_ERR_HAS(TS_ERR_ARG, "output_padding");
    if (other) { /* the weight on the cpu, the input elsewhere */
        CHECK(!ts_conv_transpose3d(ts_zeros(TS_SHAPE(1, 2, 2, 2, 2), to),
                                   ts_zeros(TS_SHAPE(2, 1, 1, 1, 1), (ts_opts){0}), NULL,
                                   (ts_convnd_opts){0}));
        CHECK_ERR(TS_ERR_DEVICE);
        CHECK(!ts_conv1d(x, ts_zeros(TS_SHAPE(6, 2, 3), (ts_opts){0}), NULL,
                         (ts_convnd_opts){.groups = 2}));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    CHECK(!ts_conv1d(NULL, w, NULL, (ts_convnd_opts){0}));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < nd; di++) {
        for (int i = 0; i < N_CASES; i++) {
            run_case(&cases[i], devs[di], TS_F64);
            run_case(&cases[i], devs[di], TS_F32);
            /* the other devices run the same compositions: their gradients through the
             * transposed convolution's node (a 2d case) and one 3d case */
            if (di == 0 || i == 7 || i == 9) run_gradcheck(&cases[i], devs[di]);
        }
        test_fold(devs[di]);
        ts_scope_begin();
        double *xv = rand_vec(2 * 2 * 4 * 5);
        ts_tensor *xin = leaf(TS_SHAPE(2, 2, 4, 5), xv, TS_F64, devs[di], true);
        CHECK(ts_gradcheck(unfold_fn, NULL, &xin, 1, (ts_gradcheck_opts){0}));
        free(xv);
        ts_scope_end();
        test_modules(devs[di]);
        test_errors(devs[di], di > 0);
    }
    return ts_test_finish();
}
