/* test_conv_padded.c — ts_conv_padded (include/tessera/conv.h) on every test device: conv1d /
 * conv2d / conv3d with a padding of its own per side and PyTorch's padding='same' (an uneven
 * total's extra element after: bottom / right) against a float64 reference loop written here
 * (groups, stride, dilation, unbatched), in float64 and float32; gradients by ts_gradcheck (central
 * differences); the refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera/conv.h"
#include "ts_test.h"

/* a k-dim case seen on 3 spatial dims (the missing leading ones of size 1, no padding) */
typedef struct pcase {
    int k;
    bool same, unbatched, bias;
    int64_t n, cin, cout, groups, in[3], ker[3];
    int s[3], d[3];
    int pad[6]; /* before / after of each spatial dim, first dim first (same: unused) */
} pcase;

/* clang-format off */
static const pcase cases[] = {
    /* k same   unb    bias   n  ci co g  in          ker        s          d          pad */
    {2, true,  false, true,  2, 2, 3, 1, {5, 6},     {2, 4},    {1, 1},    {1, 1},    {0}},
    {2, true,  false, false, 1, 4, 2, 2, {4, 5},     {3, 2},    {1, 1},    {2, 3},    {0}},
    {2, true,  true,  true,  1, 2, 2, 1, {3, 4},     {2, 2},    {1, 1},    {1, 1},    {0}},
    {2, false, false, true,  2, 2, 2, 1, {5, 4},     {3, 2},    {2, 1},    {1, 2},    {0, 2, 3, 1}},
    {2, false, false, true,  1, 2, 4, 2, {4, 4},     {2, 2},    {1, 2},    {1, 1},    {1, 1, 2, 2}},
    {1, true,  false, true,  2, 2, 3, 1, {7},        {4},       {1},       {1},       {0}},
    {1, false, true,  true,  1, 3, 2, 1, {6},        {3},       {2},       {1},       {2, 0}},
    {3, true,  false, true,  1, 2, 2, 1, {3, 4, 3},  {2, 3, 2}, {1, 1, 1}, {1, 1, 2}, {0}},
    {3, false, false, false, 1, 2, 2, 2, {3, 3, 4},  {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 0, 1, 2, 1}},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof *cases))

typedef struct geom {
    int64_t in[3], ker[3], out[3];
    int s[3], d[3], lo[3], hi[3];
} geom;

/* the case on 3 dims, the padding resolved: 'same' is PyTorch's total d (k - 1), total / 2 before
 */
static geom geom_of(const pcase *c) {
    geom g;
    const int lead = 3 - c->k;
    for (int i = 0; i < 3; i++) {
        const int j = i - lead;
        g.in[i] = j < 0 ? 1 : c->in[j], g.ker[i] = j < 0 ? 1 : c->ker[j];
        g.s[i] = j < 0 ? 1 : c->s[j], g.d[i] = j < 0 ? 1 : c->d[j];
        if (j < 0) {
            g.lo[i] = g.hi[i] = 0;
        } else if (c->same) {
            const int total = c->d[j] * (int)(c->ker[j] - 1);
            g.lo[i] = total / 2, g.hi[i] = total - total / 2;
        } else {
            g.lo[i] = c->pad[2 * j], g.hi[i] = c->pad[2 * j + 1];
        }
        g.out[i] =
            (g.in[i] + g.lo[i] + g.hi[i] - (int64_t)g.d[i] * (g.ker[i] - 1) - 1) / g.s[i] + 1;
    }
    return g;
}

static int64_t prod3(const int64_t v[3]) { return v[0] * v[1] * v[2]; }

/* y[n][o][*out] = b[o] + sum over the group's channels and the kernel of w * x (zero outside) */
static void reference(const pcase *c, const geom *g, const double *x, const double *w,
                      const double *b, double *y) {
    const int64_t cpg = c->cin / c->groups, opg = c->cout / c->groups;
    const int64_t nin = prod3(g->in), nk = prod3(g->ker), nout = prod3(g->out);
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t o = 0; o < c->cout; o++)
            for (int64_t p = 0; p < nout; p++) {
                const int64_t od = p / (g->out[1] * g->out[2]), oh = p / g->out[2] % g->out[1],
                              ow = p % g->out[2];
                double acc = c->bias ? b[o] : 0.0;
                for (int64_t ci = 0; ci < cpg; ci++) {
                    const int64_t cx = (o / opg) * cpg + ci;
                    for (int64_t q = 0; q < nk; q++) {
                        const int64_t kd = q / (g->ker[1] * g->ker[2]),
                                      kh = q / g->ker[2] % g->ker[1], kw = q % g->ker[2];
                        const int64_t id = od * g->s[0] - g->lo[0] + kd * g->d[0],
                                      ih = oh * g->s[1] - g->lo[1] + kh * g->d[1],
                                      iw = ow * g->s[2] - g->lo[2] + kw * g->d[2];
                        if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 ||
                            iw >= g->in[2])
                            continue;
                        acc += w[(o * cpg + ci) * nk + q] *
                               x[(n * c->cin + cx) * nin + (id * g->in[1] + ih) * g->in[2] + iw];
                    }
                }
                y[(n * c->cout + o) * nout + p] = acc;
            }
}

static ts_shape x_shape(const pcase *c) {
    ts_shape s = {.ndim = 0};
    if (!c->unbatched) s.dims[s.ndim++] = c->n;
    s.dims[s.ndim++] = c->cin;
    for (int i = 0; i < c->k; i++) s.dims[s.ndim++] = c->in[i];
    return s;
}

static ts_shape w_shape(const pcase *c) {
    ts_shape s = {.ndim = 2, .dims = {c->cout, c->cin / c->groups}};
    for (int i = 0; i < c->k; i++) s.dims[s.ndim++] = c->ker[i];
    return s;
}

static ts_tensor *call(const pcase *c, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    ts_convnd_opts o = {.groups = (int)c->groups, .padding_same = c->same};
    for (int i = 0; i < c->k; i++) o.stride[i] = c->s[i], o.dilation[i] = c->d[i];
    return ts_conv_padded(x, w, c->bias ? b : NULL, o, c->same ? NULL : c->pad);
}

static void run_case(int ci, ts_device dev, ts_dtype dt) {
    const pcase *c = &cases[ci];
    const geom g = geom_of(c);
    const int64_t nx = c->n * c->cin * prod3(g.in),
                  nw = c->cout * (c->cin / c->groups) * prod3(g.ker),
                  ny = c->n * c->cout * prod3(g.out);
    double *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w),
           *b = malloc((size_t)c->cout * sizeof *b), *want = malloc((size_t)ny * sizeof *want),
           *got = malloc((size_t)ny * sizeof *got);
    ts_test_fill_uniform(x, nx, 11 + ci), ts_test_fill_uniform(w, nw, 23 + ci);
    ts_test_fill_uniform(b, c->cout, 5 + ci);
    reference(c, &g, x, w, b, want);
    ts_scope_begin();
    ts_tensor *y = call(c, ts_test_tensor_f64(x_shape(c), x, dt, dev),
                        ts_test_tensor_f64(w_shape(c), w, dt, dev),
                        ts_test_tensor_f64(TS_SHAPE(c->cout), b, dt, dev));
    CHECK_OK();
    bool ok = y && ts_numel(y) == ny && ts_test_read_f64(y, got, ny);
    /* each output a sum of at most cpg * nk + 1 terms of size <= 1: that many roundings */
    const double terms = (double)(c->cin / c->groups * prod3(g.ker) + 1);
    const double tol = terms * (dt == TS_F64 ? 4e-16 : 2.4e-7) * 2;
    double worst = 0;
    for (int64_t i = 0; ok && i < ny; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    ok = ok && worst <= tol;
    CHECK(ok);
    if (!ok)
        printf("  case %d on %s (%s): worst %g > %g\n", ci, ts_device_str(dev), ts_dtype_name(dt),
               worst, tol);
    /* the output's shape: batch, channels and the resolved sizes */
    if (y) {
        const int lead = c->unbatched ? 1 : 2;
        CHECK_EQ(ts_ndim(y), lead + c->k);
        for (int i = 0; i < c->k; i++) CHECK_EQ(ts_shape_of(y).dims[lead + i], g.out[3 - c->k + i]);
    }
    ts_scope_end();
    free(x), free(w), free(b), free(want), free(got);
}

static ts_tensor *grad_fn(ts_tensor *const *in, int n, void *ctx) {
    return call((const pcase *)ctx, in[0], in[1], n > 2 ? in[2] : NULL);
}

static void run_gradcheck(int ci, ts_device dev) {
    const pcase *c = &cases[ci];
    const geom g = geom_of(c);
    const int64_t nx = c->n * c->cin * prod3(g.in),
                  nw = c->cout * (c->cin / c->groups) * prod3(g.ker);
    double *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), b[8];
    ts_test_fill_uniform(x, nx, 3), ts_test_fill_uniform(w, nw, 4),
        ts_test_fill_uniform(b, c->cout, 6);
    ts_scope_begin();
    ts_tensor *in[3] = {ts_test_tensor_f64(x_shape(c), x, TS_F64, dev),
                        ts_test_tensor_f64(w_shape(c), w, TS_F64, dev),
                        ts_test_tensor_f64(TS_SHAPE(c->cout), b, TS_F64, dev)};
    for (int i = 0; i < 3; i++) ts_set_requires_grad(in[i], true);
    const bool ok = ts_gradcheck(grad_fn, (void *)c, in, c->bias ? 3 : 2, (ts_gradcheck_opts){0});
    CHECK(ok);
    if (!ok) printf("  gradcheck failed: case %d on %s\n", ci, ts_device_str(dev));
    CHECK_OK();
    ts_scope_end();
    free(x), free(w);
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 2, 5, 5), (ts_opts){0}),
              *w = ts_zeros(TS_SHAPE(3, 2, 2, 2), (ts_opts){0});
    CHECK(!ts_conv_padded(x, w, NULL, (ts_convnd_opts){.padding_same = true, .stride = {2, 1}},
                          NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding='same' is not supported for strided convolutions");
    const int neg[6] = {0, -1, 0, 0};
    CHECK(!ts_conv_padded(x, w, NULL, (ts_convnd_opts){0}, neg));
    CHECK_ERR_HAS(TS_ERR_ARG, "negative padding");
    const int pad[6] = {1, 0, 0, 1};
    CHECK(!ts_conv_padded(x, w, NULL, (ts_convnd_opts){.padding = {1, 0}}, pad));
    CHECK_ERR_HAS(TS_ERR_ARG, "must be 0");
    CHECK(!ts_conv_padded(x, w, NULL, (ts_convnd_opts){.padding_same = true}, pad));
    CHECK_ERR_HAS(TS_ERR_ARG, "pad must be NULL");
    CHECK(!ts_conv_padded(x, w, NULL, (ts_convnd_opts){.padding_mode = TS_PAD_REFLECT}, pad));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding_mode");
    CHECK(
        !ts_conv_padded(x, ts_zeros(TS_SHAPE(3, 2), (ts_opts){0}), NULL, (ts_convnd_opts){0}, pad));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(
        !ts_conv_padded(ts_zeros(TS_SHAPE(2, 5), (ts_opts){0}), w, NULL, (ts_convnd_opts){0}, pad));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input to conv2d");
    /* symmetric pad and pad NULL with o.padding: the plain convolution's result */
    const int sym[6] = {1, 1, 2, 2};
    ts_tensor *xr = ts_randn(TS_SHAPE(1, 2, 5, 5), (ts_opts){0}),
              *wr = ts_randn(TS_SHAPE(3, 2, 2, 2), (ts_opts){0});
    ts_tensor *a = ts_conv_padded(xr, wr, NULL, (ts_convnd_opts){0}, sym),
              *b = ts_conv_padded(xr, wr, NULL, (ts_convnd_opts){.padding = {1, 2}}, NULL),
              *c = ts_conv2d(xr, wr, NULL, (ts_conv2d_opts){.padding = {1, 2}});
    CHECK(a && b && c && ts_equal(a, c) && ts_equal(b, c));
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < nd; di++)
        for (int i = 0; i < N_CASES; i++) {
            run_case(i, devs[di], TS_F64);
            run_case(i, devs[di], TS_F32);
            if (di == 0 || i == 0 || i == 8) run_gradcheck(i, devs[di]);
        }
    test_errors();
    return ts_test_finish();
}
