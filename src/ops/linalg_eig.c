/* linalg_eig.c — linalg.eig / eigvals of real square matrices: LAPACK's geev on the host in the
 * operand's dtype (sgeev for float32, dgeev for float64, as PyTorch's CPU build; decision 0024),
 * through LAPACKE's row-major interface so that geev sees A itself (its eigenvalue order and its
 * eigenvector normalisation: unit norm, largest component real). The results are complex: geev's
 * real (real, imaginary) pairs, [..., n, 2] and [..., n, n, 2], seen through ts_view_as_complex;
 * those complex tensors are the outputs of the node LinalgEigBackward0 (linalg_eig_grad.c,
 * PyTorch's grad_fn), which saves the pairs and reads the complex gradients as pairs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_internal.h"
#include "tessera/complex.h"

#ifdef TS_HAVE_LAPACKE
#include <lapacke.h>
#endif

/* geev of one row-major n x n matrix a (destroyed), float (f32) or double: eigenvalues wr + i wi,
 * real eigenvector columns vr (n x n; NULL: none) packed as LAPACK's; LAPACK's info */
static int geev(bool f32, int64_t n, void *a, void *wr, void *wi, void *vr) {
#ifdef TS_HAVE_LAPACKE
    if (n == 0) return 0;
    const lapack_int N = (lapack_int)n, ldv = vr ? N : 1;
    const char jv = vr ? 'V' : 'N';
    if (f32) {
        float none = 0;
        return LAPACKE_sgeev(LAPACK_ROW_MAJOR, 'N', jv, N, a, N, wr, wi, &none, 1, vr ? vr : &none,
                             ldv);
    }
    double none = 0;
    return LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', jv, N, a, N, wr, wi, &none, 1, vr ? vr : &none,
                         ldv);
#else
    (void)f32, (void)n, (void)a, (void)wr, (void)wi, (void)vr;
    return -1;
#endif
}

static double at(bool f32, const void *p, int64_t i) {
    return f32 ? ((const float *)p)[i] : ((const double *)p)[i];
}
static void put(bool f32, void *p, int64_t i, double v) {
    if (f32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* geev's packed output of one matrix as (real, imaginary) pairs: l (n x 2), v (n x n x 2; NULL:
 * none). A conjugate pair (wi[j] > 0) holds its vectors in columns j (real) and j + 1
 * (imaginary): v_j = re + i im, v_{j+1} = re - i im. */
static void unpack(bool f32, int64_t n, const void *wr, const void *wi, const void *vr, void *l,
                   void *v) {
    for (int64_t j = 0; j < n; j++) {
        put(f32, l, 2 * j, at(f32, wr, j));
        put(f32, l, 2 * j + 1, at(f32, wi, j));
    }
    if (!v) return;
    for (int64_t j = 0; j < n; j++) {
        const bool pair = at(f32, wi, j) > 0 && j + 1 < n;
        for (int64_t r = 0; r < n; r++) {
            const double re = at(f32, vr, r * n + j), im = pair ? at(f32, vr, r * n + j + 1) : 0;
            put(f32, v, 2 * (r * n + j), re);
            put(f32, v, 2 * (r * n + j) + 1, im);
            if (pair) {
                put(f32, v, 2 * (r * n + j + 1), re);
                put(f32, v, 2 * (r * n + j + 1) + 1, -im);
            }
        }
        j += pair;
    }
}

/* the pairs of every matrix of A: *Lp [..., n, 2], *Vp [..., n, n, 2] (vectors) in A's dtype on
 * its device; false with the error set */
static bool eig_pairs(const char *op, ts_tensor *A, bool vectors, ts_tensor **Lp, ts_tensor **Vp) {
    if (tsl_is_meta(A)) { /* no values: the pairs' shapes */
        const int64_t n = tsl_rows(A);
        const ts_shape bs = tsl_batch(A->shape);
        ts_shape vs = tsl_shape(bs, n, n);
        vs.dims[vs.ndim++] = 2;
        *Lp = tsl_meta(A, tsl_shape(bs, n, 2), A->dtype);
        if (vectors) *Vp = tsl_meta(A, vs, A->dtype);
        return *Lp && (!vectors || *Vp);
    }
    tsl_nat a;
    if (!tsl_nat_read(op, A, &a)) return false;
    const int64_t n = a.n, b = a.batch;
    const bool f32 = a.f32;
    const size_t es = f32 ? sizeof(float) : sizeof(double);
    const int64_t nn = n > 0 ? n : 1;
    void *wr = malloc((size_t)(2 * nn) * es), *vr = vectors ? malloc((size_t)(nn * nn) * es) : NULL;
    void *l = malloc((size_t)(b * 2 * nn) * es);
    void *v = vectors ? malloc((size_t)(b * 2 * nn * nn) * es) : NULL;
    bool ok = wr && l && (!vectors || (vr && v));
    if (!ok)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld matrices", op, (long long)b);
    for (int64_t i = 0; ok && i < b * n * n; i++)
        if (!isfinite(at(f32, a.a, i)))
            ok =
                !tsi_error_set(TS_ERR_ARG, "%s: input tensor should not contain infs or NaNs.", op);
    for (int64_t i = 0; ok && i < b; i++) {
        char *ai = (char *)a.a + (size_t)(i * n * n) * es;
        void *wi = (char *)wr + (size_t)nn * es;
        const int info = geev(f32, n, ai, wr, wi, vr);
        if (info < 0) {
            ok = !tsi_error_set(TS_ERR_OOM, "%s: LAPACK geev failed (%d: out of memory)", op, info);
            break;
        }
        if (info > 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: %sThe algorithm failed to converge because the input matrix is "
                          "ill-conditioned or has too many repeated eigenvalues (error code: %d).",
                          op, tsl_batch_prefix(A, i), info);
            ok = false;
            break;
        }
        unpack(f32, n, wr, wi, vr, (char *)l + (size_t)(i * 2 * n) * es,
               v ? (char *)v + (size_t)(i * 2 * n * n) * es : NULL);
    }
    if (ok) {
        const ts_shape bs = tsl_batch(A->shape);
        *Lp = tsl_nat_write(A, tsl_shape(bs, n, 2), l, f32);
        if (vectors) {
            ts_shape vs = tsl_shape(bs, n, n);
            vs.dims[vs.ndim++] = 2;
            *Vp = tsl_nat_write(A, vs, v, f32);
        }
        ok = *Lp && (!vectors || *Vp);
    }
    free(wr), free(vr), free(l), free(v);
    tsl_nat_free(&a);
    return ok;
}

static ts_tensor *eig_impl(const char *op, ts_tensor *A, ts_tensor **V) {
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    const bool graph = tsi_needs_graph(&A, 1);
    ts_tensor *Lp = NULL, *Vp = NULL, *L = NULL;
    if (eig_pairs(op, A, V || graph, &Lp, &Vp)) {
        L = ts_view_as_complex(Lp); /* the pairs need no grad: views without a node */
        /* with a graph V is an output even for eigvals: create_graph reads it with its history */
        ts_tensor *Vc = (V || graph) && L ? ts_view_as_complex(Vp) : NULL;
        if (L) L->is_view = false; /* the pairs are their own: plain results */
        if (Vc) Vc->is_view = false;
        ts_tensor *outs[2] = {L, Vc}, *saves[4] = {Lp, Vp, L, Vc};
        if (L && (!(V || graph) || Vc))
            tsl_twice(
                tsl_record("LinalgEigBackward0", op, tsl_eig_backward, &A, 1, outs, 2, saves, 4));
        if (V) *V = Vc ? ts_keep(Vc) : NULL;
    }
    return tsl_finish(L);
}

ts_tensor *ts_linalg_eig(ts_tensor *A, ts_tensor **V) {
    if (V) *V = NULL;
    return eig_impl("linalg.eig", A, V);
}

ts_tensor *ts_linalg_eigvals(ts_tensor *A) { return eig_impl("linalg.eigvals", A, NULL); }
