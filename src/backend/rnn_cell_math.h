/* rnn_cell_math.h — the pointwise part of one LSTM / GRU step (nn.LSTM, nn.GRU and their cells;
 * the backend's rnn_cell_forward / rnn_cell_backward), defined once for the CPU and CUDA kernels
 * (host and device), in float (f) and double (d). The activations themselves (sigmoid, tanh) are
 * the callers': the CPU's vectorised math on float32 (the bits of the sigmoid and tanh ops), the
 * scalar ones of kernel_math.h elsewhere. Gate orders are PyTorch's: LSTM i, f, g, o; GRU r, z, n.
 *
 * LSTM, from the activated gates i = sigmoid, f = sigmoid, g = tanh, o = sigmoid of the summed
 * pre-activations and the previous cell state cp: c = f cp + i g, h = o tanh(c) (each product
 * rounded, then the sum: the composed ops' bits where no FMA is contracted).
 * GRU, from r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), hn (= h_n, the hidden projection of the
 * n gate with its bias) and hp (the previous state): n = tanh(x_n + r hn), h = n + z (hp - n). */
#ifndef TS_BACKEND_RNN_CELL_MATH_H
#define TS_BACKEND_RNN_CELL_MATH_H

#include "backend/kernel_math.h"

/* The gradients of one LSTM element. tc = tanh(c); dh, dc the gradients reaching h and c (zero
 * where none came). Outputs: the pre-activations' gradients di, df, dg, do_ and that of cp. */
#define TS_RNN_LSTM_BWD(SFX, T)                                                                    \
    static inline TS_HD void ts_lstm_cell_bwd_##SFX(T i, T f, T g, T o, T tc, T cp, T dh, T dc,    \
                                                    T *di, T *df, T *dg, T *do_, T *dcp) {         \
        const T one = (T)1;                                                                        \
        const T dct = dc + dh * o * (one - tc * tc); /* the whole gradient of c */                 \
        *do_ = dh * tc * o * (one - o);                                                            \
        *di = dct * g * i * (one - i);                                                             \
        *df = dct * cp * f * (one - f);                                                            \
        *dg = dct * i * (one - g * g);                                                             \
        *dcp = dct * f;                                                                            \
    }
TS_RNN_LSTM_BWD(f, float)
TS_RNN_LSTM_BWD(d, double)
#undef TS_RNN_LSTM_BWD

/* c and h of one LSTM element from its activated gates */
static inline TS_HD float ts_lstm_c_f(float i, float f, float g, float cp) {
    const float a = f * cp, b = i * g;
    return a + b;
}
static inline TS_HD double ts_lstm_c_d(double i, double f, double g, double cp) {
    const double a = f * cp, b = i * g;
    return a + b;
}

/* the GRU's n pre-activation and new state */
static inline TS_HD float ts_gru_npre_f(float xn, float r, float hn) {
    const float p = r * hn;
    return xn + p;
}
static inline TS_HD double ts_gru_npre_d(double xn, double r, double hn) {
    const double p = r * hn;
    return xn + p;
}
static inline TS_HD float ts_gru_h_f(float n, float z, float hp) {
    const float d = hp - n, p = z * d;
    return n + p;
}
static inline TS_HD double ts_gru_h_d(double n, double z, double hp) {
    const double d = hp - n, p = z * d;
    return n + p;
}

/* The gradients of one GRU element from r, z, n, hn, hp and dh (the gradient reaching h): those
 * of the pre-activations dr, dz, dn (the input projection's: x_r, x_z, x_n), of hn (dhn = dn r:
 * the hidden projection's n part; its r and z parts are dr and dz) and of hp through z. */
#define TS_RNN_GRU_BWD(SFX, T)                                                                     \
    static inline TS_HD void ts_gru_cell_bwd_##SFX(T r, T z, T n, T hn, T hp, T dh, T *dr, T *dz,  \
                                                   T *dn, T *dhn, T *dhp) {                        \
        const T one = (T)1;                                                                        \
        const T dnp = dh * (one - z) * (one - n * n); /* n's pre-activation */                     \
        *dn = dnp;                                                                                 \
        *dhn = dnp * r;                                                                            \
        *dr = dnp * hn * r * (one - r);                                                            \
        *dz = dh * (hp - n) * z * (one - z);                                                       \
        *dhp = dh * z;                                                                             \
    }
TS_RNN_GRU_BWD(f, float)
TS_RNN_GRU_BWD(d, double)
#undef TS_RNN_GRU_BWD

#endif /* TS_BACKEND_RNN_CELL_MATH_H */
