/* histogram.c — torch.histogram and torch.histogramdd (issue 76): counted in double on the host
 * (device tensors make a round trip), PyTorch's rules: equal-width edges are linspace(lo, hi,
 * bins + 1) in the input's dtype over the given range or the data's min and max (equal ends widened
 * by 1/2 each way; no data: [0, 1]; a NaN in the data without a range is an error, as PyTorch's),
 * a value lands in the bin whose edges (in the input's dtype) hold it, the last bin includes its
 * right edge, values outside the edges (NaN too) are skipped. density divides by the total and by
 * each bin's widths. No gradient (PyTorch's has none). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"

#define FAIL(code, ...) (tsi_error_set(code, __VA_ARGS__), false)

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* the first index whose edge is > v, minus one (upper_bound - 1) */
static int64_t bin_of(const double *e, int64_t ne, double v) {
    int64_t lo = 0, hi = ne;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (e[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* x: rows [R, D] on the host; edges of dim d: its tensor (scope-owned, input's dtype and device)
 * and its values on the host */
static bool edges_of(const char *op, ts_tensor *input, int d, const double *x, int64_t R, int D,
                     int64_t bins, ts_tensor *given, const double *range, ts_tensor **et,
                     double **ev, int64_t *ne) {
    const ts_device dev = tsi_device(input);
    if (given) {
        if (!tsi_check_input(op, given, "bins")) return false;
        if (given->shape.ndim != 1 || given->shape.dims[0] < 1)
            return FAIL(TS_ERR_SHAPE,
                        "%s: bins tensor should have one dimension and at least 1 element, got %s",
                        op, tsi_desc(given));
        if (!tsi_device_eq(tsi_device(given), dev))
            return FAIL(TS_ERR_DEVICE, "%s: bins tensor (%s) is not on input's device (%s)", op,
                        tsi_desc(given), tsi_desc(input));
        *et = ts_to_dtype(ts_detach(given), input->dtype);
    } else {
        if (bins <= 0)
            return FAIL(TS_ERR_ARG, "%s: bins must be > 0, but got %lld for dimension %d", op,
                        (long long)bins, d);
        double lo = 0.0, hi = 1.0;
        if (range) {
            lo = range[0], hi = range[1];
            if (!(lo <= hi))
                return FAIL(TS_ERR_ARG, "%s: min should not exceed max (dimension %d: [%g, %g])",
                            op, d, lo, hi);
        } else if (R > 0) {
            lo = INFINITY, hi = -INFINITY;
            bool nan = false;
            for (int64_t i = 0; i < R; i++) {
                const double v = x[i * D + d];
                nan |= v != v;
                lo = v < lo ? v : lo, hi = v > hi ? v : hi;
            }
            if (nan) lo = hi = NAN;
        }
        if (!isfinite(lo) || !isfinite(hi))
            return FAIL(TS_ERR_ARG, "%s: dimension %d's range [%g, %g] is not finite", op, d, lo,
                        hi);
        if (lo == hi) lo -= 0.5, hi += 0.5;
        *et = ts_to(
            ts_linspace(lo, hi, bins + 1, (ts_opts){.dtype = input->dtype, .device = ts_cpu()}),
            dev);
    }
    if (!*et) return false;
    *ne = (*et)->shape.dims[0];
    return (*ev = tsi_host_values(op, *et, TS_F64)) != NULL;
}

static ts_tensor *histogram_body(const char *op, ts_tensor *input, int D, const int64_t *bins,
                                 ts_tensor *const *edges, const double *range, ts_tensor *weight,
                                 bool density, ts_tensor **edges_out) {
    ts_shape hs = {.ndim = D};
    const int64_t R = D ? ts_numel(input) / D : 0;
    const ts_device dev = tsi_device(input);
    double *x = NULL, *w = NULL, *h = NULL, *ev[TS_MAX_DIMS] = {0};
    int64_t ne[TS_MAX_DIMS];
    ts_tensor *et[TS_MAX_DIMS] = {0}, *y = NULL;
    if (dev.type == TS_META) { /* shapes only */
        for (int d = 0; d < D; d++) {
            const int64_t nb = edges && edges[d] ? edges[d]->shape.dims[0] - 1 : bins[d];
            hs.dims[d] = nb > 0 ? nb : 0;
            et[d] =
                ts_empty(TS_SHAPE(hs.dims[d] + 1), (ts_opts){.dtype = input->dtype, .device = dev});
            if (!et[d]) goto done;
        }
        y = ts_empty(hs, (ts_opts){.dtype = input->dtype, .device = dev});
        if (y) memcpy(edges_out, et, (size_t)D * sizeof *et);
        goto done;
    }
    if (R && !(x = tsi_host_values(op, input, TS_F64))) goto done;
    if (weight && R && !(w = tsi_host_values(op, weight, TS_F64))) goto done;
    int64_t total = 1;
    for (int d = 0; d < D; d++) {
        if (!edges_of(op, input, d, x, R, D, bins ? bins[d] : 0, edges ? edges[d] : NULL,
                      range ? range + 2 * d : NULL, &et[d], &ev[d], &ne[d]))
            goto done;
        hs.dims[d] = ne[d] - 1;
        total *= hs.dims[d];
    }
    if (!(h = calloc((size_t)(total ? total : 1), sizeof *h))) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    for (int64_t i = 0; i < R && total; i++) {
        int64_t lin = 0;
        int d = 0;
        for (; d < D; d++) {
            const double v = x[i * D + d], *e = ev[d];
            if (!(v >= e[0] && v <= e[ne[d] - 1])) break;
            int64_t pos = bin_of(e, ne[d], v);
            if (pos >= ne[d] - 1) pos = ne[d] - 2;
            lin = lin * hs.dims[d] + pos;
        }
        if (d == D) h[lin] += w ? w[i] : 1.0;
    }
    if (density && total) {
        double s = 0.0;
        for (int64_t k = 0; k < total; k++) s += h[k];
        for (int64_t k = 0; k < total; k++) {
            int64_t rest = k;
            double v = h[k] / s;
            for (int d = D - 1; d >= 0; d--) {
                const int64_t j = rest % hs.dims[d];
                rest /= hs.dims[d];
                v /= ev[d][j + 1] - ev[d][j];
            }
            h[k] = v;
        }
    }
    y = tsi_from_f64(hs, h, input->dtype, dev);
    if (y) memcpy(edges_out, et, (size_t)D * sizeof *et);
done:
    free(x), free(w), free(h);
    for (int d = 0; d < D; d++) free(ev[d]);
    return y;
}

static bool check_common(const char *op, ts_tensor *input, ts_tensor *weight, ts_tensor **out) {
    if (!tsi_check_input(op, input, "input")) return false;
    if (!out) return FAIL(TS_ERR_ARG, "%s: the edges' output must not be NULL", op);
    if (!tsi_is_float(input->dtype))
        return FAIL(TS_ERR_DTYPE, "%s: input must be floating point, got %s", op, tsi_desc(input));
    if (weight) {
        if (!tsi_check_input(op, weight, "weight")) return false;
        if (!tsi_device_eq(tsi_device(weight), tsi_device(input)))
            return FAIL(TS_ERR_DEVICE, "%s: weight (%s) is not on input's device (%s)", op,
                        tsi_desc(weight), tsi_desc(input));
    }
    return true;
}

ts_tensor *ts_histogramdd(ts_tensor *input, const int64_t *bins, ts_tensor *const *edges,
                          const double *range, ts_tensor *weight, bool density,
                          ts_tensor **edges_out) {
    const char *op = "torch.histogramdd";
    tsi_init();
    if (!check_common(op, input, weight, edges_out)) return NULL;
    const int nd = input->shape.ndim;
    if (nd < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input tensor should have at least 1 dimension", op),
               NULL;
    const int64_t D = input->shape.dims[nd - 1];
    if (D > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: at most %d dimensions, got %lld", op, TS_MAX_DIMS,
                             (long long)D),
               NULL;
    if (!bins && !edges)
        return tsi_error_set(TS_ERR_ARG, "%s: bins or edges must be given", op), NULL;
    if (weight) {
        ts_shape want = input->shape;
        want.ndim--;
        if (!tsi_shape_equal(weight->shape, want))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: weight should have shape input.shape[:-1] (%s), got %s", op,
                                 tsi_shape_str(want), tsi_desc(weight)),
                   NULL;
    }
    ts_scope_begin();
    ts_tensor *y =
        histogram_body(op, input, (int)D, bins, edges, range, weight, density, edges_out);
    if (y)
        for (int d = 0; d < D; d++) edges_out[d] = ts_keep(edges_out[d]);
    return finish(y);
}

ts_tensor *ts_histogram(ts_tensor *input, int64_t bins, ts_tensor *edges, bool has_range, double lo,
                        double hi, ts_tensor *weight, bool density, ts_tensor **edges_out) {
    const char *op = "torch.histogram";
    tsi_init();
    if (!check_common(op, input, weight, edges_out)) return NULL;
    if (weight && !tsi_shape_equal(weight->shape, input->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: if weight tensor is provided it should have the same shape as "
                             "the input tensor (%s), got %s",
                             op, tsi_shape_str(input->shape), tsi_desc(weight)),
               NULL;
    ts_scope_begin();
    ts_tensor *x = ts_reshape(input, TS_SHAPE(ts_numel(input), 1));
    ts_tensor *w = weight ? ts_reshape(weight, TS_SHAPE(ts_numel(weight))) : NULL;
    const double range[2] = {lo, hi};
    ts_tensor *y = x && (w || !weight)
                       ? histogram_body(op, x, 1, &bins, &edges, has_range ? range : NULL, w,
                                        density, edges_out)
                       : NULL;
    if (y) *edges_out = ts_keep(*edges_out);
    return finish(y);
}
