/* cuda_scan.cu — the cumulative ops on CUDA (backend.h's scan: cumsum, cumprod, cummax, cummin,
 * logcumsumexp) over strided views of any dtype, with the CPU kernel's rules (kern_scan.c) and its
 * steps from scan_math.h: one thread per line (every position of the other dims) scans the line
 * in order, floats accumulating in double and integers in int64 (wrapping), so the results are
 * the CPU's bit for bit wherever the device's exp and log1p are glibc's. A long single line is one
 * thread's work: correct, not fast (a blocked parallel scan would change the summation order). */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/scan_math.h"

namespace {

struct ScanPlan {
    char *out, *idx;
    const char *in;
    ts_dtype out_dt;
    ts_scan_op op;
    bool ints; /* integer arithmetic (backend.h: extremes of integer inputs, sums into integers) */
    int64_t lines, n;
    int64_t in_s, out_s, idx_s; /* strides along the scanned dim, in elements */
    size_t out_es;
    tsc_dims lead;  /* the other dims: s0 in's strides, s1 out's */
    tsc_dims ilead; /* the other dims with idx's strides in s0 */
};

template <typename T> TSC_KERNEL scan_kernel(ScanPlan P TSC_THREAD_PARAMS) {
    const bool ext = P.op == TS_SCAN_MAX || P.op == TS_SCAN_MIN;
    for (uint64_t line = TSC_TID; line < (uint64_t)P.lines; line += TSC_NTHREADS) {
        int64_t io, oo;
        tsc_offset2(P.lead, (int64_t)line, &io, &oo);
        const T *x = (const T *)P.in + io;
        char *y = P.out + (size_t)oo * P.out_es;
        int64_t *ix = ext ? (int64_t *)P.idx + tsc_offset(P.ilead, (int64_t)line) : nullptr;
        int64_t at = 0;
        if (P.ints) {
            uint64_t u = P.op == TS_SCAN_PROD ? 1u : 0u;
            int64_t best = 0;
            for (int64_t k = 0; k < P.n; k++) {
                const int64_t v = (int64_t)tsc_ld(x[k * P.in_s]);
                int64_t r;
                if (ext) {
                    if (k == 0 || ts_scan_takes_over_i(P.op, v, best)) best = v, at = k;
                    ix[k * P.idx_s] = at;
                    r = best;
                } else {
                    u = P.op == TS_SCAN_PROD ? u * (uint64_t)v : u + (uint64_t)v;
                    r = (int64_t)u;
                }
                tsc_store_i64(y + (size_t)(k * P.out_s) * P.out_es, P.out_dt, r);
            }
        } else {
            double acc = ts_scan_start_d(P.op);
            for (int64_t k = 0; k < P.n; k++) {
                const double v = tsc_to_double(x[k * P.in_s]);
                if (ext) {
                    if (k == 0 || ts_scan_takes_over_d(P.op, v, acc)) acc = v, at = k;
                    ix[k * P.idx_s] = at;
                } else {
                    acc = ts_scan_fold_d(P.op, acc, v);
                }
                tsc_store_double(y + (size_t)(k * P.out_s) * P.out_es, P.out_dt, acc);
            }
        }
    }
}

template <typename T> static void scan_launch(int index, const ScanPlan &P) {
    auto kernel = &scan_kernel<T>;
    TSC_LAUNCH(kernel, tsc_grid_size(index, P.lines, TSC_THREADS), tsc_stream(index), P);
    tsc_launch_check("scan", index);
}

} // namespace

void tsc_scan(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
              const ts_kview *idx, const ts_kview *in, int dim) {
    (void)be;
    ScanPlan P;
    P.out = out->data;
    P.idx = idx ? idx->data : nullptr;
    P.in = in->data;
    P.out_dt = out->dtype;
    P.op = op;
    P.ints = (op == TS_SCAN_MAX || op == TS_SCAN_MIN) ? !tsc_is_float(in->dtype)
                                                      : !tsc_is_float(out->dtype);
    P.n = in->shape[dim];
    P.in_s = in->strides[dim];
    P.out_s = out->strides[dim];
    P.idx_s = idx ? idx->strides[dim] : 0;
    P.out_es = tsc_dtype_size(out->dtype);
    /* the other dims, in order (the scanned one taken out) */
    int64_t shape[TS_MAX_DIMS], is[TS_MAX_DIMS], os[TS_MAX_DIMS], xs[TS_MAX_DIMS];
    int nl = 0;
    P.lines = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == dim) continue;
        shape[nl] = in->shape[d], is[nl] = in->strides[d], os[nl] = out->strides[d];
        xs[nl] = idx ? idx->strides[d] : 0;
        P.lines *= shape[nl++];
    }
    if (P.lines == 0 || P.n == 0) return;
    P.lead = tsc_coalesce(nl, shape, is, os);
    P.ilead = tsc_coalesce(nl, shape, xs, NULL);
    if (!tsc_set_device(index)) return;
    TSC_DISPATCH(in->dtype, T, scan_launch<T>(index, P));
}
