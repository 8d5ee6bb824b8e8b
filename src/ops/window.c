/* window.c — torch.signal.windows (issue 76): the window functions' values with PyTorch's
 * formulas, computed in float64 on the host (one value per point, as a factory: no inputs to
 * differentiate), then converted to the dtype and device asked for. tessera.signal.windows, the
 * torch.*_window factories and the ONNX importer's HannWindow / HammingWindow / BlackmanWindow all
 * call ts_signal_window. */
#include <math.h>
#include <stdlib.h>

#include "core/internal.h"

static const double PI = 3.14159265358979323846;

static const char *const NAMES[] = {"general_cosine", "bartlett", "cosine",
                                    "exponential",    "gaussian", "kaiser"};

/* the modified Bessel function I0 by its series (every term positive: no cancellation) */
static double bessel_i0(double x) {
    double term = 1, s = 1;
    for (int k = 1; term > 1e-17 * s && k < 1000; k++) {
        double h = x / (2.0 * k);
        term *= h * h;
        s += term;
    }
    return s;
}

/* the value at point n of the symmetric window whose last index is N */
static double value(ts_window_kind kind, double n, double N, const double *p, int np) {
    switch (kind) {
    case TS_WINDOW_GENERAL_COSINE: {
        double s = 0;
        for (int i = 0; i < np; i++) s += (i % 2 ? -p[i] : p[i]) * cos(2 * PI * i * n / N);
        return s;
    }
    case TS_WINDOW_BARTLETT:
        return 1 - fabs(2 * n / N - 1);
    case TS_WINDOW_COSINE:
        return sin(PI * (n + 0.5) / (N + 1));
    case TS_WINDOW_EXPONENTIAL: {
        double c = np > 1 && !isnan(p[1]) ? p[1] : N / 2;
        return exp(-fabs(n - c) / p[0]);
    }
    case TS_WINDOW_GAUSSIAN: {
        double z = (n - N / 2) / p[0];
        return exp(-0.5 * z * z);
    }
    case TS_WINDOW_KAISER: {
        double r = 2 * n / N - 1;
        return bessel_i0(p[0] * sqrt(fmax(0, 1 - r * r))) / bessel_i0(p[0]);
    }
    }
    return NAN;
}

/* the parameters' count and range; false with PyTorch's message */
static bool check(ts_window_kind kind, const char *name, const double *p, int np, bool sym) {
    static const int need[] = {-1, 0, 0, 1, 1, 1}; /* -1: at least one; exponential: 1 or 2 */
    if (np < 0 || (np > 0 && !p))
        return tsi_error_set(TS_ERR_ARG, "%s: %d parameters at %p", name, np, (const void *)p),
               false;
    if (kind == TS_WINDOW_GENERAL_COSINE && np < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: Coefficients cannot be empty", name), false;
    if (need[kind] >= 0 && np != need[kind] && !(kind == TS_WINDOW_EXPONENTIAL && np == 2))
        return tsi_error_set(TS_ERR_ARG, "%s: expected %d parameters, got %d", name, need[kind],
                             np),
               false;
    for (int i = 0; i < np; i++)
        if (!isfinite(p[i]) && !(kind == TS_WINDOW_EXPONENTIAL && i == 1 && isnan(p[i])))
            return tsi_error_set(TS_ERR_ARG, "%s: parameter %d is %g, not a finite number", name, i,
                                 p[i]),
                   false;
    switch (kind) {
    case TS_WINDOW_EXPONENTIAL:
        if (!(p[0] > 0))
            return tsi_error_set(TS_ERR_ARG, "%s: Tau must be positive, got: %g instead.", name,
                                 p[0]),
                   false;
        if (sym && np > 1 && !isnan(p[1]))
            return tsi_error_set(TS_ERR_ARG, "%s: Center must be None for symmetric windows", name),
                   false;
        return true;
    case TS_WINDOW_GAUSSIAN:
        if (!(p[0] > 0))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Standard deviation must be positive, got: %g instead.", name,
                                 p[0]),
                   false;
        return true;
    case TS_WINDOW_KAISER:
        if (p[0] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: beta must be non-negative, got: %g instead.",
                                 name, p[0]),
                   false;
        return true;
    default:
        return true;
    }
}

ts_tensor *ts_signal_window(ts_window_kind kind, int64_t M, const double *params, int nparams,
                            bool sym, ts_opts o) {
    tsi_init();
    if ((unsigned)kind > TS_WINDOW_KAISER)
        return tsi_error_set(TS_ERR_ARG, "signal_window: unknown window kind %d", (int)kind), NULL;
    const char *name = NAMES[kind];
    if (M < 0)
        return tsi_error_set(TS_ERR_ARG, "%s requires non-negative window length, got M=%lld", name,
                             (long long)M),
               NULL;
    ts_dtype dt = tsi_resolve_dtype(o.dtype);
    if (!ts_dtype_is_floating(dt))
        return tsi_error_set(TS_ERR_ARG, "%s expects float32 or float64 dtypes, got: %s", name,
                             ts_dtype_name(dt)),
               NULL;
    if (!check(kind, name, params, nparams, sym)) return NULL;
    double *v = malloc((size_t)(M ? M : 1) * sizeof *v);
    if (!v)
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld points", name,
                             (long long)M),
               NULL;
    /* a periodic window is the symmetric window of M + 1 points without its last */
    double N = sym ? (double)M - 1 : (double)M;
    /* one point: 1 (PyTorch's), but for an exponential window's own center */
    bool own_center = kind == TS_WINDOW_EXPONENTIAL && nparams > 1 && !isnan(params[1]);
    for (int64_t i = 0; i < M; i++)
        v[i] = M == 1 && !own_center ? 1 : value(kind, (double)i, N, params, nparams);
    o.dtype = dt;
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(M), v, o);
    free(v);
    return t;
}
