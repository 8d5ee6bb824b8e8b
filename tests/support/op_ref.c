/* op_ref.c — straightforward f64 references for the op harness, written from the math definitions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_table.h"
#include "tol_check.h"

static bool is_float(ts_dtype d) {
    return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16;
}

static double unary_math(int op, double x) {
    switch (op) {
    case TS_U_NEG:
        return -x;
    case TS_U_ABS:
        return fabs(x);
    case TS_U_EXP:
        return exp(x);
    case TS_U_LOG:
        return log(x);
    case TS_U_LOG1P:
        return log1p(x);
    case TS_U_SQRT:
        return sqrt(x);
    case TS_U_RSQRT:
        return 1.0 / sqrt(x);
    case TS_U_SIN:
        return sin(x);
    case TS_U_COS:
        return cos(x);
    case TS_U_TAN:
        return tan(x);
    case TS_U_ASIN:
        return asin(x);
    case TS_U_ACOS:
        return acos(x);
    case TS_U_ATAN:
        return atan(x);
    case TS_U_SINH:
        return sinh(x);
    case TS_U_COSH:
        return cosh(x);
    case TS_U_ASINH:
        return asinh(x);
    case TS_U_ACOSH:
        return acosh(x);
    case TS_U_ATANH:
        return atanh(x);
    case TS_U_ERF:
        return erf(x);
    case TS_U_TANH:
        return tanh(x);
    case TS_U_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case TS_U_RELU:
        return isnan(x) ? x : (x > 0 ? x : 0.0);
    case TS_U_GELU:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case TS_U_SILU:
        return x / (1.0 + exp(-x));
    case TS_U_SOFTPLUS:
        return x > 20 ? x : log1p(exp(x));
    case TS_U_SIGN:
        return (double)((x > 0) - (x < 0));
    case TS_U_FLOOR:
        return floor(x);
    case TS_U_CEIL:
        return ceil(x);
    case TS_U_ROUND:
        return nearbyint(x); /* default rounding mode: half to even */
    case TS_U_RECIPROCAL:
        return 1.0 / x;
    case TS_U_SQUARE:
        return x * x;
    case TS_U_LOGICAL_NOT:
        return x == 0 ? 1.0 : 0.0;
    default:
        return NAN;
    }
}

/* torch.maximum / minimum propagate NaN, unlike fmax */
static double binary_math(int op, double a, double b) {
    switch (op) {
    case TS_B_ADD:
        return a + b;
    case TS_B_SUB:
        return a - b;
    case TS_B_MUL:
        return a * b;
    case TS_B_DIV:
        return a / b;
    case TS_B_POW:
        return pow(a, b);
    case TS_B_MAX:
        return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case TS_B_MIN:
        return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    case TS_B_FMOD:
        return fmod(a, b);
    case TS_B_FLOORDIV:
        return floor(a / b);
    case TS_B_REM: {
        double m = fmod(a, b);
        return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
    }
    case TS_B_EQ:
        return a == b;
    case TS_B_NE:
        return a != b;
    case TS_B_LT:
        return a < b;
    case TS_B_LE:
        return a <= b;
    case TS_B_GT:
        return a > b;
    case TS_B_GE:
        return a >= b;
    case TS_B_AND:
        return a != 0 && b != 0;
    case TS_B_OR:
        return a != 0 || b != 0;
    case TS_B_RSUB:
        return b - a;
    case TS_B_RDIV:
        return b / a;
    case TS_B_RPOW:
        return pow(b, a);
    default:
        return NAN;
    }
}

bool ot_ref_unary(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)a;
    int64_t n = ot_numel(in->shape[0]);
    out->shape = in->shape[0];
    for (int64_t i = 0; i < n; i++) out->v[i] = unary_math(row->op, in->v[0][i]);
    return true;
}

/* Elementwise over the broadcast of all inputs; f gets the inputs' values at one index. */
typedef double (*elem_fn)(const ot_row *row, const ot_args *a, const double *x);

static bool elementwise(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out,
                        int nin, ts_shape to, elem_fn f) {
    for (int i = 0; i < nin; i++)
        if (!ot_broadcast(to, in->shape[i], &to)) return false;
    out->shape = to;
    int64_t n = ot_numel(to);
    if (n == 0) return true;
    int64_t idx[TS_MAX_DIMS] = {0}, k = 0;
    do {
        double x[OT_MAX_IN];
        for (int i = 0; i < nin; i++) x[i] = in->v[i][ot_bcast_offset(in->shape[i], to, idx)];
        out->v[k++] = f(row, a, x);
    } while (ot_next_index(to, idx));
    return true;
}

static double f_binary(const ot_row *row, const ot_args *a, const double *x) {
    (void)a;
    return binary_math(row->op, x[0], x[1]);
}
static double f_add_alpha(const ot_row *row, const ot_args *a, const double *x) {
    (void)a;
    return x[0] + row->scalars[0] * x[1];
}
static double f_where(const ot_row *row, const ot_args *a, const double *x) {
    (void)row, (void)a;
    return x[0] != 0 ? x[1] : x[2];
}

static const ts_shape scalar_shape = {0};

bool ot_ref_binary(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    return elementwise(row, in, a, out, 2, scalar_shape, f_binary);
}

bool ot_ref_add_alpha(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    return elementwise(row, in, a, out, 2, scalar_shape, f_add_alpha);
}

bool ot_ref_where(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    return elementwise(row, in, a, out, 3, scalar_shape, f_where);
}

bool ot_ref_binary_scalar(const ot_row *row, const ot_ref_in *in, const ot_args *a,
                          ot_ref_out *out) {
    int64_t n = ot_numel(in->shape[0]);
    out->shape = in->shape[0];
    for (int64_t i = 0; i < n; i++) out->v[i] = binary_math(row->op, in->v[0][i], a->s);
    return true;
}

bool ot_ref_clamp(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    if (isnan(a->s) && isnan(a->s2)) return false; /* torch.clamp(min=None, max=None) */
    int64_t n = ot_numel(in->shape[0]);
    out->shape = in->shape[0];
    for (int64_t i = 0; i < n; i++) {
        double x = in->v[0][i];
        if (!isnan(x) && !isnan(a->s) && x < a->s) x = a->s;
        if (!isnan(x) && !isnan(a->s2) && x > a->s2) x = a->s2;
        out->v[i] = x;
    }
    return true;
}

bool ot_ref_masked_fill(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape to = in->shape[0], b;
    if (!ot_broadcast(to, in->shape[1], &b) || b.ndim != to.ndim) return false;
    for (int i = 0; i < to.ndim; i++)
        if (b.dims[i] != to.dims[i]) return false;
    out->shape = to;
    int64_t n = ot_numel(to);
    if (n == 0) return true;
    int64_t idx[TS_MAX_DIMS] = {0}, k = 0;
    do {
        double m = in->v[1][ot_bcast_offset(in->shape[1], to, idx)];
        out->v[k] = m != 0 ? a->s : in->v[0][k];
        k++;
    } while (ot_next_index(to, idx));
    return true;
}

/* ------------------------------------------------------------------ reductions */
static int wrap_dim(int d, int ndim) {
    int n = ndim > 0 ? ndim : 1;
    return d < 0 ? d + n : d;
}

/* Integer sums and products wrap like PyTorch's int64 accumulation. */
static double int_reduce(int op, const double *x, int64_t n) {
    uint64_t acc = op == TS_R_SUM ? 0 : 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)(int64_t)x[i];
        acc = op == TS_R_SUM ? acc + v : acc * v;
    }
    return (double)(int64_t)acc;
}

static double reduce_values(int op, const double *x, int64_t n, double corr, ts_dtype out) {
    double acc;
    if ((op == TS_R_SUM || op == TS_R_PROD) && out == TS_I64) return int_reduce(op, x, n);
    switch (op) {
    case TS_R_SUM:
        acc = 0;
        for (int64_t i = 0; i < n; i++) acc += x[i];
        return acc;
    case TS_R_PROD:
        acc = 1;
        for (int64_t i = 0; i < n; i++) acc *= x[i];
        return acc;
    case TS_R_MEAN:
        acc = 0;
        for (int64_t i = 0; i < n; i++) acc += x[i];
        return acc / (double)n;
    case TS_R_MAX:
    case TS_R_MIN:
        acc = x[0];
        for (int64_t i = 1; i < n; i++) {
            if (isnan(acc)) break;
            if (isnan(x[i]) || (op == TS_R_MAX ? x[i] > acc : x[i] < acc)) acc = x[i];
        }
        return acc;
    case TS_R_VAR:
    case TS_R_STD: {
        double mean = 0, ss = 0;
        for (int64_t i = 0; i < n; i++) mean += x[i];
        mean /= (double)n;
        for (int64_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
        double div = (double)n - corr;
        double v = ss / (div > 0 ? div : 0.0);
        return op == TS_R_VAR ? v : sqrt(v);
    }
    case TS_R_LOGSUMEXP: {
        double m = -INFINITY;
        for (int64_t i = 0; i < n; i++)
            if (x[i] > m || isnan(x[i])) m = x[i];
        if (isinf(m) || isnan(m)) return m;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
        return m + log(s);
    }
    case TS_R_ARGMAX:
    case TS_R_ARGMIN:
    case OT_REF_MAX_IDX:
    case OT_REF_MIN_IDX: {
        bool mx = op == TS_R_ARGMAX || op == OT_REF_MAX_IDX;
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++) {
            if (isnan(x[best])) break;
            if (isnan(x[i]) || (mx ? x[i] > x[best] : x[i] < x[best])) best = i;
        }
        return (double)best;
    }
    default:
        return NAN;
    }
}

bool ot_ref_reduce(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    ts_shape s = in->shape[0];
    bool red[TS_MAX_DIMS] = {false};
    if (a->dims.n == 0)
        for (int i = 0; i < s.ndim; i++) red[i] = true;
    for (int i = 0; i < a->dims.n; i++) {
        int d = wrap_dim(a->dims.d[i], s.ndim);
        if (d < s.ndim) red[d] = true;
    }
    ts_shape kept = {0}, rs = {0}, os = {0};
    for (int i = 0; i < s.ndim; i++) {
        if (red[i]) {
            rs.dims[rs.ndim++] = s.dims[i];
            if (a->keepdim) os.dims[os.ndim++] = 1;
        } else {
            kept.dims[kept.ndim++] = s.dims[i];
            os.dims[os.ndim++] = s.dims[i];
        }
    }
    int64_t nk = ot_numel(kept), nr = ot_numel(rs);
    int op = row->op;
    bool needs_elems = op == TS_R_MAX || op == TS_R_MIN || op == TS_R_ARGMAX || op == TS_R_ARGMIN ||
                       op == OT_REF_MAX_IDX || op == OT_REF_MIN_IDX;
    if (needs_elems && nr == 0) return false; /* PyTorch: reduction over an empty dim */
    out->shape = os;
    double *buf = malloc(sizeof(double) * (size_t)(nr > 0 ? nr : 1));
    int64_t ki[TS_MAX_DIMS] = {0};
    for (int64_t o = 0; o < nk; o++) {
        int64_t ri[TS_MAX_DIMS] = {0};
        for (int64_t r = 0; r < nr; r++) {
            int64_t off = 0;
            int kk = 0, rr = 0;
            for (int i = 0; i < s.ndim; i++) off = off * s.dims[i] + (red[i] ? ri[rr++] : ki[kk++]);
            buf[r] = in->v[0][off];
            ot_next_index(rs, ri);
        }
        out->v[o] = reduce_values(op, buf, nr, a->s, out->dtype);
        ot_next_index(kept, ki);
    }
    free(buf);
    return true;
}

/* ------------------------------------------------------------------ matmul (torch.matmul rules) */
bool ot_ref_matmul(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row, (void)a;
    ts_shape sa = in->shape[0], sb = in->shape[1];
    bool a1 = sa.ndim == 1, b1 = sb.ndim == 1;
    if (a1) sa = (ts_shape){2, {1, sa.dims[0]}};
    if (b1) sb = (ts_shape){2, {sb.dims[0], 1}};
    int64_t n = sa.dims[sa.ndim - 2], k = sa.dims[sa.ndim - 1], m = sb.dims[sb.ndim - 1];
    if (sb.dims[sb.ndim - 2] != k) return false;
    ts_shape ba = sa, bb = sb, bs;
    ba.ndim -= 2, bb.ndim -= 2;
    if (!ot_broadcast(ba, bb, &bs)) return false;
    ts_shape os = bs;
    if (!a1) os.dims[os.ndim++] = n;
    if (!b1) os.dims[os.ndim++] = m;
    out->shape = os;
    int64_t nb = ot_numel(bs), bidx[TS_MAX_DIMS] = {0};
    for (int64_t t = 0; t < nb; t++) {
        const double *pa = in->v[0] + ot_bcast_offset(ba, bs, bidx) * n * k;
        const double *pb = in->v[1] + ot_bcast_offset(bb, bs, bidx) * k * m;
        double *po = out->v + t * n * m;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double acc = 0;
                for (int64_t q = 0; q < k; q++) acc += pa[i * k + q] * pb[q * m + j];
                po[i * m + j] = acc;
            }
        ot_next_index(bs, bidx);
    }
    return true;
}

/* ------------------------------------------------------------------ joining, indexing */
static int64_t prod_range(ts_shape s, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= s.dims[i];
    return p;
}

bool ot_ref_cat(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape os = in->shape[0];
    int d = wrap_dim(a->dim, os.ndim);
    os.dims[d] = 0;
    for (int i = 0; i < in->n; i++) os.dims[d] += in->shape[i].dims[d];
    out->shape = os;
    int64_t outer = prod_range(os, 0, d), inner = prod_range(os, d + 1, os.ndim), k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < in->n; i++) {
            int64_t len = in->shape[i].dims[d] * inner;
            memcpy(out->v + k, in->v[i] + o * len, sizeof(double) * (size_t)len);
            k += len;
        }
    return true;
}

bool ot_ref_stack(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape s = in->shape[0], os = {0};
    int d = a->dim < 0 ? a->dim + s.ndim + 1 : a->dim;
    for (int i = 0; i < s.ndim + 1; i++)
        os.dims[os.ndim++] = i < d ? s.dims[i] : (i == d ? in->n : s.dims[i - 1]);
    out->shape = os;
    int64_t outer = prod_range(s, 0, d), inner = prod_range(s, d, s.ndim), k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < in->n; i++) {
            memcpy(out->v + k, in->v[i] + o * inner, sizeof(double) * (size_t)inner);
            k += inner;
        }
    return true;
}

bool ot_ref_index_select(const ot_row *row, const ot_ref_in *in, const ot_args *a,
                         ot_ref_out *out) {
    (void)row;
    ts_shape s = in->shape[0], os = s;
    int d = wrap_dim(a->dim, s.ndim);
    int64_t ni = ot_numel(in->shape[1]);
    if (s.ndim == 0) {
        out->shape = s; /* PyTorch: a 0-dim input stays 0-dim; the index must be [0] */
        out->v[0] = in->v[0][0];
        return true;
    }
    os.dims[d] = ni;
    out->shape = os;
    int64_t outer = prod_range(s, 0, d), inner = prod_range(s, d + 1, s.ndim), k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t src = (int64_t)in->v[1][j];
            memcpy(out->v + k, in->v[0] + (o * s.dims[d] + src) * inner,
                   sizeof(double) * (size_t)inner);
            k += inner;
        }
    return true;
}

/* Offset in a contiguous tensor of shape s of the multi-index idx with idx[d] replaced by r. */
static int64_t offset_with(ts_shape s, const int64_t *idx, int d, int64_t r) {
    int64_t off = 0;
    for (int i = 0; i < s.ndim; i++) off = off * s.dims[i] + (i == d ? r : idx[i]);
    return off;
}

bool ot_ref_gather(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape s = in->shape[0], is = in->shape[1];
    int d = wrap_dim(a->dim, s.ndim);
    out->shape = is;
    int64_t n = ot_numel(is), idx[TS_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        out->v[k] = in->v[0][offset_with(s, idx, d, (int64_t)in->v[1][k])];
        ot_next_index(is, idx);
    }
    return true;
}

bool ot_ref_scatter_add(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape s = in->shape[0], is = in->shape[1], ss = in->shape[2];
    int d = wrap_dim(a->dim, s.ndim);
    out->shape = s;
    memcpy(out->v, in->v[0], sizeof(double) * (size_t)ot_numel(s));
    const int64_t n = ot_numel(is), ns = ot_numel(s);
    int64_t idx[TS_MAX_DIMS] = {0};
    /* the adds into one element in another order (CUDA's atomics) round differently: each of
     * the m adds errs by at most u |partial sum| <= u (|initial| + sum |terms|), in either order */
    int64_t *adds = out->tol ? calloc((size_t)ns + 1, sizeof *adds) : NULL;
    if (adds)
        for (int64_t j = 0; j < ns; j++) out->tol[j] = fabs(out->v[j]);
    for (int64_t k = 0; k < n; k++) {
        int64_t soff = offset_with(ss, idx, -1, 0);
        int64_t doff = offset_with(s, idx, d, (int64_t)in->v[1][k]);
        double *dst = &out->v[doff];
        /* each add rounds to the dtype, in index order, as PyTorch's cpu loop does */
        *dst = ot_cast(*dst + in->v[2][soff], out->dtype);
        if (adds) adds[doff]++, out->tol[doff] += fabs(in->v[2][soff]);
        ot_next_index(is, idx);
    }
    if (adds) {
        const double u = ts_test_unit_roundoff(out->dtype);
        for (int64_t j = 0; j < ns; j++)
            out->tol[j] = adds[j] > 1 ? 2 * adds[j] * u * out->tol[j] : 0;
    }
    free(adds);
    return true;
}

bool ot_ref_softmax(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    ts_shape s = in->shape[0];
    out->shape = s;
    if (s.ndim == 0) {
        out->v[0] = row->op ? 0.0 : 1.0;
        return true;
    }
    int d = wrap_dim(a->dim, s.ndim);
    int64_t outer = prod_range(s, 0, d), len = s.dims[d], inner = prod_range(s, d + 1, s.ndim);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *x = in->v[0] + o * len * inner + i;
            double *y = out->v + o * len * inner + i;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) m = x[j * inner] > m ? x[j * inner] : m;
            for (int64_t j = 0; j < len; j++) sum += exp(x[j * inner] - m);
            for (int64_t j = 0; j < len; j++)
                y[j * inner] = row->op ? x[j * inner] - m - log(sum) : exp(x[j * inner] - m) / sum;
        }
    return true;
}

bool ot_ref_one_hot(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    ts_shape s = in->shape[0];
    int64_t n = ot_numel(s), c = a->n;
    if (c < 0) {
        if (n == 0) return false; /* PyTorch cannot infer the class count of an empty tensor */
        for (int64_t i = 0; i < n; i++)
            c = (int64_t)in->v[0][i] + 1 > c ? (int64_t)in->v[0][i] + 1 : c;
    }
    if (!is_float(in->dtype[0]) && s.ndim < TS_MAX_DIMS) {
        out->shape = s;
        out->shape.dims[out->shape.ndim++] = c;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < c; j++) out->v[i * c + j] = (int64_t)in->v[0][i] == j;
        return true;
    }
    return false;
}
