/* test_matmul.c — mm, bmm, matmul and the blocked GEMM against a naive double reference. */
/* Covers every 1-D/2-D/N-D combination, strided and broadcast inputs, all dtypes, cpu and sim:0,
 * empty dims and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/gemm_blocked.h"
#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/matmul_dnnl.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ data and references */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
/* Values exact in every dtype: k/8 with |k| <= 24 for floats, small integers otherwise, so the
 * sums below are exact in f32 and only the final rounding to f16/bf16 differs from the reference.
 */
static double sample(ts_dtype dt) {
    int64_t r = (int64_t)(next_u64() % 49) - 24;
    if (dt == TS_U8) return (double)((r + 24) % 4);
    if (dt == TS_I64 || dt == TS_I32) return (double)(r % 4);
    return (double)r / 8.0;
}
static double uniform(void) { return (double)(next_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0; }
/* uniform in [-1, 1] on a 1/256 grid: exact in f16 and bf16 too */
static double grid_uniform(void) { return nearbyint(uniform() * 256.0) / 256.0; }

static int64_t numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

/* torch.matmul on row-major doubles, written from the documentation independently of the
 * library: 1-D operands are promoted and the added dim dropped; batch dims broadcast. Returns the
 * output shape; fills out (values) and mag (sum of |a||b|, for tolerances). */
static ts_shape ref_matmul(ts_shape sa, const double *a, ts_shape sb, const double *b, double *out,
                           double *mag) {
    int64_t m = sa.ndim >= 2 ? sa.dims[sa.ndim - 2] : 1, k = sa.dims[sa.ndim - 1];
    int64_t n = sb.ndim >= 2 ? sb.dims[sb.ndim - 1] : 1;
    int nba = sa.ndim > 2 ? sa.ndim - 2 : 0, nbb = sb.ndim > 2 ? sb.ndim - 2 : 0;
    int nb = nba > nbb ? nba : nbb;
    int64_t bd[TS_MAX_DIMS], bda[TS_MAX_DIMS], bdb[TS_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        bda[i] = ia >= 0 ? sa.dims[ia] : 1;
        bdb[i] = ib >= 0 ? sb.dims[ib] : 1;
        bd[i] = bda[i] == 1 ? bdb[i] : bda[i]; /* 1 broadcasts, 0 does not */
    }
    ts_shape os = {.ndim = 0};
    int64_t nbatch = 1;
    for (int i = 0; i < nb; i++) os.dims[os.ndim++] = bd[i], nbatch *= bd[i];
    if (sa.ndim >= 2) os.dims[os.ndim++] = m;
    if (sb.ndim >= 2) os.dims[os.ndim++] = n;
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t rem = t, ia = 0, ib = 0, pa = 1, pb = 1;
        for (int i = nb - 1; i >= 0; i--) {
            int64_t idx = rem % bd[i];
            rem /= bd[i];
            ia += (bda[i] == 1 ? 0 : idx) * pa, pa *= bda[i];
            ib += (bdb[i] == 1 ? 0 : idx) * pb, pb *= bdb[i];
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, g = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = a[ia * m * k + i * k + p], y = b[ib * k * n + p * n + j];
                    s += x * y, g += fabs(x * y);
                }
                out[(t * m + i) * n + j] = s;
                if (mag) mag[(t * m + i) * n + j] = g;
            }
    }
    return os;
}

static double reround(double v, ts_dtype dt) {
    switch (dt) {
    case TS_F32:
        return (float)v;
    case TS_I32:
        return (double)(int32_t)(int64_t)v;
    case TS_U8:
        return (double)(uint8_t)(int64_t)v;
    default:
        return v;
    }
}

/* PyTorch's test tolerances, plus f32 rounding of long sums of inexact values */
static bool close_enough(double got, double want, double mag, ts_dtype dt) {
    double rtol = 0, atol = 0;
    switch (dt) {
    case TS_F32:
        rtol = 1.3e-6, atol = 1e-5 + 2e-6 * mag;
        break;
    case TS_F64:
        rtol = 1e-12, atol = 1e-12 * (1 + mag);
        break;
    case TS_F16:
        rtol = 1e-3, atol = 1e-5 + 1e-3 * mag;
        break;
    case TS_BF16:
        rtol = 1.6e-2, atol = 1e-5 + 8e-3 * mag;
        break;
    default:
        return got == reround(want, dt);
    }
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ------------------------------------------------------------------ tensors */
enum layout { L_CONTIG, L_TRANSPOSED, L_STRIDED, L_COUNT };
static const char *layout_name[L_COUNT] = {"contiguous", "transposed", "strided"};

/* A tensor with logical shape s and row-major values v, laid out as asked: L_TRANSPOSED stores
 * the last two dims swapped and returns the transposed view, L_STRIDED stores every element
 * twice along the last dim and returns the step-2 slice (neither row- nor column-major). */
static ts_tensor *make(ts_shape s, const double *v, ts_dtype dt, ts_device dev, enum layout lay) {
    const int nd = s.ndim;
    if (lay == L_TRANSPOSED && nd < 2) lay = L_CONTIG;
    int64_t n = numel(s);
    ts_shape ps = s;
    if (lay == L_TRANSPOSED) ps.dims[nd - 1] = s.dims[nd - 2], ps.dims[nd - 2] = s.dims[nd - 1];
    if (lay == L_STRIDED) ps.dims[nd - 1] *= 2;
    double *p = malloc(sizeof(double) * (size_t)(numel(ps) + 1));
    for (int64_t i = 0; i < numel(ps); i++) p[i] = 99; /* never read through the view */
    int64_t last = nd > 0 ? s.dims[nd - 1] : 1, prev = nd > 1 ? s.dims[nd - 2] : 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i % last, r = (i / last) % prev, outer = i / (last * prev);
        if (lay == L_CONTIG)
            p[i] = v[i];
        else if (lay == L_TRANSPOSED)
            p[(outer * last + j) * prev + r] = v[i];
        else
            p[2 * i] = v[i];
    }
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(ps, p, (ts_opts){0}), dt), dev);
    free(p);
    if (lay == L_TRANSPOSED) t = ts_transpose(t, nd - 2, nd - 1);
    if (lay == L_STRIDED) t = ts_slice(t, nd - 1, 0, ps.dims[nd - 1], 2);
    return t;
}

/* Values of any tensor as row-major doubles (through cpu and f64). */
static bool fetch(ts_tensor *t, double *out) {
    ts_tensor *c = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    return c && ts_copy_to_host(c, out, sizeof(double) * (size_t)ts_numel(c)) == TS_OK;
}

static bool shape_eq(ts_shape a, ts_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dims[i] != b.dims[i]) return false;
    return true;
}

static const char *shape_str(ts_shape s, char *buf) {
    int len = sprintf(buf, "[");
    for (int i = 0; i < s.ndim; i++)
        len += sprintf(buf + len, i ? ", %lld" : "%lld", (long long)s.dims[i]);
    sprintf(buf + len, "]");
    return buf;
}

typedef ts_tensor *(*mm_fn)(ts_tensor *, ts_tensor *);

/* Runs fn on operands of shapes sa, sb with the given layouts; checks shape, dtype, device and
 * every value against the reference. `want` (when ndim >= 0) is PyTorch's result shape. */
static void check_case(const char *name, mm_fn fn, ts_shape sa, ts_shape sb, ts_shape want,
                       ts_dtype dt, ts_device dev, enum layout la, enum layout lb,
                       bool fractional) {
    ts_scope_begin();
    int64_t na = numel(sa), nb = numel(sb);
    double *va = malloc(sizeof(double) * (size_t)(na + 1));
    double *vb = malloc(sizeof(double) * (size_t)(nb + 1));
    for (int64_t i = 0; i < na; i++) va[i] = fractional ? grid_uniform() : sample(dt);
    for (int64_t i = 0; i < nb; i++) vb[i] = fractional ? grid_uniform() : sample(dt);
    int64_t max_out = 1;
    for (int i = 0; i < sa.ndim - 1; i++) max_out *= sa.dims[i] > 0 ? sa.dims[i] : 1;
    for (int i = 0; i < sb.ndim; i++) max_out *= sb.dims[i] > 0 ? sb.dims[i] : 1;
    double *ref = malloc(sizeof(double) * (size_t)(max_out + 1));
    double *mag = malloc(sizeof(double) * (size_t)(max_out + 1));
    double *got = malloc(sizeof(double) * (size_t)(max_out + 1));
    ts_shape rs = ref_matmul(sa, va, sb, vb, ref, mag);
    ts_tensor *a = make(sa, va, dt, dev, la), *b = make(sb, vb, dt, dev, lb);
    CHECK_OK();
    ts_tensor *c = fn(a, b);
    bool ok = c != NULL;
    if (!ok) {
        printf("  %s failed: %s\n", name, ts_error_message());
        ts_error_clear();
    }
    if (ok && want.ndim >= 0) ok = shape_eq(ts_shape_of(c), want) && shape_eq(rs, want);
    if (ok) ok = shape_eq(ts_shape_of(c), rs) && ts_dtype_of(c) == dt && ts_is_contiguous(c);
    if (ok) ok = ts_device_equal(ts_device_of(c), dev) && fetch(c, got);
    int64_t nout = ok ? numel(rs) : 0;
    for (int64_t i = 0; i < nout && ok; i++) {
        ok = close_enough(got[i], ref[i], mag[i], dt);
        if (!ok) printf("  element %lld: got %.9g want %.9g\n", (long long)i, got[i], ref[i]);
    }
    if (!ok) {
        char ba[128], bb[128];
        printf("  %s: %s @ %s (%s, %s) as %s/%s\n", name, shape_str(sa, ba), shape_str(sb, bb),
               ts_dtype_name(dt), ts_device_str(dev), layout_name[la], layout_name[lb]);
    }
    CHECK(ok);
    CHECK_OK();
    free(va), free(vb), free(ref), free(mag), free(got);
    ts_scope_end();
}

#define SH(...) TS_SHAPE(__VA_ARGS__)

/* ------------------------------------------------------------------ front-end tests */
typedef struct shape_case {
    ts_shape a, b, want;
} shape_case;

static void test_matmul_shapes(ts_dtype dt, ts_device dev) {
    /* result shapes as torch.matmul gives them */
    const shape_case cases[] = {
        {SH(3), SH(3), SH()},
        {SH(2, 3), SH(3), SH(2)},
        {SH(3), SH(3, 4), SH(4)},
        {SH(2, 3), SH(3, 4), SH(2, 4)},
        {SH(4, 2, 3), SH(3), SH(4, 2)},
        {SH(3), SH(4, 3, 2), SH(4, 2)},
        {SH(4, 2, 3), SH(3, 5), SH(4, 2, 5)},
        {SH(2, 3), SH(4, 3, 5), SH(4, 2, 5)},
        {SH(4, 2, 3), SH(4, 3, 5), SH(4, 2, 5)},
        {SH(4, 2, 3), SH(1, 3, 5), SH(4, 2, 5)},
        {SH(1, 2, 3), SH(4, 3, 5), SH(4, 2, 5)},
        {SH(2, 1, 2, 3), SH(3, 3, 4), SH(2, 3, 2, 4)},
        {SH(5, 1, 2, 3), SH(4, 3, 2), SH(5, 4, 2, 2)},
        {SH(2, 1, 3, 2, 3), SH(1, 4, 1, 3, 2), SH(2, 4, 3, 2, 2)},
        {SH(1, 3), SH(3), SH(1)},
        {SH(3), SH(3, 1), SH(1)},
        {SH(1, 1, 3), SH(3), SH(1, 1)},
        {SH(2, 2, 1, 3), SH(3, 1), SH(2, 2, 1, 1)},
        {SH(3, 1, 1, 4), SH(2, 4, 3), SH(3, 2, 1, 3)},
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < ncases; c++)
        for (int la = 0; la < L_COUNT; la++)
            for (int lb = 0; lb < L_COUNT; lb++)
                check_case("matmul", ts_matmul, cases[c].a, cases[c].b, cases[c].want, dt, dev,
                           (enum layout)la, (enum layout)lb, false);
}

static void test_mm_bmm(ts_dtype dt, ts_device dev) {
    for (int la = 0; la < L_COUNT; la++)
        for (int lb = 0; lb < L_COUNT; lb++) {
            enum layout a = (enum layout)la, b = (enum layout)lb;
            check_case("mm", ts_mm, SH(2, 3), SH(3, 4), SH(2, 4), dt, dev, a, b, false);
            check_case("mm", ts_mm, SH(1, 1), SH(1, 1), SH(1, 1), dt, dev, a, b, false);
            check_case("mm", ts_mm, SH(5, 7), SH(7, 1), SH(5, 1), dt, dev, a, b, false);
            check_case("mm", ts_mm, SH(1, 6), SH(6, 9), SH(1, 9), dt, dev, a, b, false);
            check_case("mm", ts_mm, SH(17, 9), SH(9, 13), SH(17, 13), dt, dev, a, b, false);
            check_case("bmm", ts_bmm, SH(4, 2, 3), SH(4, 3, 5), SH(4, 2, 5), dt, dev, a, b, false);
            check_case("bmm", ts_bmm, SH(1, 3, 3), SH(1, 3, 1), SH(1, 3, 1), dt, dev, a, b, false);
        }
}

/* Broadcast batch operands made by expand (stride 0, no copy) */
static void test_expanded(ts_dtype dt, ts_device dev) {
    ts_scope_begin();
    double va[2 * 3], vb[3 * 4], ref[4 * 2 * 4], got[4 * 2 * 4];
    for (int i = 0; i < 6; i++) va[i] = sample(dt);
    for (int i = 0; i < 12; i++) vb[i] = sample(dt);
    ts_tensor *a = ts_expand(make(SH(1, 2, 3), va, dt, dev, L_CONTIG), SH(4, 2, 3));
    ts_tensor *b = ts_expand(make(SH(1, 3, 4), vb, dt, dev, L_TRANSPOSED), SH(4, 3, 4));
    CHECK(ts_stride(a, 0) == 0 && ts_stride(b, 0) == 0);
    ref_matmul(SH(2, 3), va, SH(3, 4), vb, ref, NULL);
    ts_tensor *outs[2] = {ts_bmm(a, b), ts_matmul(a, b)};
    for (int o = 0; o < 2; o++) {
        CHECK(outs[o] && shape_eq(ts_shape_of(outs[o]), SH(4, 2, 4)));
        if (!outs[o] || !fetch(outs[o], got)) continue;
        bool ok = true;
        for (int i = 0; i < 32; i++) ok = ok && close_enough(got[i], ref[i % 8], 0, dt);
        CHECK(ok);
    }
    /* a row vector expanded along m: stride 0 inside the matrix */
    ts_tensor *row = ts_expand(make(SH(1, 3), va, dt, dev, L_CONTIG), SH(5, 3));
    ts_tensor *r = ts_mm(row, make(SH(3, 4), vb, dt, dev, L_CONTIG));
    ref_matmul(SH(1, 3), va, SH(3, 4), vb, ref, NULL);
    CHECK(r && fetch(r, got));
    bool ok = r != NULL;
    for (int i = 0; ok && i < 20; i++) ok = close_enough(got[i], ref[i % 4], 0, dt);
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

/* Sizes large enough to reach the threaded paths: BLAS or blocked GEMM, batch-parallel bmm, the
 * folded [B, m, k] @ [k, n] case, f16 through f32 scratch. */
static void test_large(ts_device dev) {
    const ts_dtype fdt[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int d = 0; d < 4; d++) {
        check_case("mm", ts_mm, SH(130, 257), SH(257, 70), SH(130, 70), fdt[d], dev, L_CONTIG,
                   L_TRANSPOSED, true);
        check_case("bmm", ts_bmm, SH(64, 16, 12), SH(64, 12, 16), SH(64, 16, 16), fdt[d], dev,
                   L_TRANSPOSED, L_CONTIG, true);
        check_case("matmul", ts_matmul, SH(8, 50, 40), SH(40, 30), SH(8, 50, 30), fdt[d], dev,
                   L_CONTIG, L_CONTIG, true);
        check_case("matmul", ts_matmul, SH(3, 1, 40, 33), SH(2, 33, 20), SH(3, 2, 40, 20), fdt[d],
                   dev, L_STRIDED, L_TRANSPOSED, true);
    }
    check_case("mm", ts_mm, SH(300, 301), SH(301, 302), SH(300, 302), TS_F32, dev, L_CONTIG,
               L_CONTIG, true);
    check_case("mm", ts_mm, SH(33, 40), SH(40, 50), SH(33, 50), TS_I64, dev, L_TRANSPOSED,
               L_STRIDED, false);
    check_case("bmm", ts_bmm, SH(40, 9, 10), SH(40, 10, 11), SH(40, 9, 11), TS_I32, dev, L_CONTIG,
               L_CONTIG, false);
}

/* Products large enough for oneDNN's matmul primitive (from 2^20 multiply-adds; the weight
 * gradient's transposed-A layout from 2^25, where gemm_small leaves it), in every storage sense of
 * both operands, and an operand whose rows are longer than its columns (a leading dimension past
 * the width: a narrowed view). Where oneDNN multiplies float32, each of them must have run there.
 */
static ts_tensor *mm_narrowed(ts_tensor *a, ts_tensor *b) { /* a's first 300 columns of 337 */
    return ts_mm(ts_narrow(a, 1, 0, 300), b);
}
/* products of m n k multiply-adds the primitive should take, by the provider's rule */
static uint64_t want_prim(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    return tsi_lib_sgemm_primitive(ta, tb, m, n, k) ? 1 : 0;
}
/* The primitive cache keys on the thread count (oneDNN fixes it when a primitive is made): the same
 * product under another count builds its own, the same count reuses it. */
static void test_matmul_primitive_per_thread_count(void) {
    enum { M = 70, N = 90, K = 110 };
    static float a[M * K], b[K * N], c1[M * N], c2[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) - 6;
    for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) - 5;
    const int saved = ts_get_num_threads();
    ts_set_num_threads(1);
    if (!tsi_dnnl_matmul_f32(false, true, M, N, K, a, K, b, K, c1, N)) {
        printf("oneDNN's matmul absent: the per-thread-count cache is not tested\n");
        ts_set_num_threads(saved);
        return;
    }
    const uint64_t built = tsi_dnnl_matmul_builds();
    CHECK(tsi_dnnl_matmul_f32(false, true, M, N, K, a, K, b, K, c1, N));
    CHECK_EQ(tsi_dnnl_matmul_builds(), built);
    ts_set_num_threads(2);
    const bool two = ts_get_num_threads() == 2;
    CHECK(tsi_dnnl_matmul_f32(false, true, M, N, K, a, K, b, K, c2, N));
    CHECK_EQ(tsi_dnnl_matmul_builds(), built + (two ? 1 : 0));
    /* small integers: every partial sum exact in float32, whatever the order */
    CHECK(memcmp(c1, c2, sizeof c1) == 0);
    ts_set_num_threads(saved);
}

static void test_matmul_primitive(void) {
    const bool dnnl = !strncmp(tsi_lib_gemm_name(false), "oneDNN", 6);
    const uint64_t before = tsi_dnnl_matmul_count();
    uint64_t want = 0;
    int cases = 0;
    for (int la = L_CONTIG; la <= L_TRANSPOSED; la++)
        for (int lb = L_CONTIG; lb <= L_TRANSPOSED; lb++, cases++) {
            check_case("mm", ts_mm, SH(130, 300), SH(300, 270), SH(130, 270), TS_F32, ts_cpu(),
                       (enum layout)la, (enum layout)lb, true);
            want += want_prim(la == L_TRANSPOSED, lb == L_TRANSPOSED, 130, 270, 300);
        }
    /* dY^T @ x over 256 rows, 400 x 340: a weight gradient past gemm_small's share */
    check_case("mm", ts_mm, SH(400, 256), SH(256, 340), SH(400, 340), TS_F32, ts_cpu(),
               L_TRANSPOSED, L_CONTIG, true),
        cases++, want += want_prim(true, false, 400, 340, 256);
    /* thin products (a 10-wide output layer's forward, weight and input gradients): under the
     * AVX2 cap oneDNN's sgemm takes them from OpenBLAS */
    check_case("mm", ts_mm, SH(256, 300), SH(300, 10), SH(256, 10), TS_F32, ts_cpu(), L_CONTIG,
               L_TRANSPOSED, true);
    check_case("mm", ts_mm, SH(10, 256), SH(256, 300), SH(10, 300), TS_F32, ts_cpu(), L_TRANSPOSED,
               L_CONTIG, true);
    check_case("mm", ts_mm, SH(256, 10), SH(10, 300), SH(256, 300), TS_F32, ts_cpu(), L_CONTIG,
               L_CONTIG, true);
    want += want_prim(false, true, 256, 10, 300) + want_prim(true, false, 10, 300, 256) +
            want_prim(false, false, 256, 300, 10);
    /* the reference sees the whole [130, 337] operand: compare with a plain copy's product */
    ts_scope_begin();
    ts_tensor *a = ts_rand(SH(130, 337), (ts_opts){0}), *b = ts_rand(SH(300, 270), (ts_opts){0});
    ts_tensor *got = mm_narrowed(a, b);
    cases++, want += want_prim(false, false, 130, 270, 300);
    ts_tensor *ref = ts_mm(ts_to_dtype(ts_narrow(a, 1, 0, 300), TS_F64), ts_to_dtype(b, TS_F64));
    /* 300 float32 products of values in [0, 1) and their sum: within 301 unit roundoffs of 300 */
    const double tol = 301.0 * 300.0 * ldexp(1, -24);
    ts_tensor *err = ts_max(ts_abs(ts_sub(ts_to_dtype(got, TS_F64), ref)));
    CHECK_OK();
    if (err) CHECK(ts_item(err) <= tol);
    ts_scope_end();
    /* the primitive's brgemm sums do not depend on the thread count (dnnl_sgemm's did: its 1- and
     * 2-thread results differ in the last bits), so a run's results are the same on 1 or 2: the
     * forward, weight-gradient and input-gradient products of a 1024-wide layer. Under AVX2
     * oneDNN 2.x runs its sgemm's kernel (gemm:jit) in the primitive, whose sums do depend on
     * it: no such check there. */
    if (dnnl) {
        ts_scope_begin();
        ts_tensor *x = ts_rand(SH(256, 1024), (ts_opts){0}),
                  *wt = ts_rand(SH(1024, 1024), (ts_opts){0});
        const int threads = ts_get_num_threads();
        float *out[2] = {malloc(256 * 1024 * 4), malloc(1024 * 1024 * 4)};
        bool same = out[0] && out[1];
        for (int t = 1; t <= 2 && same; t++) {
            ts_set_num_threads(t);
            ts_tensor *y = ts_mm(x, ts_t(wt)), *gw = ts_mm(ts_t(x), ts_mm(x, wt));
            cases += 3;
            want += want_prim(false, true, 256, 1024, 1024) +
                    want_prim(false, false, 256, 1024, 1024) +
                    want_prim(true, false, 1024, 1024, 256);
            static float prev[2][1024 * 1024];
            same = ts_copy_to_host(y, out[0], 256 * 1024 * 4) == TS_OK &&
                   ts_copy_to_host(gw, out[1], 1024 * 1024 * 4) == TS_OK;
            if (same && t == 2)
                same = !memcmp(prev[0], out[0], 256 * 1024 * 4) &&
                       !memcmp(prev[1], out[1], 1024 * 1024 * 4);
            if (same && t == 1)
                memcpy(prev[0], out[0], 256 * 1024 * 4), memcpy(prev[1], out[1], 1024 * 1024 * 4);
        }
        ts_set_num_threads(threads);
        printf("the primitive's products on 1 and 2 threads: %s\n",
               same ? "the same bits" : "DIFFER");
        CHECK(same);
        free(out[0]), free(out[1]);
        ts_scope_end();
    }
    const uint64_t ran = tsi_dnnl_matmul_count() - before;
    printf("oneDNN's matmul primitive ran %llu of %d products (%s)\n", (unsigned long long)ran,
           cases,
           dnnl   ? "every layout"
           : want ? "those with a transposed operand"
                  : "none: not built in");
    CHECK_EQ(ran, want);
    /* the rule itself: with oneDNN as the provider its primitive takes every large layout; with
     * OpenBLAS (the AVX2 kernels, TS_GEMM unset) the products with B transposed and the weight
     * gradients over a short batch into wide layers, not those of a transformer's 4096 tokens
     * (half OpenBLAS's speed there) nor those 256 wide */
    const bool nn = want_prim(false, false, 256, 1024, 1024),
               nt = want_prim(false, true, 256, 1024, 1024),
               tn = want_prim(true, false, 1024, 1024, 256);
    if (dnnl) CHECK(nn && nt && tn);
#ifdef TS_HAVE_DNNL
    const char *force = getenv("TS_GEMM");
    if (strstr(tsi_lib_gemm_name(false), "OpenBLAS") && !(force && *force)) {
        CHECK(!nn && nt && tn);
        /* beside OpenBLAS, oneDNN's sgemm takes the thin products (a 10-class layer's), not the
         * tiny ones, and OpenBLAS the rest the primitive leaves (beta 1: never the primitive) */
        CHECK_EQ(tsi_lib_sgemm_route(false, true, 256, 10, 300, 0), TSI_SGEMM_DNNL);
        CHECK_EQ(tsi_lib_sgemm_route(true, false, 10, 300, 256, 0), TSI_SGEMM_DNNL);
        CHECK_EQ(tsi_lib_sgemm_route(false, false, 8, 10, 8, 0), TSI_SGEMM_BLAS);
        CHECK_EQ(tsi_lib_sgemm_route(false, false, 256, 1024, 1024, 0), TSI_SGEMM_BLAS);
        CHECK_EQ(tsi_lib_sgemm_route(false, true, 256, 1024, 1024, 0), TSI_SGEMM_PRIMITIVE);
        CHECK_EQ(tsi_lib_sgemm_route(false, true, 256, 1024, 1024, 1), TSI_SGEMM_BLAS);
        CHECK(!want_prim(true, false, 1024, 256, 4096) && !want_prim(true, false, 256, 1024, 4096));
        CHECK(!want_prim(true, false, 4096, 256, 256) && want_prim(true, false, 4096, 512, 256));
        CHECK(want_prim(false, true, 4096, 256, 4096));
    }
    if (dnnl) {
        CHECK(want_prim(true, false, 1024, 256, 4096) && want_prim(true, false, 4096, 256, 256));
        /* oneDNN the provider: its sgemm below the primitive, the BLAS for the tiny products */
        CHECK_EQ(tsi_lib_sgemm_route(false, false, 256, 10, 300, 0), TSI_SGEMM_DNNL);
        CHECK_EQ(tsi_lib_sgemm_route(false, false, 64, 64, 64, 1), TSI_SGEMM_DNNL);
        CHECK_EQ(tsi_lib_sgemm_route(false, false, 8, 10, 8, 0),
                 tsi_lib_gemm_present(true) ? TSI_SGEMM_BLAS : TSI_SGEMM_DNNL);
    }
#endif
    /* 10^6 multiply-adds: below the primitive, in every layout it takes */
    CHECK(!want_prim(true, false, 100, 100, 100) && !want_prim(false, true, 100, 100, 100));
    CHECK(!want_prim(true, false, 100, 1000, 10) && !want_prim(false, false, 100, 100, 100));
}

static void test_empty(ts_device dev) {
    const ts_dtype dts[3] = {TS_F32, TS_F16, TS_I64};
    for (int d = 0; d < 3; d++) {
        ts_dtype dt = dts[d];
        check_case("mm", ts_mm, SH(0, 3), SH(3, 4), SH(0, 4), dt, dev, L_CONTIG, L_CONTIG, false);
        check_case("mm", ts_mm, SH(2, 3), SH(3, 0), SH(2, 0), dt, dev, L_CONTIG, L_CONTIG, false);
        /* k == 0: a matrix of zeros */
        check_case("mm", ts_mm, SH(2, 0), SH(0, 3), SH(2, 3), dt, dev, L_CONTIG, L_CONTIG, false);
        check_case("bmm", ts_bmm, SH(0, 2, 3), SH(0, 3, 4), SH(0, 2, 4), dt, dev, L_CONTIG,
                   L_CONTIG, false);
        check_case("bmm", ts_bmm, SH(3, 2, 0), SH(3, 0, 4), SH(3, 2, 4), dt, dev, L_CONTIG,
                   L_CONTIG, false);
        check_case("matmul", ts_matmul, SH(0), SH(0), SH(), dt, dev, L_CONTIG, L_CONTIG, false);
        check_case("matmul", ts_matmul, SH(0, 2, 3), SH(3), SH(0, 2), dt, dev, L_CONTIG, L_CONTIG,
                   false);
        check_case("matmul", ts_matmul, SH(2, 0, 3), SH(5, 1, 3, 2), SH(5, 2, 0, 2), dt, dev,
                   L_CONTIG, L_CONTIG, false);
    }
}

/* uint8 and int32 wrap like PyTorch's integer mm */
static void test_int_wrap(ts_device dev) {
    ts_scope_begin();
    uint8_t a8[2] = {200, 100}, b8[2] = {2, 1};
    ts_tensor *c = ts_mm(ts_from_data(SH(1, 2), TS_U8, a8, (ts_opts){.device = dev}),
                         ts_from_data(SH(2, 1), TS_U8, b8, (ts_opts){.device = dev}));
    CHECK(c && ts_dtype_of(c) == TS_U8 && ts_item(c) == (double)((200 * 2 + 100) % 256));
    int64_t a64[2] = {INT64_C(1) << 62, 3}, b64[2] = {4, 5};
    c = ts_matmul(ts_tensor_i64(SH(2), a64, (ts_opts){.device = dev}),
                  ts_tensor_i64(SH(2), b64, (ts_opts){.device = dev}));
    CHECK(c && ts_ndim(c) == 0 && ts_item(c) == 15.0); /* 2^64 wraps away */
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static bool msg_has(const char *s) { return strstr(ts_error_message(), s) != NULL; }

#define CHECK_FAILS(expr, code, text)                                                              \
    do {                                                                                           \
        CHECK((expr) == NULL);                                                                     \
        CHECK(msg_has(text));                                                                      \
        if (!msg_has(text)) printf("  message was: %s\n", ts_error_message());                     \
        CHECK_ERR(code);                                                                           \
    } while (0)

static void test_errors(void) {
    ts_scope_begin();
    ts_opts f32 = {0}, f64 = {.dtype = TS_F64}, b8 = {.dtype = TS_BOOL};
    ts_tensor *m23 = ts_ones(SH(2, 3), f32), *m45 = ts_ones(SH(4, 5), f32);
    ts_tensor *m34 = ts_ones(SH(3, 4), f32), *v3 = ts_ones(SH(3), f32), *v4 = ts_ones(SH(4), f32);
    CHECK_FAILS(ts_mm(m23, m45), TS_ERR_SHAPE,
                "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
    CHECK_FAILS(ts_mm(m23, v3), TS_ERR_SHAPE, "mm: ");
    CHECK_FAILS(ts_mm(ts_ones(SH(2, 2, 3), f32), m34), TS_ERR_SHAPE, "mm: ");
    CHECK_FAILS(ts_mm(m23, ts_ones(SH(3, 4), f64)), TS_ERR_DTYPE,
                "mm: expected m1 and m2 to have the same dtype, but got: float != double");
    CHECK_FAILS(ts_mm(ts_ones(SH(2, 2), b8), ts_ones(SH(2, 2), b8)), TS_ERR_DTYPE, "mm: ");
    CHECK_FAILS(ts_bmm(m23, m34), TS_ERR_SHAPE, "bmm: ");
    CHECK_FAILS(ts_bmm(ts_ones(SH(2, 2, 3), f32), ts_ones(SH(3, 3, 4), f32)), TS_ERR_SHAPE,
                "bmm: ");
    CHECK_FAILS(ts_bmm(ts_ones(SH(2, 2, 3), f32), ts_ones(SH(2, 4, 4), f32)), TS_ERR_SHAPE,
                "bmm: batch1 and batch2 shapes cannot be multiplied");
    CHECK_FAILS(ts_bmm(ts_ones(SH(2, 2, 3), b8), ts_ones(SH(2, 3, 4), b8)), TS_ERR_DTYPE, "bmm: ");
    CHECK_FAILS(ts_matmul(v3, v4), TS_ERR_SHAPE, "matmul: ");
    CHECK_FAILS(ts_matmul(m23, v4), TS_ERR_SHAPE,
                "matmul: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x1)");
    CHECK_FAILS(ts_matmul(v4, m34), TS_ERR_SHAPE,
                "matmul: mat1 and mat2 shapes cannot be multiplied (1x4 and 3x4)");
    CHECK_FAILS(ts_matmul(ts_ones(SH(2, 2, 3), f32), ts_ones(SH(3, 4, 4), f32)), TS_ERR_SHAPE,
                "matmul: ");
    CHECK_FAILS(ts_matmul(ts_ones(SH(2, 2, 3), f32), ts_ones(SH(3, 3, 4), f32)), TS_ERR_SHAPE,
                "matmul: ");
    CHECK_FAILS(ts_matmul(ts_scalar(2, f32), m23), TS_ERR_SHAPE, "matmul: ");
    CHECK_FAILS(ts_matmul(v3, ts_ones(SH(3), f64)), TS_ERR_DTYPE, "matmul: ");
    CHECK_FAILS(ts_matmul(ts_ones(SH(3), b8), ts_ones(SH(3), b8)), TS_ERR_DTYPE, "matmul: ");
    CHECK_FAILS(ts_mm(NULL, m34), TS_ERR_ARG, "mm: ");
    CHECK_FAILS(ts_matmul(m23, NULL), TS_ERR_ARG, "matmul: ");
    /* a NULL input keeps the error that produced it */
    ts_mm(m23, m45);
    CHECK(ts_matmul(ts_mm(m23, m45), m34) == NULL);
    CHECK(msg_has("mm: mat1 and mat2 shapes"));
    CHECK_ERR(TS_ERR_SHAPE);
    if (ts_device_count(TS_SIM) >= 2) {
        ts_tensor *s0 = ts_ones(SH(3, 4), (ts_opts){.device = ts_sim(0)});
        ts_tensor *s1 = ts_ones(SH(3, 4), (ts_opts){.device = ts_sim(1)});
        CHECK_FAILS(ts_mm(m23, s0), TS_ERR_DEVICE,
                    "mm: expected all tensors to be on the same device");
        CHECK_FAILS(ts_matmul(ts_t(s0), s1), TS_ERR_DEVICE, "matmul: ");
        CHECK_FAILS(ts_bmm(ts_ones(SH(1, 2, 3), f32), ts_unsqueeze(s0, 0)), TS_ERR_DEVICE, "bmm: ");
        CHECK_FAILS(ts_matmul(v3, ts_ones(SH(3), (ts_opts){.device = ts_sim(0)})), TS_ERR_DEVICE,
                    "matmul: ");
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ blocked GEMM */
/* C = A @ B through the blocked GEMM with the given element strides, against the naive sum. */
static bool blocked_case(bool dbl, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool tc,
                         bool bcast, bool parallel) {
    int64_t na = m * k, nb = k * n;
    double *ra = malloc(sizeof(double) * (size_t)(na + 1)),
           *rb = malloc(sizeof(double) * (size_t)(nb + 1));
    for (int64_t i = 0; i < na; i++) ra[i] = uniform();
    for (int64_t i = 0; i < nb; i++) rb[i] = uniform();
    if (bcast) /* every row of A the same: row stride 0 */
        for (int64_t i = 0; i < na; i++) ra[i] = ra[i % k];
    int64_t rsa = ta ? 1 : k, csa = ta ? m : 1, rsb = tb ? 1 : n, csb = tb ? k : 1;
    if (bcast) rsa = 0, csa = 1;
    /* C sits in a larger buffer with guard values around and between its elements */
    int64_t rsc = tc ? 1 : n + 3, csc = tc ? m + 2 : 1;
    int64_t cspan = tc ? (n * (m + 2)) : m * (n + 3);
    size_t es = dbl ? 8 : 4;
    char *a = malloc(es * (size_t)(na + 1)), *b = malloc(es * (size_t)(nb + 1));
    char *c = malloc(es * (size_t)(cspan + 16));
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            double v = ra[i * k + p];
            int64_t off = i * rsa + p * csa;
            if (dbl)
                ((double *)a)[off] = v;
            else
                ((float *)a)[off] = (float)v;
        }
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) {
            double v = rb[p * n + j];
            int64_t off = p * rsb + j * csb;
            if (dbl)
                ((double *)b)[off] = v;
            else
                ((float *)b)[off] = (float)v;
        }
    for (int64_t i = 0; i < cspan + 16; i++) {
        if (dbl)
            ((double *)c)[i] = 12345.0;
        else
            ((float *)c)[i] = 12345.0f;
    }
    char *c0 = c + 8 * es; /* 8 guard elements before C */
    if (dbl)
        tsi_gemm_blocked_f64(m, n, k, (double *)a, rsa, csa, (double *)b, rsb, csb, (double *)c0,
                             rsc, csc, parallel);
    else
        tsi_gemm_blocked_f32(m, n, k, (float *)a, rsa, csa, (float *)b, rsb, csb, (float *)c0, rsc,
                             csc, parallel);
    bool ok = true;
    char *inside = calloc((size_t)(cspan + 16), 1);
    for (int64_t i = 0; i < m && ok; i++)
        for (int64_t j = 0; j < n && ok; j++) {
            double s = 0, g = 0;
            for (int64_t p = 0; p < k; p++) {
                double x = dbl ? ra[i * k + p] : (float)ra[i * k + p];
                double y = dbl ? rb[p * n + j] : (float)rb[p * n + j];
                s += x * y, g += fabs(x * y);
            }
            int64_t off = i * rsc + j * csc;
            inside[8 + off] = 1;
            double got = dbl ? ((double *)c0)[off] : ((float *)c0)[off];
            /* the worst-case bound of a k-term sum; any misplaced product is far above it */
            double tol = (double)(k + 1) * (dbl ? 1.2e-16 : 6e-8) * g + (dbl ? 1e-14 : 1e-6);
            if (!(fabs(got - s) <= tol)) {
                printf("  blocked %s m=%lld n=%lld k=%lld ta=%d tb=%d tc=%d bc=%d (%lld,%lld): "
                       "%.9g vs %.9g\n",
                       dbl ? "f64" : "f32", (long long)m, (long long)n, (long long)k, ta, tb, tc,
                       bcast, (long long)i, (long long)j, got, s);
                ok = false;
            }
        }
    for (int64_t i = 0; i < cspan + 16 && ok; i++) /* nothing written outside C */
        if (!inside[i]) ok = (dbl ? ((double *)c)[i] : ((float *)c)[i]) == 12345.0;
    free(inside), free(ra), free(rb), free(a), free(b), free(c);
    return ok;
}

static void test_blocked_gemm(void) {
    const char *isas[3] = {"generic", "avx2", "avx512"};
    const int64_t sizes[5] = {1, 7, 63, 129, 257};
    for (int is = 0; is < 3; is++) {
        if (!tsi_gemm_blocked_force_isa(isas[is])) {
            printf("blocked GEMM: %s not supported here, skipped\n", isas[is]);
            continue;
        }
        CHECK_STREQ(tsi_gemm_blocked_isa(), isas[is]);
        int cnt = 0, bad = 0;
        for (int im = 0; im < 5; im++)
            for (int in = 0; in < 5; in++)
                for (int ik = 0; ik < 5; ik++) {
                    int64_t m = sizes[im], n = sizes[in], k = sizes[ik];
                    if (m * n * k > 300000 && (im + in + ik) % 3 != 0) continue; /* keep it short */
                    int v = im + 2 * in + 3 * ik;
                    bool ok = blocked_case(v % 2, m, n, k, v % 3 == 0, v % 5 < 2, v % 7 == 3,
                                           v % 11 == 4, v % 4 != 1);
                    cnt++, bad += !ok;
                }
        /* k spanning several kc blocks, n beyond one nc block, k == 0 */
        bad += !blocked_case(false, 37, 41, 900, false, true, false, false, true);
        bad += !blocked_case(true, 37, 41, 700, true, false, true, false, true);
        bad += !blocked_case(false, 3, 4500, 5, false, false, false, false, true);
        bad += !blocked_case(true, 5, 9, 0, false, false, true, false, false);
        bad += !blocked_case(false, 300, 310, 320, false, false, false, false, true);
        printf("blocked GEMM %s: %d cases, %d bad\n", isas[is], cnt + 5, bad);
        CHECK_EQ(bad, 0);
    }
    CHECK(tsi_gemm_blocked_force_isa(NULL));
    CHECK(!tsi_gemm_blocked_force_isa("sse9"));
}

/* The CPU matmul kernel with every storage order of A, B and C (C by columns too: the kernel
 * takes any output strides and hands the library C's transpose), at a size each provider runs
 * (a tiny one stays with the BLAS), against a float64 loop. */
static void test_kernel_layouts(void) {
    const ts_backend *be = tsi_backend_for(TS_CPU);
    const int64_t sizes[2][3] = {{5, 6, 7}, {33, 47, 29}};
    for (int si = 0; si < 2; si++)
        for (int dbl = 0; dbl < 2; dbl++)
            for (int lay = 0; lay < 8; lay++) {
                const int64_t m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
                const bool at = lay & 1, bt = lay & 2, ct = lay & 4; /* stored transposed */
                const size_t es = dbl ? sizeof(double) : sizeof(float);
                char *a = malloc((size_t)(m * k) * es), *b = malloc((size_t)(k * n) * es);
                char *c = malloc((size_t)(m * n) * es);
                double *want = calloc((size_t)(m * n), sizeof *want);
                for (int64_t i = 0; i < m * k; i++) {
                    const double v = (double)((i * 37) % 19) / 7 - 1;
                    dbl ? (void)(((double *)a)[i] = v) : (void)(((float *)a)[i] = (float)v);
                }
                for (int64_t i = 0; i < k * n; i++) {
                    const double v = (double)((i * 23) % 17) / 5 - 1.5;
                    dbl ? (void)(((double *)b)[i] = v) : (void)(((float *)b)[i] = (float)v);
                }
                ts_kview ka = {.data = a, .dtype = dbl ? TS_F64 : TS_F32, .ndim = 3};
                ts_kview kb = ka, kc = ka;
                kb.data = b, kc.data = c;
                const int64_t as[3] = {0, at ? 1 : k, at ? m : 1},
                              bs[3] = {0, bt ? 1 : n, bt ? k : 1};
                const int64_t cs[3] = {0, ct ? 1 : n, ct ? m : 1};
                const int64_t ash[3] = {1, m, k}, bsh[3] = {1, k, n}, csh[3] = {1, m, n};
                for (int d = 0; d < 3; d++) {
                    ka.shape[d] = ash[d], ka.strides[d] = as[d];
                    kb.shape[d] = bsh[d], kb.strides[d] = bs[d];
                    kc.shape[d] = csh[d], kc.strides[d] = cs[d];
                }
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++)
                        for (int64_t p = 0; p < k; p++) {
                            const int64_t ia = i * as[1] + p * as[2], ib = p * bs[1] + j * bs[2];
                            want[i * n + j] += (dbl ? ((double *)a)[ia] : ((float *)a)[ia]) *
                                               (dbl ? ((double *)b)[ib] : ((float *)b)[ib]);
                        }
                be->matmul(be, 0, &kc, &ka, &kb);
                double worst = 0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        const int64_t ic = i * cs[1] + j * cs[2];
                        const double got = dbl ? ((double *)c)[ic] : ((float *)c)[ic];
                        worst = fmax(worst, fabs(got - want[i * n + j]));
                    }
                /* |terms| <= 1.5 * 1.5: float32 sums of k of them within k u of that */
                const double tol = (double)k * 2.25 * (dbl ? 1.2e-16 : 6e-8) * 4;
                if (!(worst <= tol))
                    printf("matmul kernel %lldx%lldx%lld %s A%s B%s C%s: error %.3g > %.3g\n",
                           (long long)m, (long long)n, (long long)k, dbl ? "f64" : "f32",
                           at ? "^T" : "", bt ? "^T" : "", ct ? "^T" : "", worst, tol);
                CHECK(worst <= tol);
                free(a), free(b), free(c), free(want);
            }
}

int main(void) {
    const int gate = ts_test_isa_gate();
    if (gate) return gate;
    printf("GEMM: float32 %s, float64 %s\n", tsi_lib_gemm_name(false), tsi_lib_gemm_name(true));
    if (ts_device_count(TS_SIM) < 2) ts_sim_configure(4, 0);
    test_blocked_gemm();
    test_kernel_layouts();
    const ts_dtype dts[7] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8};
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int d = 0; d < 2; d++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[d], &before);
        for (int t = 0; t < 7; t++) {
            test_matmul_shapes(dts[t], devs[d]);
            test_mm_bmm(dts[t], devs[d]);
            test_expanded(dts[t], devs[d]);
        }
        test_large(devs[d]);
        test_empty(devs[d]);
        test_int_wrap(devs[d]);
        ts_memory_stats(devs[d], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors);
        CHECK_EQ(after.allocated, before.allocated);
    }
    test_matmul_primitive();
    test_matmul_primitive_per_thread_count();
    test_errors();
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
