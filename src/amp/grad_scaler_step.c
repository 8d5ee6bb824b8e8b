/* grad_scaler_step.c — GradScaler.unscale_ and step: the optimizer's gradients divided by the
 * scale in place (one fused kernel call per device) and the step skipped on Inf/NaN. */
#include <stdlib.h>

#include "amp/grad_scaler_internal.h"
#include "core/capture.h"
#include "core/profiler_hooks.h"
#include "optim/optim_internal.h"

/* Two elements of t share memory (a dimension of stride 0): unscaling in place would divide
 * them more than once (PyTorch refuses to write such tensors too). */
static bool has_internal_overlap(const ts_tensor *t) {
    for (int d = 0; d < t->shape.ndim; d++)
        if (t->strides[d] == 0 && t->shape.dims[d] > 1) return true;
    return false;
}

/* Every gradient can be unscaled: float, not float16 (PyTorch's allow_fp16=False), writable, on a
 * device with the kernel. Checked before any gradient changes, so a refusal changes nothing. */
static bool check_grads(const char *op, ts_optim *opt) {
    for (int i = 0; i < opt->n_params; i++) {
        ts_tensor *g = opt->params[i].p->grad;
        if (!g) continue;
        if (g->dtype == TS_F16)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: Attempting to unscale FP16 gradients (parameter %d, %s); "
                                 "keep the parameters in float32 and let autocast lower the "
                                 "computation",
                                 op, i, tsi_desc(g)),
                   false;
        if (!tsi_is_float(g->dtype))
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: the gradient of parameter %d (%s) is not floating point", op,
                                 i, tsi_desc(g)),
                   false;
        if (has_internal_overlap(g))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: the gradient of parameter %d (%s) has elements that share "
                                 "memory (an expanded view) and cannot be unscaled in place",
                                 op, i, tsi_desc(g)),
                   false;
        if (!tsi_be(g)->amp_unscale)
            return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no unscale kernel on %s", op,
                                 ts_device_str(tsi_device(g)));
    }
    return true;
}

/* Unscales the gradients on one device: a found_inf (f32 [1], zero, then set by the kernel) and
 * one kernel call over all of them. Appends the found_inf to st; false on failure. */
static bool unscale_device(const char *op, ts_optim *opt, ts_device dev, ts_tensor *inv_scale,
                           ts_kview *kv, tsi_gs_optim_state *st) {
    int n = 0;
    for (int i = 0; i < opt->n_params; i++) {
        ts_tensor *g = opt->params[i].p->grad;
        if (g && tsi_device_eq(tsi_device(g), dev)) kv[n++] = tsi_kview(g);
    }
    ts_tensor *inv = ts_to(inv_scale, dev); /* PyTorch's _MultiDeviceReplicator */
    ts_tensor *found = inv ? tsi_new(op, TS_SHAPE(1), TS_F32, dev) : NULL;
    if (!found) return false;
    tsi_gs_fill(found, 0.0);
    const ts_backend *be = tsi_be(found);
    ts_kview kf = tsi_kview(found), ki = tsi_kview(inv);
    tsi_log_op(op, dev);
    be->amp_unscale(be, dev.index, kv, n, &kf, &ki);
    TSI_PROF_OP_END();
    for (int i = 0; i < opt->n_params; i++) {
        ts_tensor *g = opt->params[i].p->grad;
        if (g && tsi_device_eq(tsi_device(g), dev)) tsi_bump_version(g);
    }
    st->found_inf[st->n_found++] = found;
    return true;
}

/* PyTorch's _unscale_grads_ for one optimizer: its gradients grouped by device. */
static bool unscale_grads(const char *op, ts_grad_scaler *s, ts_optim *opt,
                          tsi_gs_optim_state *st) {
    int n = opt->n_params;
    ts_kview *kv = malloc((size_t)(n ? n : 1) * sizeof *kv);
    ts_device *devs = malloc((size_t)(n ? n : 1) * sizeof *devs);
    ts_tensor **found = malloc((size_t)(n ? n : 1) * sizeof *found);
    if (!kv || !devs || !found) {
        free(kv), free(devs), free(found);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    }
    int n_dev = 0;
    for (int i = 0; i < n; i++) {
        ts_tensor *g = opt->params[i].p->grad;
        if (!g) continue;
        bool seen = false;
        for (int k = 0; k < n_dev && !seen; k++) seen = tsi_device_eq(devs[k], tsi_device(g));
        if (!seen) devs[n_dev++] = tsi_device(g);
    }
    st->found_inf = found;
    st->n_found = 0;
    ts_scope_begin();
    ts_no_grad_begin();
    /* the reciprocal in f64, as PyTorch does: f32 division can be imprecise under some
     * compile options */
    ts_tensor *inv = ts_to_dtype(ts_reciprocal(ts_to_dtype(s->scale, TS_F64)), TS_F32);
    bool ok = inv != NULL;
    for (int k = 0; ok && k < n_dev; k++) ok = unscale_device(op, opt, devs[k], inv, kv, st);
    ts_no_grad_end();
    ts_scope_end();
    free(kv), free(devs);
    return ok;
}

/* Back to the start of the iteration for this optimizer (READY, no inf checks): after a failure
 * the gradients are undefined, and the retried iteration unscales its new ones afresh. */
static void forget(tsi_gs_optim_state *st) {
    for (int k = 0; k < st->n_found; k++) ts_release(st->found_inf[k]);
    free(st->found_inf);
    st->found_inf = NULL;
    st->n_found = 0;
    st->stage = TSI_GS_READY;
}

/* unscale_ under the name of the op the user called (unscale_ itself or step). */
static ts_status unscale(const char *op, ts_grad_scaler *s, ts_optim *opt, tsi_gs_optim_state *st) {
    if (st->stage == TSI_GS_UNSCALED)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: unscale_() has already been called on this optimizer since the "
                             "last update()",
                             op);
    if (st->stage == TSI_GS_STEPPED)
        return tsi_error_set(TS_ERR_STATE, "%s: unscale_() is being called after step()", op);
    if (!check_grads(op, opt)) return ts_error();
    if (!unscale_grads(op, s, opt, st)) {
        /* a device failed (out of memory): the gradients are partly unscaled and must be
         * computed again; the optimizer starts the iteration over */
        forget(st);
        return ts_error() ? ts_error() : TS_ERR_OOM;
    }
    st->stage = TSI_GS_UNSCALED;
    return TS_OK;
}

/* Common checks of unscale_ and step; the optimizer's state, or NULL with the error set. */
static tsi_gs_optim_state *begin(const char *op, ts_grad_scaler *s, ts_optim *opt) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op), NULL;
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op), NULL;
    if (!tsi_gs_check_scale(op, s)) return NULL;
    return tsi_gs_state_for(op, s, opt);
}

ts_status ts_grad_scaler_unscale_(ts_grad_scaler *s, ts_optim *opt) {
    static const char op[] = "grad_scaler_unscale_";
    tsi_init();
    if (s && !s->enabled) return TS_OK;
    if (ts_error()) return ts_error(); /* gradients of a failed backward are not unscaled */
    tsi_gs_optim_state *st = begin(op, s, opt);
    return st ? unscale(op, s, opt, st) : ts_error();
}

/* Whether step() combines found-infs over several processes (ts_grad_scaler_set_process_group). */
static bool agrees(const ts_grad_scaler *s) {
    return tsi_dist_agree_size && tsi_dist_agree_size(s->group) > 1;
}

/* step() inside a capture: the optimizer step is recorded to skip itself on the device when
 * found_inf is nonzero (PyTorch's capturable step with found_inf), no host read. */
static ts_status captured_step(const char *op, const ts_grad_scaler *s, ts_optim *opt,
                               tsi_gs_optim_state *st) {
    if (st->n_found != 1 || agrees(s)) {
        tsi_capture_refuse(op, st->n_found != 1 ? "gradients on several devices"
                                                : "the processes' agreement on skipping the step");
        return ts_error();
    }
    const ts_kview found = tsi_kview(st->found_inf[0]);
    ts_status r = tsi_optim_step_unless(opt, &found);
    if (r) {
        forget(st);
        return r;
    }
    st->stage = TSI_GS_STEPPED;
    return TS_OK;
}

/* A step that fails before the processes' found-inf agreement still takes part in it, failing,
 * so that the other processes fail with it instead of waiting for this one (tsi_dist_agree_max
 * with an error pending). Returns the error. */
static ts_status fail_together(const ts_grad_scaler *s) {
    if (s && agrees(s)) tsi_dist_agree_max(s->group, 1);
    return ts_error();
}

ts_status ts_grad_scaler_step(ts_grad_scaler *s, ts_optim *opt, bool *stepped) {
    static const char op[] = "grad_scaler_step";
    tsi_init();
    if (stepped) *stepped = false;
    if (s && !s->enabled) {
        if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
        ts_status r = ts_optim_step(opt);
        if (stepped) *stepped = r == TS_OK;
        return r;
    }
    /* as ts_optim_step: no step on the gradients of a failed forward or backward */
    if (ts_error()) return fail_together(s);
    tsi_gs_optim_state *st = begin(op, s, opt);
    if (!st) return fail_together(s);
    if (st->stage == TSI_GS_STEPPED) {
        tsi_error_set(TS_ERR_STATE, "%s: step() has already been called since the last update()",
                      op);
        return fail_together(s);
    }
    if (st->stage == TSI_GS_READY && unscale(op, s, opt, st)) return fail_together(s);
    if (st->n_found == 0) {
        tsi_error_set(TS_ERR_STATE,
                      "%s: no inf checks were recorded for this optimizer (none of its "
                      "parameters has a gradient)",
                      op);
        return fail_together(s);
    }
    /* captured: *stepped stays false, the replays decide on the device */
    if (tsi_optim_capturing(opt, 0, opt->n_params)) return captured_step(op, s, opt, st);
    /* the one synchronisation of the iteration: the host decides whether to step */
    double any = 0;
    for (int k = 0; k < st->n_found; k++) any += ts_item(st->found_inf[k]);
    if (ts_error()) { /* the verdict could not be read: no step, the iteration starts over */
        forget(st);
        return fail_together(s);
    }
    /* several processes training together skip the step together (and update() backs off the
     * scale on every one of them) */
    if (agrees(s) && !ts_error()) {
        double all = tsi_dist_agree_max(s->group, any);
        if (all > 0 && any == 0) tsi_gs_fill(st->found_inf[0], 1.0);
        any = all;
    }
    if (any == 0) {
        ts_status r = ts_optim_step(opt);
        if (r) {
            forget(st);
            return r;
        }
        if (stepped) *stepped = true;
    }
    st->stage = TSI_GS_STEPPED;
    return TS_OK;
}
