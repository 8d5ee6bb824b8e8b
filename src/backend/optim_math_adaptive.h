/* optim_math_adaptive.h — the per-element updates of Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD
 * and Rprop, shared by the CPU loops (cpu/kern_optim.c) and the CUDA kernel (cuda/cuda_optim.cu).
 *
 * Each follows torch.optim's _single_tensor_* function op by op (PyTorch 2.x), rounding to the
 * compute type CT where ATen rounds (optim_math.h's conventions: addcmul is self + (value * t1) *
 * t2, addcdiv self + (value * t1) / t2, lerp ATen's two-sided formula). The per-tensor scalars
 * torch computes in Python (Adagrad's decayed lr, NAdam's momentum products, RAdam's
 * rectification, ASGD's eta and mu) come in coef (ts_optim_step_args.coef), computed on the host by
 * src/optim/optim_more.c. */
#ifndef TS_OPTIM_MATH_ADAPTIVE_H
#define TS_OPTIM_MATH_ADAPTIVE_H

#include "backend/optim_math.h"

/* coef[] per kind: Adagrad, Adamax {-clr}; NAdam {grad coefficient, exp_avg coefficient,
 * bias_correction2}; RAdam {bias_correction1, rect, sqrt(bias_correction2), rectified (0/1)};
 * ASGD {eta, 1 - lambd eta, mu}; Adadelta, Rprop none. */

#define TS_OPTIM_MATH_ADAPTIVE_DEFINE(SUF, CT, MAXIMUM)                                            \
    /* one tensor's constants in the compute type; a..g by kind (ts_om_x_consts) */                \
    typedef struct ts_om_x_##SUF {                                                                 \
        int kind;                                                                                  \
        CT sg, wd, eps, decay; /* sign (maximize), weight decay, eps, 1 - lr wd (decoupled) */     \
        CT a, b, c, d, e, f, g;                                                                    \
        bool use_wd, decoupled, flag;                                                              \
    } ts_om_x_##SUF;                                                                               \
                                                                                                   \
    static inline TS_HD ts_om_x_##SUF ts_om_x_consts_##SUF(const ts_optim_hparams *h,              \
                                                           const double *coef) {                   \
        ts_om_x_##SUF x;                                                                           \
        x.kind = (int)h->kind;                                                                     \
        x.sg = h->maximize ? (CT)-1 : (CT)1;                                                       \
        x.wd = (CT)h->weight_decay;                                                                \
        x.eps = (CT)h->eps;                                                                        \
        x.decay = (CT)(1.0 - h->lr * h->weight_decay);                                             \
        x.use_wd = h->weight_decay != 0 && !h->decoupled;                                          \
        x.decoupled = h->weight_decay != 0 && h->decoupled;                                        \
        x.flag = false;                                                                            \
        x.a = x.b = x.c = x.d = x.e = x.f = x.g = (CT)0;                                           \
        switch (h->kind) {                                                                         \
        case TS_OPTIM_ADAGRAD:                                                                     \
            x.a = (CT)coef[0];                                                                     \
            break;                                                                                 \
        case TS_OPTIM_ADADELTA:                                                                    \
            x.a = (CT)h->rho, x.b = (CT)(1.0 - h->rho), x.c = (CT)(-h->lr);                        \
            break;                                                                                 \
        case TS_OPTIM_ADAMAX:                                                                      \
            x.a = (CT)(1.0 - h->beta1), x.b = (CT)h->beta2, x.c = (CT)coef[0];                     \
            break;                                                                                 \
        case TS_OPTIM_NADAM:                                                                       \
        case TS_OPTIM_RADAM:                                                                       \
            x.a = (CT)(1.0 - h->beta1), x.b = (CT)h->beta2, x.c = (CT)(1.0 - h->beta2);            \
            if (h->kind == TS_OPTIM_NADAM) {                                                       \
                x.d = (CT)coef[2], x.e = (CT)coef[0], x.f = (CT)coef[1];                           \
            } else {                                                                               \
                x.d = (CT)coef[0], x.e = (CT)h->lr, x.f = (CT)coef[1], x.g = (CT)coef[2];          \
                x.flag = coef[3] != 0;                                                             \
            }                                                                                      \
            break;                                                                                 \
        case TS_OPTIM_ASGD:                                                                        \
            x.a = (CT)coef[1], x.b = (CT)(-coef[0]), x.c = (CT)coef[2];                            \
            x.flag = coef[2] != 1;                                                                 \
            break;                                                                                 \
        case TS_OPTIM_RPROP:                                                                       \
            x.a = (CT)h->etaminus, x.b = (CT)h->etaplus;                                           \
            x.c = (CT)h->step_size_min, x.d = (CT)h->step_size_max;                                \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
        return x;                                                                                  \
    }                                                                                              \
                                                                                                   \
    /* ATen's lerp for a weight in [0, 1] */                                                       \
    static inline TS_HD CT ts_om_lerp_##SUF(CT s, CT e, CT w) {                                    \
        return w < (CT)0.5 ? s + TS_OM_MUL_##SUF(w, e - s)                                         \
                           : e - TS_OM_MUL_##SUF(e - s, (CT)1 - w);                                \
    }                                                                                              \
    /* torch.sign on the CPU: NaN gives 0 */                                                       \
    static inline TS_HD CT ts_om_sign_##SUF(CT v) { return (CT)((v > (CT)0) - (v < (CT)0)); }      \
                                                                                                   \
    /* One element: returns the new parameter; *s0, *s1 the kind's state slots 0 and 1 (read and   \
     * written when the kind has them). */                                                         \
    static inline TS_HD CT ts_om_more_##SUF(const ts_om_x_##SUF *x, CT pv, CT g, CT *s0, CT *s1) { \
        CT d = TS_OM_MUL_##SUF(x->sg, g);                                                          \
        if (x->decoupled) pv = TS_OM_MUL_##SUF(pv, x->decay);                                      \
        if (x->use_wd && x->kind != TS_OPTIM_RPROP) d = d + TS_OM_MUL_##SUF(x->wd, pv);            \
        switch (x->kind) {                                                                         \
        case TS_OPTIM_ADAGRAD: {                                                                   \
            const CT s = *s0 + TS_OM_MUL_##SUF(d, d);                                              \
            *s0 = s;                                                                               \
            return pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(x->a, d), TS_OM_SQRT_##SUF(s) + x->eps);   \
        }                                                                                          \
        case TS_OPTIM_ADADELTA: {                                                                  \
            const CT sq =                                                                          \
                TS_OM_MUL_##SUF(*s0, x->a) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(x->b, d), d);         \
            *s0 = sq;                                                                              \
            const CT std_ = TS_OM_SQRT_##SUF(sq + x->eps);                                         \
            CT delta = TS_OM_SQRT_##SUF(*s1 + x->eps);                                             \
            delta = TS_OM_MUL_##SUF(TS_OM_DIV_##SUF(delta, std_), d);                              \
            *s1 =                                                                                  \
                TS_OM_MUL_##SUF(*s1, x->a) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(x->b, delta), delta); \
            return pv + TS_OM_MUL_##SUF(x->c, delta);                                              \
        }                                                                                          \
        case TS_OPTIM_ADAMAX: {                                                                    \
            const CT m = ts_om_lerp_##SUF(*s0, d, x->a);                                           \
            const CT u = MAXIMUM(TS_OM_MUL_##SUF(*s1, x->b), (d < (CT)0 ? -d : d) + x->eps);       \
            *s0 = m;                                                                               \
            *s1 = u;                                                                               \
            return pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(x->c, m), u);                              \
        }                                                                                          \
        case TS_OPTIM_NADAM: {                                                                     \
            const CT m = ts_om_lerp_##SUF(*s0, d, x->a);                                           \
            const CT v =                                                                           \
                TS_OM_MUL_##SUF(*s1, x->b) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(x->c, d), d);         \
            *s0 = m;                                                                               \
            *s1 = v;                                                                               \
            const CT den = TS_OM_SQRT_##SUF(TS_OM_DIV_##SUF(v, x->d)) + x->eps;                    \
            pv = pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(x->e, d), den);                              \
            return pv + TS_OM_DIV_##SUF(TS_OM_MUL_##SUF(x->f, m), den);                            \
        }                                                                                          \
        case TS_OPTIM_RADAM: {                                                                     \
            const CT m = ts_om_lerp_##SUF(*s0, d, x->a);                                           \
            const CT v =                                                                           \
                TS_OM_MUL_##SUF(*s1, x->b) + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(x->c, d), d);         \
            *s0 = m;                                                                               \
            *s1 = v;                                                                               \
            CT u = TS_OM_MUL_##SUF(TS_OM_DIV_##SUF(m, x->d), x->e);                                \
            if (x->flag) {                                                                         \
                const CT ad = TS_OM_DIV_##SUF(x->g, TS_OM_SQRT_##SUF(v) + x->eps);                 \
                u = TS_OM_MUL_##SUF(TS_OM_MUL_##SUF(u, ad), x->f);                                 \
            }                                                                                      \
            return pv + TS_OM_MUL_##SUF((CT)-1, u);                                                \
        }                                                                                          \
        case TS_OPTIM_ASGD: {                                                                      \
            pv = TS_OM_MUL_##SUF(pv, x->a);                                                        \
            pv = pv + TS_OM_MUL_##SUF(x->b, d);                                                    \
            *s0 = x->flag ? *s0 + TS_OM_MUL_##SUF(pv - *s0, x->c) : pv;                            \
            return pv;                                                                             \
        }                                                                                          \
        case TS_OPTIM_RPROP: {                                                                     \
            const CT sgn = ts_om_sign_##SUF(TS_OM_MUL_##SUF(d, *s0));                              \
            const CT f = sgn > (CT)0 ? x->b : sgn < (CT)0 ? x->a : (CT)1;                          \
            CT ss = TS_OM_MUL_##SUF(*s1, f);                                                       \
            ss = ss < x->c ? x->c : ss; /* clamp: NaN stays */                                     \
            ss = ss > x->d ? x->d : ss;                                                            \
            *s1 = ss;                                                                              \
            const CT gz = f == x->a ? (CT)0 : d;                                                   \
            *s0 = gz;                                                                              \
            return pv + TS_OM_MUL_##SUF(TS_OM_MUL_##SUF((CT)-1, ts_om_sign_##SUF(gz)), ss);        \
        }                                                                                          \
        default:                                                                                   \
            return pv;                                                                             \
        }                                                                                          \
    }

TS_OPTIM_MATH_ADAPTIVE_DEFINE(f, float, ts_maximum_f)
TS_OPTIM_MATH_ADAPTIVE_DEFINE(d, double, ts_maximum_d)

#endif /* TS_OPTIM_MATH_ADAPTIVE_H */
