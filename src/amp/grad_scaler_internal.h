/* grad_scaler_internal.h — the gradient scaler object shared by src/amp/grad_scaler*.c. */
#ifndef TS_AMP_GRAD_SCALER_INTERNAL_H
#define TS_AMP_GRAD_SCALER_INTERNAL_H

#include "core/internal.h"

/* Where an optimizer is in the iteration (PyTorch's OptState). */
typedef enum tsi_gs_stage { TSI_GS_READY, TSI_GS_UNSCALED, TSI_GS_STEPPED } tsi_gs_stage;

/* One optimizer's state since the last update: its stage and one found_inf per device of its
 * gradients (PyTorch's found_inf_per_device). */
typedef struct tsi_gs_optim_state {
    const ts_optim *opt; /* the key; not owned (PyTorch keys by id(optimizer)) */
    tsi_gs_stage stage;
    ts_tensor **found_inf; /* f32 [1], one per device, owned */
    int n_found;
} tsi_gs_optim_state;

struct ts_grad_scaler {
    bool enabled;
    double init_scale; /* what get_scale reports before the first scale() */
    double growth_factor, backoff_factor;
    int growth_interval;
    int init_growth_tracker;
    /* created on the device of the first loss scaled; owned, never in a scope */
    ts_tensor *scale;          /* f32 [1] */
    ts_tensor *growth_tracker; /* i32 [1], on scale's device */
    tsi_gs_optim_state *states;
    int n_states, cap_states;
    ts_dist_group *group; /* whose found-infs step() combines (NULL: the world) */
};

/* The scale and tracker must exist (a scaled loss came first): TS_ERR_STATE naming op otherwise. */
bool tsi_gs_check_scale(const char *op, ts_grad_scaler *s);
/* The state of opt, created READY on first use; NULL with TS_ERR_OOM. */
tsi_gs_optim_state *tsi_gs_state_for(const char *op, ts_grad_scaler *s, const ts_optim *opt);
/* Forgets every optimizer's state (after an update). */
void tsi_gs_states_reset(ts_grad_scaler *s);
/* ts_grad_scaler_load_state_dict in two steps, for loads that must change everything or nothing
 * (FSDP's sharded checkpoints): stage reads and checks sd (nothing changes; false with the error
 * naming op), commit applies it and cannot fail. A disabled scaler stages nothing (PyTorch ignores
 * the dict). */
typedef struct tsi_gs_staged {
    bool apply;
    double v[5]; /* scale, growth_factor, backoff_factor, growth_interval, _growth_tracker */
} tsi_gs_staged;
bool tsi_gs_load_stage(const char *op, const ts_grad_scaler *s, const ts_tensor_list *sd,
                       tsi_gs_staged *out);
void tsi_gs_load_commit(ts_grad_scaler *s, const tsi_gs_staged *st);
/* Writes v into the one-element scale / tracker in place (wherever they live). */
void tsi_gs_fill(ts_tensor *t, double v);

#endif /* TS_AMP_GRAD_SCALER_INTERNAL_H */
