/* ops_window.c — ONNX's signal windows (HannWindow, HammingWindow, BlackmanWindow:
 * ts_signal_window's general cosine windows) and MelWeightMatrix, computed in float64 on the
 * context's device and cast to output_datatype. */
#include <math.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ windows */
typedef enum window_kind { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } window_kind;

static bool check_window(const tso_node *n) {
    int32_t t = (int32_t)tso_attr_int(n, "output_datatype", 1);
    if (tso_dtype_from_onnx(t) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "output_datatype %s, which Tessera lacks",
                        tso_onnx_type_name(t));
    return true;
}

/* ts_signal_window's general cosine window in float64, cast to output_datatype. ONNX's size 1
 * is the formula at n = 0 (the reference's): periodic sum_i (-1)^i a_i, symmetric 0 / 0 (NaN). */
static bool run_window(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                       window_kind kind) {
    static const double hann[2] = {0.5, 0.5}, hamming[2] = {25.0 / 46.0, 21.0 / 46.0},
                        blackman[3] = {0.42, 0.5, 0.08};
    const double *a = kind == WIN_HANN ? hann : kind == WIN_HAMMING ? hamming : blackman;
    const int na = kind == WIN_BLACKMAN ? 3 : 2;
    int64_t size;
    if (!tso_read_int(n, in[0], &size, "size")) return false;
    if (size < 0) return tso_fail(n, TS_ERR_ARG, "size must be non-negative");
    bool periodic = tso_attr_int(n, "periodic", 1) != 0;
    ts_dtype dt = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "output_datatype", 1));
    ts_opts o = {.dtype = TS_F64, .device = c->device};
    if (size == 1) {
        double v = periodic ? 0 : NAN;
        for (int i = 0; periodic && i < na; i++) v += i % 2 ? -a[i] : a[i];
        TSO_DONE(ts_to_dtype(ts_full(TS_SHAPE(1), v, o), dt));
    }
    TSO_DONE(
        ts_to_dtype(ts_signal_window(TS_WINDOW_GENERAL_COSINE, size, a, na, !periodic, o), dt));
}

TSO_RUN(run_hann) { return run_window(c, n, in, out, WIN_HANN); }
TSO_RUN(run_hamming) { return run_window(c, n, in, out, WIN_HAMMING); }
TSO_RUN(run_blackman) { return run_window(c, n, in, out, WIN_BLACKMAN); }

/* ------------------------------------------------------------------ MelWeightMatrix */
/* The triangle edges are integer spectrogram bins computed from the scalar inputs on the host
 * (shape-like numbers, as the reference computes them); the matrix is built on the device. */
static bool mel_edges(const tso_node *n, ts_tensor *const *in, int64_t *mels, int64_t *dft,
                      int64_t **edges) {
    int64_t rate;
    double lo_hz, hi_hz;
    if (!tso_read_int(n, in[0], mels, "num_mel_bins") ||
        !tso_read_int(n, in[1], dft, "dft_length") ||
        !tso_read_int(n, in[2], &rate, "sample_rate") ||
        !tso_read_scalar(n, in[3], &lo_hz, "lower_edge_hertz") ||
        !tso_read_scalar(n, in[4], &hi_hz, "upper_edge_hertz"))
        return false;
    if (*mels <= 0 || *dft <= 0 || rate <= 0 || *mels > (1 << 20))
        return tso_fail(n, TS_ERR_ARG, "num_mel_bins, dft_length and sample_rate must be > 0");
    int64_t count = *mels + 2;
    *edges = malloc((size_t)count * sizeof **edges);
    if (!*edges) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    double lo_mel = 2595 * log10(1 + lo_hz / 700), hi_mel = 2595 * log10(1 + hi_hz / 700);
    double step = (hi_mel - lo_mel) / (double)count;
    for (int64_t i = 0; i < count; i++) {
        double hz = 700 * expm1((i * step + lo_mel) / 2595 * log(10));
        (*edges)[i] = (int64_t)floor((double)(*dft + 1) * hz / (double)rate);
    }
    return true;
}

static bool check_mel(const tso_node *n) { return check_window(n); }

/* a [1, mels] row of edges[first .. first + mels - 1] as float64 */
static ts_tensor *mel_row(tso_ctx *c, const int64_t *edges, int64_t first, int64_t mels) {
    return ts_to_dtype(
        ts_reshape(tso_ints_tensor(c, edges + first, (int)mels, true), TS_SHAPE(1, mels)), TS_F64);
}

TSO_RUN(run_mel) {
    int64_t mels, dft, *edges = NULL;
    if (!mel_edges(n, in, &mels, &dft, &edges)) return false;
    ts_tensor *lo = mel_row(c, edges, 0, mels), *ce = mel_row(c, edges, 1, mels);
    ts_tensor *hi = mel_row(c, edges, 2, mels);
    free(edges);
    ts_tensor *j = ts_reshape(
        ts_arange(0, (double)(dft / 2 + 1), 1, (ts_opts){.dtype = TS_F64, .device = c->device}),
        TS_SHAPE(dft / 2 + 1, 1));
    /* the reference writes the rising side (j in [lo, ce]; only 1 at ce when lo == ce), then the
     * falling side (j in [ce, hi)) over it */
    ts_tensor *rise = ts_div(ts_sub(j, lo), ts_clamp_min(ts_sub(ce, lo), 1));
    ts_tensor *in_rise = ts_logical_and(ts_ge(j, lo), ts_le(j, ce));
    ts_tensor *fall = ts_div(ts_sub(hi, j), ts_clamp_min(ts_sub(hi, ce), 1));
    ts_tensor *in_fall = ts_logical_and(ts_ge(j, ce), ts_lt(j, hi));
    ts_tensor *peak = ts_logical_and(ts_eq(j, ce), ts_eq(lo, ce));
    ts_tensor *zero = ts_zeros_like(rise);
    ts_tensor *w =
        ts_where(in_fall, fall, ts_where(peak, ts_ones_like(zero), ts_where(in_rise, rise, zero)));
    ts_dtype dt = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "output_datatype", 1));
    TSO_DONE(ts_to_dtype(w, dt));
}

const tso_op_def tso_ops_window[] = {
    {"HannWindow", 17, run_hann, check_window, false},
    {"HammingWindow", 17, run_hamming, check_window, false},
    {"BlackmanWindow", 17, run_blackman, check_window, false},
    {"MelWeightMatrix", 17, run_mel, check_mel, false},
    {NULL, 0, NULL, NULL, false},
};
