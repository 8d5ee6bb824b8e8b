/* products.c — PyTorch's products beyond matmul (issue 52): addmm, addmv, addr, baddbmm, addbmm
 * and their in-place forms, mv, dot, vdot, outer, inner, tensordot, kron, trace, multi_dot. Each
 * checks its operands under its own name, then composes the differentiable ops (mm, bmm, matmul,
 * mul, sum, views), so autograd and every device come with them. */
#include <math.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/elementwise.h"

/* The scope's result kept for the caller, or NULL when anything failed; closes the scope. */
static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

static bool need_ndim(const char *op, ts_tensor *t, const char *arg, int nd) {
    if (t->shape.ndim == nd) return true;
    return tsi_error_set(TS_ERR_SHAPE, "%s: expected %s to be %d-D, but got %d-D (%s)", op, arg, nd,
                         t->shape.ndim, tsi_desc(t)),
           false;
}

static bool same_dtype(const char *op, ts_tensor *a, const char *na, ts_tensor *b, const char *nb) {
    if (a->dtype == b->dtype) return true;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: expected %s and %s to have the same dtype, but got %s and %s (%s "
                         "and %s)",
                         op, na, nb, tsi_torch_scalar_name(a->dtype),
                         tsi_torch_scalar_name(b->dtype), tsi_desc(a), tsi_desc(b)),
           false;
}

static bool same_size(const char *op, int64_t a, const char *na, int64_t b, const char *nb) {
    if (a == b) return true;
    return tsi_error_set(TS_ERR_SHAPE, "%s: size mismatch, %s has %lld and %s has %lld", op, na,
                         (long long)a, nb, (long long)b),
           false;
}

/* ------------------------------------------------------------------ beta * input + alpha * P */
/* input broadcasts to the product's shape s (never the other way, as torch's expand) */
static bool check_expand(const char *op, ts_tensor *input, ts_shape s) {
    const ts_shape in = input->shape;
    bool ok = in.ndim <= s.ndim;
    for (int i = 1; ok && i <= in.ndim; i++) {
        int64_t a = in.dims[in.ndim - i], b = s.dims[s.ndim - i];
        ok = a == b || a == 1;
    }
    if (ok) return true;
    return tsi_error_set(TS_ERR_SHAPE,
                         "%s: input of shape %s cannot be broadcast to the product's shape %s", op,
                         tsi_shape_str(in), tsi_shape_str(s)),
           false;
}

static bool check_scalars(const char *op, ts_dtype dt, double beta, double alpha) {
    if (tsi_is_float(dt)) return true;
    if (dt == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for 'Bool'", op), false;
    if (beta != floor(beta) || !isfinite(beta))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: for integral input tensors, argument beta must not be a "
                             "floating point number (beta=%g)",
                             op, beta),
               false;
    if (alpha != floor(alpha) || !isfinite(alpha))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: for integral input tensors, argument alpha must not be a "
                             "floating point number (alpha=%g)",
                             op, alpha),
               false;
    return true;
}

typedef enum add_kind { ADD_MM, ADD_MV, ADD_R, ADD_BADDBMM, ADD_BMM } add_kind;

/* The checks shared by the add* ops: operands, dtypes, ranks, inner sizes (the product's own
 * checks would name mm / bmm instead). */
static bool check_add(const char *op, add_kind k, ts_tensor *input, ts_tensor *a, ts_tensor *b,
                      double beta, double alpha) {
    static const char *const an[] = {"mat1", "mat", "vec1", "batch1", "batch1"};
    static const char *const bn[] = {"mat2", "vec", "vec2", "batch2", "batch2"};
    static const int ar[] = {2, 2, 1, 3, 3}, br[] = {2, 1, 1, 3, 3};
    bool ok = tsi_check_input(op, input, "input");
    ok = tsi_check_input(op, a, an[k]) && ok;
    ok = tsi_check_input(op, b, bn[k]) && ok;
    if (!ok) return false;
    ts_tensor *all[3] = {input, a, b};
    ts_device dev;
    if (!tsi_same_device(op, all, 3, false, &dev)) return false;
    if (!need_ndim(op, a, an[k], ar[k]) || !need_ndim(op, b, bn[k], br[k])) return false;
    /* addr promotes its three dtypes (PyTorch's TensorIterator kernel: outer and add do here) */
    if (k == ADD_R) {
        ts_dtype r = ts_promote_types(ts_promote_types(input->dtype, a->dtype), b->dtype);
        return check_scalars(op, r, beta, alpha);
    }
    if (!same_dtype(op, input, "input", a, an[k]) || !same_dtype(op, a, an[k], b, bn[k]))
        return false;
    if (!check_scalars(op, a->dtype, beta, alpha)) return false;
    if ((k == ADD_BADDBMM || k == ADD_BMM) &&
        !same_size(op, a->shape.dims[0], "batch1's batch", b->shape.dims[0], "batch2's batch"))
        return false;
    const int ka = a->shape.ndim - 1, kb = b->shape.ndim == 1 ? 0 : b->shape.ndim - 2;
    return same_size(op, a->shape.dims[ka], "the contraction of the first operand",
                     b->shape.dims[kb], "the second's");
}

/* beta * input + alpha * p, input expanded to p's shape; in a scope */
static ts_tensor *add_scaled(const char *op, ts_tensor *input, ts_tensor *p, double beta,
                             double alpha) {
    if (!p || !check_expand(op, input, ts_shape_of(p))) return NULL;
    if (alpha != 1) p = ts_mul_scalar(p, alpha);
    if (beta == 0) return p; /* input ignored, NaN and inf included (PyTorch) */
    ts_tensor *in = ts_expand(input, ts_shape_of(p));
    if (beta != 1) in = ts_mul_scalar(in, beta);
    return ts_add(in, p);
}

static ts_tensor *add_product(const char *op, add_kind k, ts_tensor *input, ts_tensor *a,
                              ts_tensor *b, double beta, double alpha) {
    tsi_init();
    if (!check_add(op, k, input, a, b, beta, alpha)) return NULL;
    ts_scope_begin();
    ts_tensor *p = NULL;
    switch (k) {
    case ADD_MM:
        p = ts_mm(a, b);
        break;
    case ADD_MV:
        p = ts_matmul(a, b);
        break;
    case ADD_R:
        p = ts_outer(a, b);
        break;
    case ADD_BADDBMM:
        p = ts_bmm(a, b);
        break;
    case ADD_BMM: { /* sum_b a[b] @ b[b] as one product: [n, B*k] @ [B*k, m] */
        const int64_t B = a->shape.dims[0], n = a->shape.dims[1], kk = a->shape.dims[2];
        const int64_t m = b->shape.dims[2];
        ts_tensor *a2 = ts_reshape(ts_permute(a, TS_DIMS(1, 0, 2)), TS_SHAPE(n, B * kk));
        ts_tensor *b2 = ts_reshape(b, TS_SHAPE(B * kk, m));
        p = ts_mm(a2, b2);
        break;
    }
    }
    return finish(add_scaled(op, input, p, beta, alpha));
}

/* in place: the result must have input's shape */
static ts_tensor *add_product_(const char *op, add_kind k, ts_tensor *input, ts_tensor *a,
                               ts_tensor *b, double beta, double alpha) {
    ts_scope_begin();
    ts_tensor *v = add_product(op, k, input, a, b, beta, alpha);
    if (v && !tsi_shape_equal(v->shape, input->shape)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s_: output with shape %s doesn't match the broadcast shape %s", op,
                      tsi_shape_str(input->shape), tsi_shape_str(v->shape));
        v = NULL;
    }
    if (v && !tsi_ew_can_cast(v->dtype, input->dtype)) { /* addr promotes */
        tsi_error_set(TS_ERR_DTYPE,
                      "%s_: result type %s can't be cast to the desired output type %s", op,
                      tsi_torch_scalar_name(v->dtype), tsi_torch_scalar_name(input->dtype));
        v = NULL;
    }
    return finish(v ? ts_copy_(input, v) : NULL);
}

/* the out-of-place forms enter autocast (PyTorch's lower_precision_fp list; the in-place ones are
 * on no list) */
static ts_tensor *add_product_ac(const char *op, add_kind k, ts_tensor *input, ts_tensor *a,
                                 ts_tensor *b, double beta, double alpha) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &input, &a, &b);
    return tsi_autocast_exit(&ac, add_product(op, k, input, a, b, beta, alpha));
}

ts_tensor *ts_addmm(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta, double alpha) {
    return add_product_ac("addmm", ADD_MM, input, mat1, mat2, beta, alpha);
}
ts_tensor *ts_addmv(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta, double alpha) {
    return add_product_ac("addmv", ADD_MV, input, mat, vec, beta, alpha);
}
ts_tensor *ts_addr(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta, double alpha) {
    return add_product_ac("addr", ADD_R, input, vec1, vec2, beta, alpha);
}
ts_tensor *ts_baddbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                      double alpha) {
    return add_product_ac("baddbmm", ADD_BADDBMM, input, batch1, batch2, beta, alpha);
}
ts_tensor *ts_addbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                     double alpha) {
    return add_product_ac("addbmm", ADD_BMM, input, batch1, batch2, beta, alpha);
}
ts_tensor *ts_addmm_(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta,
                     double alpha) {
    return add_product_("addmm", ADD_MM, input, mat1, mat2, beta, alpha);
}
ts_tensor *ts_addmv_(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta, double alpha) {
    return add_product_("addmv", ADD_MV, input, mat, vec, beta, alpha);
}
ts_tensor *ts_addr_(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta, double alpha) {
    return add_product_("addr", ADD_R, input, vec1, vec2, beta, alpha);
}
ts_tensor *ts_baddbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                       double alpha) {
    return add_product_("baddbmm", ADD_BADDBMM, input, batch1, batch2, beta, alpha);
}
ts_tensor *ts_addbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                      double alpha) {
    return add_product_("addbmm", ADD_BMM, input, batch1, batch2, beta, alpha);
}

/* ------------------------------------------------------------------ mv, dot, vdot, outer */
static bool check_two(const char *op, ts_tensor *a, const char *na, int ra, ts_tensor *b,
                      const char *nb, int rb) {
    bool ok = tsi_check_input(op, a, na);
    ok = tsi_check_input(op, b, nb) && ok;
    if (!ok) return false;
    ts_tensor *both[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return false;
    return (ra < 0 || need_ndim(op, a, na, ra)) && (rb < 0 || need_ndim(op, b, nb, rb));
}

static ts_tensor *mv_body(ts_tensor *mat, ts_tensor *vec) {
    const char *op = "mv";
    tsi_init();
    if (tsi_complex_in(mat, vec)) return tsi_complex_matmul(op, ts_mv, mat, vec, false);
    if (!check_two(op, mat, "mat", 2, vec, "vec", 1) || !same_dtype(op, mat, "mat", vec, "vec") ||
        !same_size(op, mat->shape.dims[1], "mat's columns", vec->shape.dims[0], "vec"))
        return NULL;
    return ts_matmul(mat, vec);
}

static ts_tensor *dot_op(const char *op, ts_tensor *a, ts_tensor *b) {
    tsi_init();
    if (tsi_complex_in(a, b)) /* vdot conjugates its first operand */
        return tsi_complex_matmul(op, ts_dot, a, b, op[0] == 'v');
    if (!check_two(op, a, "input", 1, b, "tensor", 1) || !same_dtype(op, a, "input", b, "tensor") ||
        !same_size(op, a->shape.dims[0], "input", b->shape.dims[0], "tensor"))
        return NULL;
    return ts_matmul(a, b);
}
ts_tensor *ts_mv(ts_tensor *mat, ts_tensor *vec) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "mv", &mat, &vec);
    return tsi_autocast_exit(&ac, mv_body(mat, vec));
}

ts_tensor *ts_dot(ts_tensor *a, ts_tensor *b) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "dot", &a, &b);
    return tsi_autocast_exit(&ac, dot_op("dot", a, b));
}
ts_tensor *ts_vdot(ts_tensor *a, ts_tensor *b) { return dot_op("vdot", a, b); }

ts_tensor *ts_outer(ts_tensor *a, ts_tensor *b) {
    const char *op = "outer";
    tsi_init();
    if (!check_two(op, a, "input", 1, b, "vec2", 1)) return NULL;
    ts_scope_begin();
    return finish(ts_mul(ts_reshape(a, TS_SHAPE(a->shape.dims[0], 1)), b));
}

/* ------------------------------------------------------------------ tensordot, inner */
static ts_tensor *tensordot_body(ts_tensor *a, ts_tensor *b, ts_dims da, ts_dims db) {
    const char *op = "tensordot";
    tsi_init();
    if (!check_two(op, a, "a", -1, b, "b", -1) || !same_dtype(op, a, "a", b, "b")) return NULL;
    if (da.n != db.n || da.n < 0 || da.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: both dimension lists should have the same length (%d "
                             "and %d)",
                             op, da.n, db.n),
               NULL;
    const int na = a->shape.ndim, nb = b->shape.ndim;
    bool ca[TS_MAX_DIMS] = {0}, cb[TS_MAX_DIMS] = {0};
    for (int i = 0; i < da.n; i++) {
        int x = tsi_wrap_dim(op, da.d[i], na), y = tsi_wrap_dim(op, db.d[i], nb);
        if (x < 0 || y < 0) return NULL;
        if (ca[x] || cb[y])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim %d appears multiple times in the list of dims", op,
                                 ca[x] ? da.d[i] : db.d[i]),
                   NULL;
        ca[x] = cb[y] = true;
        da.d[i] = x, db.d[i] = y;
        const int64_t s1 = a->shape.dims[x], s2 = b->shape.dims[y];
        if (s1 != s2 && s1 != 1 && s2 != 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: contracted dimensions need to match, but first has size "
                                 "%lld in dim %d and second has size %lld in dim %d",
                                 op, (long long)s1, x, (long long)s2, y),
                   NULL;
    }
    ts_shape os = {.ndim = 0};
    int64_t fa = 1, fb = 1, cs = 1;
    ts_dims pa = {.n = 0}, pb = {.n = 0};
    for (int i = 0; i < na; i++)
        if (!ca[i]) {
            if (os.ndim == TS_MAX_DIMS)
                return tsi_error_set(TS_ERR_SHAPE, "%s: the result has more than %d dims", op,
                                     TS_MAX_DIMS),
                       NULL;
            os.dims[os.ndim++] = a->shape.dims[i], fa *= a->shape.dims[i], pa.d[pa.n++] = i;
        }
    for (int i = 0; i < nb; i++)
        if (!cb[i]) {
            if (os.ndim == TS_MAX_DIMS)
                return tsi_error_set(TS_ERR_SHAPE, "%s: the result has more than %d dims", op,
                                     TS_MAX_DIMS),
                       NULL;
            os.dims[os.ndim++] = b->shape.dims[i], fb *= b->shape.dims[i];
        }
    for (int i = 0; i < da.n; i++) pa.d[pa.n++] = da.d[i], pb.d[pb.n++] = db.d[i];
    for (int i = 0; i < nb; i++)
        if (!cb[i]) pb.d[pb.n++] = i;
    ts_scope_begin();
    ts_tensor *ta = a, *tb = b;
    for (int i = 0; i < da.n && ta && tb; i++) {
        const int64_t s1 = a->shape.dims[da.d[i]], s2 = b->shape.dims[db.d[i]];
        if (s2 == 1) /* a size-1 dim broadcasts: sum the other side right away (PyTorch) */
            ta = ts_sum_dim(ta, da.d[i], true);
        else if (s1 == 1)
            tb = ts_sum_dim(tb, db.d[i], true);
        else
            cs *= s1;
    }
    if (ta && ta->dtype != a->dtype) ta = ts_to_dtype(ta, a->dtype); /* integer sums widen */
    if (tb && tb->dtype != b->dtype) tb = ts_to_dtype(tb, b->dtype);
    ta = ts_reshape(ts_permute(ta, pa), TS_SHAPE(fa, cs));
    tb = ts_reshape(ts_permute(tb, pb), TS_SHAPE(cs, fb));
    return finish(ts_reshape(ts_mm(ta, tb), os));
}

ts_tensor *ts_tensordot(ts_tensor *a, ts_tensor *b, ts_dims da, ts_dims db) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "tensordot", &a, &b);
    return tsi_autocast_exit(&ac, tensordot_body(a, b, da, db));
}

ts_tensor *ts_inner(ts_tensor *a, ts_tensor *b) {
    const char *op = "inner";
    tsi_init();
    if (!check_two(op, a, "input", -1, b, "other", -1)) return NULL;
    if (a->shape.ndim == 0 || b->shape.ndim == 0) return ts_mul(a, b);
    if (a->shape.dims[a->shape.ndim - 1] != b->shape.dims[b->shape.ndim - 1])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: the last dimension must match on both input tensors but got "
                             "shapes %s and %s",
                             op, tsi_shape_str(a->shape), tsi_shape_str(b->shape)),
               NULL;
    return ts_tensordot(a, b, TS_DIMS(-1), TS_DIMS(-1));
}

/* ------------------------------------------------------------------ kron, trace */
ts_tensor *ts_kron(ts_tensor *a, ts_tensor *b) {
    const char *op = "kron";
    tsi_init();
    if (!check_two(op, a, "input", -1, b, "other", -1)) return NULL;
    const int nd = a->shape.ndim > b->shape.ndim ? a->shape.ndim : b->shape.ndim;
    if (2 * nd > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: at most %d dims are supported (inputs %s and %s)", op,
                             TS_MAX_DIMS / 2, tsi_desc(a), tsi_desc(b)),
               NULL;
    /* a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...]: [a0, b0, a1, b1, ...] */
    ts_shape sa = {.ndim = 2 * nd}, sb = {.ndim = 2 * nd}, so = {.ndim = nd};
    for (int i = 0; i < nd; i++) {
        const int ia = i - (nd - a->shape.ndim), ib = i - (nd - b->shape.ndim);
        const int64_t x = ia >= 0 ? a->shape.dims[ia] : 1, y = ib >= 0 ? b->shape.dims[ib] : 1;
        sa.dims[2 * i] = x, sa.dims[2 * i + 1] = 1;
        sb.dims[2 * i] = 1, sb.dims[2 * i + 1] = y;
        so.dims[i] = x * y;
    }
    ts_scope_begin();
    return finish(ts_reshape(ts_mul(ts_reshape(a, sa), ts_reshape(b, sb)), so));
}

ts_tensor *ts_trace(ts_tensor *t) {
    const char *op = "trace";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected a matrix, but got tensor with dim %d (%s)",
                             op, t->shape.ndim, tsi_desc(t)),
               NULL;
    const int64_t n = t->shape.dims[0], m = t->shape.dims[1];
    if (n == 0 || m == 0) return ts_sum(t);
    ts_scope_begin();
    ts_tensor *eye = ts_eye(n, m, (ts_opts){.dtype = t->dtype, .device = ts_device_of(t)});
    return finish(ts_sum(ts_mul(t, eye)));
}

/* ------------------------------------------------------------------ multi_dot */
/* the product of ts[i..j] in the order s (PyTorch's matrix-chain order) */
static ts_tensor *chain(ts_tensor *const *ts, const int *s, int n, int i, int j) {
    if (i == j) return ts[i];
    const int k = s[i * n + j];
    return ts_mm(chain(ts, s, n, i, k), chain(ts, s, n, k + 1, j));
}

ts_tensor *ts_multi_dot(ts_tensor *const *ts, int n) {
    const char *op = "multi_dot";
    tsi_init();
    if (n < 2 || !ts)
        return tsi_error_set(TS_ERR_ARG, "%s: expected at least 2 tensors but got %d", op, n), NULL;
    for (int i = 0; i < n; i++)
        if (!tsi_check_input(op, ts[i], "tensors")) return NULL;
    ts_device dev;
    if (!tsi_same_device(op, (ts_tensor **)ts, n, false, &dev)) return NULL;
    for (int i = 0; i < n; i++) {
        const int nd = ts[i]->shape.ndim;
        const bool end = i == 0 || i == n - 1;
        if (nd != 2 && !(end && nd == 1))
            return tsi_error_set(TS_ERR_SHAPE, "%s: tensor %d must be %s, but got %d-D (%s)", op, i,
                                 end ? "1-D or 2-D" : "2-D", nd, tsi_desc(ts[i])),
                   NULL;
        if (ts[i]->dtype != ts[0]->dtype)
            return tsi_error_set(
                       TS_ERR_DTYPE, "%s: all tensors must have the same dtype, got %s and %s", op,
                       tsi_torch_scalar_name(ts[0]->dtype), tsi_torch_scalar_name(ts[i]->dtype)),
                   NULL;
    }
    int64_t *p = malloc((size_t)(n + 1) * sizeof *p);
    double *c = malloc((size_t)n * (size_t)n * sizeof *c);
    int *s = malloc((size_t)n * (size_t)n * sizeof *s);
    if (!p || !c || !s) {
        free(p), free(c), free(s);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    /* dims p[i] x p[i+1] of matrix i, the 1-D ends as a row / a column */
    const bool first1 = ts[0]->shape.ndim == 1, last1 = ts[n - 1]->shape.ndim == 1;
    p[0] = first1 ? 1 : ts[0]->shape.dims[0];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const ts_tensor *t = ts[i];
        const int64_t rows =
            t->shape.ndim == 1 ? (i == 0 ? 1 : t->shape.dims[0]) : t->shape.dims[0];
        const int64_t cols =
            t->shape.ndim == 1 ? (i == 0 ? t->shape.dims[0] : 1) : t->shape.dims[1];
        if (rows != p[i]) {
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: tensors %d and %d with shapes %s and %s cannot be multiplied", op,
                          i - 1, i, tsi_shape_str(ts[i - 1]->shape), tsi_shape_str(t->shape));
            ok = false;
            break;
        }
        p[i + 1] = cols;
    }
    /* the cheapest parenthesisation (multiply-adds), ties to the first split as PyTorch */
    for (int i = 0; ok && i < n; i++) c[i * n + i] = 0;
    for (int len = 1; ok && len < n; len++)
        for (int i = 0; i + len < n; i++) {
            const int j = i + len;
            c[i * n + j] = INFINITY;
            for (int k = i; k < j; k++) {
                const double q = c[i * n + k] + c[(k + 1) * n + j] +
                                 (double)p[i] * (double)p[k + 1] * (double)p[j + 1];
                if (q < c[i * n + j]) c[i * n + j] = q, s[i * n + j] = k;
            }
        }
    ts_tensor *y = NULL;
    ts_scope_begin();
    if (ok) {
        ts_tensor **m = malloc((size_t)n * sizeof *m);
        if (m) {
            for (int i = 0; i < n; i++) m[i] = ts[i];
            if (first1) m[0] = ts_unsqueeze(ts[0], 0);
            if (last1) m[n - 1] = ts_unsqueeze(ts[n - 1], 1);
            y = chain(m, s, n, 0, n - 1);
            if (first1 && y) y = ts_squeeze_dim(y, 0);
            if (last1 && y) y = ts_squeeze_dim(y, -1);
            free(m);
        } else {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        }
    }
    free(p), free(c), free(s);
    return finish(y);
}
