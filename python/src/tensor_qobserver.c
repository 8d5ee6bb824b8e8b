/* tensor_qobserver.c — the observers' statistics behind tessera.ao.quantization.observer
 * (include/tessera/quant.h) in tessera._C: _histogram_observer_update / _search,
 * _moving_average_minmax_update, _per_channel_minmax_update,
 * _moving_average_per_channel_minmax_update. */
#include "tensor_impl.h"
#include "tessera/quant.h"

/* _histogram_observer_update(histogram, min_val, max_val, input): the buffers in place; None */
static PyObject *f__histogram_observer_update SIG {
    (void)mod;
    const char *fn = "histogram_observer_update";
    PARSE("histogram_observer_update", 4, "histogram", "min_val", "max_val", "input");
    ts_tensor *h = TARG(0, fn), *mn = h ? TARG(1, fn) : NULL, *mx = mn ? TARG(2, fn) : NULL,
              *x = mx ? TARG(3, fn) : NULL;
    if (!x || tsp_enter()) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_histogram_observer_update(h, mn, mx, x));
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* _histogram_observer_search(histogram, min_val, max_val, dst_nbins) -> (new_min, new_max) */
static PyObject *f__histogram_observer_search SIG {
    (void)mod;
    const char *fn = "histogram_observer_search";
    PARSE("histogram_observer_search", 4, "histogram", "min_val", "max_val", "dst_nbins");
    ts_tensor *h = TARG(0, fn), *mn = h ? TARG(1, fn) : NULL, *mx = mn ? TARG(2, fn) : NULL;
    int64_t dst;
    if (!mx || tsp_int_arg(a[3], &dst, fn, "dst_nbins") < 0 || tsp_enter()) return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_histogram_observer_search(h, mn, mx, dst, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

/* _histogram_observer_qparams(histogram, min_val, max_val, dst_nbins, quant_min, quant_max,
 * symmetric, symmetric_zero_point, eps) -> (scale float32 [1], zero_point int64 [1]) */
static PyObject *f__histogram_observer_qparams SIG {
    (void)mod;
    const char *fn = "histogram_observer_qparams";
    PARSE("histogram_observer_qparams", 9, "histogram", "min_val", "max_val", "dst_nbins",
          "quant_min", "quant_max", "symmetric", "symmetric_zero_point", "eps");
    ts_tensor *h = TARG(0, fn), *mn = h ? TARG(1, fn) : NULL, *mx = mn ? TARG(2, fn) : NULL;
    int64_t dst, qmin, qmax, szp;
    bool sym;
    double eps;
    if (!mx || tsp_int_arg(a[3], &dst, fn, "dst_nbins") < 0 ||
        tsp_int_arg(a[4], &qmin, fn, "quant_min") < 0 ||
        tsp_int_arg(a[5], &qmax, fn, "quant_max") < 0 ||
        tsp_bool_arg(a[6], false, &sym, fn, "symmetric") < 0 ||
        tsp_int_arg(a[7], &szp, fn, "symmetric_zero_point") < 0 ||
        tsp_double_arg(a[8], 0, &eps, fn, "eps") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_histogram_observer_qparams(h, mn, mx, dst, qmin, qmax, sym, szp, eps, &r[0],
                                                 &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

/* _moving_average_minmax_update(min_val, max_val, input, averaging_constant): in place; None */
static PyObject *f__moving_average_minmax_update SIG {
    (void)mod;
    const char *fn = "moving_average_minmax_update";
    PARSE("moving_average_minmax_update", 4, "min_val", "max_val", "input", "averaging_constant");
    ts_tensor *mn = TARG(0, fn), *mx = mn ? TARG(1, fn) : NULL, *x = mx ? TARG(2, fn) : NULL;
    double c;
    if (!x || tsp_double_arg(a[3], 0, &c, fn, "averaging_constant") < 0 || tsp_enter()) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_moving_average_minmax_update(mn, mx, x, c));
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* _per_channel_minmax_update(min_val, max_val, input, ch_axis) -> (min_val, max_val) */
static PyObject *f__per_channel_minmax_update SIG {
    (void)mod;
    const char *fn = "per_channel_minmax_update";
    PARSE("per_channel_minmax_update", 4, "min_val", "max_val", "input", "ch_axis");
    ts_tensor *mn = TARG(0, fn), *mx = mn ? TARG(1, fn) : NULL, *x = mx ? TARG(2, fn) : NULL;
    int64_t axis;
    if (!x || tsp_int_arg(a[3], &axis, fn, "ch_axis") < 0 || tsp_enter()) return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_per_channel_minmax_update(mn, mx, x, axis, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

/* _moving_average_per_channel_minmax_update(min_val, max_val, input, ch_axis, averaging_constant)
 * -> (min_val, max_val) */
static PyObject *f__moving_average_per_channel_minmax_update SIG {
    (void)mod;
    const char *fn = "moving_average_per_channel_minmax_update";
    PARSE("moving_average_per_channel_minmax_update", 5, "min_val", "max_val", "input", "ch_axis",
          "averaging_constant");
    ts_tensor *mn = TARG(0, fn), *mx = mn ? TARG(1, fn) : NULL, *x = mx ? TARG(2, fn) : NULL;
    int64_t axis;
    double c;
    if (!x || tsp_int_arg(a[3], &axis, fn, "ch_axis") < 0 ||
        tsp_double_arg(a[4], 0, &c, fn, "averaging_constant") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_moving_average_per_channel_minmax_update(mn, mx, x, axis, c, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

#define QFN(name)                                                                                  \
    { #name, (PyCFunction)(void (*)(void))f_##name, METH_FASTCALL | METH_KEYWORDS, NULL }
PyMethodDef tsp_tensor_qobserver_functions[] = {
    QFN(_histogram_observer_update),
    QFN(_histogram_observer_search),
    QFN(_histogram_observer_qparams),
    QFN(_moving_average_minmax_update),
    QFN(_per_channel_minmax_update),
    QFN(_moving_average_per_channel_minmax_update),
    {NULL, NULL, 0, NULL},
};
