/* kern_scan.c — CPU cumulative ops along one dim (backend.h's scan): cumsum, cumprod, cummax,
 * cummin, logcumsumexp over strided views of any dtype. Each line (every position of the other
 * dims) is one sequential scan, read and written in chunks through the reductions' converters;
 * lines run in parallel when there are enough elements. Float sums and products whose lines are
 * laid out for it take kern_scan_float.c's paths, with the same arithmetic. */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_reduce.h"
#include "backend/cpu/kern_scan_float.h"
#include "backend/omp_if.h"
#include "backend/scan_math.h"

#define SCAN_CHUNK   256
#define SCAN_PAR_MIN 32768 /* fewer elements than this: one thread */

typedef struct scan_state {
    double d;   /* running float value (sum, product, log-sum-exp, extreme) */
    uint64_t u; /* running integer sum / product (wrapping) */
    int64_t i;  /* running integer extreme */
    int64_t at; /* index of the extreme */
    bool any;   /* an extreme has been seen */
} scan_state;

static bool is_float(ts_dtype dt) {
    return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16;
}

static void scan_chunk_f(ts_scan_op op, scan_state *s, double *v, int64_t *ix, int64_t base,
                         int64_t m) {
    for (int64_t k = 0; k < m; k++) {
        double x = v[k];
        if (op == TS_SCAN_MAX || op == TS_SCAN_MIN) {
            if (!s->any || ts_scan_takes_over_d(op, x, s->d))
                s->d = x, s->at = base + k, s->any = true;
            ix[k] = s->at;
        } else {
            s->d = ts_scan_fold_d(op, s->d, x);
        }
        v[k] = s->d;
    }
}

static void scan_chunk_i(ts_scan_op op, scan_state *s, int64_t *v, int64_t *ix, int64_t base,
                         int64_t m) {
    for (int64_t k = 0; k < m; k++) {
        int64_t x = v[k];
        switch (op) {
        case TS_SCAN_SUM:
            s->u += (uint64_t)x;
            v[k] = (int64_t)s->u;
            break;
        case TS_SCAN_PROD:
            s->u *= (uint64_t)x;
            v[k] = (int64_t)s->u;
            break;
        default: /* MAX, MIN (LOGSUMEXP is floats only) */
            if (!s->any || ts_scan_takes_over_i(op, x, s->i))
                s->i = x, s->at = base + k, s->any = true;
            v[k] = s->i;
            ix[k] = s->at;
            break;
        }
    }
}

/* a 1-D view of m elements of v along dim starting at element offset off */
static ts_kview line_view(const ts_kview *v, int dim, int64_t off, int64_t m) {
    ts_kview r = {0};
    r.data = v->data + (size_t)off * tsi_cpu_red_elem_size(v->dtype);
    r.dtype = v->dtype;
    r.ndim = 1;
    r.shape[0] = m;
    r.strides[0] = v->strides[dim];
    return r;
}

static void scan_line(ts_scan_op op, const ts_kview *out, const ts_kview *idx, const ts_kview *in,
                      int dim, int64_t oo, int64_t xo, int64_t io, bool ints) {
    double dbuf[SCAN_CHUNK];
    int64_t ibuf[SCAN_CHUNK], xbuf[SCAN_CHUNK];
    scan_state s = {.d = ts_scan_start_d(op), .u = op == TS_SCAN_PROD ? 1u : 0u};
    const int64_t n = in->shape[dim], is = in->strides[dim];
    const size_t ies = tsi_cpu_red_elem_size(in->dtype);
    const bool ext = op == TS_SCAN_MAX || op == TS_SCAN_MIN;
    for (int64_t p = 0; p < n; p += SCAN_CHUNK) {
        int64_t m = n - p < SCAN_CHUNK ? n - p : SCAN_CHUNK;
        const char *src = in->data + (size_t)(io + p * is) * ies;
        ts_kview ov = line_view(out, dim, oo + p * out->strides[dim], m);
        if (ints) {
            tsi_cpu_red_conv_run_i64(ibuf, src, in->dtype, is, m);
            scan_chunk_i(op, &s, ibuf, xbuf, p, m);
            tsi_cpu_red_store_run_i(&ov, 0, ibuf, m);
        } else {
            tsi_cpu_red_conv_run_f64(dbuf, src, in->dtype, is, m);
            scan_chunk_f(op, &s, dbuf, xbuf, p, m);
            tsi_cpu_red_store_run_d(&ov, 0, dbuf, m);
        }
        if (ext) {
            ts_kview xv = line_view(idx, dim, xo + p * idx->strides[dim], m);
            tsi_cpu_red_store_run_i(&xv, 0, xbuf, m);
        }
    }
}

void tsi_cpu_scan(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
                  const ts_kview *idx, const ts_kview *in, int dim) {
    (void)be;
    (void)index;
    const int nd = in->ndim;
    int64_t lines = 1, total = 1;
    for (int d = 0; d < nd; d++) {
        total *= in->shape[d];
        if (d != dim) lines *= in->shape[d];
    }
    if (total == 0) return;
    if (tsi_cpu_scan_float(op, out, in, dim)) return; /* float sums and products, laid out */
    /* extremes compare in the input's own type; sums and products accumulate in out's */
    const bool ints =
        (op == TS_SCAN_MAX || op == TS_SCAN_MIN) ? !is_float(in->dtype) : !is_float(out->dtype);
    TS_PARALLEL_FOR_IF(
        total >= SCAN_PAR_MIN && lines > 1, for (int64_t r = 0; r < lines; r++) {
            int64_t rem = r, oo = 0, xo = 0, io = 0;
            for (int d = nd - 1; d >= 0; d--) {
                if (d == dim) continue;
                int64_t k = rem % in->shape[d];
                rem /= in->shape[d];
                io += k * in->strides[d];
                oo += k * out->strides[d];
                if (idx) xo += k * idx->strides[d];
            }
            scan_line(op, out, idx, in, dim, oo, xo, io, ints);
        });
}
