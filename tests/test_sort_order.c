/* test_sort_order.c — the exact order of sort / argsort / topk / kthvalue / median along a dim
 * (src/ops/sort_keys.c, sort_radix.c, sort_select.c) against qsort with a position tiebreak:
 * NaN (either sign) largest (first when descending), -0.0 equal to +0.0 (ties by position), +-inf,
 * subnormals, duplicates, int64 keys at INT64_MIN / INT64_MAX and beyond 2^53, narrow dtypes
 * (int32, uint8, bool, bfloat16), short rows (insertion sort), long rows (radix), many rows (the
 * threaded path), dim 0 and the last dim, on every device. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "ts_test.h"

static uint64_t seed = 88172645463325252ull;
static uint64_t rnd(void) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return seed;
}

/* float data: row 0 zeros of both signs (every key equal), row 1 NaNs of both signs, the others
 * special values and random ones */
static void gen_f(double *x, int64_t R, int64_t L) {
    static const double set[] = {NAN,   -NAN,   INFINITY, -INFINITY, 0.0, -0.0, 1.5, -1.5,
                                 1e-40, -1e-40, FLT_MAX,  -FLT_MAX,  3.0, 3.0,  -2.0};
    const int ns = (int)(sizeof set / sizeof set[0]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < L; j++) {
            double *v = &x[r * L + j];
            if (r == 0 && R > 2)
                *v = j % 3 ? -0.0 : 0.0;
            else if (r == 1 && R > 2)
                *v = j % 2 ? NAN : -NAN;
            else if (rnd() % 2)
                *v = set[rnd() % ns];
            else
                *v = (double)(int64_t)(rnd() % 2001 - 1000) / 8.0;
        }
}
static void gen_i(int64_t *x, int64_t R, int64_t L) {
    static const int64_t set[] = {INT64_MIN,        INT64_MAX,         0,   -1, 1, 9007199254740993,
                                  9007199254740992, -9007199254740993, 255, 256};
    for (int64_t i = 0; i < R * L; i++) {
        const uint64_t u = rnd();
        x[i] = u % 3 == 0 ? set[u / 3 % 10] : u % 3 == 1 ? (int64_t)(u >> 8) % 300 : (int64_t)rnd();
    }
}

/* the reference order: keys f (NaN largest, -0 == +0) or i; ties by position */
static const double *ref_f;
static const int64_t *ref_i;
static bool ref_desc;
static int cmp_ref(const void *pa, const void *pb) {
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int c;
    if (ref_i) {
        c = (ref_i[a] > ref_i[b]) - (ref_i[a] < ref_i[b]);
    } else {
        const double x = ref_f[a], y = ref_f[b];
        c = isnan(x) || isnan(y) ? isnan(x) - isnan(y) : (x > y) - (x < y);
    }
    if (ref_desc) c = -c;
    return c ? c : (a > b) - (a < b);
}
/* perm[j] = the position in row r (elements at r * rs + j * js) of its j-th in the order */
static void ref_row(int64_t r, int64_t L, int64_t rs, int64_t js, int64_t *perm) {
    for (int64_t j = 0; j < L; j++) perm[j] = r * rs + j * js;
    qsort(perm, (size_t)L, sizeof *perm, cmp_ref);
    for (int64_t j = 0; j < L; j++) perm[j] = (perm[j] - r * rs) / js;
}

static bool rd_i64(ts_tensor *t, int64_t *out, int64_t n) {
    ts_tensor *h = t ? ts_contiguous(ts_to(ts_to_dtype(t, TS_I64), ts_cpu())) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * 8) == TS_OK;
}
static bool rd_f64(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu())) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * 8) == TS_OK;
}

enum { MAXR = 40, MAXL = 1000, MAXN = MAXR * MAXL };
static int64_t perm[MAXN], got[MAXN], ix[MAXN];
static double fx[MAXN], gv[MAXN];

/* out (R rows of m along dim, layout of a tensor R x m or m x R) against the reference's first
 * places pick(r) .. of each row; keepdim false with m 1: R values */
static bool same_places(const char *what, const int64_t *out, int64_t R, int64_t m, int dim,
                        const int64_t *ref, int64_t L, const int64_t *place) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < m; j++) {
            const int64_t o = dim ? r * m + j : j * R + r;
            const int64_t want = ref[r * L + (place ? place[r] : j)];
            if (out[o] != want) {
                fprintf(stderr, "  %s: row %lld place %lld: %lld, want %lld\n", what, (long long)r,
                        (long long)j, (long long)out[o], (long long)want);
                return false;
            }
        }
    return true;
}

static void check_case(ts_device d, ts_dtype dt, int64_t R, int64_t L, int dim) {
    const bool is_int = !ts_dtype_is_floating(dt);
    const ts_shape s = dim ? TS_SHAPE(R, L) : TS_SHAPE(L, R);
    const int64_t rs = dim ? L : 1, js = dim ? 1 : R, n = R * L;
    ts_scope_begin();
    ts_tensor *t;
    if (is_int) {
        gen_i(ix, R, L);
        t = ts_from_data(s, TS_I64, ix, (ts_opts){.dtype = TS_I64});
    } else {
        gen_f(fx, R, L);
        t = ts_tensor_f64(s, fx, (ts_opts){.dtype = TS_F64});
    }
    t = ts_to(ts_to_dtype(t, dt), d);
    /* the reference keys: the tensor's own values */
    CHECK(is_int ? rd_i64(t, ix, n) : rd_f64(t, fx, n));
    ref_i = is_int ? ix : NULL, ref_f = is_int ? NULL : fx;
    for (int desc = 0; desc < 2; desc++) {
        ref_desc = desc;
        for (int64_t r = 0; r < R; r++) ref_row(r, L, rs, js, perm + r * L);
        ts_tensor *si = NULL, *sv = ts_sort(t, dim, desc, false, &si);
        CHECK(rd_i64(ts_argsort(t, dim, desc, true), got, n) &&
              same_places("argsort", got, R, L, dim, perm, L, NULL));
        CHECK(rd_i64(si, got, n) && same_places("sort indices", got, R, L, dim, perm, L, NULL));
        /* the values, to the bit: -0.0 and NaN kept as they were */
        bool bad = is_int ? !sv : !rd_f64(sv, gv, n);
        for (int64_t r = 0; r < R && !is_int && !bad; r++)
            for (int64_t j = 0; j < L && !bad; j++) {
                const double w = fx[r * rs + perm[r * L + j] * js], g = gv[r * rs + j * js];
                bad = isnan(w) ? !isnan(g) : (g != w || signbit(g) != signbit(w));
            }
        CHECK(!bad);
        const int64_t k = L < 5 ? L : 5;
        CHECK(ts_topk(t, k, dim, desc, true, &si) && rd_i64(si, got, R * k) &&
              same_places("topk", got, R, k, dim, perm, L, NULL));
        if (desc) continue;
        int64_t place[MAXR];
        const int64_t ks[3] = {1, L / 3 + 1, L};
        for (int c = 0; c < 3; c++) {
            for (int64_t r = 0; r < R; r++) place[r] = ks[c] - 1;
            CHECK(ts_kthvalue(t, ks[c], dim, false, &si) && rd_i64(si, got, R) &&
                  same_places("kthvalue", got, R, 1, 1, perm, L, place));
        }
        for (int64_t r = 0; r < R; r++) {
            int64_t nans = 0;
            for (int64_t j = 0; j < L && !is_int; j++) nans += isnan(fx[r * rs + j * js]);
            place[r] = nans ? L - nans : (L - 1) / 2;
        }
        CHECK(ts_median_dim(t, dim, false, &si) && rd_i64(si, got, R) &&
              same_places("median", got, R, 1, 1, perm, L, place));
    }
    ts_scope_end();
    CHECK_OK();
}

/* each allocation of each op failing in turn (the row scratch too): TS_ERR_OOM or a result, never
 * a crash or a leak (the sanitizer build). Rows under the threads' grain: each parallel region
 * costs a scheduler slice on a loaded machine. */
static void check_oom(void) {
    ts_scope_begin();
    gen_f(fx, 4, 300);
    ts_tensor *t = ts_to_dtype(ts_tensor_f64(TS_SHAPE(4, 300), fx, (ts_opts){0}), TS_F32);
    for (int op = 0; op < 4; op++) {
        bool done = false;
        for (int64_t n = 1; n < 200 && !done; n++) {
            ts_scope_begin();
            ts_tensor *idx = NULL, *v = NULL;
            ts_fault_alloc_set(n);
            if (op == 0) v = ts_sort(t, 1, true, true, &idx);
            if (op == 1) v = ts_topk(t, 5, 1, true, true, &idx);
            if (op == 2) v = ts_median_dim(t, 1, false, &idx);
            if (op == 3) v = ts_mode(t, 1, false, &idx); /* a full sort */
            const bool fired = ts_fault_alloc_fired();
            ts_fault_alloc_set(-1);
            done = !fired;
            CHECK(fired ? ts_error() == TS_ERR_OOM : v && idx && ts_error() == TS_OK);
            ts_error_clear();
            ts_scope_end();
        }
        CHECK(done);
    }
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        const ts_dtype fl[] = {TS_F32, TS_F64, TS_BF16, TS_F16};
        const ts_dtype in[] = {TS_I64, TS_I32, TS_U8, TS_BOOL, TS_I16, TS_I8, TS_U16, TS_U32};
        for (int i = 0; i < 4; i++) {
            check_case(d, fl[i], 5, 7, 1);   /* insertion sort */
            check_case(d, fl[i], 4, 32, 0);  /* its longest rows, along dim 0 */
            check_case(d, fl[i], 4, 33, 1);  /* radix */
            check_case(d, fl[i], 3, 300, 0); /* radix along dim 0 */
        }
        for (int i = 0; i < 8; i++) {
            check_case(d, in[i], 5, 9, 1);
            check_case(d, in[i], 3, 257, 0);
        }
        check_case(d, TS_F32, 1, 1, 1);
    }
    /* enough keys for the rows to go to threads */
    check_case(ts_cpu(), TS_F32, MAXR, MAXL, 1);
    check_case(ts_cpu(), TS_I64, MAXR, MAXL, 1);
    check_case(ts_cpu(), TS_F64, MAXR / 2, MAXL, 0);
    check_oom();
    return ts_test_finish();
}
