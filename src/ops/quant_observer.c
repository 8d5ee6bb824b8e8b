/* quant_observer.c — the observers' running statistics (torch.ao.quantization.observer, PyTorch
 * 2.15): HistogramObserver's histogram update and its L2 search (_non_linear_param_search), and
 * the running min / max of MovingAverageMinMaxObserver and PerChannelMinMaxObserver, in PyTorch's
 * float32 arithmetic and order (CPU kernels: histc's linear binning, linspace's fused
 * multiply-add, the 8-lane cascade of torch.sum, cumsum accumulated in double, bincount in index
 * order); include/tessera/quant.h, docs/QUANTIZATION.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tessera/quant.h"

/* ------------------------------------------------------------------ PyTorch's CPU arithmetic */
/* torch.sum of a contiguous float32 vector (cascade_sum: vectorized_inner_sum over 8-lane vectors,
 * row_sum with 4 accumulators and multi_row_sum's levels, the tail and lanes added in order) */
#define LANES 8
static void multi_row_acc(float acc[4][4][LANES], int lvl, int k, const float *v, int lanes) {
    for (int l = 0; l < lanes; l++) acc[lvl][k][l] += v[l];
}
static void row_sum(const float *x, int64_t size, int lanes, float out[LANES]) {
    /* size elements of `lanes` floats each (lanes 1: scalars) */
    float acc[4][4][LANES];
    memset(acc, 0, sizeof acc);
    const int64_t size_ilp = size / 4;
    int64_t lg = 0;
    while (size_ilp > 1 && ((int64_t)1 << lg) < size_ilp) lg++; /* CeilLog2 */
    const int64_t lp = lg / 4 > 4 ? lg / 4 : 4, step = (int64_t)1 << lp, mask0 = step - 1;
    int64_t i = 0;
    for (; i + step <= size_ilp;) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int k = 0; k < 4; k++) multi_row_acc(acc, 0, k, x + (i * 4 + k) * lanes, lanes);
        for (int j = 1; j < 4; j++) {
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < lanes; l++) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.0f;
                }
            if (i & (mask0 << (j * lp))) break;
        }
    }
    for (; i < size_ilp; i++)
        for (int k = 0; k < 4; k++) multi_row_acc(acc, 0, k, x + (i * 4 + k) * lanes, lanes);
    for (int j = 1; j < 4; j++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < lanes; l++) acc[0][k][l] += acc[j][k][l];
    for (int64_t t = size_ilp * 4; t < size; t++)
        for (int l = 0; l < lanes; l++) acc[0][0][l] += x[t * lanes + l];
    for (int k = 1; k < 4; k++)
        for (int l = 0; l < lanes; l++) acc[0][0][l] += acc[0][k][l];
    memcpy(out, acc[0][0], (size_t)lanes * sizeof(float));
}
static float torch_sum_f32(const float *x, int64_t n) {
    float v[LANES];
    if (n < LANES) {
        row_sum(x, n, 1, v);
        return v[0];
    }
    const int64_t nv = n / LANES;
    row_sum(x, nv, LANES, v);
    float s = 0.0f;
    for (int64_t t = nv * LANES; t < n; t++) s += x[t];
    for (int l = 0; l < LANES; l++) s += v[l];
    return s;
}

/* torch.linspace(start, end, steps) in float32: step = (end - start) / (steps - 1), the first half
 * start + step * i and the second end - step * (steps - 1 - i), each one fused multiply-add (as
 * PyTorch's AVX2 kernel is compiled) */
static void linspace_f32(float start, float end, int64_t steps, float *out) {
    const float step = steps > 1 ? (end - start) / (float)(steps - 1) : 0.0f;
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; i++)
        out[i] = i < half ? fmaf(step, (float)i, start) : fmaf(-step, (float)(steps - 1 - i), end);
}

/* torch.histc(x, bins, min=lo, max=hi) into h (added to, not cleared): PyTorch's outer edges (an
 * empty range takes the data's, then widens by one each way) and its linear binning
 * pos = (int)((x - left) * bins / (right - left)) in float32, the right edge in the last bin,
 * values outside skipped. false when the range is not finite or empty. */
static bool histc_f32(const float *x, int64_t n, double lo, double hi, int64_t bins, float *h) {
    if (lo == hi && n > 0) {
        float a = x[0], b = x[0];
        for (int64_t i = 1; i < n; i++) a = x[i] < a ? x[i] : a, b = x[i] > b ? x[i] : b;
        lo = a, hi = b;
    }
    if (lo == hi) lo -= 1, hi += 1;
    if (!isfinite(lo) || !isfinite(hi) || !(lo < hi)) return false;
    const float left = (float)lo, right = (float)hi, nb = (float)bins;
    for (int64_t i = 0; i < n; i++) {
        const float e = x[i];
        if (!(e >= left && e <= right)) continue;
        /* edges equal in float32 (a constant past 2^24 whose +-1 rounds away): PyTorch divides
         * 0 by 0 and casts NaN (undefined); the middle bin here */
        const float p = left < right ? ((e - left) * nb) / (right - left) : 0.5f * nb;
        int64_t pos = (int64_t)p;
        pos = pos >= bins ? bins - 1 : pos < 0 ? 0 : pos; /* the right edge in the last bin */
        h[pos] += 1.0f;
    }
    return true;
}

/* HistogramObserver._upscale_histogram (bins * 16 sub-bins at their mid-points, bucketized into
 * [umin, umax], bincount in order) added into out */
static bool upscale_add(const float *hist, int64_t bins, float omin, float omax, float umin,
                        float umax, float *out) {
    const int64_t up = 16, n = bins * up;
    float *lin = malloc((size_t)(n + 1 + bins + 1) * sizeof(float)), *bnd = lin ? lin + n + 1 : 0;
    float *add = calloc((size_t)bins, sizeof(float));
    if (!lin || !add) return free(lin), free(add), false;
    const float bin_size = (omax - omin) / (float)n, half = 0.5f * bin_size;
    linspace_f32(omin, omax, n + 1, lin);
    linspace_f32(umin, umax, bins + 1, bnd);
    for (int64_t i = 0; i < n; i++) {
        const float mid = lin[i] + half;
        int64_t a = 0, b = bins + 1; /* first boundary > mid (bucketize right=True) */
        while (a < b) {
            const int64_t m = a + (b - a) / 2;
            if (bnd[m] > mid)
                b = m;
            else
                a = m + 1;
        }
        int64_t j = a - 1;
        j = j >= bins ? bins - 1 : j < 0 ? 0 : j;
        add[j] += hist[i / up] / (float)up;
    }
    for (int64_t j = 0; j < bins; j++) out[j] += add[j];
    free(lin);
    free(add);
    return true;
}

/* ------------------------------------------------------------------ argument checks */
static bool f32_vec(const char *op, ts_tensor *t, const char *what, int64_t ndim) {
    if (!tsi_check_input(op, t, what)) return false;
    if (t->dtype != TS_F32 || (ndim >= 0 && t->shape.ndim != ndim))
        return tsi_error_set(TS_ERR_ARG, "%s: %s must be a float32 tensor%s (got %s)", op, what,
                             ndim == 0   ? " of 0 dims"
                             : ndim == 1 ? " of 1 dim"
                                         : "",
                             tsi_desc(t)),
               false;
    return true;
}

/* x as a host float32 array (converted from another floating dtype); NULL + error otherwise */
static float *host_f32(const char *op, ts_tensor *x, int64_t *n) {
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be floating point (got %s)", op,
                             tsi_desc(x)),
               NULL;
    *n = tsi_numel(x->shape);
    float *h = malloc((size_t)(*n ? *n : 1) * sizeof(float));
    if (!h) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    ts_scope_begin(); /* the float32 copy of another dtype is the scope's */
    ts_tensor *c = x->dtype == TS_F32 ? x : ts_to_dtype(x, TS_F32);
    const ts_status st = c ? ts_copy_to_host(c, h, (size_t)*n * sizeof(float)) : ts_error();
    ts_scope_end();
    if (st != TS_OK) return free(h), NULL;
    return h;
}

/* writes n floats into the float32 tensor t (same numel) */
static ts_status write_f32(const char *op, ts_tensor *t, const float *v) {
    ts_tensor *s = tsi_from_host(op, t->shape, TS_F32, v, tsi_device(t));
    if (!s) return ts_error();
    ts_scope_begin();
    const bool ok = ts_copy_(t, s) != NULL;
    ts_scope_end();
    ts_release(s);
    return ok ? TS_OK : ts_error();
}

static ts_status read_scalar(ts_tensor *t, float *v) { return ts_copy_to_host(t, v, sizeof *v); }

/* ------------------------------------------------------------------ HistogramObserver */
ts_status ts_histogram_observer_update(ts_tensor *histogram, ts_tensor *min_val, ts_tensor *max_val,
                                       ts_tensor *x) {
    const char *op = "histogram_observer_update";
    tsi_init();
    if (!f32_vec(op, histogram, "histogram", 1) || !f32_vec(op, min_val, "min_val", 0) ||
        !f32_vec(op, max_val, "max_val", 0))
        return ts_error();
    const int64_t bins = histogram->shape.dims[0];
    if (bins < 1) return tsi_error_set(TS_ERR_ARG, "%s: histogram has no bins", op);
    int64_t n = 0;
    float *xs = host_f32(op, x, &n), *hist = NULL, *uh = NULL;
    if (!xs) return ts_error();
    ts_status st = TS_OK;
    float cmin, cmax;
    if (n == 0) goto done;
    /* inf values are dropped (PyTorch: "torch.inf detected in input tensor, ignoring input");
     * NaN makes PyTorch's histc fail on its range: refused here */
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(xs[i])) {
            st = tsi_error_set(TS_ERR_ARG,
                               "%s: input has NaN (element %lld): PyTorch's histc "
                               "refuses its range",
                               op, (long long)i);
            goto done;
        }
        if (!isinf(xs[i])) xs[m++] = xs[i];
    }
    if (m == 0) goto done;
    float xmin = xs[0], xmax = xs[0];
    for (int64_t i = 1; i < m; i++)
        xmin = xs[i] < xmin ? xs[i] : xmin, xmax = xs[i] > xmax ? xs[i] : xmax;
    if ((st = read_scalar(min_val, &cmin)) != TS_OK || (st = read_scalar(max_val, &cmax)) != TS_OK)
        goto done;
    hist = calloc((size_t)bins, sizeof(float));
    uh = calloc((size_t)bins, sizeof(float));
    if (!hist || !uh) {
        st = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    if (cmin == INFINITY || cmax == -INFINITY) { /* the first batch: reset_histogram */
        histc_f32(xs, m, xmin, xmax, bins, hist);
        cmin = xmin, cmax = xmax;
    } else {
        if (isnan(cmin) || isnan(cmax) || !(cmin <= cmax)) {
            st = tsi_error_set(TS_ERR_ARG, "%s: min_val %g, max_val %g are not a range", op,
                               (double)cmin, (double)cmax);
            goto done;
        }
        const float nmin = xmin < cmin ? xmin : cmin, nmax = xmax > cmax ? xmax : cmax;
        if ((st = ts_copy_to_host(histogram, hist, (size_t)bins * sizeof(float))) != TS_OK)
            goto done;
        if (!histc_f32(xs, m, nmin, nmax, bins, uh)) {
            st = tsi_error_set(TS_ERR_ARG, "%s: range [%g, %g] is not finite", op, (double)nmin,
                               (double)nmax);
            goto done;
        }
        if (nmin == cmin && nmax == cmax) {
            for (int64_t j = 0; j < bins; j++) hist[j] += uh[j];
        } else if (cmin == cmax) { /* one value so far: histc of it, times the count */
            const float count = torch_sum_f32(hist, bins);
            float *one = calloc((size_t)bins, sizeof(float));
            if (!one) {
                st = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
                goto done;
            }
            histc_f32(&cmin, 1, nmin, nmax, bins, one);
            for (int64_t j = 0; j < bins; j++) hist[j] = one[j] * count + uh[j];
            free(one);
        } else {
            if (!upscale_add(hist, bins, cmin, cmax, nmin, nmax, uh)) {
                st = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
                goto done;
            }
            memcpy(hist, uh, (size_t)bins * sizeof(float));
        }
        cmin = nmin, cmax = nmax;
    }
    if ((st = write_f32(op, histogram, hist)) == TS_OK &&
        (st = write_f32(op, min_val, &cmin)) == TS_OK)
        st = write_f32(op, max_val, &cmax);
done:
    free(xs);
    free(hist);
    free(uh);
    return st;
}

/* PyTorch's float32 floor division (c10::div_floor_floating) */
static float div_floor_f32(float a, float b) {
    if (b == 0.0f) return a / b;
    const float mod = fmodf(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) div -= 1.0f;
    if (div == 0.0f) return copysignf(0.0f, a / b);
    float f = floorf(div);
    if (div - f > 0.5f) f += 1.0f;
    return f;
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* HistogramObserver._compute_quantization_error (float32 tensors, python-float widths) */
static double quantization_error(const float *hist, int64_t bins, float mn, float mx, int64_t dst,
                                 int64_t s, int64_t e, float *norm) {
    const double bw = ((double)mx - (double)mn) / (double)bins;
    const double dbw = bw * (double)(e - s + 1) / (double)dst;
    if (dbw == 0.0) return 0.0;
    const float bwf = (float)bw, dbwf = (float)dbw, half = (float)(dbw / 2),
                mhalf = (float)(-dbw / 2), top = (float)(dst - 1);
    const float cn = (half * half * half - mhalf * mhalf * mhalf) / 3.0f;
    const float mh3 = mhalf * mhalf * mhalf;
    for (int64_t i = 0; i < bins; i++) {
        const float beg = (float)(i - s) * bwf, end = beg + bwf;
        const float db = clampf(div_floor_f32(beg, dbwf), 0.0f, top);
        const float de = clampf(div_floor_f32(end, dbwf), 0.0f, top);
        const float dbc = (db + 0.5f) * dbwf, dens = hist[i] / bwf;
        const float dlb = beg - dbc;
        const float n1 = dens * ((half * half * half - dlb * dlb * dlb) / 3.0f);
        const float n2 = ((de - db) - 1.0f) * (dens * cn);
        const float dle = end - (de * dbwf + half);
        const float n3 = dens * ((dle * dle * dle - mh3) / 3.0f);
        norm[i] = ((0.0f + n1) + n2) + n3;
    }
    return (double)torch_sum_f32(norm, bins);
}

/* the search on the host: *lo / *hi the chosen range */
static ts_status search_core(const char *op, ts_tensor *histogram, ts_tensor *min_val,
                             ts_tensor *max_val, int64_t dst_nbins, float *lo, float *hi) {
    if (!f32_vec(op, histogram, "histogram", 1) || !f32_vec(op, min_val, "min_val", 0) ||
        !f32_vec(op, max_val, "max_val", 0))
        return ts_error();
    const int64_t bins = histogram->shape.dims[0];
    if (bins < 1) return tsi_error_set(TS_ERR_ARG, "%s: histogram has no bins", op);
    if (dst_nbins < 2)
        return tsi_error_set(TS_ERR_ARG, "%s: dst_nbins must be at least 2 (got %lld)", op,
                             (long long)dst_nbins);
    float mn, mx;
    ts_status st;
    if ((st = read_scalar(min_val, &mn)) != TS_OK || (st = read_scalar(max_val, &mx)) != TS_OK)
        return st;
    if (!isfinite(mn) || !isfinite(mx) || !(mn <= mx))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: min_val %g, max_val %g are not a finite range (run the observer "
                             "on data first)",
                             op, (double)mn, (double)mx);
    float *h = malloc((size_t)bins * 3 * sizeof(float));
    if (!h) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    float *cs = h + bins, *norm = cs + bins;
    if ((st = ts_copy_to_host(histogram, h, (size_t)bins * sizeof(float))) != TS_OK) {
        free(h);
        return st;
    }
    const float bw = (mx - mn) / (float)bins;
    const double total = (double)torch_sum_f32(h, bins);
    double acc = 0; /* torch.cumsum on the CPU accumulates float32 in double */
    for (int64_t i = 0; i < bins; i++) cs[i] = (float)(acc += h[i]);
    double alpha = 0.0, beta = 1.0, norm_min = INFINITY;
    int64_t sb = 0, eb = bins - 1;
    while (alpha < beta) {
        const double na = alpha + 1e-5, nb = beta - 1e-5;
        /* cSum[l] < next_alpha * total: a float32 tensor against a python float, in float32 */
        const float ta = (float)(na * total), tb = (float)(nb * total);
        int64_t l = sb, r = eb;
        while (l < eb && cs[l] < ta) l++;
        while (r > sb && cs[r] > tb) r--;
        int64_t nsb = sb, neb = eb;
        if (l - sb > eb - r)
            nsb = l, alpha = na;
        else
            neb = r, beta = nb;
        if (nsb == sb && neb == eb) continue;
        const double norm_v = quantization_error(h, bins, mn, mx, dst_nbins, nsb, neb, norm);
        if (norm_v > norm_min) break;
        norm_min = norm_v, sb = nsb, eb = neb;
    }
    *lo = mn + bw * (float)sb, *hi = mn + bw * (float)(eb + 1);
    free(h);
    return TS_OK;
}

/* two 0-d float32 tensors (caller references) */
static ts_status pair_out(const char *op, float lo, float hi, ts_device dev, ts_tensor **a,
                          ts_tensor **b) {
    *a = tsi_from_host(op, TS_SHAPE(), TS_F32, &lo, dev);
    *b = *a ? tsi_from_host(op, TS_SHAPE(), TS_F32, &hi, dev) : NULL;
    if (*b) return TS_OK;
    ts_release(*a);
    *a = NULL;
    return ts_error();
}

ts_status ts_histogram_observer_search(ts_tensor *histogram, ts_tensor *min_val, ts_tensor *max_val,
                                       int64_t dst_nbins, ts_tensor **new_min,
                                       ts_tensor **new_max) {
    const char *op = "histogram_observer_search";
    tsi_init();
    if (!new_min || !new_max)
        return tsi_error_set(TS_ERR_ARG, "%s: new_min or new_max is NULL", op);
    *new_min = *new_max = NULL;
    float lo, hi;
    ts_status st = search_core(op, histogram, min_val, max_val, dst_nbins, &lo, &hi);
    if (st == TS_OK && (st = pair_out(op, lo, hi, tsi_device(min_val), new_min, new_max)) == TS_OK)
        tsi_own(*new_min), tsi_own(*new_max);
    return st;
}

/* ------------------------------------------------------------------ min / max observers */
/* torch.aminmax of n floats: NaN if any is NaN */
static void aminmax_f32(const float *x, int64_t n, float *lo, float *hi) {
    float a = x[0], b = x[0];
    for (int64_t i = 1; i < n; i++) {
        if (isnan(x[i]) || isnan(a)) {
            a = b = NAN;
            break;
        }
        a = x[i] < a ? x[i] : a, b = x[i] > b ? x[i] : b;
    }
    *lo = a, *hi = b;
}

ts_status ts_moving_average_minmax_update(ts_tensor *min_val, ts_tensor *max_val, ts_tensor *x,
                                          double averaging_constant) {
    const char *op = "moving_average_minmax_update";
    tsi_init();
    if (!f32_vec(op, min_val, "min_val", 0) || !f32_vec(op, max_val, "max_val", 0))
        return ts_error();
    if (!isfinite(averaging_constant))
        return tsi_error_set(TS_ERR_ARG, "%s: averaging_constant must be finite (got %g)", op,
                             averaging_constant);
    int64_t n = 0;
    float *xs = host_f32(op, x, &n);
    if (!xs) return ts_error();
    ts_status st = TS_OK;
    float mn, mx, lo, hi;
    if (n == 0) goto done;
    if ((st = read_scalar(min_val, &mn)) != TS_OK || (st = read_scalar(max_val, &mx)) != TS_OK)
        goto done;
    aminmax_f32(xs, n, &lo, &hi);
    if (mn == INFINITY && mx == -INFINITY) {
        mn = lo, mx = hi;
    } else { /* min + c * (cur - min), each a float32 tensor op */
        const float c = (float)averaging_constant;
        mn = mn + c * (lo - mn);
        mx = mx + c * (hi - mx);
    }
    if ((st = write_f32(op, min_val, &mn)) == TS_OK) st = write_f32(op, max_val, &mx);
done:
    free(xs);
    return st;
}

/* The per-channel observers: the batch's min / max per index along ch_axis, combined with the
 * running ones by torch.min / torch.max (moving false) or by the moving average (moving true) */
static ts_status per_channel_update(const char *op, ts_tensor *min_val, ts_tensor *max_val,
                                    ts_tensor *x, int64_t ch_axis, bool moving, float avg,
                                    ts_tensor **new_min, ts_tensor **new_max) {
    tsi_init();
    if (!new_min || !new_max)
        return tsi_error_set(TS_ERR_ARG, "%s: new_min or new_max is NULL", op);
    *new_min = *new_max = NULL;
    if (!f32_vec(op, min_val, "min_val", 1) || !f32_vec(op, max_val, "max_val", 1))
        return ts_error();
    if (!tsi_check_input(op, x, "input")) return ts_error();
    const int nd = x->shape.ndim;
    if (nd < 1 || ch_axis < -nd || ch_axis >= nd)
        return tsi_error_set(TS_ERR_ARG, "%s: ch_axis %lld is out of range for %s", op,
                             (long long)ch_axis, tsi_desc(x));
    const int ax = (int)(ch_axis < 0 ? ch_axis + nd : ch_axis);
    const int64_t C = x->shape.dims[ax], had = tsi_numel(min_val->shape);
    if (had != tsi_numel(max_val->shape) || (had != 0 && had != C))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: min_val / max_val hold %lld / %lld channels, the input %lld "
                             "along ch_axis %d",
                             op, (long long)had, (long long)tsi_numel(max_val->shape), (long long)C,
                             ax);
    int64_t n = 0;
    float *xs = host_f32(op, x, &n), *lo = NULL;
    if (!xs) return ts_error();
    ts_status st = TS_OK;
    if (n == 0 || C == 0) { /* PyTorch returns at once on an empty input */
        *new_min = ts_clone(min_val);
        *new_max = *new_min ? ts_clone(max_val) : NULL;
        if (!*new_max) st = ts_error(), *new_min = NULL;
        goto done;
    }
    lo = malloc((size_t)C * 4 * sizeof(float));
    if (!lo) {
        st = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    float *hi = lo + C, *omin = hi + C, *omax = omin + C;
    int64_t inner = 1;
    for (int d = ax + 1; d < nd; d++) inner *= x->shape.dims[d];
    const int64_t outer = n / (C * inner);
    for (int64_t c = 0; c < C; c++) lo[c] = INFINITY, hi[c] = -INFINITY;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < inner; i++) {
                const float v = xs[(o * C + c) * inner + i];
                if (isnan(v) || isnan(lo[c])) {
                    lo[c] = hi[c] = NAN;
                    continue;
                }
                lo[c] = v < lo[c] ? v : lo[c], hi[c] = v > hi[c] ? v : hi[c];
            }
    if (had) { /* torch.min / torch.max: NaN propagates */
        if ((st = ts_copy_to_host(min_val, omin, (size_t)C * sizeof(float))) != TS_OK ||
            (st = ts_copy_to_host(max_val, omax, (size_t)C * sizeof(float))) != TS_OK)
            goto done;
        for (int64_t c = 0; c < C && moving; c++) {
            /* min + c * (cur - min), each a float32 tensor op; a channel not yet seen (+inf,
             * -inf: the C modules' initial state) takes the batch's, where PyTorch gives NaN */
            if (omin[c] == INFINITY && omax[c] == -INFINITY) continue;
            lo[c] = omin[c] + avg * (lo[c] - omin[c]);
            hi[c] = omax[c] + avg * (hi[c] - omax[c]);
        }
        for (int64_t c = 0; c < C && !moving; c++) {
            lo[c] = isnan(lo[c]) || isnan(omin[c]) ? NAN : lo[c] < omin[c] ? lo[c] : omin[c];
            hi[c] = isnan(hi[c]) || isnan(omax[c]) ? NAN : hi[c] > omax[c] ? hi[c] : omax[c];
        }
    }
    *new_min = tsi_own(tsi_from_host(op, TS_SHAPE(C), TS_F32, lo, tsi_device(min_val)));
    *new_max =
        *new_min ? tsi_own(tsi_from_host(op, TS_SHAPE(C), TS_F32, hi, tsi_device(min_val))) : NULL;
    if (!*new_max) st = ts_error(), *new_min = NULL;
done:
    free(xs);
    free(lo);
    return st;
}

ts_status ts_per_channel_minmax_update(ts_tensor *min_val, ts_tensor *max_val, ts_tensor *x,
                                       int64_t ch_axis, ts_tensor **new_min, ts_tensor **new_max) {
    return per_channel_update("per_channel_minmax_update", min_val, max_val, x, ch_axis, false,
                              0.0f, new_min, new_max);
}

ts_status ts_moving_average_per_channel_minmax_update(ts_tensor *min_val, ts_tensor *max_val,
                                                      ts_tensor *x, int64_t ch_axis,
                                                      double averaging_constant,
                                                      ts_tensor **new_min, ts_tensor **new_max) {
    const char *op = "moving_average_per_channel_minmax_update";
    if (!isfinite(averaging_constant)) {
        tsi_init();
        if (new_min) *new_min = NULL;
        if (new_max) *new_max = NULL;
        return tsi_error_set(TS_ERR_ARG, "%s: averaging_constant must be finite (got %g)", op,
                             averaging_constant);
    }
    return per_channel_update(op, min_val, max_val, x, ch_axis, true, (float)averaging_constant,
                              new_min, new_max);
}

ts_status ts_histogram_observer_qparams(ts_tensor *histogram, ts_tensor *min_val,
                                        ts_tensor *max_val, int64_t dst_nbins, int64_t quant_min,
                                        int64_t quant_max, bool symmetric,
                                        int64_t symmetric_zero_point, double eps, ts_tensor **scale,
                                        ts_tensor **zero_point) {
    const char *op = "histogram_observer_qparams";
    tsi_init();
    if (!scale || !zero_point)
        return tsi_error_set(TS_ERR_ARG, "%s: scale or zero_point is NULL", op);
    *scale = *zero_point = NULL;
    if (!f32_vec(op, min_val, "min_val", 0) || !f32_vec(op, max_val, "max_val", 0))
        return ts_error();
    float mn, mx;
    ts_status st;
    if ((st = read_scalar(min_val, &mn)) != TS_OK || (st = read_scalar(max_val, &mx)) != TS_OK)
        return st;
    if (mn == INFINITY && mx == -INFINITY) /* nothing observed: scale 1, zero point 0 */
        return ts_calculate_qparams(min_val, max_val, quant_min, quant_max, symmetric,
                                    symmetric_zero_point, eps, scale, zero_point);
    float l, h;
    ts_tensor *lo, *hi;
    if ((st = search_core(op, histogram, min_val, max_val, dst_nbins, &l, &h)) != TS_OK ||
        (st = pair_out(op, l, h, tsi_device(min_val), &lo, &hi)) != TS_OK)
        return st;
    st = ts_calculate_qparams(lo, hi, quant_min, quant_max, symmetric, symmetric_zero_point, eps,
                              scale, zero_point);
    ts_release(lo);
    ts_release(hi);
    return st;
}
