/* kern_conv_act_vec.h — a forward convolution's fused activation on one vector of outputs (bias
 * added), for the vector kernels that apply it in registers (kern_conv_direct.c,
 * conv_dw_blocked.c). Lane by lane what kernel_math.h's ts_relu_f / ts_clamp_f and the composed
 * HardSigmoid / HardSwish give (kern_conv.c's tsi_conv_act_f32): NaN stays NaN. V is a GCC vector
 * of float, VI the int32 vector of its width; the including file sets FMA contraction. */
#ifndef TS_KERN_CONV_ACT_VEC_H
#define TS_KERN_CONV_ACT_VEC_H

#include "backend/cpu/kern_conv.h"

#define TS_DEFINE_CONV_ACT_VEC(NAME, ATTR, V, VI)                                                  \
    ATTR static inline __attribute__((always_inline)) V NAME(const ts_cgeom *g, V a) {             \
        if (g->act == TS_CONV_ACT_RELU) return (V)((VI)a & ((a > (V){0}) | (a != a)));             \
        if (g->act == TS_CONV_ACT_HARDSIGMOID || g->act == TS_CONV_ACT_HARDSWISH) {                \
            V t = a * (float)g->lo + (float)g->hi;                                                 \
            VI m = t < (V){0};                                                                     \
            t = (V)((VI)t & ~m);                                                                   \
            const V one = (V){0} + 1.0f;                                                           \
            m = t > one;                                                                           \
            t = (V)(((VI)one & m) | ((VI)t & ~m));                                                 \
            return g->act == TS_CONV_ACT_HARDSWISH ? a * t : t;                                    \
        }                                                                                          \
        const V lo = (V){0} + (float)g->lo, hi = (V){0} + (float)g->hi;                            \
        VI m = a < lo;                                                                             \
        a = (V)(((VI)lo & m) | ((VI)a & ~m));                                                      \
        m = a > hi;                                                                                \
        return (V)(((VI)hi & m) | ((VI)a & ~m));                                                   \
    }

#endif /* TS_KERN_CONV_ACT_VEC_H */
