/* optim_math.h — the per-element updates of the fused optimizer step (SGD, Adam/AdamW, RMSprop),
 * shared by the CPU loops (cpu/kern_optim.c) and the CUDA kernel (cuda/cuda_optim.cu), so the two
 * backends cannot drift apart numerically.
 *
 * Each update follows torch.optim's _single_tensor_* functions op by op, rounding to the compute
 * type CT (float for f32/f16/bf16, double for f64) where torch rounds: addcmul is
 * self + (value * t1) * t2 and addcdiv self + (value * t1) / t2, as ATen evaluates them. State
 * values go in and out through pointers to CT; the caller loads and stores them (rounding f16/bf16
 * state on the store, while the update goes on with the unrounded value, as the CPU always did).
 *
 * On the GPU every product, quotient and square root goes through the _rn intrinsics: nvcc would
 * otherwise fuse a*b+c into an FMA (one rounding instead of two), and a build with fast math would
 * approximate the divisions. With them a CUDA step rounds exactly like the CPU step. */
#ifndef TS_OPTIM_MATH_H
#define TS_OPTIM_MATH_H

#include <math.h>
#include <stdbool.h>

#include "backend/kernel_math.h"
#include "backend/optim_step.h"

#ifdef __CUDA_ARCH__
#define TS_OM_MUL_f(a, b) __fmul_rn((a), (b))
#define TS_OM_DIV_f(a, b) __fdiv_rn((a), (b))
#define TS_OM_SQRT_f(a)   __fsqrt_rn(a)
#define TS_OM_MUL_d(a, b) __dmul_rn((a), (b))
#define TS_OM_DIV_d(a, b) __ddiv_rn((a), (b))
#define TS_OM_SQRT_d(a)   __dsqrt_rn(a)
#else
#define TS_OM_MUL_f(a, b) ((a) * (b))
#define TS_OM_DIV_f(a, b) ((a) / (b))
#define TS_OM_SQRT_f(a)   sqrtf(a)
#define TS_OM_MUL_d(a, b) ((a) * (b))
#define TS_OM_DIV_d(a, b) ((a) / (b))
#define TS_OM_SQRT_d(a)   sqrt(a)
#endif

/* A capturable optimizer's tensor (ts_optim_step_args.scalars): the group's hyper-parameters with
 * lr, momentum and beta1 from the tensor's scalars sc (f64 [TS_OPTIM_SCALARS], on its device). */
static inline TS_HD ts_optim_hparams ts_om_with_scalars(ts_optim_hparams h, const double *sc) {
    h.lr = sc[TS_OPTIM_SC_LR];
    h.momentum = sc[TS_OPTIM_SC_MOMENTUM];
    h.beta1 = sc[TS_OPTIM_SC_BETA1];
    return h;
}

/* SUF: f (float) or d (double); CT the compute type; MAXIMUM the NaN-propagating maximum. */
#define TS_OPTIM_MATH_DEFINE(SUF, CT, MAXIMUM)                                                     \
    /* a parameter group's hyper-parameters in the compute type */                                 \
    typedef struct ts_om_k_##SUF {                                                                 \
        CT sg, wd, mom, damp1, nlr;   /* sign (maximize), weight decay, momentum, 1 - dampening,   \
                                         -lr */                                                    \
        CT b1, omb1, b2, omb2, decay; /* Adam: betas, 1 - betas, AdamW's 1 - lr * wd */            \
        CT eps, alpha, oma;           /* eps; RMSprop: alpha, 1 - alpha */                         \
    } ts_om_k_##SUF;                                                                               \
                                                                                                   \
    static inline TS_HD ts_om_k_##SUF ts_om_consts_##SUF(const ts_optim_hparams *h) {              \
        ts_om_k_##SUF k;                                                                           \
        k.sg = h->maximize ? (CT)-1 : (CT)1;                                                       \
        k.wd = (CT)h->weight_decay;                                                                \
        k.mom = (CT)h->momentum;                                                                   \
        k.damp1 = (CT)(1.0 - h->dampening);                                                        \
        k.nlr = (CT)(-h->lr);                                                                      \
        k.b1 = (CT)h->beta1;                                                                       \
        k.omb1 = (CT)(1.0 - h->beta1);                                                             \
        k.b2 = (CT)h->beta2;                                                                       \
        k.omb2 = (CT)(1.0 - h->beta2);                                                             \
        k.decay = (CT)(1.0 - h->lr * h->weight_decay);                                             \
        k.eps = (CT)h->eps;                                                                        \
        k.alpha = (CT)h->alpha;                                                                    \
        k.oma = (CT)(1.0 - h->alpha);                                                              \
        return k;                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* Adam's per-tensor bias corrections at `step` (counting this one): -lr / (1 - beta1^step)    \
     * and sqrt(1 - beta2^step), evaluated in double like torch's Python scalars */                \
    static inline TS_HD void ts_om_adam_bias_##SUF(const ts_optim_hparams *h, double step,         \
                                                   CT *nstep, CT *bc2s) {                          \
        const double bc1 = 1.0 - pow(h->beta1, step), bc2 = 1.0 - pow(h->beta2, step);             \
        *nstep = (CT)(-(h->lr / bc1));                                                             \
        *bc2s = (CT)sqrt(bc2);                                                                     \
    }                                                                                              \
                                                                                                   \
    /* SGD: returns the new parameter; *buf is the momentum buffer (read unless fresh, written     \
     * when mom). maximize is a multiplication by -1, which is exact. */                           \
    static inline TS_HD CT ts_om_sgd_##SUF(const ts_om_k_##SUF *k, CT pv, CT g, CT *buf, bool wd,  \
                                           bool mom, bool fresh, bool nest) {                      \
        CT d = TS_OM_MUL_##SUF(k->sg, g);                                                          \
        if (wd) d = d + TS_OM_MUL_##SUF(k->wd, pv);                                                \
        if (mom) {                                                                                 \
            const CT bv =                                                                          \
                fresh ? d : TS_OM_MUL_##SUF(*buf, k->mom) + TS_OM_MUL_##SUF(k->damp1, d);          \
            *buf = bv;                                                                             \
            d = nest ? d + TS_OM_MUL_##SUF(k->mom, bv) : bv;                                       \
        }                                                                                          \
        return pv + TS_OM_MUL_##SUF(k->nlr, d);                                                    \
    }                                                                                              \
                                                                                                   \
    /* Adam / AdamW (decoupled weight decay): *m, *v the moments, *mx the amsgrad maximum (read    \
     * and written only when ams); nstep, bc2s from ts_om_adam_bias. */                            \
    static inline TS_HD CT ts_om_adam_##SUF(const ts_om_k_##SUF *k, CT nstep, CT bc2s, CT pv,      \
                                            CT g, CT *m, CT *v, CT *mx, bool adamw, bool wd,       \
                                            bool ams) {                                            \
        CT d = TS_OM_MUL_##SUF(k->sg, g);                                                          \
        if (adamw) pv = TS_OM_MUL_##SUF(pv, k->decay);                                             \
        if (wd) d = d + TS_OM_MUL_##SUF(k->wd, pv);                                                \
        const CT mm = TS_OM_MUL_##SUF(*m, k->b1) + TS_OM_MUL_##SUF(k->omb1, d);                    \
        CT vv = TS_OM_MUL_##SUF(*v, k->b2) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(k->omb2, d), d);      \
        *m = mm;                                                                                   \
        *v = vv;                                                                                   \
        if (ams) {                                                                                 \
            vv = MAXIMUM(vv, *mx);                                                                 \
            *mx = vv;                                                                              \
        }                                                                                          \
        const CT den = TS_OM_DIV_##SUF(TS_OM_SQRT_##SUF(vv), bc2s) + k->eps;                       \
        return pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(nstep, mm), den);                              \
    }                                                                                              \
                                                                                                   \
    /* RMSprop: *sq the square average, *ga the gradient average (centered), *buf the momentum     \
     * buffer (mom) */                                                                             \
    static inline TS_HD CT ts_om_rmsprop_##SUF(const ts_om_k_##SUF *k, CT pv, CT g, CT *sq,        \
                                               CT *buf, CT *ga, bool wd, bool centered,            \
                                               bool mom) {                                         \
        CT d = TS_OM_MUL_##SUF(k->sg, g);                                                          \
        if (wd) d = d + TS_OM_MUL_##SUF(k->wd, pv);                                                \
        const CT s =                                                                               \
            TS_OM_MUL_##SUF(*sq, k->alpha) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(k->oma, d), d);       \
        *sq = s;                                                                                   \
        CT avg;                                                                                    \
        if (centered) {                                                                            \
            const CT gv = TS_OM_MUL_##SUF(*ga, k->alpha) + TS_OM_MUL_##SUF(k->oma, d);             \
            *ga = gv;                                                                              \
            avg = TS_OM_SQRT_##SUF(s + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF((CT)-1, gv), gv));          \
        } else {                                                                                   \
            avg = TS_OM_SQRT_##SUF(s);                                                             \
        }                                                                                          \
        avg = avg + k->eps;                                                                        \
        if (mom) {                                                                                 \
            const CT bv = TS_OM_MUL_##SUF(*buf, k->mom) + TS_OM_DIV_##SUF(d, avg);                 \
            *buf = bv;                                                                             \
            return pv + TS_OM_MUL_##SUF(k->nlr, bv);                                               \
        }                                                                                          \
        return pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(k->nlr, d), avg);                              \
    }

TS_OPTIM_MATH_DEFINE(f, float, ts_maximum_f)
TS_OPTIM_MATH_DEFINE(d, double, ts_maximum_d)

#endif /* TS_OPTIM_MATH_H */
