/* where.c — where and masked_fill front ends (both run the backend's where kernel). */
#include <float.h>

#include "amp/autocast.h"
#include "autograd/trace.h"
#include "ops/elementwise.h"

static inline bool dev_eq(ts_device a, ts_device b) {
    return a.type == b.type && a.index == b.index;
}

/* x on dev with dtype dt: x itself (*tmp NULL) or a temporary left in *tmp for the caller to
 * release; NULL on error. Only a 0-dim cpu tensor can be off dev here (tsi_same_device). */
static ts_tensor *prepare(const char *op, ts_tensor *x, ts_device dev, ts_dtype dt,
                          ts_tensor **tmp) {
    *tmp = NULL;
    if (dev_eq(tsi_device(x), dev) && x->dtype == dt) return x;
    ts_tensor *moved = tsi_to_device(op, x, dev);
    if (!moved) return NULL;
    *tmp = tsi_cast(op, moved, dt);
    ts_release(moved);
    return *tmp;
}

/* torch's where / masked_fill accept uint8 conditions (deprecated) besides bool */
static bool check_condition(const char *op, const ts_tensor *cond, const char *what) {
    if (cond->dtype == TS_BOOL || cond->dtype == TS_U8) return true;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: expected %s to be a boolean tensor, but got a tensor with dtype %s "
                         "(%s: %s)",
                         op, what, tsi_torch_scalar_name(cond->dtype), what, tsi_desc(cond)),
           false;
}

static ts_tensor *where_op(ts_tensor *cond, ts_tensor *a, ts_tensor *b) {
    const char *op = "where";
    tsi_init();
    if (!tsi_check_input(op, cond, "cond") || !tsi_check_input(op, a, "a") ||
        !tsi_check_input(op, b, "b"))
        return NULL;
    ts_tensor *const ts[3] = {cond, a, b};
    ts_device dev;
    if (!tsi_same_device(op, ts, 3, true, &dev)) return NULL;
    if (!check_condition(op, cond, "condition")) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    ts_shape s1, s;
    if (!tsi_broadcast_shapes(op, cond->shape, a->shape, &s1) ||
        !tsi_broadcast_shapes(op, s1, b->shape, &s))
        return NULL;
    tsi_log_op(op, dev);
    ts_tensor *tc = NULL, *ta = NULL, *tb = NULL, *out = NULL;
    ts_tensor *c2 = prepare(op, cond, dev, TS_BOOL, &tc);
    ts_tensor *a2 = c2 ? prepare(op, a, dev, r, &ta) : NULL;
    ts_tensor *b2 = a2 ? prepare(op, b, dev, r, &tb) : NULL;
    if (b2) out = tsi_new(op, s, r, dev);
    if (out && tsi_numel(s) > 0) {
        ts_kview ko = tsi_kview(out), kc = tsi_ew_kview_to(c2, &s), ka = tsi_ew_kview_to(a2, &s),
                 kb = tsi_ew_kview_to(b2, &s);
        tsi_be(out)->where(tsi_be(out), tsi_dev_index(out), &ko, &kc, &ka, &kb);
    }
    ts_release(tc);
    ts_release(ta);
    ts_release(tb);
    ts_tensor *const ins[2] = {a, b};
    if (tsi_needs_graph(ins, 2)) out = tsi_ew_record_where(cond, a, b, out);
    return tsi_own(out);
}

ts_tensor *ts_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b) {
    /* autocast's promote policy: a and b in the wider of their floating dtypes */
    ts_tensor *const ins[3] = {cond, a, b};
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "where", &a, &b);
    return tsi_trace("where", ins, 3, tsi_autocast_exit(&ac, where_op(cond, a, b)), NULL, 0, NULL,
                     0);
}

/* ------------------------------------------------------------------ masked_fill */
/* PyTorch refuses a fill value the tensor's dtype cannot hold (infinities and NaN are fine for
 * floats; bool takes anything). */
static bool value_fits(ts_dtype dt, double v) {
    switch (dt) {
    case TS_F32:
        return !isfinite(v) || fabs(v) <= FLT_MAX;
    case TS_F16:
        return !isfinite(v) || fabs(v) <= 65504.0;
    case TS_BF16:
        return !isfinite(v) || fabs(v) <= 3.3895313892515355e38;
    case TS_I64:
        return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case TS_I32:
        return v >= -2147483648.0 && v <= 2147483647.0;
    case TS_U8:
        return v >= 0.0 && v <= 255.0;
    case TS_I8:
        return v >= -128.0 && v <= 127.0;
    case TS_I16:
        return v >= -32768.0 && v <= 32767.0;
    case TS_U16:
        return v >= 0.0 && v <= 65535.0;
    case TS_U32:
        return v >= 0.0 && v <= 4294967295.0;
    case TS_U64:
        return v >= 0.0 && v < 18446744073709551616.0;
    default:
        return true;
    }
}

/* A new reference (not in a scope), or NULL. */
static ts_tensor *masked_fill_op(const char *op, ts_tensor *t, ts_tensor *mask, double v,
                                 bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !tsi_check_input(op, mask, "mask")) return NULL;
    ts_tensor *const ts[2] = {t, mask};
    ts_device dev;
    if (!tsi_same_device(op, ts, 2, true, &dev)) return NULL;
    if (inplace && !dev_eq(tsi_device(t), dev)) { /* the destination decides the device */
        tsi_same_device(op, ts, 2, false, &dev);
        return NULL;
    }
    if (!check_condition(op, mask, "mask")) return NULL;
    if (!value_fits(t->dtype, v))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: value cannot be converted to type %s without overflow (value "
                             "%g, input: %s)",
                             op, ts_dtype_name(t->dtype), v, tsi_desc(t)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, t->shape, mask->shape, &s)) return NULL;
    if (inplace && !tsi_ew_check_inplace(op, t, t->dtype, &s)) return NULL;
    tsi_log_op(op, dev);

    ts_tensor *tm, *tt = NULL, *vt = NULL, *out = NULL;
    ts_tensor *m2 = prepare(op, mask, dev, TS_BOOL, &tm);
    if (!m2) return NULL;
    const bool any = tsi_numel(s) > 0;
    if (!inplace) {
        ts_tensor *t2 = prepare(op, t, dev, t->dtype, &tt);
        if (t2) vt = tsi_new(op, (ts_shape){0}, t->dtype, dev);
        if (vt) out = tsi_new(op, s, t->dtype, dev);
        if (out && any) { /* the value where the mask is set, t elsewhere: one pass */
            const ts_backend *be = tsi_be(out);
            const int idx = tsi_dev_index(out);
            ts_kview kv = tsi_kview(vt);
            be->fill(be, idx, &kv, v);
            ts_kview ko = tsi_kview(out), km = tsi_ew_kview_to(m2, &s),
                     kt = tsi_ew_kview_to(t2, &s);
            kv = tsi_ew_kview_to(vt, &s);
            be->where(be, idx, &ko, &km, &kv, &kt);
        }
    } else {
        if (!tm && tsi_ew_overlaps(t, m2)) m2 = tm = tsi_ew_clone(op, mask); /* partly overlaps */
        if (m2) vt = tsi_new(op, (ts_shape){0}, t->dtype, dev);
        if (vt) {
            const ts_backend *be = tsi_be(t);
            const int idx = tsi_dev_index(t);
            ts_kview kv = tsi_kview(vt);
            be->fill(be, idx, &kv, v);
            if (any) {
                ts_kview kt = tsi_kview(t), km = tsi_ew_kview_to(m2, &s);
                kv = tsi_ew_kview_to(vt, &s);
                be->where(be, idx, &kt, &km, &kv, &kt);
            }
            tsi_bump_version(t);
            out = ts_retain(t);
        }
    }
    ts_release(tm);
    ts_release(tt);
    ts_release(vt);
    return out;
}

/* Records the node when the graph needs one (in place: made before the op runs). */
static ts_tensor *masked_fill_run(const char *op, ts_tensor *t, ts_tensor *mask, double v,
                                  bool inplace) {
    if (!t || !mask || !tsi_needs_graph(&t, 1)) return masked_fill_op(op, t, mask, v, inplace);
    if (!inplace)
        return tsi_ew_record_masked_fill(op, t, mask, masked_fill_op(op, t, mask, v, false));
    ts_node *n = tsi_ew_begin_masked_fill(op, t, mask);
    return n ? tsi_ew_finish(n, masked_fill_op(op, t, mask, v, true)) : NULL;
}

ts_tensor *ts_masked_fill(ts_tensor *t, ts_tensor *mask, double v) {
    ts_tensor *y = masked_fill_run("masked_fill", t, mask, v, false);
    return tsi_own(tsi_trace("masked_fill", (ts_tensor *[]){t, mask}, 2, y, NULL, 0, &v, 1));
}
ts_tensor *ts_masked_fill_(ts_tensor *t, ts_tensor *mask, double v) {
    ts_tensor *y = masked_fill_run("masked_fill_", t, mask, v, true);
    return tsi_own(tsi_trace("masked_fill_", (ts_tensor *[]){t, mask}, 2, y, NULL, 0, &v, 1));
}
