/* gcd.c — gcd and lcm of integer tensors (broadcast, promoted): Euclid's steps on every pair at
 * once until every pair is done, from the elementwise ops (every device; no gradient). */
#include "autograd/autograd.h"
#include "ops/compose.h"
#include "ops/elementwise.h"

static bool check2(const char *op, ts_tensor *a, const char *na, ts_tensor *b, const char *nb) {
    tsi_init();
    bool ok = tsi_check_input(op, a, na);
    return tsi_check_input(op, b, nb) && ok;
}

/* ------------------------------------------------------------------ gcd, lcm */
static ts_tensor *gcd_run(const char *op, ts_tensor *a, ts_tensor *b) {
    if (!check2(op, a, "input", b, "other")) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    if (!tsi_is_int(r))
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s_cpu\" not implemented for '%s'", op, op,
                             tsi_torch_scalar_name(r)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s)) return NULL;
    /* C's loop on every pair at once: while (x != 0) { c = x; x = y % x; y = c; } return y */
    ts_tensor *x = ts_abs(ts_expand(ts_to_dtype(ts_detach(a), r), s));
    ts_tensor *y = ts_abs(ts_expand(ts_to_dtype(ts_detach(b), r), s));
    if (!x || !y || tsi_numel(s) == 0) return ts_clone(y);
    for (int it = 0; it < 200 && x; it++) {
        ts_tensor *nz = ts_ne_scalar(x, 0);
        ts_tensor *any = ts_any(nz, (ts_dims){0}, false);
        if (!any || ts_item(any) == 0) break;
        ts_tensor *c = x, *safe = ts_where(nz, x, ts_ones_like(x));
        x = ts_where(nz, ts_fmod(y, safe), x); /* C's %: the dividend's sign */
        y = ts_where(nz, c, y);
    }
    return x ? ts_clone(y) : NULL;
}

ts_tensor *ts_gcd(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    return finish(gcd_run("gcd", a, b));
}

ts_tensor *ts_lcm(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    ts_tensor *g = gcd_run("lcm", a, b);
    if (!g) return finish(NULL);
    /* g == 0 ? 0 : |a / g * b| */
    ts_tensor *zero = ts_eq_scalar(g, 0);
    ts_tensor *gs = ts_where(zero, ts_ones_like(g), g);
    ts_tensor *q =
        ts_div_rounding(ts_to_dtype(ts_detach(a), ts_dtype_of(g)), gs, TS_ROUNDING_TRUNC);
    ts_tensor *y = ts_abs(ts_mul(q, ts_to_dtype(ts_detach(b), ts_dtype_of(g))));
    return finish(ts_where(zero, ts_zeros_like(g), y));
}
