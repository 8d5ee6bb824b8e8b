/* cuda_binary_ops.cuh — the binary op switch per compute type, shared by the tensor-tensor and the
 * tensor-scalar kernels (kern_binary.c's rules, math from kernel_math.h). */
#ifndef TS_CUDA_BINARY_OPS_CUH
#define TS_CUDA_BINARY_OPS_CUH

#include "backend/cuda/cuda_dtype.cuh"

static_assert(TS_B_COUNT == 55,
              "a ts_binary_op was added or removed: give it its CUDA case in tsc_bin_arith (float, "
              "double, integers) here; then update the count");

/* Comparisons and logical ops write bool; everything else the input dtype. */
static inline bool tsc_binary_is_bool(ts_binary_op op) { return op >= TS_B_EQ && op <= TS_B_OR; }

/* kernel_math.h's special binary ops (issue 52); integers (off the contract) in double, truncated
 */
#define TSC_BIN_SPECIAL(U, FN, FAM)                                                                \
    case U:                                                                                        \
        return TS_SPECIAL_##FAM(FN)(a, b);
#define TSC_BIN_SPECIAL_INT(U, FN, unused)                                                         \
    case U:                                                                                        \
        return ts_d2i64(TS_SPECIAL_d(FN)((double)a, (double)b));

/* clang-format off */
TS_HD inline float tsc_bin_arith(int op, float a, float b) {
    switch (op) {
    case TS_B_ADD: return a + b;
    case TS_B_SUB: return a - b;
    case TS_B_MUL: return a * b;
    case TS_B_DIV: return a / b;
    case TS_B_POW: return powf(a, b);
    case TS_B_MAX: return ts_maximum_f(a, b);
    case TS_B_MIN: return ts_minimum_f(a, b);
    case TS_B_FMOD: return ts_fmod_f(a, b);
    case TS_B_FLOORDIV: return ts_floordiv_f(a, b);
    case TS_B_DIVTRUNC: return truncf(a / b);
    case TS_B_REM: return ts_rem_f(a, b);
    case TS_B_RSUB: return b - a;
    case TS_B_RDIV: return b / a;
    case TS_B_RPOW: return powf(b, a);
    case TS_B_RELU_BWD: return ts_relu_bwd_f(a, b);
    case TS_B_SIGMOID_BWD: return ts_sigmoid_bwd_f(a, b);
    case TS_B_TANH_BWD: return ts_tanh_bwd_f(a, b);
    case TS_B_GELU_BWD: return ts_gelu_bwd_f(a, b);
    case TS_B_SILU_BWD: return ts_silu_bwd_f(a, b);
    TS_SPECIAL_BINARY(TSC_BIN_SPECIAL, f)
    default: return a;
    }
}

TS_HD inline double tsc_bin_arith(int op, double a, double b) {
    switch (op) {
    case TS_B_ADD: return a + b;
    case TS_B_SUB: return a - b;
    case TS_B_MUL: return a * b;
    case TS_B_DIV: return a / b;
    case TS_B_POW: return pow(a, b);
    case TS_B_MAX: return ts_maximum_d(a, b);
    case TS_B_MIN: return ts_minimum_d(a, b);
    case TS_B_FMOD: return ts_fmod_d(a, b);
    case TS_B_FLOORDIV: return ts_floordiv_d(a, b);
    case TS_B_DIVTRUNC: return trunc(a / b);
    case TS_B_REM: return ts_rem_d(a, b);
    case TS_B_RSUB: return b - a;
    case TS_B_RDIV: return b / a;
    case TS_B_RPOW: return pow(b, a);
    case TS_B_RELU_BWD: return ts_relu_bwd_d(a, b);
    case TS_B_SIGMOID_BWD: return ts_sigmoid_bwd_d(a, b);
    case TS_B_TANH_BWD: return ts_tanh_bwd_d(a, b);
    case TS_B_GELU_BWD: return ts_gelu_bwd_d(a, b);
    case TS_B_SILU_BWD: return ts_silu_bwd_d(a, b);
    TS_SPECIAL_BINARY(TSC_BIN_SPECIAL, d)
    default: return a;
    }
}

/* Wrapping arithmetic; division and modulo by zero give 0 (a kernel must not trap); the float
 * backwards (off the contract on integers) compute in double and truncate, like the CPU. */
TS_HD inline int64_t tsc_bin_arith(int op, int64_t a, int64_t b) {
    switch (op) {
    case TS_B_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case TS_B_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case TS_B_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case TS_B_DIV: return ts_idiv_i64(a, b);
    case TS_B_POW: return ts_ipow_i64(a, b);
    case TS_B_MAX: return a > b ? a : b;
    case TS_B_MIN: return a < b ? a : b;
    case TS_B_FMOD: return ts_imod_i64(a, b);
    case TS_B_FLOORDIV: return ts_ifloordiv_i64(a, b);
    case TS_B_REM: return ts_irem_i64(a, b);
    case TS_B_DIVTRUNC: return ts_idiv_i64(a, b);
    case TS_B_BITAND: return a & b;
    case TS_B_BITOR: return a | b;
    case TS_B_BITXOR: return a ^ b;
    case TS_B_LSHIFT: return b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b);
    case TS_B_RSHIFT: return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b;
    case TS_B_RSUB: return (int64_t)((uint64_t)b - (uint64_t)a);
    case TS_B_RDIV: return ts_idiv_i64(b, a);
    case TS_B_RPOW: return ts_ipow_i64(b, a);
    case TS_B_RELU_BWD: return b <= 0 ? 0 : a;
    case TS_B_SIGMOID_BWD: return ts_d2i64(ts_sigmoid_bwd_d((double)a, (double)b));
    case TS_B_TANH_BWD: return ts_d2i64(ts_tanh_bwd_d((double)a, (double)b));
    case TS_B_GELU_BWD: return ts_d2i64(ts_gelu_bwd_d((double)a, (double)b));
    case TS_B_SILU_BWD: return ts_d2i64(ts_silu_bwd_d((double)a, (double)b));
    TS_SPECIAL_BINARY(TSC_BIN_SPECIAL_INT, 0)
    default: return a;
    }
}

template <typename C> TS_HD inline tsc_b8 tsc_bin_cmp(int op, C a, C b) {
    bool r;
    switch (op) {
    case TS_B_EQ: r = a == b; break;
    case TS_B_NE: r = a != b; break;
    case TS_B_LT: r = a < b; break;
    case TS_B_LE: r = a <= b; break;
    case TS_B_GT: r = a > b; break;
    case TS_B_GE: r = a >= b; break;
    case TS_B_AND: r = (a != 0) & (b != 0); break;
    case TS_B_OR: r = (a != 0) | (b != 0); break;
    default: r = false; break;
    }
    return {(uint8_t)r};
}

/* clang-format on */
#endif /* TS_CUDA_BINARY_OPS_CUH */
