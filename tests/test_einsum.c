/* test_einsum.c — ts_einsum (src/ops/einsum.c) on every device against a float64 loop over every
 * assignment of the labels (explicit and implicit outputs, diagonals, traces, size-1 broadcasts,
 * the ellipsis, three operands, integers, float32), ts_gradcheck, a view for a lone permutation,
 * and the refusals with PyTorch's messages. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.3 * (double)(i + 1) + 0.7 * seed) * 0.9;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, ts_dtype dt, bool rg) {
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

/* the reference: eq of letters only, explicit output; a size-1 dim broadcasts. ref[k] the sum,
 * mag[k] the sum of |terms|; returns the output's element count */
static int64_t ref_einsum(const char *eq, int n, const ts_shape *s, const double *const *v,
                          double *ref, double *mag) {
    char terms[8][16], out[16];
    int nt = 0, k = 0;
    const char *p = eq;
    for (; *p && *p != '-'; p++) {
        if (*p == ',') {
            terms[nt++][k] = 0, k = 0;
            continue;
        }
        terms[nt][k++] = *p;
    }
    terms[nt++][k] = 0;
    snprintf(out, sizeof out, "%s", p + 2);
    (void)n;
    int64_t size[128] = {0};
    char labs[64];
    int nl = 0;
    for (int i = 0; i < nt; i++)
        for (int d = 0; terms[i][d]; d++) {
            int c = terms[i][d];
            if (!size[c]) labs[nl++] = (char)c;
            if (s[i].dims[d] > size[c]) size[c] = s[i].dims[d];
        }
    int64_t nout = 1;
    for (int d = 0; out[d]; d++) nout *= size[(int)out[d]];
    for (int64_t i = 0; i < nout; i++) ref[i] = mag[i] = 0;
    int64_t idx[128] = {0}, total = 1;
    for (int l = 0; l < nl; l++) total *= size[(int)labs[l]];
    for (int64_t it = 0; it < total; it++) {
        int64_t r = it;
        for (int l = nl - 1; l >= 0; l--)
            idx[(int)labs[l]] = r % size[(int)labs[l]], r /= size[(int)labs[l]];
        double prod = 1;
        for (int i = 0; i < nt; i++) {
            int64_t off = 0;
            for (int d = 0; terms[i][d]; d++)
                off = off * s[i].dims[d] + (s[i].dims[d] == 1 ? 0 : idx[(int)terms[i][d]]);
            prod *= v[i][off];
        }
        int64_t o = 0;
        for (int d = 0; out[d]; d++) o = o * size[(int)out[d]] + idx[(int)out[d]];
        ref[o] += prod, mag[o] += fabs(prod);
    }
    return nout;
}

/* got within tol * (mag + 1) of ref, element by element */
static bool near_mag(ts_tensor *t, const double *ref, const double *mag, int64_t n, double tol) {
    static double got[4096];
    if (!rd(t, got, n)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * (mag[i] + 1))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

/* a shape as a constant initializer */
#define SH(n, ...)                                                                                 \
    {                                                                                              \
        .ndim = n, .dims = { __VA_ARGS__ }                                                         \
    }
#define SH0                                                                                        \
    { .ndim = 0 }

typedef struct ecase {
    const char *eq;  /* what ts_einsum gets */
    const char *ref; /* the same sum in the reference's form (letters, explicit output) */
    int n;
    ts_shape s[3];
    ts_shape out;
} ecase;

static const ecase CASES[] = {
    {"ij,jk->ik", "ij,jk->ik", 2, {SH(2, 3, 4), SH(2, 4, 5)}, SH(2, 3, 5)},
    {"ij,jk", "ij,jk->ik", 2, {SH(2, 3, 4), SH(2, 4, 5)}, SH(2, 3, 5)},
    {"ibj,bjk->bik", "ibj,bjk->bik", 2, {SH(3, 3, 2, 4), SH(3, 2, 4, 5)}, SH(3, 2, 3, 5)},
    {"ii->i", "ii->i", 1, {SH(2, 4, 4)}, SH(1, 4)},
    {"ii", "ii->", 1, {SH(2, 4, 4)}, SH0},
    {"iji->j", "iji->j", 1, {SH(3, 3, 2, 3)}, SH(1, 2)},
    {"i,j->ij", "i,j->ij", 2, {SH(1, 3), SH(1, 4)}, SH(2, 3, 4)},
    {"ij->", "ij->", 1, {SH(2, 3, 4)}, SH0},
    {"ij->ji", "ij->ji", 1, {SH(2, 3, 4)}, SH(2, 4, 3)},
    {"Ab,bc", "Ab,bc->Ac", 2, {SH(2, 2, 3), SH(2, 3, 4)}, SH(2, 2, 4)},
    {"zA", "zA->Az", 1, {SH(2, 2, 3)}, SH(2, 3, 2)},
    {"bn,anm,bm->ba", "bn,anm,bm->ba", 3, {SH(2, 2, 3), SH(3, 4, 3, 5), SH(2, 2, 5)}, SH(2, 2, 4)},
    {"ij,jk,k->i", "ij,jk,k->i", 3, {SH(2, 2, 3), SH(2, 3, 4), SH(1, 4)}, SH(1, 2)},
    {"ijk,ikj->i", "ijk,ikj->i", 2, {SH(3, 2, 3, 3), SH(3, 2, 3, 3)}, SH(1, 2)},
    /* size-1 dims broadcast: a contracted one, a batch one, an output one */
    {"ij,jk->ik", "ij,jk->ik", 2, {SH(2, 3, 1), SH(2, 4, 5)}, SH(2, 3, 5)},
    {"bij,bjk->bik", "bij,bjk->bik", 2, {SH(3, 1, 2, 3), SH(3, 4, 3, 2)}, SH(3, 4, 2, 2)},
    {"i,i->i", "i,i->i", 2, {SH(1, 1), SH(1, 3)}, SH(1, 3)},
    /* the ellipsis, right-aligned and broadcast; summed when the output omits it */
    {"...ij,...jk->...ik",
     "ABij,Bjk->ABik",
     2,
     {SH(4, 2, 1, 3, 4), SH(3, 5, 4, 2)},
     SH(4, 2, 5, 3, 2)},
    {"i...->...", "iAB->AB", 1, {SH(3, 3, 2, 2)}, SH(2, 2, 2)},
    {"...i->i", "ABi->i", 1, {SH(3, 2, 3, 4)}, SH(1, 4)},
    {"b...,b...", "bAB,bAB->AB", 2, {SH(3, 2, 3, 2), SH(3, 2, 3, 2)}, SH(2, 3, 2)},
    /* empty: a sum of nothing */
    {"ij,jk->ik", "ij,jk->ik", 2, {SH(2, 2, 0), SH(2, 0, 3)}, SH(2, 2, 3)},
};

static void test_values(void) {
    double v[3][256], ref[256], mag[256];
    for (int i = 0; i < 3; i++) fill(v[i], 256, i + 1);
    const double *vp[3] = {v[0], v[1], v[2]};
    const ts_dtype dts[2] = {TS_F64, TS_F32};
    /* at most 12 terms per sum, accumulated in the dtype: 16 eps of |terms| */
    const double tol[2] = {16 * 0x1p-53, 16 * 0x1p-24};
    for (int di = 0; di < ndev; di++)
        for (int ti = 0; ti < 2; ti++)
            for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
                const ecase *e = &CASES[c];
                ts_scope_begin();
                ts_tensor *in[3];
                for (int i = 0; i < e->n; i++) in[i] = mk(e->s[i], v[i], devs[di], dts[ti], false);
                ts_tensor *y = ts_einsum(e->eq, in, e->n);
                int64_t cnt = ref_einsum(e->ref, e->n, e->s, vp, ref, mag);
                bool ok =
                    y && ts_dtype_of(y) == dts[ti] && ts_device_equal(ts_device_of(y), devs[di]);
                ts_shape ys = y ? ts_shape_of(y) : (ts_shape){0};
                ok = ok && ys.ndim == e->out.ndim &&
                     !memcmp(ys.dims, e->out.dims, (size_t)ys.ndim * sizeof *ys.dims);
                ok = ok && near_mag(y, ref, mag, cnt, tol[ti]);
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "einsum '%s' %s on %s%s", e->eq,
                                  ts_dtype_name(dts[ti]), ts_device_str(devs[di]),
                                  ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
    /* integers stay in their dtype (sums included) and are exact */
    ts_scope_begin();
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, -1, 2, 0, 3, 1};
    ts_tensor *ia[2] = {mk(TS_SHAPE(2, 3), a, ts_cpu(), TS_I32, false),
                        mk(TS_SHAPE(3, 2), b, ts_cpu(), TS_I32, false)};
    ts_tensor *y = ts_einsum("ij,jk->ik", ia, 2);
    const double want[4] = {14, 2, 32, 2};
    CHECK(y && ts_dtype_of(y) == TS_I32 && near_all(y, want, 4, 0));
    y = ts_einsum("ij->j", ia, 1);
    const double cols[3] = {5, 7, 9};
    CHECK(y && ts_dtype_of(y) == TS_I32 && near_all(y, cols, 3, 0));
    /* a lone permutation is a view of the operand, as PyTorch's */
    ts_tensor *x = mk(TS_SHAPE(2, 3), a, ts_cpu(), TS_F64, false);
    y = ts_einsum("ij->ji", &x, 1);
    CHECK(y && ts_data_ptr(y) == ts_data_ptr(x) && ts_size(y, 0) == 3);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradients */
static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    return ts_einsum((const char *)ctx, in, n);
}

static void test_grads(void) {
    double v[3][64];
    for (int i = 0; i < 3; i++) fill(v[i], 64, 10 + i);
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
            const ecase *e = &CASES[c];
            ts_scope_begin();
            ts_tensor *in[3];
            for (int i = 0; i < e->n; i++) in[i] = mk(e->s[i], v[i], devs[di], TS_F64, true);
            const bool ok = ts_gradcheck(g_fn, (void *)e->eq, in, e->n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck '%s' on %s%s", e->eq,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* ------------------------------------------------------------------ refusals */
static void refused(const char *eq, ts_tensor *const *in, int n, ts_status code, const char *text) {
    ts_tensor *y = ts_einsum(eq, in, n);
    bool ok = y == NULL && ts_error() == code && strstr(ts_error_message(), "einsum()") &&
              strstr(ts_error_message(), text);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "einsum '%s': expected %d '%s', got %d '%s'", eq,
                      (int)code, text, (int)ts_error(), ts_error_message());
    ts_error_clear();
}

static void test_errors(void) {
    ts_scope_begin();
    double v[24];
    fill(v, 24, 5);
    ts_tensor *a = mk(TS_SHAPE(3, 4), v, ts_cpu(), TS_F64, false);
    ts_tensor *b = mk(TS_SHAPE(4, 2), v, ts_cpu(), TS_F64, false);
    ts_tensor *ab[2] = {a, b}, *aa[2] = {a, a};
    refused("ij,jk->ik", ab, 1, TS_ERR_ARG, "fewer operands");
    refused("ij->ij", ab, 2, TS_ERR_ARG, "more operands");
    refused("ijk->i", ab, 1, TS_ERR_SHAPE, "does not match the number of dimensions");
    refused("ii->i", ab, 1, TS_ERR_SHAPE, "repeated for operand 0");
    refused("ij->ik", ab, 1, TS_ERR_ARG, "output subscript k does not appear");
    refused("ij->ii", ab, 1, TS_ERR_ARG, "appears more than once");
    refused("i$", ab, 1, TS_ERR_ARG, "invalid subscript given at index 1");
    refused("....", ab, 1, TS_ERR_ARG, "ellipsis was already found");
    refused("i.j", ab, 1, TS_ERR_ARG, "not part of any ellipsis");
    refused("ij,jk->ik", aa, 2, TS_ERR_SHAPE, "subscript j has size 3 for operand 1");
    refused("...ij,...jk", aa, 2, TS_ERR_SHAPE, "subscript j has size 3");
    refused("ij,jk->ik", ab, 0, TS_ERR_ARG, "at least one operand");
    refused(NULL, ab, 1, TS_ERR_ARG, "equation");
    ts_tensor *mixed[2] = {a, mk(TS_SHAPE(4, 2), v, ts_cpu(), TS_F32, false)};
    refused("ij,jk->ik", mixed, 2, TS_ERR_DTYPE, "operand 1 is float32 but operand 0 is float64");
    ts_tensor *e3a = mk(TS_SHAPE(2, 3, 4), v, ts_cpu(), TS_F64, false),
              *e3b = mk(TS_SHAPE(4, 4), v, ts_cpu(), TS_F64, false);
    ts_tensor *ell[2] = {e3a, e3b};
    refused("...j,...j", ell, 2, TS_ERR_SHAPE, "covered by ellipsis in operand 1");
    ts_tensor *nul[2] = {a, NULL};
    CHECK(ts_einsum("ij,jk->ik", nul, 2) == NULL && ts_error() != TS_OK);
    ts_error_clear();
    if (ndev > 1) {
        ts_tensor *dd[2] = {a, mk(TS_SHAPE(4, 2), v, devs[1], TS_F64, false)};
        CHECK(ts_einsum("ij,jk->ik", dd, 2) == NULL && ts_error() == TS_ERR_DEVICE);
        ts_error_clear();
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
