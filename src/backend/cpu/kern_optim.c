/* kern_optim.c — the fused CPU optimizer step (SGD, Adam, AdamW, RMSprop; Adagrad, Adadelta,
 * Adamax, NAdam, RAdam, ASGD, Rprop) over many tensors. */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/kernel_math.h"
#include "backend/optim_math.h"
#include "backend/optim_math_adaptive.h"
#include "backend/optim_step.h"

/* The per-element updates live in optim_math.h (shared with the CUDA kernel): each follows
 * torch.optim's _single_tensor_* functions op by op, rounding to the compute type where torch
 * rounds, so f32 and f64 results track PyTorch's to the last bits. */

#define LD_SAME(x) (x)
#define ST_SAME(x) (x)
#define LD_F16(x)  ts_f16_to_f32(x)
#define ST_F16(x)  ts_f32_to_f16(x)
#define LD_BF16(x) ts_bf16_to_f32(x)
#define ST_BF16(x) ts_f32_to_bf16(x)

#define INLINE static inline __attribute__((always_inline))

/* A parameter element's load and store: from and to the float32 master when MASTER (the parameter
 * then stores the result rounded once to its dtype), from and to the parameter otherwise. */
#define P_LOAD(MASTER, LD, CT, p, mw, i) ((MASTER) ? (CT)(mw)[i] : LD((p)[i]))
#define P_STORE(MASTER, ST, CT, p, mw, i, r)                                                       \
    do {                                                                                           \
        const CT r_ = (r);                                                                         \
        if (MASTER) (mw)[i] = (float)r_;                                                           \
        (p)[i] = ST(r_);                                                                           \
    } while (0)

/* Each loop is a function of constant flags, always inlined into calls with literal flags: every
 * option combination gets its own branch-free (vectorizable) loop. maximize is a multiplication by
 * -1, which is exact. T: the parameter and gradient type; S: the state's (f32 with a master);
 * MASTER: literal, whether the parameter steps through its float32 master mw. */
#define OPTIM_KERNELS(SUF, T, S, CT, MS, LD, ST, LDS, STS, MASTER)                                 \
    INLINE void sgd_loop_##SUF(const ts_optim_hparams *h, T *restrict p, float *restrict mw,       \
                               const T *restrict g, S *restrict buf, int64_t b, int64_t e,         \
                               const bool WD, const bool MOM, const bool FRESH, const bool NEST) { \
        const ts_om_k_##MS k = ts_om_consts_##MS(h);                                               \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT bv = MOM && !FRESH ? LDS(buf[i]) : (CT)0;                                           \
            P_STORE(MASTER, ST, CT, p, mw, i,                                                      \
                    ts_om_sgd_##MS(&k, P_LOAD(MASTER, LD, CT, p, mw, i), LD(g[i]), &bv, WD, MOM,   \
                                   FRESH, NEST));                                                  \
            if (MOM) buf[i] = STS(bv);                                                             \
        }                                                                                          \
    }                                                                                              \
    static void sgd_##SUF(const ts_optim_hparams *h, T *p, float *mw, const T *g, S *buf,          \
                          bool fresh, int64_t b, int64_t e) {                                      \
        const bool wd = h->weight_decay != 0, mom = h->momentum != 0, nest = h->nesterov;          \
        if (!mom && wd)                                                                            \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, true, false, false, false);                     \
        else if (!mom)                                                                             \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, false, false, false, false);                    \
        else if (wd && fresh)                                                                      \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, true, true, true, nest);                        \
        else if (fresh)                                                                            \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, false, true, true, nest);                       \
        else if (wd && nest)                                                                       \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, true, true, false, true);                       \
        else if (wd)                                                                               \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, true, true, false, false);                      \
        else if (nest)                                                                             \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, false, true, false, true);                      \
        else                                                                                       \
            sgd_loop_##SUF(h, p, mw, g, buf, b, e, false, true, false, false);                     \
    }                                                                                              \
    INLINE void adam_loop_##SUF(const ts_optim_hparams *h, double step, T *restrict p,             \
                                float *restrict mw, const T *restrict g, S *restrict ma,           \
                                S *restrict va, S *restrict xa, int64_t b, int64_t e,              \
                                const bool ADAMW, const bool WD, const bool AMS) {                 \
        const ts_om_k_##MS k = ts_om_consts_##MS(h);                                               \
        CT nstep, bc2s;                                                                            \
        ts_om_adam_bias_##MS(h, step, &nstep, &bc2s);                                              \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT m = LDS(ma[i]), v = LDS(va[i]), mx = AMS ? LDS(xa[i]) : (CT)0;                      \
            P_STORE(MASTER, ST, CT, p, mw, i,                                                      \
                    ts_om_adam_##MS(&k, nstep, bc2s, P_LOAD(MASTER, LD, CT, p, mw, i), LD(g[i]),   \
                                    &m, &v, &mx, ADAMW, WD, AMS));                                 \
            ma[i] = STS(m);                                                                        \
            va[i] = STS(v);                                                                        \
            if (AMS) xa[i] = STS(mx);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void adam_##SUF(const ts_optim_hparams *h, double step, T *p, float *mw, const T *g,    \
                           S *ma, S *va, S *xa, int64_t b, int64_t e) {                            \
        const bool adamw = h->kind == TS_OPTIM_ADAMW, wd = !adamw && h->weight_decay != 0;         \
        if (adamw && h->amsgrad)                                                                   \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 1, 0, 1);                         \
        else if (adamw)                                                                            \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 1, 0, 0);                         \
        else if (wd && h->amsgrad)                                                                 \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 0, 1, 1);                         \
        else if (wd)                                                                               \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 0, 1, 0);                         \
        else if (h->amsgrad)                                                                       \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 0, 0, 1);                         \
        else                                                                                       \
            adam_loop_##SUF(h, step, p, mw, g, ma, va, xa, b, e, 0, 0, 0);                         \
    }                                                                                              \
    INLINE void rmsprop_loop_##SUF(const ts_optim_hparams *h, T *restrict p, float *restrict mw,   \
                                   const T *restrict g, S *restrict sa, S *restrict ba,            \
                                   S *restrict ga, int64_t b, int64_t e, const bool WD,            \
                                   const bool CENTERED, const bool MOM) {                          \
        const ts_om_k_##MS k = ts_om_consts_##MS(h);                                               \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT sq = LDS(sa[i]), bv = MOM ? LDS(ba[i]) : (CT)0, gv = CENTERED ? LDS(ga[i]) : (CT)0; \
            P_STORE(MASTER, ST, CT, p, mw, i,                                                      \
                    ts_om_rmsprop_##MS(&k, P_LOAD(MASTER, LD, CT, p, mw, i), LD(g[i]), &sq, &bv,   \
                                       &gv, WD, CENTERED, MOM));                                   \
            sa[i] = STS(sq);                                                                       \
            if (CENTERED) ga[i] = STS(gv);                                                         \
            if (MOM) ba[i] = STS(bv);                                                              \
        }                                                                                          \
    }                                                                                              \
    static void rmsprop_##SUF(const ts_optim_hparams *h, T *p, float *mw, const T *g, S *sa,       \
                              S *ba, S *ga, int64_t b, int64_t e) {                                \
        const bool wd = h->weight_decay != 0, c = h->centered, m = h->momentum > 0;                \
        if (wd && c && m)                                                                          \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 1, 1, 1);                            \
        else if (wd && c)                                                                          \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 1, 1, 0);                            \
        else if (wd && m)                                                                          \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 1, 0, 1);                            \
        else if (wd)                                                                               \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 1, 0, 0);                            \
        else if (c && m)                                                                           \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 0, 1, 1);                            \
        else if (c)                                                                                \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 0, 1, 0);                            \
        else if (m)                                                                                \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 0, 0, 1);                            \
        else                                                                                       \
            rmsprop_loop_##SUF(h, p, mw, g, sa, ba, ga, b, e, 0, 0, 0);                            \
    }                                                                                              \
    /* Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop (optim_math_adaptive.h). KIND < 0: the \
     * kind read from h per element; a literal kind with both state slots: the switch folds and    \
     * the loop vectorizes (the same operations element by element, so the same bits) */           \
    INLINE void more_loop_##SUF(const ts_optim_hparams *h, const double *coef, T *restrict p,      \
                                float *restrict mw, const T *restrict g, S *restrict s0a,          \
                                S *restrict s1a, int64_t b, int64_t e, const int KIND) {           \
        ts_om_x_##MS x = ts_om_x_consts_##MS(h, coef);                                             \
        if (KIND >= 0) x.kind = KIND;                                                              \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT s0 = KIND >= 0 || s0a ? LDS(s0a[i]) : (CT)0;                                        \
            CT s1 = KIND >= 0 || s1a ? LDS(s1a[i]) : (CT)0;                                        \
            P_STORE(MASTER, ST, CT, p, mw, i,                                                      \
                    ts_om_more_##MS(&x, P_LOAD(MASTER, LD, CT, p, mw, i), LD(g[i]), &s0, &s1));    \
            if (KIND >= 0 || s0a) s0a[i] = STS(s0);                                                \
            if (KIND >= 0 || s1a) s1a[i] = STS(s1);                                                \
        }                                                                                          \
    }                                                                                              \
    static void more_##SUF(const ts_optim_hparams *h, const double *coef, T *p, float *mw,         \
                           const T *g, S *s0a, S *s1a, int64_t b, int64_t e) {                     \
        if (h->kind == TS_OPTIM_ADADELTA && s0a && s1a)                                            \
            more_loop_##SUF(h, coef, p, mw, g, s0a, s1a, b, e, TS_OPTIM_ADADELTA);                 \
        else                                                                                       \
            more_loop_##SUF(h, coef, p, mw, g, s0a, s1a, b, e, -1);                                \
    }

OPTIM_KERNELS(f32, float, float, float, f, LD_SAME, ST_SAME, LD_SAME, ST_SAME, 0)
OPTIM_KERNELS(f64, double, double, double, d, LD_SAME, ST_SAME, LD_SAME, ST_SAME, 0)
OPTIM_KERNELS(f16, ts_f16_bits, ts_f16_bits, float, f, LD_F16, ST_F16, LD_F16, ST_F16, 0)
OPTIM_KERNELS(bf16, ts_bf16_bits, ts_bf16_bits, float, f, LD_BF16, ST_BF16, LD_BF16, ST_BF16, 0)
/* f16 / bf16 parameters with float32 masters: state in f32 */
OPTIM_KERNELS(f16m, ts_f16_bits, float, float, f, LD_F16, ST_F16, LD_SAME, ST_SAME, 1)
OPTIM_KERNELS(bf16m, ts_bf16_bits, float, float, f, LD_BF16, ST_BF16, LD_SAME, ST_SAME, 1)

#define DISPATCH_KIND(SUF, T, S)                                                                   \
    do {                                                                                           \
        T *p = (T *)a->param[i].data;                                                              \
        const T *g = (const T *)a->grad[i].data;                                                   \
        S *s0 = (S *)st[0], *s1 = (S *)st[1], *s2 = (S *)st[2];                                    \
        switch (h->kind) {                                                                         \
        case TS_OPTIM_SGD:                                                                         \
            sgd_##SUF(h, p, mw, g, s0, a->fresh && a->fresh[i], b, e);                             \
            break;                                                                                 \
        case TS_OPTIM_ADAM:                                                                        \
        case TS_OPTIM_ADAMW:                                                                       \
            adam_##SUF(h, step, p, mw, g, s0, s1, s2, b, e);                                       \
            break;                                                                                 \
        case TS_OPTIM_RMSPROP:                                                                     \
            rmsprop_##SUF(h, p, mw, g, s0, s1, s2, b, e);                                          \
            break;                                                                                 \
        default:                                                                                   \
            more_##SUF(h, a->coef + (size_t)i * TS_OPTIM_COEFS, p, mw, g, s0, s1, b, e);           \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* elements [b, e) of tensor i with hyper-parameters h, Adam's step count `step` */
static void step_range(const struct ts_optim_step_args *a, const ts_optim_hparams *h, double step,
                       int i, int64_t b, int64_t e) {
    char *st[TS_OPTIM_SLOTS];
    for (int k = 0; k < TS_OPTIM_SLOTS; k++) st[k] = a->state[k] ? a->state[k][i].data : NULL;
    /* a master: f16/bf16 parameters only (the front end makes none for the others) */
    float *mw = a->master ? (float *)a->master[i].data : NULL;
    switch (a->param[i].dtype) {
    case TS_F32:
        DISPATCH_KIND(f32, float, float);
        break;
    case TS_F64:
        DISPATCH_KIND(f64, double, double);
        break;
    case TS_F16:
        if (mw)
            DISPATCH_KIND(f16m, ts_f16_bits, float);
        else
            DISPATCH_KIND(f16, ts_f16_bits, ts_f16_bits);
        break;
    case TS_BF16:
        if (mw)
            DISPATCH_KIND(bf16m, ts_bf16_bits, float);
        else
            DISPATCH_KIND(bf16, ts_bf16_bits, ts_bf16_bits);
        break;
    default:
        break; /* the front end admits float parameters only */
    }
}

/* Tensor i's hyper-parameters and step count: the group's and the host's, or a capturable
 * optimizer's from the device (the count advanced there). */
static ts_optim_hparams tensor_hparams(const struct ts_optim_step_args *a, int i, double *step) {
    ts_optim_hparams h = a->h;
    *step = a->step ? a->step[i] : 0;
    if (a->scalars) {
        double *sc = (double *)a->scalars[i].data;
        h = ts_om_with_scalars(h, sc);
        *step = sc[TS_OPTIM_SC_STEPS] + 1;
        sc[TS_OPTIM_SC_STEPS] = *step;
    }
    return h;
}

void tsi_cpu_optim_step(const ts_backend *be, int index, const struct ts_optim_step_args *args) {
    if (args->skip_if && *(const float *)args->skip_if->data != 0) return; /* Inf/NaN: skipped */
    for (int i = 0; i < args->n; i++) {
        const ts_kview *pv = &args->param[i];
        double step;
        const ts_optim_hparams h = tensor_hparams(args, i, &step);
        int64_t numel = 1;
        for (int d = 0; d < pv->ndim; d++) numel *= pv->shape[d];
        if (numel <= 0) continue;
#ifdef TS_HAVE_OPENMP
        /* small tensors (biases, most of a small model) stay on this thread: a parallel region
         * costs more than their update */
        if (numel > TS_CPU_GRAIN && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
            {
                int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
                int64_t chunk = ((numel + nt - 1) / nt + 63) & ~(int64_t)63;
                int64_t b = t * chunk, e = b + chunk < numel ? b + chunk : numel;
                if (b < e) step_range(args, &h, step, i, b, e);
            }
            continue;
        }
#endif
        step_range(args, &h, step, i, 0, numel);
    }
}
