/* kern_optim.c — the fused CPU optimizer step (SGD, Adam, AdamW, RMSprop) over many tensors. */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/kernel_math.h"
#include "backend/optim_step.h"

/* Each update follows torch.optim's _single_tensor_* functions op by op, rounding to the compute
 * type where torch rounds, so f32 and f64 results track PyTorch's to the last bits: addcmul is
 * self + (value * t1) * t2 and addcdiv self + (value * t1) / t2, as ATen evaluates them. */

#define LD_SAME(x) (x)
#define ST_SAME(x) (x)
#define LD_F16(x)  ts_f16_to_f32(x)
#define ST_F16(x)  ts_f32_to_f16(x)
#define LD_BF16(x) ts_bf16_to_f32(x)
#define ST_BF16(x) ts_f32_to_bf16(x)

/* torch.maximum: NaN in either operand wins */
#define MAX_NAN(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))
#define INLINE        static inline __attribute__((always_inline))

/* Each loop is a function of constant flags, always inlined into calls with literal flags: every
 * option combination gets its own branch-free (vectorizable) loop. maximize is a multiplication by
 * -1, which is exact. */
#define OPTIM_KERNELS(SUF, T, CT, LD, ST, SQRT)                                                    \
    INLINE void sgd_loop_##SUF(const ts_optim_hparams *h, T *restrict p, const T *restrict g,      \
                               T *restrict buf, int64_t b, int64_t e, const bool WD,               \
                               const bool MOM, const bool FRESH, const bool NEST) {                \
        const CT sg = h->maximize ? -1 : 1, wd = (CT)h->weight_decay, mom = (CT)h->momentum;       \
        const CT damp1 = (CT)(1.0 - h->dampening), nlr = (CT)(-h->lr);                             \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT pv = LD(p[i]), d = sg * LD(g[i]);                                                   \
            if (WD) d = d + wd * pv;                                                               \
            if (MOM) {                                                                             \
                CT bv = FRESH ? d : LD(buf[i]) * mom + damp1 * d;                                  \
                buf[i] = ST(bv);                                                                   \
                d = NEST ? d + mom * bv : bv;                                                      \
            }                                                                                      \
            p[i] = ST(pv + nlr * d);                                                               \
        }                                                                                          \
    }                                                                                              \
    static void sgd_##SUF(const ts_optim_hparams *h, T *p, const T *g, T *buf, bool fresh,         \
                          int64_t b, int64_t e) {                                                  \
        const bool wd = h->weight_decay != 0, mom = h->momentum != 0, nest = h->nesterov;          \
        if (!mom && wd)                                                                            \
            sgd_loop_##SUF(h, p, g, buf, b, e, true, false, false, false);                         \
        else if (!mom)                                                                             \
            sgd_loop_##SUF(h, p, g, buf, b, e, false, false, false, false);                        \
        else if (wd && fresh)                                                                      \
            sgd_loop_##SUF(h, p, g, buf, b, e, true, true, true, nest);                            \
        else if (fresh)                                                                            \
            sgd_loop_##SUF(h, p, g, buf, b, e, false, true, true, nest);                           \
        else if (wd && nest)                                                                       \
            sgd_loop_##SUF(h, p, g, buf, b, e, true, true, false, true);                           \
        else if (wd)                                                                               \
            sgd_loop_##SUF(h, p, g, buf, b, e, true, true, false, false);                          \
        else if (nest)                                                                             \
            sgd_loop_##SUF(h, p, g, buf, b, e, false, true, false, true);                          \
        else                                                                                       \
            sgd_loop_##SUF(h, p, g, buf, b, e, false, true, false, false);                         \
    }                                                                                              \
    INLINE void adam_loop_##SUF(const ts_optim_hparams *h, double step, T *restrict p,             \
                                const T *restrict g, T *restrict ma, T *restrict va,               \
                                T *restrict xa, int64_t b, int64_t e, const bool ADAMW,            \
                                const bool WD, const bool AMS) {                                   \
        const double bc1 = 1.0 - pow(h->beta1, step), bc2 = 1.0 - pow(h->beta2, step);             \
        const CT nstep = (CT)(-(h->lr / bc1)), bc2s = (CT)sqrt(bc2);                               \
        const CT b1 = (CT)h->beta1, omb1 = (CT)(1.0 - h->beta1);                                   \
        const CT b2 = (CT)h->beta2, omb2 = (CT)(1.0 - h->beta2);                                   \
        const CT sg = h->maximize ? -1 : 1, wd = (CT)h->weight_decay, eps = (CT)h->eps;            \
        const CT decay = (CT)(1.0 - h->lr * h->weight_decay);                                      \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT pv = LD(p[i]), d = sg * LD(g[i]);                                                   \
            if (ADAMW) pv = pv * decay;                                                            \
            if (WD) d = d + wd * pv;                                                               \
            CT m = LD(ma[i]) * b1 + omb1 * d;                                                      \
            CT v = LD(va[i]) * b2 + (omb2 * d) * d;                                                \
            ma[i] = ST(m);                                                                         \
            va[i] = ST(v);                                                                         \
            if (AMS) {                                                                             \
                CT mx = LD(xa[i]);                                                                 \
                v = MAX_NAN(v, mx);                                                                \
                xa[i] = ST(v);                                                                     \
            }                                                                                      \
            CT den = SQRT(v) / bc2s + eps;                                                         \
            p[i] = ST(pv + (nstep * m) / den);                                                     \
        }                                                                                          \
    }                                                                                              \
    static void adam_##SUF(const ts_optim_hparams *h, double step, T *p, const T *g, T *ma, T *va, \
                           T *xa, int64_t b, int64_t e) {                                          \
        const bool adamw = h->kind == TS_OPTIM_ADAMW, wd = !adamw && h->weight_decay != 0;         \
        if (adamw && h->amsgrad)                                                                   \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 1, 0, 1);                             \
        else if (adamw)                                                                            \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 1, 0, 0);                             \
        else if (wd && h->amsgrad)                                                                 \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 0, 1, 1);                             \
        else if (wd)                                                                               \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 0, 1, 0);                             \
        else if (h->amsgrad)                                                                       \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 0, 0, 1);                             \
        else                                                                                       \
            adam_loop_##SUF(h, step, p, g, ma, va, xa, b, e, 0, 0, 0);                             \
    }                                                                                              \
    INLINE void rmsprop_loop_##SUF(const ts_optim_hparams *h, T *restrict p, const T *restrict g,  \
                                   T *restrict sa, T *restrict ba, T *restrict ga, int64_t b,      \
                                   int64_t e, const bool WD, const bool CENTERED,                  \
                                   const bool MOM) {                                               \
        const CT a = (CT)h->alpha, oma = (CT)(1.0 - h->alpha), eps = (CT)h->eps;                   \
        const CT sg = h->maximize ? -1 : 1, wd = (CT)h->weight_decay, mom = (CT)h->momentum;       \
        const CT nlr = (CT)(-h->lr);                                                               \
        for (int64_t i = b; i < e; i++) {                                                          \
            CT pv = LD(p[i]), d = sg * LD(g[i]);                                                   \
            if (WD) d = d + wd * pv;                                                               \
            CT sq = LD(sa[i]) * a + (oma * d) * d;                                                 \
            sa[i] = ST(sq);                                                                        \
            CT avg;                                                                                \
            if (CENTERED) {                                                                        \
                CT gv = LD(ga[i]) * a + oma * d;                                                   \
                ga[i] = ST(gv);                                                                    \
                avg = SQRT(sq + ((CT)-1 * gv) * gv);                                               \
            } else {                                                                               \
                avg = SQRT(sq);                                                                    \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (MOM) {                                                                             \
                CT bv = LD(ba[i]) * mom + d / avg;                                                 \
                ba[i] = ST(bv);                                                                    \
                p[i] = ST(pv + nlr * bv);                                                          \
            } else {                                                                               \
                p[i] = ST(pv + (nlr * d) / avg);                                                   \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void rmsprop_##SUF(const ts_optim_hparams *h, T *p, const T *g, T *sa, T *ba, T *ga,    \
                              int64_t b, int64_t e) {                                              \
        const bool wd = h->weight_decay != 0, c = h->centered, m = h->momentum > 0;                \
        if (wd && c && m)                                                                          \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 1, 1, 1);                                \
        else if (wd && c)                                                                          \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 1, 1, 0);                                \
        else if (wd && m)                                                                          \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 1, 0, 1);                                \
        else if (wd)                                                                               \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 1, 0, 0);                                \
        else if (c && m)                                                                           \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 0, 1, 1);                                \
        else if (c)                                                                                \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 0, 1, 0);                                \
        else if (m)                                                                                \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 0, 0, 1);                                \
        else                                                                                       \
            rmsprop_loop_##SUF(h, p, g, sa, ba, ga, b, e, 0, 0, 0);                                \
    }

OPTIM_KERNELS(f32, float, float, LD_SAME, ST_SAME, sqrtf)
OPTIM_KERNELS(f64, double, double, LD_SAME, ST_SAME, sqrt)
OPTIM_KERNELS(f16, ts_f16_bits, float, LD_F16, ST_F16, sqrtf)
OPTIM_KERNELS(bf16, ts_bf16_bits, float, LD_BF16, ST_BF16, sqrtf)

#define DISPATCH_KIND(SUF, T)                                                                      \
    do {                                                                                           \
        T *p = (T *)a->param[i].data;                                                              \
        const T *g = (const T *)a->grad[i].data;                                                   \
        T *s0 = (T *)st[0], *s1 = (T *)st[1], *s2 = (T *)st[2];                                    \
        switch (h->kind) {                                                                         \
        case TS_OPTIM_SGD:                                                                         \
            sgd_##SUF(h, p, g, s0, a->fresh && a->fresh[i], b, e);                                 \
            break;                                                                                 \
        case TS_OPTIM_ADAM:                                                                        \
        case TS_OPTIM_ADAMW:                                                                       \
            adam_##SUF(h, a->step[i], p, g, s0, s1, s2, b, e);                                     \
            break;                                                                                 \
        case TS_OPTIM_RMSPROP:                                                                     \
            rmsprop_##SUF(h, p, g, s0, s1, s2, b, e);                                              \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* elements [b, e) of tensor i */
static void step_range(const struct ts_optim_step_args *a, int i, int64_t b, int64_t e) {
    const ts_optim_hparams *h = &a->h;
    char *st[TS_OPTIM_SLOTS];
    for (int k = 0; k < TS_OPTIM_SLOTS; k++) st[k] = a->state[k] ? a->state[k][i].data : NULL;
    switch (a->param[i].dtype) {
    case TS_F32:
        DISPATCH_KIND(f32, float);
        break;
    case TS_F64:
        DISPATCH_KIND(f64, double);
        break;
    case TS_F16:
        DISPATCH_KIND(f16, ts_f16_bits);
        break;
    case TS_BF16:
        DISPATCH_KIND(bf16, ts_bf16_bits);
        break;
    default:
        break; /* the front end admits float parameters only */
    }
}

void ts_cpu_optim_step(const ts_backend *be, int index, const struct ts_optim_step_args *args) {
    for (int i = 0; i < args->n; i++) {
        const ts_kview *pv = &args->param[i];
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
                if (b < e) step_range(args, i, b, e);
            }
            continue;
        }
#endif
        step_range(args, i, 0, numel);
    }
}
