/* kern_index.c — CPU index_select, gather and scatter_add over strided views of any dtype. */
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#define IX_PAR_MIN 32768 /* fewer elements than this: one thread */

/* Every op walks "rows": all dims but `dim` and the last one. Inside a row it loops over `dim`
 * and then the last dim (one loop when dim is the last dim), so the innermost loop runs along
 * memory. For scatter_add two rows never share a destination, which makes rows safe to run in
 * parallel without atomics and keeps the order of additions into each element fixed. */
typedef struct ix_walk {
    int nd, dim, last; /* last == -1 when dim is the last dim */
    int64_t shape[TS_MAX_DIMS];
    int64_t nrows;
} ix_walk;

static size_t elem_size(ts_dtype dt) { return ts_cpu_dtype_size(dt); }

/* A 0-dim view becomes a 1-element 1-D view so every op sees at least one dim. */
static ts_kview as_1d(const ts_kview *v) {
    ts_kview r = *v;
    if (r.ndim == 0) {
        r.ndim = 1;
        r.shape[0] = 1;
        r.strides[0] = 0;
    }
    return r;
}

static ix_walk walk_make(const ts_kview *shape_of, int dim) {
    ix_walk w;
    w.nd = shape_of->ndim;
    w.dim = dim;
    w.last = dim == w.nd - 1 ? -1 : w.nd - 1;
    w.nrows = 1;
    for (int d = 0; d < w.nd; d++) {
        w.shape[d] = shape_of->shape[d];
        if (d != dim && d != w.last) w.nrows *= w.shape[d];
    }
    return w;
}

/* Offsets of row r in up to three views (strides given; a NULL stride array is skipped). */
static void row_offsets(const ix_walk *w, int64_t r, const int64_t *s0, const int64_t *s1,
                        const int64_t *s2, int64_t *o0, int64_t *o1, int64_t *o2) {
    *o0 = *o1 = *o2 = 0;
    for (int d = w->nd - 1; d >= 0; d--) {
        if (d == w->dim || d == w->last) continue;
        int64_t k = r % w->shape[d];
        r /= w->shape[d];
        *o0 += k * s0[d];
        if (s1) *o1 += k * s1[d];
        if (s2) *o2 += k * s2[d];
    }
}

/* ------------------------------------------------------------------ index_select, gather */
/* dst[j, k] = src[index(j, k), k] for one row, with elements of type T. The source index along
 * `dim` comes from idx at (j, k) (gather) or at j alone (index_select: xk == 0). */
#define IX_COPY_ROW(T)                                                                             \
    static void copy_row_##T(char *dst, int64_t dj, int64_t dk, const char *src, int64_t sdim,     \
                             int64_t sk, const int64_t *idx, int64_t xj, int64_t xk, int64_t nj,   \
                             int64_t nk) {                                                         \
        T *d = (T *)dst;                                                                           \
        const T *s = (const T *)src;                                                               \
        if (nk == 1 && dj == 1 && xj == 1 && sdim == 1) { /* dense, one element an index */        \
            for (int64_t j = 0; j < nj; j++) d[j] = s[idx[j]];                                     \
            return;                                                                                \
        }                                                                                          \
        if (nk == 1) { /* along the last dim: one element per index, no per-element memcpy */      \
            for (int64_t j = 0; j < nj; j++) d[j * dj] = s[idx[j * xj] * sdim];                    \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < nj; j++) {                                                         \
            if (xk == 0) {                                                                         \
                const T *sj = s + idx[j * xj] * sdim;                                              \
                T *dp = d + j * dj;                                                                \
                if (dk == 1 && sk == 1)                                                            \
                    memcpy(dp, sj, (size_t)nk * sizeof(T));                                        \
                else                                                                               \
                    for (int64_t k = 0; k < nk; k++) dp[k * dk] = sj[k * sk];                      \
            } else {                                                                               \
                for (int64_t k = 0; k < nk; k++)                                                   \
                    d[j * dj + k * dk] = s[idx[j * xj + k * xk] * sdim + k * sk];                  \
            }                                                                                      \
        }                                                                                          \
    }
IX_COPY_ROW(uint8_t)
IX_COPY_ROW(uint16_t)
IX_COPY_ROW(uint32_t)
IX_COPY_ROW(uint64_t)

/* Elements one task of select_common copies at least (when its row holds that many). */
#define IX_TASK_ELEMS 16384

/* out[..., j, ..., k] = in[..., idx(j[, k]), ..., k]; idx strides are per out dim (zero for the
 * dims index_select's 1-D index does not have). The threads share out tasks of a row's indices
 * (blocks of j), not whole rows: index_select along dim 0 of a matrix is one row. */
static void select_common(const ts_kview *out, const ts_kview *in, int dim, const int64_t *idx,
                          const int64_t *xstr) {
    ix_walk w = walk_make(out, dim);
    int64_t nj = out->shape[dim], nk = w.last >= 0 ? out->shape[w.last] : 1;
    int64_t dk = w.last >= 0 ? out->strides[w.last] : 0, sk = w.last >= 0 ? in->strides[w.last] : 0;
    int64_t xk = w.last >= 0 ? xstr[w.last] : 0;
    if (w.nrows * nj * nk == 0) return;
    size_t es = elem_size(out->dtype);
    bool par = w.nrows * nj * nk >= IX_PAR_MIN;
    const int64_t jb = nk >= IX_TASK_ELEMS ? 1 : (IX_TASK_ELEMS + nk - 1) / nk; /* j a task */
    const int64_t nb = (nj + jb - 1) / jb;                                      /* tasks a row */
    const int64_t dj = out->strides[dim], sdim = in->strides[dim], xj = xstr[dim];
    TS_PARALLEL_FOR_IF(
        par, for (int64_t t = 0; t < w.nrows * nb; t++) {
            const int64_t r = t / nb, j0 = (t % nb) * jb, cnt = nj - j0 < jb ? nj - j0 : jb;
            int64_t oo, io, xo;
            row_offsets(&w, r, out->strides, in->strides, xstr, &oo, &io, &xo);
            char *dst = out->data + (oo + j0 * dj) * (int64_t)es;
            const char *src = in->data + io * (int64_t)es;
            const int64_t *ix = idx + xo + j0 * xj;
            switch (es) {
            case 1:
                copy_row_uint8_t(dst, dj, dk, src, sdim, sk, ix, xj, xk, cnt, nk);
                break;
            case 2:
                copy_row_uint16_t(dst, dj, dk, src, sdim, sk, ix, xj, xk, cnt, nk);
                break;
            case 4:
                copy_row_uint32_t(dst, dj, dk, src, sdim, sk, ix, xj, xk, cnt, nk);
                break;
            default:
                copy_row_uint64_t(dst, dj, dk, src, sdim, sk, ix, xj, xk, cnt, nk);
                break;
            }
        });
}

void tsi_cpu_index_select(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                          int dim, const ts_kview *idx) {
    (void)be;
    (void)index;
    ts_kview o = as_1d(out), i = as_1d(in);
    int64_t xstr[TS_MAX_DIMS] = {0};
    xstr[dim] = idx->ndim > 0 ? idx->strides[0] : 0;
    select_common(&o, &i, dim, (const int64_t *)idx->data, xstr);
}

void tsi_cpu_gather(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                    int dim, const ts_kview *idx) {
    (void)be;
    (void)index;
    ts_kview o = as_1d(out), i = as_1d(in), x = as_1d(idx);
    select_common(&o, &i, dim, (const int64_t *)x.data, x.strides);
}

/* ------------------------------------------------------------------ scatter_add */
/* dst[idx(j, k) along dim, k] += src[j, k] for one row. ADD(d, s) updates one element. */
#define IX_SCATTER_ROW(NAME, T, ADD)                                                               \
    static void NAME(char *dst, int64_t ddim, int64_t dk, const char *src, int64_t sj, int64_t sk, \
                     const int64_t *idx, int64_t xj, int64_t xk, int64_t nj, int64_t nk) {         \
        T *d = (T *)dst;                                                                           \
        const T *s = (const T *)src;                                                               \
        if (nk == 1) { /* along the last dim: no inner loop */                                     \
            for (int64_t j = 0; j < nj; j++) {                                                     \
                T *dp = d + idx[j * xj] * ddim;                                                    \
                *dp = ADD(*dp, s[j * sj]);                                                         \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < nj; j++)                                                           \
            for (int64_t k = 0; k < nk; k++) {                                                     \
                T *dp = d + idx[j * xj + k * xk] * ddim + k * dk;                                  \
                T sv = s[j * sj + k * sk];                                                         \
                *dp = ADD(*dp, sv);                                                                \
            }                                                                                      \
    }
#define ADD_PLAIN(a, b)  ((a) + (b))
#define ADD_F16(a, b)    ts_f32_to_f16(ts_f16_to_f32(a) + ts_f16_to_f32(b))
#define ADD_BF16(a, b)   ts_f32_to_bf16(ts_bf16_to_f32(a) + ts_bf16_to_f32(b))
#define ADD_WRAP64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define ADD_WRAP32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_U8(a, b)     ((uint8_t)((a) + (b)))
#define ADD_BOOL(a, b)   ((uint8_t)((a) != 0 || (b) != 0))
IX_SCATTER_ROW(scatter_f32, float, ADD_PLAIN)
IX_SCATTER_ROW(scatter_f64, double, ADD_PLAIN)
IX_SCATTER_ROW(scatter_f16, uint16_t, ADD_F16)
IX_SCATTER_ROW(scatter_bf16, uint16_t, ADD_BF16)
IX_SCATTER_ROW(scatter_i64, int64_t, ADD_WRAP64)
IX_SCATTER_ROW(scatter_i32, int32_t, ADD_WRAP32)
IX_SCATTER_ROW(scatter_u8, uint8_t, ADD_U8)
IX_SCATTER_ROW(scatter_bool, uint8_t, ADD_BOOL)
#define ADD_WRAP8(a, b)    ((int8_t)(uint8_t)((uint8_t)(a) + (uint8_t)(b)))
#define ADD_WRAP16(a, b)   ((int16_t)(uint16_t)((uint16_t)(a) + (uint16_t)(b)))
#define ADD_U16(a, b)      ((uint16_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_UNSIGNED(a, b) ((a) + (b))
IX_SCATTER_ROW(scatter_i8, int8_t, ADD_WRAP8)
IX_SCATTER_ROW(scatter_i16, int16_t, ADD_WRAP16)
IX_SCATTER_ROW(scatter_u16, uint16_t, ADD_U16)
IX_SCATTER_ROW(scatter_u32, uint32_t, ADD_UNSIGNED)
IX_SCATTER_ROW(scatter_u64, uint64_t, ADD_UNSIGNED)

void tsi_cpu_scatter_add(const ts_backend *be, int index, const ts_kview *dst, int dim,
                         const ts_kview *idx, const ts_kview *src) {
    (void)be;
    (void)index;
    ts_kview d = as_1d(dst), x = as_1d(idx), s = as_1d(src);
    ix_walk w = walk_make(&x, dim);
    int64_t nj = x.shape[dim], nk = w.last >= 0 ? x.shape[w.last] : 1;
    if (w.nrows * nj * nk == 0) return;
    int64_t dk = w.last >= 0 ? d.strides[w.last] : 0, sk = w.last >= 0 ? s.strides[w.last] : 0;
    int64_t xk = w.last >= 0 ? x.strides[w.last] : 0;
    size_t es = elem_size(d.dtype);
    bool par = w.nrows > 1 && w.nrows * nj * nk >= IX_PAR_MIN;
    TS_PARALLEL_FOR_IF(
        par, for (int64_t r = 0; r < w.nrows; r++) {
            int64_t xo, doff, so;
            row_offsets(&w, r, x.strides, d.strides, s.strides, &xo, &doff, &so);
            char *dp = d.data + (size_t)doff * es;
            const char *sp = s.data + (size_t)so * es;
            const int64_t *ix = (const int64_t *)x.data + xo;
            int64_t ddim = d.strides[dim], sj = s.strides[dim], xj = x.strides[dim];
            switch (d.dtype) {
            case TS_F32:
                scatter_f32(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_F64:
                scatter_f64(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_F16:
                scatter_f16(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_BF16:
                scatter_bf16(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_I64:
                scatter_i64(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_I32:
                scatter_i32(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_U8:
                scatter_u8(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_BOOL:
                scatter_bool(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_I8:
                scatter_i8(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_I16:
                scatter_i16(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_U16:
                scatter_u16(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_U32:
                scatter_u32(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            case TS_U64:
                scatter_u64(dp, ddim, dk, sp, sj, sk, ix, xj, xk, nj, nk);
                break;
            default:
                break;
            }
        });
}
