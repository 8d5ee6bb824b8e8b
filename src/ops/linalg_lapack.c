/* linalg_lapack.c — host batches of float64 matrices and LAPACKE's routines on them
 * (linalg_lapack.h). Row-major throughout: LAPACKE transposes to LAPACK's column-major itself. */
#include "ops/linalg_lapack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#ifdef TS_HAVE_LAPACKE
#include <lapacke.h>
#endif

bool tsl_available(const char *op) {
#ifdef TS_HAVE_LAPACKE
    (void)op;
    return true;
#else
    tsi_error_set(TS_ERR_UNSUPPORTED, "%s: this build of Tessera has no LAPACKE (liblapacke-dev)",
                  op);
    return false;
#endif
}

bool tsl_alloc(const char *op, int64_t batch, int64_t m, int64_t n, tsl_mats *M) {
    M->batch = batch, M->m = m, M->n = n;
    const int64_t total = batch * m * n;
    M->a = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!M->a) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld values", op, (long long)total);
        return false;
    }
    return true;
}

void tsl_free(tsl_mats *M) {
    free(M->a);
    M->a = NULL;
}

bool tsl_read(const char *op, ts_tensor *A, tsl_mats *M) {
    const ts_shape s = A->shape;
    const int64_t m = s.dims[s.ndim - 2], n = s.dims[s.ndim - 1];
    int64_t batch = 1;
    for (int i = 0; i < s.ndim - 2; i++) batch *= s.dims[i];
    if (!tsl_alloc(op, batch, m, n, M)) return false;
    const int64_t total = batch * m * n;
    if (total == 0) return true;
    ts_tensor *c = ts_to_dtype(A, TS_F64);
    c = c ? ts_contiguous(ts_to(c, ts_cpu())) : NULL;
    if (!c || ts_copy_to_host(c, M->a, (size_t)total * sizeof(double)) != TS_OK) {
        tsl_free(M);
        return false;
    }
    return true;
}

static ts_opts on(ts_tensor *like, ts_dtype dt) {
    ts_opts o = {0};
    o.dtype = dt;
    o.device = ts_device_of(like);
    return o;
}

bool tsl_is_meta(ts_tensor *like) { return tsi_device(like).type == TS_META; }

ts_tensor *tsl_meta(ts_tensor *like, ts_shape s, ts_dtype dt) { return ts_empty(s, on(like, dt)); }

ts_tensor *tsl_write(ts_tensor *like, ts_shape s, const double *v, ts_dtype dt) {
    static const double none = 0;
    ts_tensor *t = ts_from_data(s, TS_F64, tsi_numel(s) ? v : &none, on(like, TS_F64));
    return t && dt != TS_F64 ? ts_to_dtype(t, dt) : t;
}

ts_tensor *tsl_write_i32(ts_tensor *like, ts_shape s, const int32_t *v) {
    static const int32_t none = 0;
    return ts_from_data(s, TS_I32, tsi_numel(s) ? v : &none, on(like, TS_I32));
}

ts_tensor *tsl_write_i64(ts_tensor *like, ts_shape s, const int64_t *v) {
    static const int64_t none = 0;
    return ts_from_data(s, TS_I64, tsi_numel(s) ? v : &none, on(like, TS_I64));
}

#ifdef TS_HAVE_LAPACKE
#define RM LAPACK_ROW_MAJOR
#define LI (lapack_int)

int tsl_getrf(int64_t m, int64_t n, double *a, int32_t *ipiv) {
    if (m == 0 || n == 0) return 0;
    lapack_int *p = malloc((size_t)(m < n ? m : n) * sizeof *p);
    if (!p) return -1000;
    int info = LAPACKE_dgetrf(RM, LI m, LI n, a, LI n, p);
    for (int64_t i = 0; i < (m < n ? m : n); i++) ipiv[i] = (int32_t)p[i];
    free(p);
    return info;
}

static lapack_int *pivots_in(int64_t n, const int32_t *ipiv) {
    lapack_int *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (p)
        for (int64_t i = 0; i < n; i++) p[i] = ipiv[i];
    return p;
}

int tsl_getri(int64_t n, double *a, const int32_t *ipiv) {
    if (n == 0) return 0;
    lapack_int *p = pivots_in(n, ipiv);
    if (!p) return -1000;
    int info = LAPACKE_dgetri(RM, LI n, a, LI n, p);
    free(p);
    return info;
}

int tsl_getrs(bool trans, int64_t n, int64_t k, const double *lu, const int32_t *ipiv, double *b) {
    if (n == 0 || k == 0) return 0;
    lapack_int *p = pivots_in(n, ipiv);
    if (!p) return -1000;
    int info = LAPACKE_dgetrs(RM, trans ? 'T' : 'N', LI n, LI k, lu, LI n, p, b, LI k);
    free(p);
    return info;
}

int tsl_potrf_lower(int64_t n, double *a) {
    return n == 0 ? 0 : LAPACKE_dpotrf(RM, 'L', LI n, a, LI n);
}

int tsl_geqrf(int64_t m, int64_t n, double *a, double *tau) {
    return m == 0 || n == 0 ? 0 : LAPACKE_dgeqrf(RM, LI m, LI n, a, LI n, tau);
}

int tsl_orgqr(int64_t m, int64_t kq, int64_t k, const double *a, int64_t n, const double *tau,
              double *q) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < kq; j++) q[i * kq + j] = j < n ? a[i * n + j] : 0.0;
    if (m == 0 || kq == 0) return 0;
    if (k == 0) { /* no reflectors: the identity */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < kq; j++) q[i * kq + j] = i == j;
        return 0;
    }
    return LAPACKE_dorgqr(RM, LI m, LI kq, LI k, q, LI kq, tau);
}

int tsl_gesdd(int64_t m, int64_t n, double *a, double *s, double *u, double *vt, bool full) {
    const int64_t k = m < n ? m : n;
    if (k == 0) { /* no singular values: U and V are identities */
        if (u)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < (full ? m : k); j++) u[i * (full ? m : k) + j] = i == j;
        if (vt)
            for (int64_t i = 0; i < (full ? n : k); i++)
                for (int64_t j = 0; j < n; j++) vt[i * n + j] = i == j;
        return 0;
    }
    if (!u) {
        double du = 0, dv = 0;
        return LAPACKE_dgesdd(RM, 'N', LI m, LI n, a, LI n, s, &du, 1, &dv, LI n);
    }
    const char job = full ? 'A' : 'S';
    return LAPACKE_dgesdd(RM, job, LI m, LI n, a, LI n, s, u, LI(full ? m : k), vt, LI n);
}

int tsl_syevd(bool vectors, bool upper, int64_t n, double *a, double *w) {
    return n == 0 ? 0
                  : LAPACKE_dsyevd(RM, vectors ? 'V' : 'N', upper ? 'U' : 'L', LI n, a, LI n, w);
}

int tsl_gels(const char *driver, int64_t m, int64_t n, int64_t k, double *a, double *b,
             double rcond, int64_t *rank, double *s) {
    const int64_t ldb = k > 0 ? k : 1;
    lapack_int r = 0;
    int info;
    if (m == 0 || n == 0) { /* no unknowns: B is the residual; no equations: X = 0 */
        if (m == 0)
            for (int64_t i = 0; i < n * k; i++) b[i] = 0.0;
        *rank = 0;
        return 0;
    }
    if (!strcmp(driver, "gels")) {
        info = LAPACKE_dgels(RM, 'N', LI m, LI n, LI k, a, LI n, b, LI ldb);
        r = (lapack_int)(m < n ? m : n);
    } else if (!strcmp(driver, "gelsd")) {
        info = LAPACKE_dgelsd(RM, LI m, LI n, LI k, a, LI n, b, LI ldb, s, rcond, &r);
    } else if (!strcmp(driver, "gelss")) {
        info = LAPACKE_dgelss(RM, LI m, LI n, LI k, a, LI n, b, LI ldb, s, rcond, &r);
    } else {
        lapack_int *jpvt = calloc((size_t)n, sizeof *jpvt);
        if (!jpvt) return -1000;
        info = LAPACKE_dgelsy(RM, LI m, LI n, LI k, a, LI n, b, LI ldb, jpvt, rcond, &r);
        free(jpvt);
    }
    *rank = r;
    return info;
}
#else
int tsl_getrf(int64_t m, int64_t n, double *a, int32_t *ipiv) {
    (void)m, (void)n, (void)a, (void)ipiv;
    return -1;
}
int tsl_getri(int64_t n, double *a, const int32_t *ipiv) {
    (void)n, (void)a, (void)ipiv;
    return -1;
}
int tsl_getrs(bool trans, int64_t n, int64_t k, const double *lu, const int32_t *ipiv, double *b) {
    (void)trans, (void)n, (void)k, (void)lu, (void)ipiv, (void)b;
    return -1;
}
int tsl_potrf_lower(int64_t n, double *a) {
    (void)n, (void)a;
    return -1;
}
int tsl_geqrf(int64_t m, int64_t n, double *a, double *tau) {
    (void)m, (void)n, (void)a, (void)tau;
    return -1;
}
int tsl_orgqr(int64_t m, int64_t kq, int64_t k, const double *a, int64_t n, const double *tau,
              double *q) {
    (void)m, (void)kq, (void)k, (void)a, (void)n, (void)tau, (void)q;
    return -1;
}
int tsl_gesdd(int64_t m, int64_t n, double *a, double *s, double *u, double *vt, bool full) {
    (void)m, (void)n, (void)a, (void)s, (void)u, (void)vt, (void)full;
    return -1;
}
int tsl_syevd(bool vectors, bool upper, int64_t n, double *a, double *w) {
    (void)vectors, (void)upper, (void)n, (void)a, (void)w;
    return -1;
}
int tsl_gels(const char *driver, int64_t m, int64_t n, int64_t k, double *a, double *b,
             double rcond, int64_t *rank, double *s) {
    (void)driver, (void)m, (void)n, (void)k, (void)a, (void)b, (void)rcond, (void)rank, (void)s;
    return -1;
}
#endif
