/* cpu_loops.h — strided N-d iteration for the CPU elementwise kernels (merge, walk, OpenMP). */
#ifndef TS_CPU_LOOPS_H
#define TS_CPU_LOOPS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/kernel_math.h"
#include "core/clones.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

/* Below this many elements a kernel runs on the calling thread: an OpenMP region costs more than
 * the work (PyTorch uses the same grain). */
#define TS_CPU_GRAIN   32768
#define TS_CPU_MAX_OPS 4

/* Storage types per dtype, named so kernels can paste them from a dtype tag. */
typedef float ts_cpu_t_f32;
typedef double ts_cpu_t_f64;
typedef ts_f16_bits ts_cpu_t_f16;
typedef ts_bf16_bits ts_cpu_t_bf16;
typedef int64_t ts_cpu_t_i64;
typedef int32_t ts_cpu_t_i32;
typedef uint8_t ts_cpu_t_u8;
typedef uint8_t ts_cpu_t_b8;
typedef int8_t ts_cpu_t_i8;
typedef int16_t ts_cpu_t_i16;
typedef uint16_t ts_cpu_t_u16;
typedef uint32_t ts_cpu_t_u32;
typedef uint64_t ts_cpu_t_u64;

/* Loads into and stores from the compute types of the unary and binary kernels' integer and bool
 * paths (ID: the value as it is). */
#define ID(x)     (x)
#define TO_B8(x)  ((uint8_t)((x) != 0))
#define LD_B8(x)  ((int64_t)((x) != 0))
#define LD_I(x)   ((int64_t)(x))
#define ST_I64(x) (x)
#define ST_I32(x) ((int32_t)(x))
#define ST_U8(x)  ((uint8_t)(x))
#define ST_I8(x)  ((int8_t)(x))
#define ST_I16(x) ((int16_t)(x))
#define ST_U16(x) ((uint16_t)(x))
#define ST_U32(x) ((uint32_t)(x))
#define ST_U64(x) ((uint64_t)(x))
#define LD_U(x)   ((uint64_t)(x))

/* Views of several operands over one shape, with dims merged where every operand allows it.
 * Strides are in bytes so operands of different dtypes share one walk. The innermost dim is last.
 */
typedef struct ts_cpu_iter {
    int nops;
    int ndim; /* >= 1 */
    int64_t numel;
    int64_t shape[TS_MAX_DIMS];
    int64_t strides[TS_CPU_MAX_OPS][TS_MAX_DIMS];
    char *data[TS_CPU_MAX_OPS];
} ts_cpu_iter;

/* Called once per run of the innermost dim: p[k] is operand k's first element, s[k] its stride
 * in bytes; n elements. Per-element work never goes through a pointer. */
typedef void (*ts_cpu_seg_fn)(void *ctx, char *const *p, const int64_t *s, int64_t n);

static inline size_t ts_cpu_dtype_size(ts_dtype dt) {
    switch (dt) {
    case TS_C128:
        return 16;
    case TS_F64:
    case TS_I64:
    case TS_U64:
    case TS_C64:
        return 8;
    case TS_F32:
    case TS_I32:
    case TS_U32:
        return 4;
    case TS_F16:
    case TS_BF16:
    case TS_I16:
    case TS_U16:
        return 2;
    default:
        return 1;
    }
}

/* True when inner dim i should be walked outside dim o: the first operand with both strides
 * non-zero decides (the output first), as in PyTorch's TensorIterator. */
static inline bool ts_cpu_dim_outer(const ts_cpu_iter *it, int o, int i) {
    for (int k = 0; k < it->nops; k++) {
        int64_t so = it->strides[k][o], si = it->strides[k][i];
        if (so == 0 || si == 0) continue;
        return si > so;
    }
    return false;
}

/* All views have views[0]'s shape (broadcast operands carry stride 0). Size-1 dims are dropped,
 * dims are ordered by decreasing output stride (so an in-place op on a transposed view still
 * walks memory in order), then adjacent dims merged where every operand is jointly contiguous.
 * Elementwise kernels do not depend on the visiting order. */
static inline void ts_cpu_iter_init(ts_cpu_iter *it, int nops, const ts_kview *const *views) {
    const ts_kview *v0 = views[0];
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) it->data[k] = views[k]->data;
    int nd = 0;
    for (int d = 0; d < v0->ndim; d++) {
        it->numel *= v0->shape[d];
        if (v0->shape[d] == 1) continue;
        it->shape[nd] = v0->shape[d];
        for (int k = 0; k < nops; k++)
            it->strides[k][nd] = views[k]->strides[d] * (int64_t)ts_cpu_dtype_size(views[k]->dtype);
        nd++;
    }
    for (int i = 1; i < nd; i++) { /* insertion sort: stable, and a no-op for row-major outputs */
        for (int j = i; j > 0 && ts_cpu_dim_outer(it, j - 1, j); j--) {
            int64_t t = it->shape[j];
            it->shape[j] = it->shape[j - 1], it->shape[j - 1] = t;
            for (int k = 0; k < nops; k++) {
                t = it->strides[k][j];
                it->strides[k][j] = it->strides[k][j - 1], it->strides[k][j - 1] = t;
            }
        }
    }
    int m = 0; /* merge dim d into the run ending at m - 1 when every operand allows it */
    for (int d = 0; d < nd; d++) {
        bool merge = m > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = it->strides[k][m - 1] == it->strides[k][d] * it->shape[d];
        if (merge) {
            it->shape[m - 1] *= it->shape[d];
        } else {
            it->shape[m] = it->shape[d];
            m++;
        }
        for (int k = 0; k < nops; k++) it->strides[k][m - 1] = it->strides[k][d];
    }
    if (m == 0) { /* 0-dim or all sizes 1: one element */
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        m = 1;
    }
    it->ndim = m;
}

/* True when every operand is one dense run with its own element size (after coalescing). */
static inline bool ts_cpu_iter_contiguous(const ts_cpu_iter *it, const size_t *esz) {
    if (it->ndim != 1) return false;
    for (int k = 0; k < it->nops; k++)
        if (it->shape[0] > 1 && it->strides[k][0] != (int64_t)esz[k]) return false;
    return true;
}

/* Visits elements [begin, end) of the (reordered, merged) iteration space, one innermost run at a
 * time. */
static inline void ts_cpu_iter_walk(const ts_cpu_iter *it, int64_t begin, int64_t end,
                                    ts_cpu_seg_fn fn, void *ctx) {
    const int nd = it->ndim, nops = it->nops;
    int64_t idx[TS_MAX_DIMS];
    char *p[TS_CPU_MAX_OPS];
    int64_t s[TS_CPU_MAX_OPS];
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) { /* no divisions on the common begin = 0 */
        idx[d] = rem ? rem % it->shape[d] : 0;
        rem = rem ? rem / it->shape[d] : 0;
    }
    for (int k = 0; k < nops; k++) {
        p[k] = it->data[k];
        for (int d = 0; d < nd; d++) p[k] += idx[d] * it->strides[k][d];
        s[k] = it->strides[k][nd - 1];
    }
    const int64_t inner = it->shape[nd - 1];
    while (begin < end) {
        int64_t n = inner - idx[nd - 1];
        if (n > end - begin) n = end - begin;
        fn(ctx, p, s, n);
        begin += n;
        if (begin >= end) break;
        idx[nd - 1] += n;
        for (int k = 0; k < nops; k++) p[k] += n * s[k];
        for (int d = nd - 1; d > 0 && idx[d] == it->shape[d]; d--) { /* carry */
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < nops; k++)
                p[k] += it->strides[k][d - 1] - it->shape[d] * it->strides[k][d];
        }
    }
}

/* Runs fn over the whole iteration space: on this thread when small, else split into contiguous
 * ranges of the flattened index, one per OpenMP thread (boundaries rounded to 64 elements so
 * threads do not share cache lines of the output). */
static inline void ts_cpu_iter_run(const ts_cpu_iter *it, ts_cpu_seg_fn fn, void *ctx) {
    if (it->numel <= 0) return;
#ifdef TS_HAVE_OPENMP
    if (it->numel > TS_CPU_GRAIN && omp_get_max_threads() > 1 && !omp_in_parallel()) {
        const int64_t numel = it->numel;
#pragma omp parallel
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t chunk = ((numel + nt - 1) / nt + 63) & ~(int64_t)63;
            int64_t b = t * chunk, e = b + chunk < numel ? b + chunk : numel;
            if (b < e) ts_cpu_iter_walk(it, b, e, fn, ctx);
        }
        return;
    }
#endif
    ts_cpu_iter_walk(it, 0, it->numel, fn, ctx);
}

#endif /* TS_CPU_LOOPS_H */
