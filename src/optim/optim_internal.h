/* optim_internal.h — the optimizer object shared by the optimizers, schedulers and state dicts. */
#ifndef TS_OPTIM_INTERNAL_H
#define TS_OPTIM_INTERNAL_H

#include "backend/optim_step.h"
#include "core/internal.h"

/* Per-parameter scalar state kept on the host (NAdam's mu_product; ASGD's eta and mu). */
#define TS_OPTIM_AUX 2

/* One parameter and the state the optimizer keeps for it (on the parameter's device, owned by the
 * optimizer, never by a scope). */
typedef struct tsi_optim_param {
    ts_tensor *p;                     /* retained */
    ts_tensor *state[TS_OPTIM_SLOTS]; /* NULL until needed */
    bool fresh[TS_OPTIM_SLOTS];       /* allocated but not yet written (SGD's momentum) */
    double step;                      /* steps taken (Adam, AdamW, RMSprop) */
    double aux[TS_OPTIM_AUX];         /* the kind's scalar state (aux_names) */
    bool has_state;
    /* a capturable optimizer's scalars on p's device (optim_capture.c), NULL until then: the
     * step count there is the one that counts */
    ts_tensor *scalars;
    /* the float32 master of an f16/bf16 parameter (ts_optim_set_master_weights; optim_master.c),
     * NULL until made; the parameter's storage (uid), version, offset and strides and the master's
     * version when they last agreed */
    ts_tensor *master;
    uint64_t master_puid, master_pver, master_mver;
    int64_t master_poff, master_pstrides[TS_MAX_DIMS];
} tsi_optim_param;

typedef struct tsi_optim_group {
    ts_optim_hparams h; /* lr and (one-cycle) momentum / beta1 change during training */
    double initial_lr;  /* the schedulers' base lr, set by the first scheduler */
    bool has_initial_lr;
    int first, n; /* parameters [first, first + n) of ts_optim.params */
} tsi_optim_group;

/* What differs between the kinds. */
typedef struct tsi_optim_kind_info {
    const char *name;                       /* "SGD": error messages */
    const char *slot_names[TS_OPTIM_SLOTS]; /* state dict names; NULL: slot unused by the kind */
    bool has_step;                          /* "step" in the state */
    /* the slot is used with these options (and must exist before a step) */
    bool (*slot_used)(const ts_optim_hparams *h, int slot);
    /* ---- the kinds of optim_math_adaptive.h (NULL / false for the others) */
    const char *aux_names[TS_OPTIM_AUX]; /* state dict names of aux; NULL: unused */
    bool f32_scalars; /* step and aux as f32 0-dim tensors (PyTorch's _get_scalar_dtype) */
    /* the aux of a parameter without state (before its first step) */
    void (*init_aux)(const ts_optim_hparams *h, double *aux);
    /* the value a new slot starts with (NULL: zero) */
    double (*slot_init)(const ts_optim_hparams *h, int slot);
    /* the per-tensor coefficients of a step (`step` counts it) and the aux after it */
    void (*coefs)(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                  double *aux_next);
} tsi_optim_kind_info;

struct ts_optim {
    const tsi_optim_kind_info *info;
    ts_optim_hparams defaults; /* the first group's options; later groups copy them */
    tsi_optim_group *groups;
    int n_groups, cap_groups;
    tsi_optim_param *params;
    int n_params, cap_params;
    /* step scratch, grown with the parameter count so a step does not allocate */
    ts_kview *kv;       /* [(2 + TS_OPTIM_SLOTS) * cap_params] */
    double *steps;      /* [cap_params] */
    bool *fresh;        /* [cap_params] */
    int *sel;           /* [cap_params] */
    ts_tensor **copies; /* [2 * cap_params]: contiguous stand-ins for strided parameters, grads */
    ts_kview *skv;      /* [cap_params]: the scalars' views */
    double *coef;       /* [TS_OPTIM_COEFS * cap_params] */
    double *aux_next;   /* [TS_OPTIM_AUX * cap_params] */
    int scratch_cap;
    bool capturable;         /* a step was captured: parameters keep their scalars on the device */
    const ts_kview *skip_if; /* during tsi_optim_step_unless: the grad scaler's found_inf */
    struct tsi_optim_offload *offload; /* ts_optim_offload's host masters (offload.c); NULL */
    bool offload_busy;                 /* inside the offloaded step: the masters step */
    bool master_weights;               /* ts_optim_set_master_weights (optim_master.c) */
    ts_kview *mkv;                     /* [cap_params]: the masters' views during a step */
};

extern const tsi_optim_kind_info tsi_sgd_info, tsi_adam_info, tsi_adamw_info, tsi_rmsprop_info;
extern const tsi_optim_kind_info tsi_adagrad_info, tsi_adadelta_info, tsi_adamax_info,
    tsi_nadam_info, tsi_radam_info, tsi_asgd_info, tsi_rprop_info;

/* A new optimizer over params (one group); NULL with the error recorded. */
ts_optim *tsi_optim_new(const char *op, const tsi_optim_kind_info *info, ts_optim_hparams h,
                        ts_tensor *const *params, int n);
/* The same over a module's parameters. */
ts_optim *tsi_optim_new_module(const char *op, const tsi_optim_kind_info *info, ts_optim_hparams h,
                               ts_module *m);

/* Drops a parameter's state. */
void tsi_optim_param_clear(tsi_optim_param *pp);

/* The fused step, skipped on the device when *skip_if (a one-element f32 view) is nonzero; NULL
 * steps (ts_optim_step). The grad scaler's step inside a capture. */
ts_status tsi_optim_step_unless(ts_optim *opt, const ts_kview *skip_if);

/* ---- float32 master weights (optim_master.c) */
/* Whether pp's parameter steps through a master (masters on, an f16/bf16 parameter). */
bool tsi_optim_master_wanted(const ts_optim *o, const tsi_optim_param *pp);
/* The dtype of pp's state: f32 with a master, the parameter's otherwise. */
ts_dtype tsi_optim_state_dtype(const ts_optim *o, const tsi_optim_param *pp);
/* Before a step: pp's master made (or remade from the parameter, when something else wrote it
 * or it is elsewhere), or dropped when unwanted; false with the error recorded. */
bool tsi_optim_master_prepare(const char *op, ts_optim *o, tsi_optim_param *pp);
/* After the step wrote parameter and master: their versions noted as agreeing. */
void tsi_optim_master_synced(tsi_optim_param *pp);
/* Drops pp's master. */
void tsi_optim_master_drop(tsi_optim_param *pp);

/* ---- optimizer offload (offload.c) */
typedef struct tsi_optim_offload tsi_optim_offload;
/* The offloaded step (from tsi_optim_step_unless when opt->offload is set). */
ts_status tsi_optim_offload_step(const char *op, ts_optim *opt, const ts_kview *skip_if);
/* The masters stand in for the parameters (made for parameters added since; false with the
 * error recorded), and the device parameters back. */
bool tsi_optim_offload_enter(const char *op, ts_optim *opt);
void tsi_optim_offload_leave(ts_optim *opt);
void tsi_optim_offload_free(ts_optim *opt);

/* ---- the capturable optimizer (optim_capture.c) */
/* Whether steps of parameters on dev read their scalars from the device. */
bool tsi_optim_wants_scalars(const ts_optim *o, ts_device dev);
/* pp's scalars made (or moved) on its parameter's device when wanted, from h and its host step
 * count; false with the error recorded. */
bool tsi_optim_scalars_prepare(const char *op, ts_optim *o, const ts_optim_hparams *h,
                               tsi_optim_param *pp);
/* Whether this thread captures on the device of one of parameters [first, first + n). */
bool tsi_optim_capturing(const ts_optim *o, int first, int n);
/* True (and the capture broken with "<op>: <what> while capturing...") when this thread captures
 * on the device of one of parameters [first, first + n). */
bool tsi_optim_refuse_capturing(const char *op, const ts_optim *o, int first, int n,
                                const char *what);
/* After a group's lr, momentum or beta1 changed: written to its parameters' device scalars;
 * refused while capturing on their device. */
ts_status tsi_optim_group_changed(const char *op, ts_optim *o, int group);
/* A parameter's step count (read from the device when it lives there) and its setting. */
double tsi_optim_param_steps(const tsi_optim_param *pp);
void tsi_optim_param_set_steps(tsi_optim_param *pp, double steps);

/* A caller-held 0-dim f64 cpu tensor holding v (state dict scalars). */
ts_tensor *tsi_optim_scalar(const char *op, double v);
/* The same in dtype dt (TS_F32 or TS_F64). */
ts_tensor *tsi_optim_scalar_dt(const char *op, double v, ts_dtype dt);
/* v rounded to float32 (PyTorch's scalar state tensors) */
double tsi_optim_f32(double v);

#endif /* TS_OPTIM_INTERNAL_H */
