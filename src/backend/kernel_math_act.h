/* kernel_math_act.h — issue 52's activations (elu, celu, selu, hardtanh, hardshrink, softshrink,
 * threshold, logsigmoid, mish, hardsigmoid, hardswish, leaky_relu): one scalar formula each, in
 * float (f) and double (d), shared by the CPU loops and the CUDA kernels through TS_ACT_PARAM_UNARY
 * (expanded inside kernel_math.h's TS_SPECIAL_PARAM_UNARY). The formulas, their order of operations
 * and their NaN behaviour are PyTorch's CPU kernels' (ATen/native/cpu/Activation.cpp): a comparison
 * with NaN is false, so NaN takes the branch the kernel's `else` names, and NaN comes out. Included
 * by kernel_math.h only (TS_HD comes from there). */
#ifndef TS_KERNEL_MATH_ACT_H
#define TS_KERNEL_MATH_ACT_H

/* SELU's constants (Klambauer et al.; PyTorch's SELU_ALPHA, SELU_SCALE) */
#define TS_SELU_ALPHA 1.6732632423543772848170429916717
#define TS_SELU_SCALE 1.0507009873554804934193349852946

/* elu family: x <= 0 ? neg * expm1(x * in_scale) : pos * x (elu: neg alpha, in_scale 1, pos 1;
 * celu: in_scale 1 / alpha; selu: neg alpha * scale, pos scale) */
static inline TS_HD float ts_elu_f(float x, float neg, float in_scale, float pos) {
    return x <= 0.0f ? expm1f(x * in_scale) * neg : x * pos;
}
static inline TS_HD double ts_elu_d(double x, double neg, double in_scale, double pos) {
    return x <= 0.0 ? expm1(x * in_scale) * neg : x * pos;
}
/* hardtanh = PyTorch's clamp(x, lo, hi): NaN in x or in a bound comes out as NaN */
static inline TS_HD float ts_hardtanh_f(float x, float lo, float hi) {
    return (x < lo || lo != lo) ? lo : ((x > hi || hi != hi) ? hi : x);
}
static inline TS_HD double ts_hardtanh_d(double x, double lo, double hi) {
    return (x < lo || lo != lo) ? lo : ((x > hi || hi != hi) ? hi : x);
}
/* hardshrink: 0 on [-l, l], else x */
static inline TS_HD float ts_hardshrink_f(float x, float l) {
    return (x >= -l && x <= l) ? 0.0f : x;
}
static inline TS_HD double ts_hardshrink_d(double x, double l) {
    return (x >= -l && x <= l) ? 0.0 : x;
}
/* softshrink: x - l above l, x + l below -l, else x * 0 (NaN stays NaN, -0 keeps its sign) */
static inline TS_HD float ts_softshrink_f(float x, float l) {
    return x > l ? x - l : (x < -l ? x + l : x * 0.0f);
}
static inline TS_HD double ts_softshrink_d(double x, double l) {
    return x > l ? x - l : (x < -l ? x + l : x * 0.0);
}
/* threshold: x <= th ? value : x (strictly greater keeps x; NaN stays NaN) */
static inline TS_HD float ts_threshold_f(float x, float th, float v) { return x <= th ? v : x; }
static inline TS_HD double ts_threshold_d(double x, double th, double v) { return x <= th ? v : x; }
/* logsigmoid: min(0, x) - log1p(e^-|x|), no overflow either side */
static inline TS_HD float ts_logsigmoid_f(float x) {
    return (x < 0.0f ? x : 0.0f) - log1pf(expf(-fabsf(x)));
}
static inline TS_HD double ts_logsigmoid_d(double x) {
    return (x < 0.0 ? x : 0.0) - log1p(exp(-fabs(x)));
}
/* mish: x tanh(softplus(x)) with softplus = log1p(e^x) unthresholded, as PyTorch (e^x overflows to
 * inf above ~89 in float, log1p(inf) = inf and tanh(inf) = 1: x) */
static inline TS_HD float ts_mish_f(float x) { return x * tanhf(log1pf(expf(x))); }
static inline TS_HD double ts_mish_d(double x) { return x * tanh(log1p(exp(x))); }
/* hardsigmoid: min(max(x + 3, 0), 6) / 6; hardswish: x times the same clamp, then / 6 */
static inline TS_HD float ts_relu6_of_f(float t) { return t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t); }
static inline TS_HD double ts_relu6_of_d(double t) { return t < 0.0 ? 0.0 : (t > 6.0 ? 6.0 : t); }
static inline TS_HD float ts_hardsigmoid_f(float x) { return ts_relu6_of_f(x + 3.0f) / 6.0f; }
static inline TS_HD double ts_hardsigmoid_d(double x) { return ts_relu6_of_d(x + 3.0) / 6.0; }
static inline TS_HD float ts_hardswish_f(float x) { return x * ts_relu6_of_f(x + 3.0f) / 6.0f; }
static inline TS_HD double ts_hardswish_d(double x) { return x * ts_relu6_of_d(x + 3.0) / 6.0; }

/* leaky_relu: x > 0 ? x : x * slope (PyTorch's kernel: NaN and -0 take the slope's side, NaN
 * stays NaN, -0 stays -0 for a positive slope) */
static inline TS_HD float ts_leaky_relu_f(float x, float slope) { return x > 0.0f ? x : x * slope; }
static inline TS_HD double ts_leaky_relu_d(double x, double slope) {
    return x > 0.0 ? x : x * slope;
}

/* softsign: x / (1 + |x|), PyTorch's composition's operations in the compute type */
static inline TS_HD float ts_softsign_f(float x) { return x / (fabsf(x) + 1.0f); }
static inline TS_HD double ts_softsign_d(double x) { return x / (fabs(x) + 1.0); }

/* The activations as (op, expression, trailing arguments) over `a` (of the compute type CT) and
 * the doubles p0, p1 (the backend's unary numbers; backend.h says which is which), FAM f or d. */
#define TS_ACT_PARAM_UNARY(X, FAM, CT, ...)                                                        \
    X(TS_U_ELU, ts_elu_##FAM(a, (CT)p0, (CT)p1, (CT)1), __VA_ARGS__)                               \
    X(TS_U_SELU, ts_elu_##FAM(a, (CT)(TS_SELU_ALPHA * TS_SELU_SCALE), (CT)1, (CT)TS_SELU_SCALE),   \
      __VA_ARGS__)                                                                                 \
    X(TS_U_HARDTANH, ts_hardtanh_##FAM(a, (CT)p0, (CT)p1), __VA_ARGS__)                            \
    X(TS_U_HARDSHRINK, ts_hardshrink_##FAM(a, (CT)p0), __VA_ARGS__)                                \
    X(TS_U_SOFTSHRINK, ts_softshrink_##FAM(a, (CT)p0), __VA_ARGS__)                                \
    X(TS_U_THRESHOLD, ts_threshold_##FAM(a, (CT)p0, (CT)p1), __VA_ARGS__)                          \
    X(TS_U_LOGSIGMOID, ts_logsigmoid_##FAM(a), __VA_ARGS__)                                        \
    X(TS_U_MISH, ts_mish_##FAM(a), __VA_ARGS__)                                                    \
    X(TS_U_HARDSIGMOID, ts_hardsigmoid_##FAM(a), __VA_ARGS__)                                      \
    X(TS_U_HARDSWISH, ts_hardswish_##FAM(a), __VA_ARGS__)                                          \
    X(TS_U_LEAKY_RELU, ts_leaky_relu_##FAM(a, (CT)p0), __VA_ARGS__)                                \
    X(TS_U_SOFTSIGN, ts_softsign_##FAM(a), __VA_ARGS__)

#endif /* TS_KERNEL_MATH_ACT_H */
