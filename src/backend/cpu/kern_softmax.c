/* kern_softmax.c — CPU softmax / log_softmax along one dim, numerically stable (max subtracted),
 * computed in f32 (f64 for f64) over strided views; f32 (and f16 / bf16) take the maximum and the
 * exponentials from the vectorised math of vec_kernels.h, f64 libm's exp. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#define SM_PAR_MIN 32768 /* fewer elements than this: one thread */
/* columns per tile when the softmax dim is not the contiguous one: whole rows per position keep
 * the reads streaming */
#define SM_TILE    1024
#define SM_COL_MIN 8 /* contiguous kept dim at least this long to use the column path */

#ifdef TS_HAVE_OPENMP
#define SM_PRAGMA(x) _Pragma(x)
#else
#define SM_PRAGMA(x)
#endif

/* The dims other than `dim`, merged where both in and out allow it. */
typedef struct sm_dims {
    int nd;
    int64_t shape[TS_MAX_DIMS];
    int64_t is[TS_MAX_DIMS], os[TS_MAX_DIMS];
} sm_dims;

static sm_dims other_dims(const ts_kview *out, const ts_kview *in, int dim) {
    sm_dims r;
    r.nd = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d == dim || in->shape[d] == 1) continue;
        if (r.nd > 0 && r.is[r.nd - 1] == in->strides[d] * in->shape[d] &&
            r.os[r.nd - 1] == out->strides[d] * in->shape[d]) {
            r.shape[r.nd - 1] *= in->shape[d];
            r.is[r.nd - 1] = in->strides[d];
            r.os[r.nd - 1] = out->strides[d];
        } else {
            r.shape[r.nd] = in->shape[d];
            r.is[r.nd] = in->strides[d];
            r.os[r.nd] = out->strides[d];
            r.nd++;
        }
    }
    return r;
}

/* offsets (elements) of the first `nd` dims of r at row-major position lin */
static void offsets(const sm_dims *r, int nd, int64_t lin, int64_t *io, int64_t *oo) {
    *io = *oo = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t k = lin % r->shape[d];
        lin /= r->shape[d];
        *io += k * r->is[d];
        *oo += k * r->os[d];
    }
}

/* ------------------------------------------------------------------ conversions */
/* f32 / f16 / bf16 through vec_kernels.h's conversions (F16C where the CPU has it) */
static void load_f(float *dst, const char *p, ts_dtype dt, int64_t s, int64_t n) {
    ts_vec_load_f32(tsi_vec_kernels_get(), dst, p, dt, s * (dt == TS_F32 ? 4 : 2), n);
}

static void store_f(char *p, ts_dtype dt, int64_t s, const float *src, int64_t n) {
    ts_vec_store_f32(tsi_vec_kernels_get(), p, dt, s * (dt == TS_F32 ? 4 : 2), src, n);
}

static void load_d(double *dst, const char *p, ts_dtype dt, int64_t s, int64_t n) {
    (void)dt;
    const double *q = (const double *)p;
    for (int64_t k = 0; k < n; k++) dst[k] = q[k * s];
}

static void store_d(char *p, ts_dtype dt, int64_t s, const double *src, int64_t n) {
    (void)dt;
    double *q = (double *)p;
    for (int64_t k = 0; k < n; k++) q[k * s] = src[k];
}

/* ------------------------------------------------------------------ one body, two precisions */
/* A NaN anywhere in a row makes the whole row NaN (the sum is NaN), and an all -inf row gives NaN
 * (-inf - -inf), both as PyTorch. y may alias x. */
static void row_d(const double *x, double *y, int64_t L, bool lg) {
    double m = -INFINITY;
    for (int64_t k = 0; k < L; k++) m = x[k] > m ? x[k] : m;
    double s = 0;
    if (lg) {
        for (int64_t k = 0; k < L; k++) s += exp(x[k] - m);
        const double ls = log(s);
        for (int64_t k = 0; k < L; k++) y[k] = (x[k] - m) - ls;
    } else {
        for (int64_t k = 0; k < L; k++) {
            const double e = exp(x[k] - m);
            y[k] = e;
            s += e;
        }
        const double inv = 1.0 / s;
        for (int64_t k = 0; k < L; k++) y[k] *= inv;
    }
}

/* the sum in double (vk keeps 16 lanes): long rows would lose digits in f32 */
static void row_f(const float *x, float *y, int64_t L, bool lg) {
    tsi_vec_kernels_get()->softmax_row_f32(y, x, L, lg);
}

/* v[c] = exp(v[c]) for c < n */
static void exps_f(float *v, int64_t n) { tsi_vec_kernels_get()->unary_f32(TS_U_EXP, v, v, n); }
static void exps_d(double *v, int64_t n) {
    for (int64_t c = 0; c < n; c++) v[c] = exp(v[c]);
}

/* ------------------------------------------------------------------ one body, two precisions */
/* A NaN anywhere in a row makes the whole row NaN (the sum is NaN), and an all -inf row gives NaN
 * (-inf - -inf), both as PyTorch. y may alias x. */
#define SM_DEFINE(SUF, T, EXPS, LOGF, LOAD, STORE)                                                 \
    /* One row per position of the other dims; direct when both views are contiguous along         \
     * dim and already of the compute type, else through a buffer. */                              \
    static void rows_##SUF(const ts_kview *out, const ts_kview *in, int dim, const sm_dims *od,    \
                           int64_t nrows, bool lg) {                                               \
        int64_t L = in->shape[dim], xs = in->strides[dim], ys = out->strides[dim];                 \
        size_t es = sizeof(T) == 8 || in->dtype == TS_F32 ? sizeof(T) : 2;                         \
        bool direct = (L == 1 || (xs == 1 && ys == 1)) && es == sizeof(T);                         \
        bool par = nrows * L >= SM_PAR_MIN;                                                        \
        atomic_bool failed = false;                                                                \
        (void)par;                                                                                 \
        SM_PRAGMA("omp parallel if (par)") {                                                       \
            T *buf = direct ? NULL : malloc((size_t)L * sizeof(T));                                \
            if (!direct && !buf) atomic_store_explicit(&failed, true, memory_order_relaxed);       \
            SM_PRAGMA("omp for schedule(static)") for (int64_t r = 0; r < nrows; r++) {            \
                int64_t io, oo;                                                                    \
                offsets(od, od->nd, r, &io, &oo);                                                  \
                const char *xp = in->data + (size_t)io * es;                                       \
                char *yp = out->data + (size_t)oo * es;                                            \
                if (direct) {                                                                      \
                    row_##SUF((const T *)xp, (T *)yp, L, lg);                                      \
                } else if (buf) {                                                                  \
                    LOAD(buf, xp, in->dtype, xs, L);                                               \
                    row_##SUF(buf, buf, L, lg);                                                    \
                    STORE(yp, out->dtype, ys, buf, L);                                             \
                }                                                                                  \
            }                                                                                      \
            free(buf);                                                                             \
        }                                                                                          \
        if (atomic_load(&failed)) tsi_kernel_oom("softmax", (size_t)L * sizeof(T));                \
    }                                                                                              \
                                                                                                   \
    /* The last other dim is contiguous in both views: tiles of SM_TILE columns, three passes      \
     * (max, sum, write) over the softmax dim, each reading one contiguous run per position. */    \
    static void cols_##SUF(const ts_kview *out, const ts_kview *in, int dim, const sm_dims *od,    \
                           bool lg) {                                                              \
        int64_t L = in->shape[dim], xs = in->strides[dim], ys = out->strides[dim];                 \
        size_t es = sizeof(T) == 8 || in->dtype == TS_F32 ? sizeof(T) : 2;                         \
        int64_t C = od->shape[od->nd - 1], ntiles = (C + SM_TILE - 1) / SM_TILE;                   \
        int64_t ngroups = 1;                                                                       \
        for (int d = 0; d < od->nd - 1; d++) ngroups *= od->shape[d];                              \
        const bool par = ngroups * C * L >= SM_PAR_MIN;                                            \
        TS_PARALLEL_FOR_IF(                                                                        \
            par, for (int64_t w = 0; w < ngroups * ntiles; w++) {                                  \
                T m[SM_TILE], v[SM_TILE];                                                          \
                double s[SM_TILE];                                                                 \
                int64_t g = w / ntiles, c0 = (w % ntiles) * SM_TILE;                               \
                int64_t tn = C - c0 < SM_TILE ? C - c0 : SM_TILE, io, oo;                          \
                offsets(od, od->nd - 1, g, &io, &oo);                                              \
                const char *xp = in->data + (size_t)(io + c0) * es;                                \
                char *yp = out->data + (size_t)(oo + c0) * es;                                     \
                for (int64_t c = 0; c < tn; c++) m[c] = -INFINITY, s[c] = 0;                       \
                for (int64_t l = 0; l < L; l++) {                                                  \
                    LOAD(v, xp + (size_t)(l * xs) * es, in->dtype, 1, tn);                         \
                    for (int64_t c = 0; c < tn; c++)                                               \
                        m[c] = (v[c] > m[c] || v[c] != v[c]) ? v[c] : m[c];                        \
                }                                                                                  \
                /* softmax into an output of the compute type keeps exp(x - max) there and         \
                   rescales it, instead of evaluating exp twice */                                 \
                bool keep = !lg && out->dtype == in->dtype && es == sizeof(T);                     \
                for (int64_t l = 0; l < L; l++) {                                                  \
                    LOAD(v, xp + (size_t)(l * xs) * es, in->dtype, 1, tn);                         \
                    for (int64_t c = 0; c < tn; c++) v[c] -= m[c];                                 \
                    EXPS(v, tn);                                                                   \
                    for (int64_t c = 0; c < tn; c++) s[c] += v[c];                                 \
                    if (keep) STORE(yp + (size_t)(l * ys) * es, out->dtype, 1, v, tn);             \
                }                                                                                  \
                for (int64_t c = 0; c < tn; c++) s[c] = lg ? LOGF((T)s[c]) : 1.0 / s[c];           \
                for (int64_t l = 0; l < L; l++) {                                                  \
                    if (keep) {                                                                    \
                        T *y = (T *)(yp + (size_t)(l * ys) * es);                                  \
                        for (int64_t c = 0; c < tn; c++) y[c] *= (T)s[c];                          \
                        continue;                                                                  \
                    }                                                                              \
                    LOAD(v, xp + (size_t)(l * xs) * es, in->dtype, 1, tn);                         \
                    if (lg) {                                                                      \
                        for (int64_t c = 0; c < tn; c++) v[c] = (v[c] - m[c]) - (T)s[c];           \
                    } else {                                                                       \
                        for (int64_t c = 0; c < tn; c++) v[c] -= m[c];                             \
                        EXPS(v, tn);                                                               \
                        for (int64_t c = 0; c < tn; c++) v[c] *= (T)s[c];                          \
                    }                                                                              \
                    STORE(yp + (size_t)(l * ys) * es, out->dtype, 1, v, tn);                       \
                }                                                                                  \
            });                                                                                    \
    }

SM_DEFINE(f, float, exps_f, logf, load_f, store_f)
SM_DEFINE(d, double, exps_d, log, load_d, store_d)

void tsi_cpu_softmax(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                     int dim, bool log) {
    (void)be;
    (void)index;
    ts_kview i1, o1;
    if (in->ndim == 0) { /* a scalar is a row of one */
        i1 = *in;
        o1 = *out;
        i1.ndim = o1.ndim = 1;
        i1.shape[0] = o1.shape[0] = 1;
        i1.strides[0] = o1.strides[0] = 0;
        in = &i1;
        out = &o1;
        dim = 0;
    }
    int64_t numel = 1;
    for (int d = 0; d < in->ndim; d++) numel *= in->shape[d];
    if (numel == 0) return;
    sm_dims od = other_dims(out, in, dim);
    int64_t nrows = numel / in->shape[dim];
    bool f64 = in->dtype == TS_F64;
    bool contig_dim = in->shape[dim] == 1 || (in->strides[dim] == 1 && out->strides[dim] == 1);
    if (!contig_dim && od.nd > 0 && od.is[od.nd - 1] == 1 && od.os[od.nd - 1] == 1 &&
        od.shape[od.nd - 1] >= SM_COL_MIN) {
        if (f64)
            cols_d(out, in, dim, &od, log);
        else
            cols_f(out, in, dim, &od, log);
    } else {
        if (f64)
            rows_d(out, in, dim, &od, nrows, log);
        else
            rows_f(out, in, dim, &od, nrows, log);
    }
}
