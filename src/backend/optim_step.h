/* optim_step.h — the arguments of the fused optimizer step, the backend entry `optim_step`. */
#ifndef TS_OPTIM_STEP_H
#define TS_OPTIM_STEP_H

#include <stdbool.h>

#include "backend/backend.h"

typedef enum ts_optim_kind {
    TS_OPTIM_SGD,
    TS_OPTIM_ADAM,
    TS_OPTIM_ADAMW,
    TS_OPTIM_RMSPROP,
    /* the kinds stepped by ts_om_more (optim_math_adaptive.h), with per-tensor coefficients (coef)
     */
    TS_OPTIM_ADAGRAD,
    TS_OPTIM_ADADELTA,
    TS_OPTIM_ADAMAX,
    TS_OPTIM_NADAM,
    TS_OPTIM_RADAM,
    TS_OPTIM_ASGD,
    TS_OPTIM_RPROP,
} ts_optim_kind;

/* One parameter group's hyper-parameters (torch.optim's names). */
typedef struct ts_optim_hparams {
    ts_optim_kind kind;
    double lr;
    double momentum;     /* SGD, RMSprop */
    double dampening;    /* SGD */
    double weight_decay; /* all; AdamW's is decoupled */
    double beta1, beta2; /* Adam, AdamW, Adamax, NAdam, RAdam */
    double eps;          /* Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam */
    double alpha;        /* RMSprop; ASGD (the power of its eta) */
    double lr_decay, initial_accumulator_value;             /* Adagrad */
    double rho;                                             /* Adadelta */
    double momentum_decay;                                  /* NAdam */
    double lambd, t0;                                       /* ASGD */
    double etaminus, etaplus, step_size_min, step_size_max; /* Rprop */
    bool decoupled; /* NAdam, RAdam: decoupled_weight_decay */
    bool nesterov;  /* SGD */
    bool amsgrad;   /* Adam, AdamW */
    bool centered;  /* RMSprop */
    bool maximize;
} ts_optim_hparams;

/* State buffers per parameter, by slot:
 *   SGD      0 momentum_buffer
 *   Adam(W)  0 exp_avg, 1 exp_avg_sq, 2 max_exp_avg_sq (amsgrad)
 *   RMSprop  0 square_avg, 1 momentum_buffer (momentum > 0), 2 grad_avg (centered)
 *   Adagrad  0 sum;  Adadelta 0 square_avg, 1 acc_delta;  Adamax 0 exp_avg, 1 exp_inf
 *   NAdam, RAdam 0 exp_avg, 1 exp_avg_sq;  ASGD 0 ax;  Rprop 0 prev, 1 step_size */
#define TS_OPTIM_SLOTS 3
#define TS_OPTIM_COEFS 4

/* Every view is contiguous; a parameter's grad and state have its shape and dtype (a float dtype;
 * f16/bf16 compute in f32), except with a master (below). Parameters are updated in place, state
 * too. */
struct ts_optim_step_args {
    ts_optim_hparams h;
    int n;                 /* tensors */
    const ts_kview *param; /* [n] */
    const ts_kview *grad;  /* [n] */
    /* state[k][i]: slot k of parameter i; the slots the options use are present (data != NULL) */
    const ts_kview *state[TS_OPTIM_SLOTS];
    /* Adam/AdamW: the step count including this step, per tensor (bias corrections) */
    const double *step;
    /* SGD with momentum: the buffer holds nothing yet and is set to the gradient, as torch does on
     * a parameter's first step */
    const bool *fresh;
    /* A capturable optimizer's scalars on the device (docs/CAPTURE.md), NULL otherwise: per
     * tensor a contiguous f64 view of TS_OPTIM_SCALARS elements. The kernel takes lr, momentum
     * and beta1 from it in place of h's, and the step count (all kinds count) from it instead of
     * `step`: steps taken + 1, written back. */
    const ts_kview *scalars;
    /* The kinds from TS_OPTIM_ADAGRAD on: per tensor TS_OPTIM_COEFS doubles computed on the host
     * from its step count and scalar state (src/optim/optim_more.c, e.g. Adagrad's decayed lr,
     * NAdam's momentum products); NULL for the others. Those kinds are never captured. */
    const double *coef;
    /* The grad scaler's verdict on the device (NULL: step): a one-element f32 view; nonzero
     * skips the whole call (parameters, state and step counts unchanged). */
    const ts_kview *skip_if;
    /* Float32 master weights (ts_optim_set_master_weights), NULL for none: per tensor an f32
     * contiguous view of the parameter's numel, or data NULL for none (f32/f64 parameters). A
     * tensor with a master steps the master (read and written as the parameter would be, its state
     * f32) and stores the parameter as the result rounded once to its dtype, in the same pass. */
    const ts_kview *master;
};

/* The slots of a capturable optimizer's device scalars (ts_optim_step_args.scalars). */
enum {
    TS_OPTIM_SC_LR,
    TS_OPTIM_SC_MOMENTUM,
    TS_OPTIM_SC_BETA1, /* the group's: written between steps (schedules) */
    TS_OPTIM_SC_STEPS, /* steps taken: advanced by the kernel */
    TS_OPTIM_SCALARS
};

#endif /* TS_OPTIM_STEP_H */
