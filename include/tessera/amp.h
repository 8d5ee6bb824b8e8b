/* tessera/amp.h — mixed precision: autocast regions and the gradient scaler (via tessera.h). */
#ifndef TESSERA_AMP_H
#define TESSERA_AMP_H

/* ===================================================================== autocast
 * Inside a region, ops on tensors of `device_type` run in PyTorch's autocast policy:
 *   lower precision (dtype): mm, bmm, matmul, linear, conv2d;
 *   float32: softmax, log_softmax, cross_entropy, nll_loss, mse_loss (and the other losses), sum,
 *            prod, logsumexp, exp, log, log1p, rsqrt, reciprocal, softplus, pow, layer_norm,
 *            batch_norm (docs/AMP.md has the lists and the reasons; mean is on none of them);
 *   widest input type: cat, stack, where, scatter_add, and binary ops (by type promotion).
 * Only floating inputs other than float64 are cast. Regions nest and are thread-local; a nested
 * region replaces the state for its device type until its end. Casts of leaf tensors that require
 * grad (parameters) are cached until the outermost region of the thread ends. */
typedef struct ts_autocast_opts {
    ts_dtype dtype; /* TS_DTYPE_DEFAULT: f16 on cuda, bf16 on cpu and sim */
    bool disabled;  /* a region with autocast off (torch.autocast(enabled=False)) */
    bool no_cache;  /* cache_enabled=False */
} ts_autocast_opts;
/* device_type: TS_CPU, TS_CUDA or TS_SIM (TS_DEVICE_DEFAULT: the default device's type). dtype
 * must be TS_F16, TS_BF16 or TS_DTYPE_DEFAULT (TS_ERR_DTYPE otherwise; the region still opens so
 * begin/end stay paired). */
TS_API void ts_autocast_begin(ts_device_type device_type, ts_dtype dtype);
TS_API void ts_autocast_begin_ex(ts_device_type device_type, ts_autocast_opts o);
TS_API void ts_autocast_end(void); /* TS_ERR_STATE when no region is open */
TS_API bool ts_autocast_is_enabled(ts_device_type device_type);
TS_API ts_dtype
ts_autocast_get_dtype(ts_device_type device_type); /* the region's (or default) dtype */
TS_API void ts_autocast_clear_cache(void);

/* ================================================================= grad scaler
 * PyTorch's torch.cuda.amp.GradScaler:
 *   ts_backward(ts_grad_scaler_scale(s, loss));
 *   ts_grad_scaler_unscale_(s, opt);            // optional, e.g. before clipping
 *   ts_grad_scaler_step(s, opt, &stepped);      // skipped when a gradient is Inf/NaN
 *   ts_grad_scaler_update(s);
 * The scale lives on the device of the first loss it scales. unscale_, step and update do nothing
 * while an error is pending on the thread (as ts_optim_step), and each changes all or nothing; an
 * unscale_ or step that failed puts the optimizer back at the start of its iteration (compute
 * the gradients again). */
typedef struct ts_grad_scaler ts_grad_scaler;
typedef struct ts_grad_scaler_opts {
    double init_scale;     /* 0 -> 65536 (2^16) */
    double growth_factor;  /* 0 -> 2.0 */
    double backoff_factor; /* 0 -> 0.5 */
    int growth_interval;   /* 0 -> 2000 */
    bool disabled;         /* enabled=False: scale/unscale/update do nothing, step just steps */
} ts_grad_scaler_opts;
TS_API ts_grad_scaler *ts_grad_scaler_new(ts_grad_scaler_opts o);
TS_API void ts_grad_scaler_free(ts_grad_scaler *s);
TS_API ts_tensor *ts_grad_scaler_scale(ts_grad_scaler *s, ts_tensor *loss); /* loss * scale */
/* Divides the optimizer's gradients by the scale in place and records whether any is Inf/NaN; a
 * second call before update is TS_ERR_STATE, like PyTorch. */
TS_API ts_status ts_grad_scaler_unscale_(ts_grad_scaler *s, ts_optim *opt);
/* Unscales if not done yet, then steps unless an Inf/NaN was found; *stepped (may be NULL) tells.
 * While capturing (graph.h) the step is recorded to skip itself on the device at each replay that
 * finds an Inf/NaN, and *stepped is false. */
TS_API ts_status ts_grad_scaler_step(ts_grad_scaler *s, ts_optim *opt, bool *stepped);
/* Backs off (Inf/NaN seen since the last update) or grows (growth_interval clean steps). With an
 * error pending (the iteration failed, a capture broke) it keeps the scale but still ends the
 * iteration, so the next one can unscale and step once the error is cleared. */
TS_API ts_status ts_grad_scaler_update(ts_grad_scaler *s);
TS_API ts_status ts_grad_scaler_set_scale(ts_grad_scaler *s,
                                          double new_scale); /* update(new_scale) */
TS_API double ts_grad_scaler_get_scale(ts_grad_scaler *s);   /* 1.0 when disabled, NAN on error */
TS_API int ts_grad_scaler_growth_tracker(ts_grad_scaler *s); /* -1 on error */
/* The processes that skip a step together: step() combines their found-infs (a MAX over the
 * group) so that every rank skips the step, and backs off the scale, or none does (PyTorch's
 * ShardedGradScaler(process_group=)). NULL, the default: the world, once ts_dist_init has made one
 * of several processes (a world of one, or no ts_dist_init: no agreement). A group of this rank
 * alone (ts_dist_new_group): no agreement, for ranks that train independently. Every rank of the
 * group must step its scaler the same number of times. TS_ERR_ARG for a NULL scaler. */
typedef struct ts_dist_group ts_dist_group;
TS_API ts_status ts_grad_scaler_set_process_group(ts_grad_scaler *s, ts_dist_group *group);
/* PyTorch's state_dict keys: scale, growth_factor, backoff_factor, growth_interval,
 * _growth_tracker (0-dim f64 cpu tensors). */
TS_API ts_tensor_list ts_grad_scaler_state_dict(ts_grad_scaler *s);
TS_API ts_status ts_grad_scaler_load_state_dict(ts_grad_scaler *s, const ts_tensor_list *sd);

#endif /* TESSERA_AMP_H */
