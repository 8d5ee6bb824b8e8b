/* test_max_pool_backward.c — ts_max_pool2d_backward (aten.max_pool2d_with_indices_backward,
 * src/nn/pool.c) on every device in float32 and float64: against a float64 hand scatter of the
 * output's gradient through max_pool2d_with_indices' indices, and against max_pool2d's own
 * backward; batched and unbatched, overlapping windows (sums), padding, dilation, ceil mode, a
 * channels_last input (the result keeps its format); ts_gradcheck of its own gradient (a gather
 * at the indices for grad_output, zero for self) in float64; the refusals naming the op and the
 * argument (indices outside the plane, shapes, dtypes). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV 8192
static double hx[MAXV], hg[MAXV], href[MAXV], hgot[MAXV], hauto[MAXV];
static int64_t hidx[MAXV];

#define fill       ts_test_fill_uniform /* tests/support/host_values.h */
#define mk         ts_test_tensor_f64   /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
static bool rd_i64(ts_tensor *t, int64_t *out) {
    ts_tensor *h = t ? ts_to(ts_contiguous(t), ts_cpu()) : NULL;
    int64_t n = h ? ts_numel(h) : 0;
    return h && n <= MAXV &&
           (n == 0 || ts_copy_to_host(h, out, (size_t)n * sizeof(int64_t)) == TS_OK);
}

static void test_values(ts_device d, ts_dtype dt) {
    static const struct {
        bool unbatched, cl;
        int64_t n, c, h, w;
        ts_pool2d_opts o;
    } cases[] = {
        {false, false, 2, 3, 5, 6, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
        {false, false, 1, 2, 7, 7, {.kernel = {3, 2}, .stride = {1, 1}}}, /* overlapping: sums */
        {true, false, 0, 2, 6, 5, {.kernel = {2, 2}, .stride = {2, 1}, .dilation = {2, 1}}},
        {false, false, 2, 1, 5, 5, {.kernel = {2, 2}, .stride = {2, 2}, .ceil_mode = true}},
        {false, true, 2, 4, 6, 6, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 0}}},
    };
    const double tol = dt == TS_F64 ? 1e-12 : 1e-5;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_scope_begin();
        const int64_t N = cases[c].unbatched ? 1 : cases[c].n, C = cases[c].c, H = cases[c].h,
                      W = cases[c].w;
        const ts_shape xs = cases[c].unbatched ? TS_SHAPE(C, H, W) : TS_SHAPE(N, C, H, W);
        fill(hx, N * C * H * W, (int)c);
        ts_tensor *x = mk(xs, hx, dt, d);
        if (cases[c].cl) x = ts_contiguous_format(x, TS_CHANNELS_LAST);
        ts_set_requires_grad(x, true);
        ts_tensor *idx = NULL, *y = ts_max_pool2d_with_indices(x, cases[c].o, &idx);
        CHECK_OK();
        if (!y) {
            ts_scope_end();
            continue;
        }
        const ts_shape ys = ts_shape_of(y);
        const int64_t OH = ys.dims[ys.ndim - 2], OW = ys.dims[ys.ndim - 1];
        fill(hg, N * C * OH * OW, 100 + (int)c);
        ts_tensor *go = mk(ys, hg, dt, d);
        ts_tensor *gx = ts_max_pool2d_backward(go, x, cases[c].o, idx);
        CHECK_OK();
        /* the hand scatter: go summed into each plane at its indices */
        CHECK(rd_i64(idx, hidx));
        for (int64_t i = 0; i < N * C * H * W; i++) href[i] = 0;
        for (int64_t p = 0; p < N * C; p++)
            for (int64_t o = 0; o < OH * OW; o++) {
                const int64_t j = hidx[p * OH * OW + o];
                CHECK(j >= 0 && j < H * W);
                if (j >= 0 && j < H * W) href[p * H * W + j] += hg[p * OH * OW + o];
            }
        bool ok = gx && ts_dtype_of(gx) == dt && rd(gx, hgot);
        double err = 0;
        for (int64_t i = 0; ok && i < N * C * H * W; i++) err = fmax(err, fabs(hgot[i] - href[i]));
        CHECK(ok && err <= tol * 4);
        if (!(ok && err <= tol * 4)) printf("  (case %zu: max err %.3g)\n", c, err);
        CHECK(!cases[c].cl || ts_is_contiguous_format(gx, TS_CHANNELS_LAST));
        /* the same as max_pool2d's own backward of sum(y * go) */
        ts_backward(ts_sum(ts_mul(y, go)));
        CHECK(rd(ts_grad(x), hauto));
        double e2 = 0;
        for (int64_t i = 0; i < N * C * H * W; i++) e2 = fmax(e2, fabs(hauto[i] - hgot[i]));
        CHECK(e2 <= tol * 4);
        ts_scope_end();
        CHECK_OK();
    }
}

/* ---------------------------------------------------------------- its own gradient */
typedef struct {
    ts_tensor *idx;
    ts_pool2d_opts o;
} gctx;

static ts_tensor *bwd_f(ts_tensor *const *in, int n, void *vctx) {
    const gctx *g = vctx;
    (void)n;
    return ts_max_pool2d_backward(in[0], in[1], g->o, g->idx);
}

static void test_grads(void) {
    ts_scope_begin();
    const ts_pool2d_opts o = {.kernel = {3, 3}, .stride = {1, 2}, .padding = {1, 1}};
    fill(hx, 2 * 2 * 5 * 5, 7);
    ts_tensor *x = mk(TS_SHAPE(2, 2, 5, 5), hx, TS_F64, ts_cpu()), *idx = NULL;
    ts_tensor *y = ts_max_pool2d_with_indices(x, o, &idx);
    fill(hg, ts_numel(y), 8);
    ts_tensor *in[2] = {mk(ts_shape_of(y), hg, TS_F64, ts_cpu()), x};
    ts_set_requires_grad(in[0], true);
    ts_set_requires_grad(in[1], true);
    gctx g = {idx, o};
    bool ok = ts_gradcheck(bwd_f, &g, in, 2, (ts_gradcheck_opts){0});
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "gradcheck max_pool2d_backward%s", ts_test_error_str());
    ts_error_clear();
    /* the node's name and x's zero gradient */
    ts_tensor *r = ts_max_pool2d_backward(in[0], in[1], o, idx);
    CHECK(r && ts_grad_fn_name(r) &&
          strcmp(ts_grad_fn_name(r), "MaxPool2DWithIndicesBackwardBackward0") == 0);
    ts_backward(ts_sum(ts_mul(r, r)));
    CHECK(ts_grad(in[1]) && ts_item(ts_sum(ts_abs(ts_grad(in[1])))) == 0.0);
    CHECK_OK();
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    const ts_pool2d_opts o = {.kernel = {2, 2}};
    ts_tensor *x = ts_randn(TS_SHAPE(1, 2, 4, 4), (ts_opts){0}), *idx = NULL;
    ts_tensor *y = ts_max_pool2d_with_indices(x, o, &idx), *go = ts_ones_like(y);
    CHECK(!ts_max_pool2d_backward(go, x, o, ts_full_like(idx, 16)));
    CHECK_ERR_HAS(TS_ERR_ARG, "max_pool2d_with_indices_backward: indices must lie in [0, 16)");
    CHECK(!ts_max_pool2d_backward(go, x, o, ts_full_like(idx, -1)));
    CHECK_ERR_HAS(TS_ERR_ARG, "indices must lie");
    CHECK(!ts_max_pool2d_backward(ts_ones(TS_SHAPE(1, 2, 3, 2), (ts_opts){0}), x, o, idx));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "max_pool2d_with_indices_backward: grad_output");
    CHECK(!ts_max_pool2d_backward(go, x, o, ts_to_dtype(idx, TS_I32)));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "max_pool2d_with_indices_backward: indices must be int64");
    CHECK(!ts_max_pool2d_backward(ts_to_dtype(go, TS_I64), x, o, idx));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "grad_output must be floating");
    CHECK(!ts_max_pool2d_backward(go, x, (ts_pool2d_opts){.kernel = {0, 2}}, idx));
    CHECK_ERR_HAS(TS_ERR_ARG, "max_pool2d_with_indices_backward: kernel size");
    CHECK(!ts_max_pool2d_backward(NULL, x, o, idx));
    CHECK_ERR(TS_ERR_ARG);
    if (ndev > 1) {
        CHECK(!ts_max_pool2d_backward(ts_to(go, devs[1]), x, o, idx));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            ts_scope_begin();
            test_values(devs[di], t ? TS_F32 : TS_F64);
            ts_scope_end();
            CHECK_OK();
        }
    ts_scope_begin();
    test_grads();
    test_errors();
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
