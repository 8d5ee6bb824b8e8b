/* test_embedding_bag.c — ts_embedding_bag (src/nn/embedding_bag.c, the embedding_bag slot:
 * src/backend/cpu/kern_embedding_bag.c) on every device against a float64 reference written here:
 * the 2-D and offsets forms, include_last_offset (positions after the last offset in no bag),
 * empty bags, padding_idx (left out of the sums and of mean's count; a bag of padding only gives
 * zeros), per_sample_weights, int32 indices and offsets, a strided weight (the portable loop),
 * widths crossing the AVX2 path's 64- and 8-column blocks with enough bags to run threaded,
 * float32 / float64 / float16 / bfloat16, a column-broadcast (stride 0) weight; the gradients by
 * ts_gradcheck (EmbeddingBagBackward0) and against the reference's; a captured step's replay; the
 * refusals; an allocation-failure sweep (fault_sweep.h); mode max (values, ties, padding, empty
 * bags, its gradient).
 *
 * Tolerances: float64 sums rounded in double; float32 ones accumulate in float32 (as PyTorch's),
 * each of a bag's L adds (and products) rounding by at most eps32 / 2 relative to the running
 * value, so |error| <= (L + 1) eps32 sum|terms| (+ mean's division, eps32 / 2 relative): the
 * check allows (L + 2) eps sum|terms| with eps of the dtype (float16 / bfloat16: of the output's
 * rounding, from a reference of the rounded weights). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "host_read_util.h"
#include "tessera.h"
#include "tessera/autograd.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 65536

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(0.71 * (double)(i + 1) + 1.3 * seed) * 2.5;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
}
static ts_tensor *mki(ts_shape s, const int64_t *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_i64(s, v, (ts_opts){.dtype = TS_I64}), dt), d);
}

/* a bag problem: weight [N, D], n indices; off (bags + 1 bounds) or width */
typedef struct prob {
    int64_t N, D, n, bags, width;
    const double *w, *psw;
    const int64_t *idx, *off;
    int mode;
    int64_t pad;
} prob;

/* out [bags, D] and sum|terms| per element; the largest bag length in *lmax */
static void ref_bag(const prob *p, double *out, double *mag, int64_t *lmax) {
    *lmax = 0;
    for (int64_t b = 0; b < p->bags; b++) {
        const int64_t s = p->off ? p->off[b] : b * p->width;
        const int64_t e = p->off ? p->off[b + 1] : s + p->width;
        int64_t kept = 0;
        if (e - s > *lmax) *lmax = e - s;
        for (int64_t j = 0; j < p->D; j++) out[b * p->D + j] = mag[b * p->D + j] = 0;
        for (int64_t q = s; q < e; q++) {
            if (p->idx[q] == p->pad) continue;
            kept++;
            for (int64_t j = 0; j < p->D; j++) {
                const double t = p->w[p->idx[q] * p->D + j] * (p->psw ? p->psw[q] : 1.0);
                out[b * p->D + j] += t, mag[b * p->D + j] += fabs(t);
            }
        }
        if (p->mode == 1 && kept > 0)
            for (int64_t j = 0; j < p->D; j++) out[b * p->D + j] /= (double)kept;
    }
}

static double eps_of(ts_dtype dt) {
    return dt == TS_F64 ? 0x1p-52 : dt == TS_F32 ? 0x1p-23 : dt == TS_F16 ? 0x1p-10 : 0x1p-7;
}

static void check_bag(const char *what, ts_tensor *y, const prob *p, ts_dtype dt, ts_device d) {
    static double got[MAXN], ref[MAXN], mag[MAXN];
    const int64_t m = p->bags * p->D;
    int64_t lmax;
    ref_bag(p, ref, mag, &lmax);
    bool ok = y && m <= MAXN && ts_ndim(y) == 2 && ts_size(y, 0) == p->bags &&
              ts_size(y, 1) == p->D && rd(y, got, m);
    int64_t at = -1;
    const double e = eps_of(dt);
    for (int64_t i = 0; ok && i < m; i++) {
        /* half dtypes: the output rounded once more, by eps / 2 of the value */
        const double tol = (double)(lmax + 2) * e * mag[i] +
                           (dt == TS_F16 || dt == TS_BF16 ? e * fabs(ref[i]) : 0.0);
        if (!(fabs(got[i] - ref[i]) <= tol)) ok = false, at = i;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s (%s, %s): element %lld: %.17g vs %.17g%s", what,
                      ts_dtype_name(dt), ts_device_str(d), (long long)at, at >= 0 ? got[at] : 0.0,
                      at >= 0 ? ref[at] : 0.0, ts_test_error_str());
    ts_error_clear();
}

/* the weight rounded to dt, back in double (the reference of a rounded weight) */
static void round_to(double *w, int64_t n, ts_dtype dt) {
    ts_scope_begin();
    ts_tensor *t = ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), w, (ts_opts){.dtype = TS_F64}), dt);
    rd(t, w, n);
    ts_scope_end();
}

static ts_tensor *run(const prob *p, ts_dtype dt, ts_dtype it, ts_device d, bool last) {
    ts_tensor *w = mk(TS_SHAPE(p->N, p->D), p->w, dt, d);
    ts_tensor *ind = p->off ? mki(TS_SHAPE(p->n), p->idx, it, d)
                            : mki(TS_SHAPE(p->bags, p->width), p->idx, it, d);
    ts_tensor *off = NULL;
    if (p->off) {
        /* include_last_offset: the bags + 1 bounds; otherwise the bags' starts */
        off = mki(TS_SHAPE(last ? p->bags + 1 : p->bags), p->off, it, d);
    }
    ts_tensor *psw = NULL;
    if (p->psw)
        psw = p->off ? mk(TS_SHAPE(p->n), p->psw, dt, d)
                     : mk(TS_SHAPE(p->bags, p->width), p->psw, dt, d);
    return ts_embedding_bag(w, ind, off, p->mode, psw, p->pad, last);
}

static const ts_dtype fdts[] = {TS_F64, TS_F32, TS_F16, TS_BF16};

/* the forms on every device, dtype, index dtype and mode */
static void test_forward(void) {
    static double w[64 * 130], psw[1200];
    static int64_t idx[1200];
    fill(psw, 1200, 3);
    for (int64_t i = 0; i < 1200; i++) idx[i] = (i * 37 + i / 7) % 64;
    idx[5] = idx[6] = idx[7] = idx[8] = idx[9] = 3; /* 2-D: bag 1 of padding only (pad 3) */
    /* offsets form: 11 positions; bag 1 empty, bag 4 empty at the end (n = 11) */
    static const int64_t off_end[] = {0, 3, 3, 7, 11, 11}; /* 5 bags, last runs to n */
    static const int64_t off_short[] = {0, 3, 3, 7, 9, 9}; /* include_last_offset: 9, 10 out */
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++) {
            const ts_dtype dt = fdts[k];
            for (int mode = 0; mode < 2; mode++)
                for (int usew = 0; usew < 2 - mode; usew++)
                    for (int usepad = 0; usepad < 2; usepad++)
                        for (int itk = 0; itk < 2; itk++) {
                            const ts_dtype it = itk ? TS_I32 : TS_I64;
                            const int64_t D = k == 1 ? 130 : 9;
                            fill(w, 64 * D, 1);
                            if (dt == TS_F16 || dt == TS_BF16) round_to(w, 64 * D, dt);
                            double pw[1200];
                            memcpy(pw, psw, sizeof pw);
                            if (dt == TS_F16 || dt == TS_BF16) round_to(pw, 1200, dt);
                            ts_scope_begin();
                            /* 2-D: 7 bags of 5; float32: 240 bags of 5 (threaded, 130 columns) */
                            prob p = {.N = 64,
                                      .D = D,
                                      .bags = k == 1 ? 240 : 7,
                                      .width = 5,
                                      .w = w,
                                      .psw = usew ? pw : NULL,
                                      .idx = idx,
                                      .mode = mode,
                                      .pad = usepad ? 3 : -1};
                            p.n = p.bags * p.width;
                            check_bag("2-D", run(&p, dt, it, devs[di], false), &p, dt, devs[di]);
                            /* offsets, the last bag to the end */
                            prob q = p;
                            q.width = 0, q.n = 11, q.bags = 5, q.off = off_end;
                            check_bag("offsets", run(&q, dt, it, devs[di], false), &q, dt,
                                      devs[di]);
                            /* include_last_offset: positions 9 and 10 in no bag */
                            q.off = off_short;
                            check_bag("include_last_offset", run(&q, dt, it, devs[di], true), &q,
                                      dt, devs[di]);
                            ts_scope_end();
                            CHECK_OK();
                        }
        }
}

/* a strided weight (a transposed view: the portable loop) and an empty input */
static void test_strided_and_empty(void) {
    static double w[20 * 6], wt[6 * 20];
    fill(w, 120, 5);
    for (int r = 0; r < 20; r++)
        for (int j = 0; j < 6; j++) wt[j * 20 + r] = w[r * 6 + j];
    static const int64_t idx[] = {1, 4, 19, 0, 7, 7, 2, 3};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            ts_scope_begin();
            ts_tensor *W = ts_transpose(mk(TS_SHAPE(6, 20), wt, fdts[k], devs[di]), 0, 1);
            ts_tensor *I = mki(TS_SHAPE(4, 2), idx, TS_I64, devs[di]);
            prob p = {.N = 20,
                      .D = 6,
                      .bags = 4,
                      .width = 2,
                      .n = 8,
                      .w = w,
                      .idx = idx,
                      .mode = 1,
                      .pad = 7};
            check_bag("strided weight", ts_embedding_bag(W, I, NULL, 1, NULL, 7, false), &p,
                      fdts[k], devs[di]);
            /* sum with per-sample weights on the strided weight (the portable loop's scaled
             * strided adds) */
            static double sw[8];
            fill(sw, 8, 6);
            prob ps = p;
            ps.mode = 0, ps.pad = -1, ps.psw = sw;
            check_bag("strided weight, per-sample weights",
                      ts_embedding_bag(W, I, NULL, 0, mk(TS_SHAPE(4, 2), sw, fdts[k], devs[di]), -1,
                                       false),
                      &ps, fdts[k], devs[di]);
            /* a weight broadcast along its columns (column stride 0): each row one value */
            static double wc[20 * 6];
            for (int r = 0; r < 20; r++)
                for (int j = 0; j < 6; j++) wc[r * 6 + j] = w[r * 6];
            double col[20];
            for (int r = 0; r < 20; r++) col[r] = w[r * 6];
            ts_tensor *Wc = ts_expand(mk(TS_SHAPE(20, 1), col, fdts[k], devs[di]), TS_SHAPE(20, 6));
            prob pc = p;
            pc.w = wc;
            check_bag("column-broadcast weight", ts_embedding_bag(Wc, I, NULL, 1, NULL, 7, false),
                      &pc, fdts[k], devs[di]);
            /* no positions: bags of zeros; no bags */
            ts_tensor *E = ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = devs[di]});
            ts_tensor *O = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I64, .device = devs[di]});
            ts_tensor *y = ts_embedding_bag(W, E, O, 0, NULL, -1, false);
            double z[18];
            CHECK(y && ts_size(y, 0) == 3 && ts_size(y, 1) == 6 && rd(y, z, 18));
            for (int i = 0; i < 18; i++) CHECK(z[i] == 0.0);
            y = ts_embedding_bag(
                W, ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = TS_I64, .device = devs[di]}), NULL,
                1, NULL, -1, false);
            CHECK(y && ts_size(y, 0) == 0 && ts_size(y, 1) == 6);
            ts_scope_end();
            CHECK_OK();
        }
}

/* gradcheck: in[0] weight, in[1] per-sample weights (or absent) */
typedef struct gctx {
    ts_tensor *ind, *off;
    int mode;
    int64_t pad;
    bool last;
} gctx;
static ts_tensor *gc_fn(ts_tensor *const *in, int n, void *ctx) {
    const gctx *c = ctx;
    return ts_embedding_bag(in[0], c->ind, c->off, c->mode, n > 1 ? in[1] : NULL, c->pad, c->last);
}

static void test_grads(void) {
    static double w[12 * 4], psw[11];
    fill(w, 48, 7), fill(psw, 11, 8);
    static const int64_t idx[] = {1, 4, 4, 0, 7, 3, 2, 3, 11, 4, 5};
    static const int64_t off[] = {0, 3, 3, 7, 9};
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++)
        for (int c = 0; c < 4; c++) {
            ts_scope_begin();
            const ts_device d = devs[di];
            gctx g = {.mode = c == 1 ? 1 : 0, .pad = c >= 1 ? 3 : -1, .last = c == 2};
            if (c == 3) { /* 2-D */
                g.ind = mki(TS_SHAPE(2, 5), idx, TS_I64, d);
            } else {
                g.ind = mki(TS_SHAPE(11), idx, TS_I32, d);
                g.off = mki(TS_SHAPE(c == 2 ? 5 : 4), off, TS_I64, d);
            }
            ts_tensor *in[2] = {mk(TS_SHAPE(12, 4), w, TS_F64, d),
                                c == 3 ? mk(TS_SHAPE(2, 5), psw, TS_F64, d)
                                       : mk(TS_SHAPE(11), psw, TS_F64, d)};
            ts_set_requires_grad(in[0], true), ts_set_requires_grad(in[1], true);
            const int nin = g.mode == 0 ? 2 : 1;
            const bool ok = ts_gradcheck(gc_fn, &g, in, nin, go);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", c, ts_device_str(d),
                              ts_test_error_str());
            ts_error_clear();
            /* the weight's gradient of y.sum() against the reference: each kept position adds
             * its coefficient to its row (1, or 1 / kept for mean; 0 outside every bag) */
            ts_tensor *x = mk(TS_SHAPE(12, 4), w, TS_F64, d);
            ts_set_requires_grad(x, true);
            ts_tensor *y = gc_fn((ts_tensor *[]){x}, 1, &g);
            CHECK(y != NULL);
            ts_backward(ts_sum(y));
            double gw[48] = {0}, got[48];
            const int64_t nb = c == 3 ? 2 : c == 2 ? 4 : 4;
            for (int64_t b = 0; b < nb; b++) {
                const int64_t s = c == 3 ? b * 5 : off[b];
                const int64_t e = c == 3 ? s + 5 : (b + 1 < (c == 2 ? 5 : 4) ? off[b + 1] : 11);
                int64_t kept = 0;
                for (int64_t q = s; q < e; q++) kept += idx[q] != g.pad;
                for (int64_t q = s; q < e; q++)
                    if (idx[q] != g.pad)
                        for (int j = 0; j < 4; j++)
                            gw[idx[q] * 4 + j] += g.mode == 1 ? 1.0 / (double)kept : 1.0;
            }
            CHECK(rd(ts_grad(x), got, 48));
            for (int i = 0; i < 48; i++) CHECK_NEAR(got[i], gw[i], 1e-14);
            ts_scope_end();
            CHECK_OK();
        }
}

/* no bags (include_last_offset with one offset) and no positions: zero gradients */
static void test_grads_empty(void) {
    static double w[12 * 4], psw[11];
    fill(w, 48, 7), fill(psw, 11, 8);
    static const int64_t idx[] = {1, 4, 4, 0, 7, 3, 2, 3, 11, 4, 5};
    for (int di = 0; di < ndev; di++)
        for (int c = 0; c < 2; c++) {
            ts_scope_begin();
            const ts_device d = devs[di];
            ts_tensor *x = mk(TS_SHAPE(12, 4), w, TS_F64, d);
            ts_tensor *p = c == 0
                               ? mk(TS_SHAPE(11), psw, TS_F64, d)
                               : ts_zeros(TS_SHAPE(0, 3), (ts_opts){.dtype = TS_F64, .device = d});
            ts_set_requires_grad(x, true), ts_set_requires_grad(p, true);
            ts_tensor *y =
                c == 0 ? ts_embedding_bag(x, mki(TS_SHAPE(11), idx, TS_I64, d),
                                          mki(TS_SHAPE(1), idx + 3, TS_I64, d), 0, p, -1, true)
                       : ts_embedding_bag(
                             x, ts_zeros(TS_SHAPE(0, 3), (ts_opts){.dtype = TS_I64, .device = d}),
                             NULL, 0, p, -1, false);
            CHECK(y && ts_size(y, 0) == 0 && ts_size(y, 1) == 4);
            ts_backward(ts_sum(y));
            double g[48];
            CHECK(rd(ts_grad(x), g, 48));
            for (int i = 0; i < 48; i++) CHECK(g[i] == 0.0);
            CHECK(ts_grad(p) && ts_numel(ts_grad(p)) == ts_numel(p));
            ts_scope_end();
            CHECK_OK();
        }
}

/* a captured 2-D step replays with the weight's new values; the offsets form is refused there */
static void test_capture(void) {
    static double w1[10 * 3], w2[10 * 3];
    fill(w1, 30, 1), fill(w2, 30, 2);
    static const int64_t idx[] = {1, 2, 9, 0, 5, 5};
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *W = mk(TS_SHAPE(10, 3), w1, TS_F32, d), *I = mki(TS_SHAPE(2, 3), idx, TS_I64, d);
        ts_tensor *Y = ts_embedding_bag(W, I, NULL, 1, NULL, 5, false); /* warm-up */
        ts_graph *g = ts_graph_capture_begin(d, (ts_graph_opts){0});
        Y = ts_embedding_bag(W, I, NULL, 1, NULL, 5, false);
        ts_tensor *R = ts_embedding_bag(W, ts_reshape(I, TS_SHAPE(6)),
                                        mki(TS_SHAPE(2), (const int64_t[]){0, 3}, TS_I64, d), 0,
                                        NULL, -1, false);
        CHECK(R == NULL && ts_error() == TS_ERR_UNSUPPORTED);
        ts_error_clear();
        CHECK(g && ts_graph_capture_end() == TS_OK && ts_graph_kernel_count(g) >= 1);
        ts_copy_(W, mk(TS_SHAPE(10, 3), w2, TS_F32, d));
        CHECK(ts_graph_replay(g) == TS_OK);
        prob p = {.N = 10,
                  .D = 3,
                  .bags = 2,
                  .width = 3,
                  .n = 6,
                  .w = w2,
                  .idx = idx,
                  .mode = 1,
                  .pad = 5};
        check_bag("replayed", Y, &p, TS_F32, d);
        ts_graph_free(g);
        ts_scope_end();
        CHECK_OK();
    }
}

/* mode max (issue 76): bags [0, 3), [3, 3) (empty: zeros), [3, 7) with padding row 4 left out,
 * [7, 8) padding only (zeros); against max loops over the float64 rows, and the gradient: each
 * output element's incoming value on the first maximal row of its bag (PyTorch's max_indices) */
static void test_max(void) {
    static double w[6 * 3];
    fill(w, 18, 3);
    w[1 * 3 + 2] = w[5 * 3 + 2] = 9.0; /* a tie in bag 2, column 2: the first (row 1) gets it */
    static const int64_t idx[] = {0, 2, 5, 1, 4, 5, 3, 4}, off[] = {0, 3, 3, 7};
    const int64_t bags = 4, pad = 4;
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *W = mk(TS_SHAPE(6, 3), w, TS_F64, d);
        ts_set_requires_grad(W, true);
        ts_tensor *Y = ts_embedding_bag(W, mki(TS_SHAPE(8), idx, TS_I64, d),
                                        mki(TS_SHAPE(4), off, TS_I64, d), 2, NULL, pad, false);
        double ref[4 * 3], gref[6 * 3] = {0}, g[4 * 3];
        for (int64_t i = 0; i < 12; i++) g[i] = 0.5 + (double)i;
        for (int64_t b = 0; b < bags; b++)
            for (int64_t c = 0; c < 3; c++) {
                const int64_t s = off[b], e = b + 1 < bags ? off[b + 1] : 8;
                int64_t at = -1;
                for (int64_t p = s; p < e; p++)
                    if (idx[p] != pad && (at < 0 || w[idx[p] * 3 + c] > w[at * 3 + c])) at = idx[p];
                ref[b * 3 + c] = at < 0 ? 0.0 : w[at * 3 + c];
                if (at >= 0) gref[at * 3 + c] += g[b * 3 + c];
            }
        CHECK(Y && near_all(Y, ref, 12, 0));
        CHECK(ts_backward_with(Y, mk(TS_SHAPE(4, 3), g, TS_F64, d)) == TS_OK);
        CHECK(near_all(ts_grad(W), gref, 18, 0));
        /* the 2-D form and float32 */
        ts_tensor *Y2 = ts_embedding_bag(
            ts_to_dtype(W, TS_F32), mki(TS_SHAPE(2, 3), idx, TS_I64, d), NULL, 2, NULL, -1, false);
        double r2[6];
        for (int64_t b = 0; b < 2; b++)
            for (int64_t c = 0; c < 3; c++) {
                double m = -INFINITY;
                for (int64_t p = b * 3; p < b * 3 + 3; p++) m = fmax(m, (float)w[idx[p] * 3 + c]);
                r2[b * 3 + c] = m;
            }
        CHECK(Y2 && ts_dtype_of(Y2) == TS_F32 && near_all(Y2, r2, 6, 0));
        CHECK_OK();
        ts_scope_end();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *w = ts_ones(TS_SHAPE(5, 3), (ts_opts){.dtype = TS_F64});
    ts_tensor *i2 = ts_tensor_i64(TS_SHAPE(2, 2), (const int64_t[]){0, 1, 2, 3}, (ts_opts){0});
    ts_tensor *i1 = ts_tensor_i64(TS_SHAPE(4), (const int64_t[]){0, 1, 2, 3}, (ts_opts){0});
    ts_tensor *o = ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){0, 2}, (ts_opts){0});
    CHECK(ts_embedding_bag(w, i2, NULL, 3, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "mode has to be 0 (sum), 1 (mean) or 2 (max)");
    CHECK(ts_embedding_bag(w, ts_tensor_i64(TS_SHAPE(1, 2), (const int64_t[]){0, 5}, (ts_opts){0}),
                           NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    CHECK(ts_embedding_bag(w, ts_tensor_i64(TS_SHAPE(1, 2), (const int64_t[]){-1, 0}, (ts_opts){0}),
                           NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    /* an index far out of range (the kernel would read there): refused before any read */
    CHECK(ts_embedding_bag(
              w,
              ts_tensor_i64(TS_SHAPE(1, 2), (const int64_t[]){(int64_t)1 << 40, 0}, (ts_opts){0}),
              NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    /* no offsets at all: no bags (offsets[0] is not read) */
    ts_tensor *y0 = ts_embedding_bag(w, i1, ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_I64}), 0,
                                     NULL, -1, false);
    CHECK(y0 && ts_size(y0, 0) == 0 && ts_size(y0, 1) == 3);
    CHECK_OK();
    CHECK(ts_embedding_bag(w, i1, ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){1, 2}, (ts_opts){0}),
                           0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "offsets[0] has to be 0");
    CHECK(ts_embedding_bag(w, i1,
                           ts_tensor_i64(TS_SHAPE(3), (const int64_t[]){0, 3, 2}, (ts_opts){0}), 0,
                           NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-decreasing");
    CHECK(ts_embedding_bag(w, i1, ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){0, 5}, (ts_opts){0}),
                           0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-decreasing");
    /* an offset far past the input (the kernel would read there): refused before any read */
    CHECK(ts_embedding_bag(
              w, i1,
              ts_tensor_i64(TS_SHAPE(3), (const int64_t[]){0, 2, (int64_t)1 << 40}, (ts_opts){0}),
              0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-decreasing");
    CHECK(ts_embedding_bag(w, i2, o, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "offsets has to be NULL");
    CHECK(ts_embedding_bag(w, i1, NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "offsets has to be a 1D");
    CHECK(ts_embedding_bag(w, i2, NULL, 1, ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_F64}), -1,
                           false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "only supported for mode sum");
    CHECK(ts_embedding_bag(w, i2, NULL, 0, ts_ones(TS_SHAPE(4), (ts_opts){.dtype = TS_F64}), -1,
                           false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "same shape");
    CHECK(ts_embedding_bag(w, i2, NULL, 0, ts_ones(TS_SHAPE(2, 2), (ts_opts){0}), -1, false) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "per_sample_weights");
    CHECK(ts_embedding_bag(w, i2, NULL, 0, NULL, 5, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "padding_idx");
    CHECK(ts_embedding_bag(w, ts_to_dtype(i2, TS_F32), NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "int64 or int32");
    CHECK(ts_embedding_bag(ts_ones(TS_SHAPE(5), (ts_opts){0}), i2, NULL, 0, NULL, -1, false) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2D");
    CHECK(ts_embedding_bag(w, ts_ones(TS_SHAPE(1, 1, 1), (ts_opts){.dtype = TS_I64}), NULL, 0, NULL,
                           -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "1D or 2D");
    CHECK(ts_embedding_bag(w, i2, NULL, 3, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "mode");
    /* a 0-d input (with or without offsets), and missing operands */
    ts_tensor *i0 = ts_tensor_i64(TS_SHAPE(), (const int64_t[]){1}, (ts_opts){0});
    CHECK(ts_embedding_bag(w, i0, o, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "1D or 2D");
    CHECK(ts_embedding_bag(w, i0, NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "1D or 2D");
    CHECK(ts_embedding_bag(NULL, i2, NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "embedding_bag: weight is NULL");
    CHECK(ts_embedding_bag(w, NULL, NULL, 0, NULL, -1, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "embedding_bag: input is NULL");
    ts_scope_end();
    CHECK_OK();
}

/* every allocation failed in turn (fault_sweep.h): the offsets form with per-sample weights and
 * its backward, the 2-D mean with padding, include_last_offset; each failure is a clear
 * out-of-memory error that leaks nothing, and the ops succeed once it is cleared */
typedef struct eb_st {
    ts_tensor *w, *idx, *off, *psw, *i2;
} eb_st;

static void *eb_setup(void) {
    static double w[12 * 4], psw[11];
    fill(w, 48, 7), fill(psw, 11, 8);
    static const int64_t idx[] = {1, 4, 4, 0, 7, 3, 2, 3, 11, 4, 5}, off[] = {0, 3, 3, 7, 9};
    eb_st *s = calloc(1, sizeof *s);
    ts_scope_begin();
    s->w = ts_keep(mk(TS_SHAPE(12, 4), w, TS_F32, ts_cpu()));
    ts_set_requires_grad(s->w, true);
    s->psw = ts_keep(mk(TS_SHAPE(11), psw, TS_F32, ts_cpu()));
    ts_set_requires_grad(s->psw, true);
    s->idx = ts_keep(mki(TS_SHAPE(11), idx, TS_I32, ts_cpu()));
    s->off = ts_keep(mki(TS_SHAPE(5), off, TS_I64, ts_cpu()));
    s->i2 = ts_keep(mki(TS_SHAPE(2, 5), idx, TS_I64, ts_cpu()));
    ts_scope_end();
    return s;
}

static bool eb_run(void *p) {
    eb_st *s = p;
    ts_set_grad(s->w, NULL), ts_set_grad(s->psw, NULL);
    ts_scope_begin();
    ts_tensor *a = ts_embedding_bag(s->w, s->idx, s->off, 0, s->psw, 3, false);
    ts_tensor *b = ts_embedding_bag(s->w, s->i2, NULL, 1, NULL, 4, false);
    ts_tensor *c = ts_embedding_bag(s->w, s->idx, s->off, 1, NULL, -1, true);
    bool ok = a && b && c;
    if (ok) ts_backward(ts_add(ts_add(ts_sum(a), ts_sum(b)), ts_sum(c)));
    ts_scope_end();
    return ok && ts_error() == TS_OK && ts_grad(s->w) && ts_grad(s->psw);
}

static void eb_teardown(void *p) {
    eb_st *s = p;
    ts_release(s->w), ts_release(s->psw), ts_release(s->idx), ts_release(s->off);
    ts_release(s->i2);
    free(s);
}

static void test_fault_sweep(void) {
    const ts_sweep_case c = {
        .name = "embedding_bag", .setup = eb_setup, .run = eb_run, .teardown = eb_teardown};
    const ts_sweep_stats st = ts_fault_sweep(&c, 5000);
    CHECK(st.errors > 0 && st.oom == st.errors);
    CHECK_OK();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_forward();
    test_strided_and_empty();
    test_grads();
    test_grads_empty();
    test_capture();
    test_max();
    test_errors();
    test_fault_sweep();
    CHECK_OK();
    return ts_test_finish();
}
