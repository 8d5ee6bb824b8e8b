/* cuda_rnn_cell.cu — one LSTM / GRU time step's gates on CUDA (backend.h's ts_rnn_cell_args), one
 * thread per (row, hidden unit), forward and backward: the pointwise formulas of
 * backend/rnn_cell_math.h with kernel_math.h's sigmoid and the device's tanh. */
#include "backend/cuda/cuda_compute.h"
#include "backend/rnn_cell_math.h"

namespace {

struct RcPlan {
    const char *xw, *gh, *state, *saved, *dh, *dc;
    char *h, *c, *sv, *dxw, *dgh, *dstate;
    int64_t B, H;
};

__device__ __forceinline__ float rc_sig(float x) { return ts_sigmoid_f(x); }
__device__ __forceinline__ double rc_sig(double x) { return ts_sigmoid_d(x); }
__device__ __forceinline__ float rc_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rc_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float rc_lstm_c(float i, float f, float g, float cp) {
    return ts_lstm_c_f(i, f, g, cp);
}
__device__ __forceinline__ double rc_lstm_c(double i, double f, double g, double cp) {
    return ts_lstm_c_d(i, f, g, cp);
}
__device__ __forceinline__ float rc_npre(float xn, float r, float hn) {
    return ts_gru_npre_f(xn, r, hn);
}
__device__ __forceinline__ double rc_npre(double xn, double r, double hn) {
    return ts_gru_npre_d(xn, r, hn);
}
__device__ __forceinline__ float rc_gru_h(float n, float z, float hp) {
    return ts_gru_h_f(n, z, hp);
}
__device__ __forceinline__ double rc_gru_h(double n, double z, double hp) {
    return ts_gru_h_d(n, z, hp);
}
__device__ __forceinline__ void rc_lstm_bwd(float i, float f, float g, float o, float tc, float cp,
                                            float dh, float dc, float *di, float *df, float *dg,
                                            float *dout, float *dcp) {
    ts_lstm_cell_bwd_f(i, f, g, o, tc, cp, dh, dc, di, df, dg, dout, dcp);
}
__device__ __forceinline__ void rc_lstm_bwd(double i, double f, double g, double o, double tc,
                                            double cp, double dh, double dc, double *di, double *df,
                                            double *dg, double *dout, double *dcp) {
    ts_lstm_cell_bwd_d(i, f, g, o, tc, cp, dh, dc, di, df, dg, dout, dcp);
}
__device__ __forceinline__ void rc_gru_bwd(float r, float z, float n, float hn, float hp, float dh,
                                           float *dr, float *dz, float *dn, float *dhn,
                                           float *dhp) {
    ts_gru_cell_bwd_f(r, z, n, hn, hp, dh, dr, dz, dn, dhn, dhp);
}
__device__ __forceinline__ void rc_gru_bwd(double r, double z, double n, double hn, double hp,
                                           double dh, double *dr, double *dz, double *dn,
                                           double *dhn, double *dhp) {
    ts_gru_cell_bwd_d(r, z, n, hn, hp, dh, dr, dz, dn, dhn, dhp);
}

template <typename T> __global__ void lstm_fwd(RcPlan p) {
    const T *xw = (const T *)p.xw, *gh = (const T *)p.gh, *cp = (const T *)p.state;
    T *h = (T *)p.h, *c = (T *)p.c, *sv = (T *)p.sv;
    const int64_t H = p.H, n = p.B * H;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / H, j = e % H, g0 = r * 4 * H + j;
        T pre[4];
        for (int k = 0; k < 4; k++) pre[k] = xw[g0 + k * H] + (gh ? gh[g0 + k * H] : (T)0);
        const T i = rc_sig(pre[0]), f = rc_sig(pre[1]), g = rc_tanh(pre[2]), o = rc_sig(pre[3]);
        const T cj = rc_lstm_c(i, f, g, cp[e]), tc = rc_tanh(cj);
        T *s = sv + r * 5 * H + j;
        s[0] = i, s[H] = f, s[2 * H] = g, s[3 * H] = o, s[4 * H] = tc;
        c[e] = cj;
        h[e] = o * tc;
    }
}

template <typename T> __global__ void gru_fwd(RcPlan p) {
    const T *xw = (const T *)p.xw, *gh = (const T *)p.gh, *hp = (const T *)p.state;
    T *h = (T *)p.h, *sv = (T *)p.sv;
    const int64_t H = p.H, n = p.B * H;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / H, j = e % H, g0 = r * 3 * H + j;
        const T rg = rc_sig(xw[g0] + gh[g0]), z = rc_sig(xw[g0 + H] + gh[g0 + H]);
        const T hn = gh[g0 + 2 * H], nn = rc_tanh(rc_npre(xw[g0 + 2 * H], rg, hn));
        T *s = sv + r * 4 * H + j;
        s[0] = rg, s[H] = z, s[2 * H] = nn, s[3 * H] = hn;
        h[e] = rc_gru_h(nn, z, hp[e]);
    }
}

template <typename T> __global__ void lstm_bwd(RcPlan p) {
    const T *sv = (const T *)p.saved, *cp = (const T *)p.state, *dh = (const T *)p.dh,
            *dc = (const T *)p.dc;
    T *dx = (T *)p.dxw, *dcp = (T *)p.dstate;
    const int64_t H = p.H, n = p.B * H;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / H, j = e % H;
        const T *s = sv + r * 5 * H + j;
        T di, df, dg, dout, dcj;
        rc_lstm_bwd(s[0], s[H], s[2 * H], s[3 * H], s[4 * H], cp[e], dh ? dh[e] : (T)0,
                    dc ? dc[e] : (T)0, &di, &df, &dg, &dout, &dcj);
        if (dx) {
            T *d = dx + r * 4 * H + j;
            d[0] = di, d[H] = df, d[2 * H] = dg, d[3 * H] = dout;
        }
        if (dcp) dcp[e] = dcj;
    }
}

template <typename T> __global__ void gru_bwd(RcPlan p) {
    const T *sv = (const T *)p.saved, *hp = (const T *)p.state, *dh = (const T *)p.dh;
    T *dx = (T *)p.dxw, *dg = (T *)p.dgh, *dhp = (T *)p.dstate;
    const int64_t H = p.H, n = p.B * H;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / H, j = e % H;
        const T *s = sv + r * 4 * H + j;
        T dr, dz, dn, dhn, dhpj;
        rc_gru_bwd(s[0], s[H], s[2 * H], s[3 * H], hp[e], dh ? dh[e] : (T)0, &dr, &dz, &dn, &dhn,
                   &dhpj);
        if (dx) {
            T *d = dx + r * 3 * H + j;
            d[0] = dr, d[H] = dz, d[2 * H] = dn;
        }
        if (dg) {
            T *d = dg + r * 3 * H + j;
            d[0] = dr, d[H] = dz, d[2 * H] = dhn;
        }
        if (dhp) dhp[e] = dhpj;
    }
}

RcPlan plan_of(const ts_rnn_cell_args *a) {
    RcPlan p;
    p.xw = a->xw.data, p.gh = a->gh.data, p.state = a->state.data, p.saved = a->saved.data;
    p.dh = a->dh.data, p.dc = a->dc.data;
    p.h = a->h.data, p.c = a->c.data, p.sv = a->saved.data;
    p.dxw = a->dxw.data, p.dgh = a->dgh.data, p.dstate = a->dstate.data;
    p.B = a->rows, p.H = a->hidden;
    return p;
}

} /* namespace */

void tsc_rnn_cell_forward(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be;
    const RcPlan p = plan_of(a);
    const int64_t n = p.B * p.H;
    if (n <= 0 || !tsc_begin(index)) return;
    const unsigned grid = tsc_grid(n, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    const bool f64 = a->xw.dtype == TS_F64;
    if (a->lstm) {
        if (f64)
            lstm_fwd<double><<<grid, TSC_THREADS, 0, st>>>(p);
        else
            lstm_fwd<float><<<grid, TSC_THREADS, 0, st>>>(p);
    } else {
        if (f64)
            gru_fwd<double><<<grid, TSC_THREADS, 0, st>>>(p);
        else
            gru_fwd<float><<<grid, TSC_THREADS, 0, st>>>(p);
    }
    tsc_launch_check("rnn_cell_forward", index);
}

void tsc_rnn_cell_backward(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be;
    const RcPlan p = plan_of(a);
    const int64_t n = p.B * p.H;
    if (n <= 0 || !tsc_begin(index)) return;
    const unsigned grid = tsc_grid(n, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    const bool f64 = a->saved.dtype == TS_F64;
    if (a->lstm) {
        if (f64)
            lstm_bwd<double><<<grid, TSC_THREADS, 0, st>>>(p);
        else
            lstm_bwd<float><<<grid, TSC_THREADS, 0, st>>>(p);
    } else {
        if (f64)
            gru_bwd<double><<<grid, TSC_THREADS, 0, st>>>(p);
        else
            gru_bwd<float><<<grid, TSC_THREADS, 0, st>>>(p);
    }
    tsc_launch_check("rnn_cell_backward", index);
}
