/* test_shape_forms.c — issue 52's shape and indexing forms (src/ops/rearrange.c, diagonal.c,
 * repeat.c, join.c) on every device against float64 loops: flip / fliplr / flipud / rot90 / roll,
 * tril / triu (+ in place), diagonal / diag / diag_embed / diagflat, repeat_interleave (int and
 * tensor), movedim, unfold, split_with_sizes / tensor_split, take / take_along_dim, index_add /
 * index_copy / index_fill, scatter (src, value, reduce, a repeated index: the last wins),
 * scatter_reduce (every reduction, include_self both ways), nonzero, masked_select /
 * masked_scatter, block_diag; ts_gradcheck of each differentiable one; the refusals naming the op.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)(i + 1) + 0.9 * seed) * 0.9;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d));
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
static ts_tensor *mki(ts_shape s, const int64_t *v, ts_device d) {
    return ts_to(ts_tensor_i64(s, v, (ts_opts){.dtype = TS_I64}), d);
}
/* t has shape s and exactly the values ref (the ops move values: no rounding) */
static bool same(ts_tensor *t, ts_shape s, const double *ref) {
    static double got[4096];
    if (!t) return false;
    ts_shape ts_ = ts_shape_of(t);
    if (ts_.ndim != s.ndim) {
        fprintf(stderr, "  ndim %d vs %d\n", ts_.ndim, s.ndim);
        return false;
    }
    for (int k = 0; k < s.ndim; k++)
        if (ts_.dims[k] != s.dims[k]) {
            fprintf(stderr, "  dim %d: %lld vs %lld\n", k, (long long)ts_.dims[k],
                    (long long)s.dims[k]);
            return false;
        }
    int64_t n = ts_numel(t);
    if (n > 4096 || !rd(t, got, n)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= 1e-12 * (1 + fabs(ref[i])))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

static double a[256], b[256];

static void test_flip_roll_tri(ts_device d) {
    double r[256];
    ts_tensor *x = mk(TS_SHAPE(2, 3, 4), a, d, false);
    /* flip dims 0 and 2 */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) r[(i * 3 + j) * 4 + k] = a[((1 - i) * 3 + j) * 4 + 3 - k];
    CHECK(same(ts_flip(x, TS_DIMS(0, -1)), TS_SHAPE(2, 3, 4), r));
    ts_tensor *m = mk(TS_SHAPE(3, 4), a, d, false);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) r[i * 4 + j] = a[i * 4 + 3 - j];
    CHECK(same(ts_fliplr(m), TS_SHAPE(3, 4), r));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) r[i * 4 + j] = a[(2 - i) * 4 + j];
    CHECK(same(ts_flipud(m), TS_SHAPE(3, 4), r));
    /* rot90 k = 1: out[i][j] = m[j][m - 1 - i], shape [4, 3] */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) r[i * 3 + j] = a[j * 4 + 3 - i];
    CHECK(same(ts_rot90(m, 1, 0, 1), TS_SHAPE(4, 3), r));
    CHECK(same(ts_rot90(m, -3, 0, 1), TS_SHAPE(4, 3), r));
    for (int i = 0; i < 12; i++) r[i] = a[11 - i];
    CHECK(same(ts_rot90(m, 2, 0, 1), TS_SHAPE(3, 4), r));
    /* roll: flattened by 5, then dims (0, 1) by (1, -1) */
    for (int i = 0; i < 12; i++) r[(i + 5) % 12] = a[i];
    CHECK(same(ts_roll(m, (int64_t[]){5}, 1, (ts_dims){0}), TS_SHAPE(3, 4), r));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) r[((i + 1) % 3) * 4 + (j + 3) % 4] = a[i * 4 + j];
    CHECK(same(ts_roll(m, (int64_t[]){1, -1}, 2, TS_DIMS(0, 1)), TS_SHAPE(3, 4), r));
    /* tril / triu with diagonals -1, 0, 2 over a batch */
    for (int dg = -1; dg <= 2; dg += 3) {
        for (int i = 0; i < 24; i++) {
            int row = (i / 4) % 3, col = i % 4;
            r[i] = col - row <= dg ? a[i] : 0;
        }
        CHECK(same(ts_tril(x, dg), TS_SHAPE(2, 3, 4), r));
        for (int i = 0; i < 24; i++) {
            int row = (i / 4) % 3, col = i % 4;
            r[i] = col - row >= dg ? a[i] : 0;
        }
        CHECK(same(ts_triu(x, dg), TS_SHAPE(2, 3, 4), r));
        ts_tensor *y = ts_clone(x);
        CHECK(ts_triu_(y, dg) == y && same(y, TS_SHAPE(2, 3, 4), r));
    }
}

static void test_diagonals(ts_device d) {
    double r[256];
    ts_tensor *x = mk(TS_SHAPE(2, 3, 4), a, d, false);
    /* diagonal(offset 1, dims 1, 2): [2, min(3, 3)] */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) r[i * 3 + k] = a[(i * 3 + k) * 4 + k + 1];
    CHECK(same(ts_diagonal(x, 1, 1, 2), TS_SHAPE(2, 3), r));
    /* diagonal(offset -1, dims 2, 0): planes over dim 1; rows from dim 2, cols from dim 0 */
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 2; k++) r[j * 2 + k] = a[(k * 3 + j) * 4 + k + 1];
    CHECK(same(ts_diagonal(x, -1, 2, 0), TS_SHAPE(3, 2), r));
    CHECK(same(ts_diagonal(x, 5, 1, 2), TS_SHAPE(2, 0), r));
    /* diag_embed of [2, 3] with offset -1: [2, 4, 4] */
    ts_tensor *v = mk(TS_SHAPE(2, 3), a, d, false);
    for (int i = 0; i < 32; i++) {
        int bb = i / 16, row = (i / 4) % 4, col = i % 4;
        r[i] = row - col == 1 ? a[bb * 3 + col] : 0;
    }
    CHECK(same(ts_diag_embed(v, -1, -2, -1), TS_SHAPE(2, 4, 4), r));
    /* dims swapped: the transpose */
    for (int i = 0; i < 32; i++) {
        int bb = i / 16, row = (i / 4) % 4, col = i % 4;
        r[i] = col - row == 1 ? a[bb * 3 + row] : 0;
    }
    CHECK(same(ts_diag_embed(v, -1, 2, 1), TS_SHAPE(2, 4, 4), r));
    /* diag: 1-D -> matrix, 2-D -> diagonal; diagflat */
    ts_tensor *u = mk(TS_SHAPE(3), a, d, false);
    for (int i = 0; i < 16; i++) r[i] = i % 4 == i / 4 + 1 ? a[i / 4] : 0;
    CHECK(same(ts_diag(u, 1), TS_SHAPE(4, 4), r));
    for (int i = 0; i < 36; i++) r[i] = i % 6 == i / 6 ? a[i / 6] : 0;
    CHECK(same(ts_diagflat(v, 0), TS_SHAPE(6, 6), r));
    ts_tensor *m = mk(TS_SHAPE(3, 4), a, d, false);
    r[0] = a[4], r[1] = a[9];
    CHECK(same(ts_diag(m, -1), TS_SHAPE(2), r));
}

static void test_repeat_move_unfold(ts_device d) {
    double r[256];
    ts_tensor *m = mk(TS_SHAPE(2, 3), a, d, false);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 6; j++) r[i * 6 + j] = a[i * 3 + j / 2];
    CHECK(same(ts_repeat_interleave(m, 2, true, 1), TS_SHAPE(2, 6), r));
    for (int i = 0; i < 18; i++) r[i] = a[i / 3];
    CHECK(same(ts_repeat_interleave(m, 3, false, 0), TS_SHAPE(18), r));
    for (int i = 0; i < 3; i++) r[i] = a[5];
    CHECK(same(ts_repeat_interleave(mk(TS_SHAPE(), a + 5, d, false), 3, true, 0), TS_SHAPE(3), r));
    ts_tensor *reps = mki(TS_SHAPE(3), (int64_t[]){0, 2, 1}, d);
    const int src_col[3] = {1, 1, 2};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) r[i * 3 + j] = a[i * 3 + src_col[j]];
    CHECK(same(ts_repeat_interleave_tensor(m, reps, true, 1), TS_SHAPE(2, 3), r));
    /* movedim (0, 1) -> (2, 0) on [2, 3, 4]: out [3, 4, 2] with out[j][k][i] = x[i][j][k] */
    ts_tensor *x = mk(TS_SHAPE(2, 3, 4), a, d, false);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) r[(j * 4 + k) * 2 + i] = a[(i * 3 + j) * 4 + k];
    CHECK(same(ts_movedim(x, TS_DIMS(0, 1), TS_DIMS(2, 0)), TS_SHAPE(3, 4, 2), r));
    /* unfold dim 2, size 2, step 1 on [2, 3, 4]: [2, 3, 3, 2] */
    for (int i = 0; i < 6; i++)
        for (int w = 0; w < 3; w++)
            for (int s = 0; s < 2; s++) r[(i * 3 + w) * 2 + s] = a[i * 4 + w + s];
    CHECK(same(ts_unfold(x, 2, 2, 1), TS_SHAPE(2, 3, 3, 2), r));
    /* unfold dim 0 of a [7] with size 3 step 2: 3 windows */
    ts_tensor *u = mk(TS_SHAPE(7), a, d, false);
    for (int w = 0; w < 3; w++)
        for (int s = 0; s < 3; s++) r[w * 3 + s] = a[w * 2 + s];
    CHECK(same(ts_unfold(u, 0, 3, 2), TS_SHAPE(3, 3), r));
    /* splits */
    ts_tensor *p[8];
    CHECK_EQ(ts_split_with_sizes(u, (int64_t[]){2, 0, 5}, 3, 0, p, 8), 3);
    CHECK(same(p[0], TS_SHAPE(2), a) && same(p[1], TS_SHAPE(0), a) &&
          same(p[2], TS_SHAPE(5), a + 2));
    CHECK_EQ(ts_tensor_split_sections(u, 3, 0, p, 8), 3);
    CHECK(same(p[0], TS_SHAPE(3), a) && same(p[1], TS_SHAPE(2), a + 3) &&
          same(p[2], TS_SHAPE(2), a + 5));
    CHECK_EQ(ts_tensor_split_indices(u, (int64_t[]){1, -2, 9}, 3, 0, p, 8), 4);
    CHECK(same(p[0], TS_SHAPE(1), a) && same(p[1], TS_SHAPE(4), a + 1) &&
          same(p[2], TS_SHAPE(2), a + 5) && same(p[3], TS_SHAPE(0), a));
}

static void test_indexing(ts_device d) {
    double r[256];
    ts_tensor *m = mk(TS_SHAPE(3, 4), a, d, false);
    /* take with a negative index */
    ts_tensor *ti = mki(TS_SHAPE(2, 2), (int64_t[]){0, -1, 5, 7}, d);
    r[0] = a[0], r[1] = a[11], r[2] = a[5], r[3] = a[7];
    CHECK(same(ts_take(m, ti), TS_SHAPE(2, 2), r));
    /* take_along_dim: indices [1, 4] broadcast over the 3 rows */
    ts_tensor *ai = mki(TS_SHAPE(1, 2), (int64_t[]){3, 1}, d);
    for (int i = 0; i < 3; i++) r[i * 2] = a[i * 4 + 3], r[i * 2 + 1] = a[i * 4 + 1];
    CHECK(same(ts_take_along_dim(m, ai, true, 1), TS_SHAPE(3, 2), r));
    /* index_add / index_copy / index_fill along dim 1 with index [3, 0] */
    ts_tensor *ix = mki(TS_SHAPE(2), (int64_t[]){3, 0}, d), *src = mk(TS_SHAPE(3, 2), b, d, false);
    for (int i = 0; i < 12; i++) r[i] = a[i];
    for (int i = 0; i < 3; i++) r[i * 4 + 3] += 2 * b[i * 2], r[i * 4] += 2 * b[i * 2 + 1];
    CHECK(same(ts_index_add(m, 1, ix, src, 2.0), TS_SHAPE(3, 4), r));
    for (int i = 0; i < 12; i++) r[i] = a[i];
    for (int i = 0; i < 3; i++) r[i * 4 + 3] = b[i * 2], r[i * 4] = b[i * 2 + 1];
    CHECK(same(ts_index_copy(m, 1, ix, src), TS_SHAPE(3, 4), r));
    ts_tensor *mc = ts_clone(m);
    CHECK(ts_index_copy_(mc, 1, ix, src) == mc && same(mc, TS_SHAPE(3, 4), r));
    for (int i = 0; i < 12; i++) r[i] = i % 4 == 3 || i % 4 == 0 ? -7 : a[i];
    CHECK(same(ts_index_fill(m, 1, ix, -7), TS_SHAPE(3, 4), r));
    /* scatter dim 0, index [2, 4] (smaller than src [3, 4]); a repeated position: the last wins */
    const int64_t sv[8] = {2, 0, 1, 2, 2, 1, 1, 0};
    ts_tensor *si = mki(TS_SHAPE(2, 4), sv, d), *s2 = mk(TS_SHAPE(3, 4), b, d, false);
    for (int i = 0; i < 12; i++) r[i] = a[i];
    for (int e = 0; e < 8; e++) r[sv[e] * 4 + e % 4] = b[e];
    CHECK(same(ts_scatter(m, 0, si, s2, NULL), TS_SHAPE(3, 4), r));
    for (int i = 0; i < 12; i++) r[i] = a[i];
    for (int e = 0; e < 8; e++) r[sv[e] * 4 + e % 4] = 0.25;
    CHECK(same(ts_scatter_value(m, 0, si, 0.25, NULL), TS_SHAPE(3, 4), r));
    for (int i = 0; i < 12; i++) r[i] = a[i];
    for (int e = 0; e < 8; e++) r[sv[e] * 4 + e % 4] *= b[e];
    CHECK(same(ts_scatter(m, 0, si, s2, "multiply"), TS_SHAPE(3, 4), r));
    /* scatter_reduce: every reduction, with and without self */
    const char *red[5] = {"sum", "prod", "mean", "amax", "amin"};
    for (int q = 0; q < 5; q++)
        for (int inc = 0; inc < 2; inc++) {
            double acc[12];
            int cnt[12];
            for (int i = 0; i < 12; i++) acc[i] = a[i], cnt[i] = inc;
            for (int e = 0; e < 8; e++) {
                int o = (int)sv[e] * 4 + e % 4;
                double v = b[e];
                if (cnt[o] == 0)
                    acc[o] = v;
                else if (q == 0 || q == 2)
                    acc[o] += v;
                else if (q == 1)
                    acc[o] *= v;
                else if (q == 3)
                    acc[o] = v > acc[o] ? v : acc[o];
                else
                    acc[o] = v < acc[o] ? v : acc[o];
                cnt[o]++;
            }
            for (int i = 0; i < 12; i++) r[i] = q == 2 && cnt[i] > 0 ? acc[i] / cnt[i] : acc[i];
            ts_tensor *y = ts_scatter_reduce(m, 0, si, s2, red[q], inc);
            CHECK(same(y, TS_SHAPE(3, 4), r));
            if (!same(y, TS_SHAPE(3, 4), r))
                fprintf(stderr, "  (%s, include_self %d)\n", red[q], inc);
        }
    /* nonzero, masked_select, masked_scatter */
    const double nzv[6] = {0, 1.5, 0, -2, 3, 0};
    ts_tensor *nz = mk(TS_SHAPE(2, 3), nzv, d, false);
    const double nzr[6] = {0, 1, 1, 0, 1, 1};
    ts_tensor *ij = ts_nonzero(nz);
    CHECK(ij && ts_dtype_of(ij) == TS_I64 && same(ij, TS_SHAPE(3, 2), nzr));
    ts_tensor *mask = ts_ne_scalar(nz, 0);
    ts_tensor *row = ts_ne_scalar(mk(TS_SHAPE(3), (double[]){1, 0, 1}, d, false), 0);
    r[0] = a[0], r[1] = a[2], r[2] = a[3], r[3] = a[5];
    CHECK(same(ts_masked_select(mk(TS_SHAPE(2, 3), a, d, false), row), TS_SHAPE(4), r));
    /* a random mask over 3000 elements (the kept positions written without a branch), all false,
     * all true, and only the last element */
    static double xv[3000], want[3000];
    static bool mv[3000];
    for (int pass = 0; pass < 4; pass++) {
        int64_t c = 0;
        for (int64_t i = 0; i < 3000; i++) {
            xv[i] = (double)i + 0.5;
            mv[i] = pass == 0 ? sin(2.3 * (double)i * (double)i) > 0
                              : pass == 2 || (pass == 3 && i == 2999);
            if (mv[i]) want[c++] = xv[i];
        }
        ts_tensor *mt = ts_from_data(TS_SHAPE(3, 1000), TS_BOOL, mv, (ts_opts){.device = d});
        CHECK(same(ts_masked_select(mk(TS_SHAPE(3, 1000), xv, d, false), mt), TS_SHAPE(c), want));
    }
    const double ms[6] = {a[0], b[0], a[2], b[1], b[2], a[5]};
    CHECK(same(ts_masked_scatter(mk(TS_SHAPE(2, 3), a, d, false), mask, src), TS_SHAPE(2, 3), ms));
    /* block_diag of a [2, 2], a [3] and a 0-dim */
    ts_tensor *bl[3] = {mk(TS_SHAPE(2, 2), a, d, false), mk(TS_SHAPE(3), b, d, false),
                        mk(TS_SHAPE(), a + 9, d, false)};
    for (int i = 0; i < 24; i++) r[i] = 0;
    r[0] = a[0], r[1] = a[1], r[6] = a[2], r[7] = a[3];
    r[12 + 2] = b[0], r[12 + 3] = b[1], r[12 + 4] = b[2], r[18 + 5] = a[9];
    CHECK(same(ts_block_diag(bl, 3), TS_SHAPE(4, 6), r));
}

/* ------------------------------------------------------------------ gradients */
typedef enum {
    G_FLIP,
    G_ROLL,
    G_TRIL,
    G_DIAGONAL,
    G_DIAG_EMBED,
    G_REPEAT,
    G_UNFOLD,
    G_TAKE,
    G_TAKE_ALONG,
    G_INDEX_ADD,
    G_INDEX_COPY,
    G_SCATTER,
    G_SUM,
    G_PROD,
    G_MEAN,
    G_AMAX,
    G_AMIN_NOSELF,
    G_MSEL,
    G_MSCAT,
    G_BLOCK,
    G_COUNT
} gk;
static ts_device gdev;
static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const ts_device d = gdev;
    const int64_t sv[6] = {1, 0, 1, 1, 1, 0};
    switch ((gk)(intptr_t)ctx) {
    case G_FLIP:
        return ts_flip(in[0], TS_DIMS(0, 1));
    case G_ROLL:
        return ts_roll(in[0], (int64_t[]){2, -1}, 2, TS_DIMS(1, 0));
    case G_TRIL:
        return ts_tril(in[0], -1);
    case G_DIAGONAL:
        return ts_diagonal(in[0], 1, 2, 0);
    case G_DIAG_EMBED:
        return ts_diag_embed(in[0], 1, 0, 2);
    case G_REPEAT:
        return ts_repeat_interleave(in[0], 2, true, 0);
    case G_UNFOLD:
        return ts_unfold(in[0], 1, 2, 1);
    case G_TAKE:
        return ts_take(in[0], mki(TS_SHAPE(3), (int64_t[]){5, -1, 5}, d));
    case G_TAKE_ALONG:
        return ts_take_along_dim(in[0], mki(TS_SHAPE(1, 2), (int64_t[]){2, 2}, d), true, 1);
    case G_INDEX_ADD:
        return ts_index_add(in[0], 0, mki(TS_SHAPE(2), (int64_t[]){1, 1}, d), in[1], 0.5);
    case G_INDEX_COPY:
        return ts_index_copy(in[0], 0, mki(TS_SHAPE(2), (int64_t[]){1, 0}, d), in[1]);
    case G_SCATTER:
        return ts_scatter(in[0], 0, mki(TS_SHAPE(1, 3), sv, d), in[1], NULL);
    case G_SUM:
        return ts_scatter_reduce(in[0], 0, mki(TS_SHAPE(2, 3), sv, d), in[1], "sum", true);
    case G_PROD:
        return ts_scatter_reduce(in[0], 0, mki(TS_SHAPE(2, 3), sv, d), in[1], "prod", true);
    case G_MEAN:
        return ts_scatter_reduce(in[0], 0, mki(TS_SHAPE(2, 3), sv, d), in[1], "mean", false);
    case G_AMAX:
        return ts_scatter_reduce(in[0], 0, mki(TS_SHAPE(2, 3), sv, d), in[1], "amax", true);
    case G_AMIN_NOSELF:
        return ts_scatter_reduce(in[0], 0, mki(TS_SHAPE(2, 3), sv, d), in[1], "amin", false);
    case G_MSEL:
        return ts_masked_select(in[0], ts_gt_scalar(in[1], 0));
    case G_MSCAT:
        return ts_masked_scatter(in[0], ts_gt_scalar(ts_detach(in[0]), 0), in[1]);
    case G_BLOCK:
        return ts_block_diag(in, 2);
    default:
        return NULL;
    }
}

static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    struct {
        gk k;
        int n;
        ts_shape s[2];
    } cases[] = {
        {G_FLIP, 1, {TS_SHAPE(3, 4)}},
        {G_ROLL, 1, {TS_SHAPE(3, 4)}},
        {G_TRIL, 1, {TS_SHAPE(2, 3, 3)}},
        {G_DIAGONAL, 1, {TS_SHAPE(3, 2, 4)}},
        {G_DIAG_EMBED, 1, {TS_SHAPE(2, 3)}},
        {G_REPEAT, 1, {TS_SHAPE(2, 3)}},
        {G_UNFOLD, 1, {TS_SHAPE(2, 4)}},
        {G_TAKE, 1, {TS_SHAPE(2, 3)}},
        {G_TAKE_ALONG, 1, {TS_SHAPE(3, 4)}},
        {G_INDEX_ADD, 2, {TS_SHAPE(3, 2), TS_SHAPE(2, 2)}},
        {G_INDEX_COPY, 2, {TS_SHAPE(3, 2), TS_SHAPE(2, 2)}},
        {G_SCATTER, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_SUM, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_PROD, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_MEAN, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_AMAX, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_AMIN_NOSELF, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_MSEL, 2, {TS_SHAPE(2, 3), TS_SHAPE(3)}},
        {G_MSCAT, 2, {TS_SHAPE(2, 3), TS_SHAPE(7)}},
        {G_BLOCK, 2, {TS_SHAPE(2, 2), TS_SHAPE(3)}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            gdev = devs[di];
            ts_scope_begin();
            ts_tensor *in[2];
            for (int i = 0; i < cases[c].n; i++) {
                double v[64];
                fill(v, 64, (int)c * 3 + i);
                in[i] = mk(cases[c].s[i], v, devs[di], true);
            }
            const bool ok = ts_gradcheck(g_fn, (void *)(intptr_t)cases[c].k, in, cases[c].n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *v = mk(TS_SHAPE(4), a, ts_cpu(), false), *m = mk(TS_SHAPE(3, 4), a, ts_cpu(), false);
    ts_tensor *fi = mk(TS_SHAPE(2), a, ts_cpu(), false);
    ts_tensor *ix = mki(TS_SHAPE(2), (int64_t[]){0, 9}, ts_cpu());
    CHECK(ts_flip(m, TS_DIMS(0, -2)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "flip");
    CHECK(ts_fliplr(v) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "fliplr");
    CHECK(ts_rot90(m, 1, 1, -1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "rot90");
    CHECK(ts_roll(m, (int64_t[]){1, 2}, 2, TS_DIMS(0)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "roll");
    CHECK(ts_tril(v, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "tril");
    CHECK(ts_diagonal(m, 0, 1, -1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "diagonal");
    CHECK(ts_diag(mk(TS_SHAPE(2, 2, 2), a, ts_cpu(), false), 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "diag");
    CHECK(ts_repeat_interleave(m, -1, true, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "repeat_interleave");
    CHECK(ts_repeat_interleave_tensor(m, mki(TS_SHAPE(2), (int64_t[]){1, 1}, ts_cpu()), true, 0) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "repeat_interleave");
    CHECK(ts_repeat_interleave_tensor(m, fi, true, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "repeat_interleave");
    CHECK(ts_unfold(v, 0, 5, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "unfold");
    CHECK(ts_unfold(v, 0, 2, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "unfold");
    CHECK(ts_movedim(m, TS_DIMS(0, 0), TS_DIMS(0, 1)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "movedim");
    ts_tensor *p[4];
    CHECK_EQ(ts_split_with_sizes(v, (int64_t[]){1, 2}, 2, 0, p, 4), -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "split_with_sizes");
    CHECK_EQ(ts_tensor_split_sections(v, 0, 0, p, 4), -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "tensor_split");
    CHECK(ts_take(v, ix) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "take");
    CHECK(ts_take(v, fi) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "take");
    CHECK(ts_take_along_dim(m, mki(TS_SHAPE(2), (int64_t[]){0, 1}, ts_cpu()), true, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "take_along_dim");
    CHECK(ts_index_add(m, 0, mki(TS_SHAPE(2), (int64_t[]){0, 1}, ts_cpu()), m, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "index_add");
    CHECK(ts_index_copy(m, 0, mki(TS_SHAPE(1), (int64_t[]){3}, ts_cpu()),
                        mk(TS_SHAPE(1, 4), a, ts_cpu(), false)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "index_copy");
    CHECK(ts_index_fill(v, 0, ix, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "index_fill");
    CHECK(ts_index_fill(v, 0, fi, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "index_fill");
    ts_tensor *si = mki(TS_SHAPE(1, 4), (int64_t[]){0, 1, 2, 3}, ts_cpu());
    CHECK(ts_scatter(m, 0, si, m, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scatter");
    CHECK(ts_scatter(m, 0, si, ts_to_dtype(m, TS_F32), NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "scatter");
    CHECK(ts_scatter(m, 1, si, m, "max") == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scatter");
    CHECK(ts_scatter_reduce(m, 1, si, m, "add", true) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scatter_reduce");
    CHECK(ts_masked_select(m, fi) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "masked_select");
    CHECK(ts_masked_scatter(m, ts_ge_scalar(m, -5), fi) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "masked_scatter");
    CHECK(ts_block_diag(p, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "block_diag");
    CHECK(ts_block_diag((ts_tensor *[]){mk(TS_SHAPE(1, 1, 1), a, ts_cpu(), false)}, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "block_diag");
    if (ndev > 1) {
        CHECK(ts_take(ts_to(v, devs[1]), mki(TS_SHAPE(1), (int64_t[]){0}, ts_cpu())) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "take");
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    fill(a, 256, 1), fill(b, 256, 2);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        test_flip_roll_tri(devs[di]);
        test_diagonals(devs[di]);
        test_repeat_move_unfold(devs[di]);
        test_indexing(devs[di]);
        ts_scope_end();
        CHECK_OK();
    }
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
