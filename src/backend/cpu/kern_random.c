/* kern_random.c — CPU random fills (uniform, normal, bernoulli, randint) on the Philox stream. */
#include <stdlib.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"
#include "backend/philox.h"

/* Elements generated per batch: their words live on the stack. The values depend only on the stream
 * position (philox.h), so the batch size and the thread split never change the numbers. */
#define RAND_BATCH   1024
#define RAND_PAR_MIN 16384

/* w[k] = word d of stream position j0 + k, one Philox evaluation per four positions. */
static void gen_words(uint64_t seed, uint64_t j0, int64_t m, uint32_t d, uint32_t *w) {
    int64_t k = 0;
    while (k < m) {
        uint64_t j = j0 + (uint64_t)k;
        uint32_t blk[4];
        ts_philox_block(seed, j >> 2, d, blk);
        for (uint32_t lane = (uint32_t)(j & 3u); lane < 4 && k < m; lane++, k++) w[k] = blk[lane];
    }
}

static void store_run_f64(char *p, ts_dtype dt, int64_t s, const double *v, int64_t n) {
    switch (dt) {
    case TS_F32:
        for (int64_t k = 0; k < n; k++) ((float *)p)[k * s] = (float)v[k];
        break;
    case TS_F64:
        for (int64_t k = 0; k < n; k++) ((double *)p)[k * s] = v[k];
        break;
    case TS_F16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = ts_f32_to_f16((float)v[k]);
        break;
    case TS_BF16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = ts_f32_to_bf16((float)v[k]);
        break;
    case TS_I64:
        for (int64_t k = 0; k < n; k++) ((int64_t *)p)[k * s] = ts_d2i64(v[k]);
        break;
    case TS_I32:
        for (int64_t k = 0; k < n; k++) ((int32_t *)p)[k * s] = ts_d2i32(v[k]);
        break;
    case TS_U8:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)p)[k * s] = ts_d2u8(v[k]);
        break;
    case TS_I8:
        for (int64_t k = 0; k < n; k++) ((int8_t *)p)[k * s] = ts_d2i8(v[k]);
        break;
    case TS_I16:
        for (int64_t k = 0; k < n; k++) ((int16_t *)p)[k * s] = ts_d2i16(v[k]);
        break;
    case TS_U16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = ts_d2u16(v[k]);
        break;
    case TS_U32:
        for (int64_t k = 0; k < n; k++) ((uint32_t *)p)[k * s] = ts_d2u32(v[k]);
        break;
    case TS_U64:
        for (int64_t k = 0; k < n; k++) ((uint64_t *)p)[k * s] = ts_d2u64(v[k]);
        break;
    case TS_BOOL:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)p)[k * s] = v[k] != 0.0;
        break;
    default:
        break;
    }
}

static void store_run_i64(char *p, ts_dtype dt, int64_t s, const int64_t *v, int64_t n) {
    switch (dt) {
    case TS_F32:
        for (int64_t k = 0; k < n; k++) ((float *)p)[k * s] = (float)v[k];
        break;
    case TS_F64:
        for (int64_t k = 0; k < n; k++) ((double *)p)[k * s] = (double)v[k];
        break;
    case TS_F16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = ts_f32_to_f16((float)v[k]);
        break;
    case TS_BF16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = ts_f32_to_bf16((float)v[k]);
        break;
    case TS_I64:
        for (int64_t k = 0; k < n; k++) ((int64_t *)p)[k * s] = v[k];
        break;
    case TS_I32:
        for (int64_t k = 0; k < n; k++) ((int32_t *)p)[k * s] = (int32_t)v[k];
        break;
    case TS_U8:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)p)[k * s] = (uint8_t)v[k];
        break;
    case TS_I8:
        for (int64_t k = 0; k < n; k++) ((int8_t *)p)[k * s] = (int8_t)v[k];
        break;
    case TS_I16:
        for (int64_t k = 0; k < n; k++) ((int16_t *)p)[k * s] = (int16_t)v[k];
        break;
    case TS_U16:
        for (int64_t k = 0; k < n; k++) ((uint16_t *)p)[k * s] = (uint16_t)v[k];
        break;
    case TS_U32:
        for (int64_t k = 0; k < n; k++) ((uint32_t *)p)[k * s] = (uint32_t)v[k];
        break;
    case TS_U64:
        for (int64_t k = 0; k < n; k++) ((uint64_t *)p)[k * s] = (uint64_t)v[k];
        break;
    case TS_BOOL:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)p)[k * s] = v[k] != 0;
        break;
    default:
        break;
    }
}

static size_t elem_size(ts_dtype dt) { return ts_cpu_dtype_size(dt); }

/* Writes n values to the elements of `out` at row-major positions start .. start+n-1; exactly one
 * of vd / vi is non-NULL. */
static void store_linear(const ts_kview *out, int64_t start, int64_t n, const double *vd,
                         const int64_t *vi) {
    int nd = out->ndim;
    size_t es = elem_size(out->dtype);
    if (nd == 0) {
        if (vd)
            store_run_f64(out->data, out->dtype, 0, vd, n);
        else
            store_run_i64(out->data, out->dtype, 0, vi, n);
        return;
    }
    int64_t idx[TS_MAX_DIMS];
    int64_t rem = start, off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % out->shape[d];
        rem /= out->shape[d];
        off += idx[d] * out->strides[d];
    }
    int64_t last = out->shape[nd - 1], ls = out->strides[nd - 1];
    int64_t done = 0;
    while (done < n) {
        int64_t run = last - idx[nd - 1];
        if (run > n - done) run = n - done;
        char *p = out->data + (size_t)off * es;
        if (vd)
            store_run_f64(p, out->dtype, ls, vd + done, run);
        else
            store_run_i64(p, out->dtype, ls, vi + done, run);
        done += run;
        if (done >= n) break;
        /* the run reached the end of the last dim: carry into the leading dims */
        off += (last - idx[nd - 1]) * ls;
        idx[nd - 1] = last;
        for (int d = nd - 1; d > 0 && idx[d] == out->shape[d]; d--) {
            off -= idx[d] * out->strides[d];
            idx[d] = 0;
            idx[d - 1]++;
            off += out->strides[d - 1];
        }
    }
}

static void random_batch(ts_random_kind kind, const ts_kview *out, double p0, double p1,
                         uint64_t seed, uint64_t offset, int64_t start, int64_t m) {
    uint32_t w[4][RAND_BATCH];
    double v[RAND_BATCH];
    uint64_t j0 = offset + (uint64_t)start;
    bool f64 = out->dtype == TS_F64;
    switch (kind) {
    case TS_RAND_UNIFORM:
        gen_words(seed, j0, m, 0, w[0]);
        if (f64) {
            gen_words(seed, j0, m, 1, w[1]);
            for (int64_t k = 0; k < m; k++) v[k] = p0 + (p1 - p0) * ts_philox_u53(w[0][k], w[1][k]);
        } else {
            for (int64_t k = 0; k < m; k++) v[k] = p0 + (p1 - p0) * (double)ts_philox_u24(w[0][k]);
        }
        break;
    case TS_RAND_NORMAL: {
        double u1[RAND_BATCH], u2[RAND_BATCH];
        for (uint32_t d = 0; d < (f64 ? 4u : 2u); d++) gen_words(seed, j0, m, d, w[d]);
        for (int64_t k = 0; k < m; k++) {
            if (f64) {
                u1[k] = ts_philox_u53(w[0][k], w[1][k]);
                u2[k] = ts_philox_u53(w[2][k], w[3][k]);
            } else {
                u1[k] = (double)ts_philox_u24(w[0][k]);
                u2[k] = (double)ts_philox_u24(w[1][k]);
            }
        }
        /* ts_philox_box_muller's formula, vectorised (vec_math_impl.h) */
        tsi_vec_kernels_get()->normal_f64(v, u1, u2, p0, p1, m);
        break;
    }
    case TS_RAND_BERNOULLI:
        gen_words(seed, j0, m, 0, w[0]);
        for (int64_t k = 0; k < m; k++) v[k] = (double)ts_philox_u24(w[0][k]) < p0 ? 1.0 : 0.0;
        break;
    case TS_RAND_RANDINT: {
        int64_t vi[RAND_BATCH];
        int64_t low = ts_d2i64(p0);
        uint64_t range = (uint64_t)ts_d2i64(p1) - (uint64_t)low;
        gen_words(seed, j0, m, 0, w[0]);
        gen_words(seed, j0, m, 1, w[1]);
        for (int64_t k = 0; k < m; k++) {
            uint64_t r = ((uint64_t)w[1][k] << 32) | (uint64_t)w[0][k];
            vi[k] = (int64_t)((uint64_t)low + (range ? r % range : 0));
        }
        store_linear(out, start, m, NULL, vi);
        return;
    }
    }
    store_linear(out, start, m, v, NULL);
}

void tsi_cpu_random(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                    double p0, double p1, uint64_t seed, uint64_t offset) {
    (void)be;
    (void)index;
    int64_t numel = 1;
    for (int d = 0; d < out->ndim; d++) numel *= out->shape[d];
    if (numel <= 0) return;
    int64_t nbatch = (numel + RAND_BATCH - 1) / RAND_BATCH;
    TS_PARALLEL_FOR_IF(
        numel >= RAND_PAR_MIN, for (int64_t b = 0; b < nbatch; b++) {
            int64_t start = b * RAND_BATCH;
            int64_t m = numel - start < RAND_BATCH ? numel - start : RAND_BATCH;
            random_batch(kind, out, p0, p1, seed, offset, start, m);
        });
}
