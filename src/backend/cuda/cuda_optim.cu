/* cuda_optim.cu — the fused optimizer step on CUDA: one kernel launch updates every tensor of a
 * call (PyTorch's multi_tensor_apply idea). A table of the tensors (pointers, sizes, per-tensor
 * bias corrections and flags) goes to device memory with one copy; the launch covers every tensor's
 * chunks, and each block finds its tensor by a binary search over the chunk offsets.
 *
 * A capturable optimizer's tensors (docs/CAPTURE.md) take lr, momentum and beta1 from their
 * scalars on the device and count their steps there (count_kernel, then the step); the grad
 * scaler's skip flag, read on the device, makes both kernels leave everything alone.
 *
 * The per-element math is optim_math.h, shared with the CPU loops; it multiplies, divides and takes
 * square roots through the _rn intrinsics, so a CUDA step rounds exactly like the CPU step. */
#include <stdlib.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/optim_math.h"
#include "backend/optim_math_adaptive.h"

namespace {

#define OPT_CHUNK 4096 /* elements per block chunk (16 per thread) */

/* One tensor of the table. nstep / bc2s hold Adam's bias corrections already rounded to the
 * compute type (exact in double). */
struct OTensor {
    void *p;
    float *mw; /* the float32 master (ts_optim_step_args.master), NULL for none */
    const void *g;
    void *s[TS_OPTIM_SLOTS];
    int64_t numel;
    int64_t chunk0; /* index of the tensor's first chunk over the whole launch */
    double nstep, bc2s;
    int fresh;
    /* a capturable optimizer's scalars (f64 [TS_OPTIM_SCALARS], optim_step.h), NULL otherwise:
     * lr, momentum and beta1 from there, the step count advanced there (count_kernel) */
    double *sc;
    /* Adagrad .. Rprop: the host's per-tensor coefficients (optim_math_adaptive.h) */
    double coef[TS_OPTIM_COEFS];
};

struct OArgs {
    ts_om_k_f kf;
    ts_om_k_d kd;
    ts_optim_hparams h; /* the group's, for tensors with scalars */
    const float *skip;  /* the grad scaler's verdict: nonzero skips the whole call */
    int kind;           /* ts_optim_kind */
    bool wd, mom, nest, adamw, ams, centered;
};

template <typename CT> struct OM;
template <> struct OM<float> {
    typedef ts_om_k_f K;
    static __device__ __forceinline__ const ts_om_k_f *k(const OArgs &a) { return &a.kf; }
    static __device__ __forceinline__ K consts(const ts_optim_hparams *h) {
        return ts_om_consts_f(h);
    }
    typedef ts_om_x_f X;
    static __device__ __forceinline__ X xconsts(const ts_optim_hparams *h, const double *coef) {
        return ts_om_x_consts_f(h, coef);
    }
    static __device__ __forceinline__ float more(const X *x, float pv, float g, float *s0,
                                                 float *s1) {
        return ts_om_more_f(x, pv, g, s0, s1);
    }
    static __device__ __forceinline__ void bias(const ts_optim_hparams *h, double step, float *ns,
                                                float *bs) {
        ts_om_adam_bias_f(h, step, ns, bs);
    }
    static __device__ __forceinline__ float sgd(const ts_om_k_f *k, float pv, float g, float *buf,
                                                bool wd, bool mom, bool fresh, bool nest) {
        return ts_om_sgd_f(k, pv, g, buf, wd, mom, fresh, nest);
    }
    static __device__ __forceinline__ float adam(const ts_om_k_f *k, float nstep, float bc2s,
                                                 float pv, float g, float *m, float *v, float *mx,
                                                 bool adamw, bool wd, bool ams) {
        return ts_om_adam_f(k, nstep, bc2s, pv, g, m, v, mx, adamw, wd, ams);
    }
    static __device__ __forceinline__ float rmsprop(const ts_om_k_f *k, float pv, float g,
                                                    float *sq, float *buf, float *ga, bool wd,
                                                    bool centered, bool mom) {
        return ts_om_rmsprop_f(k, pv, g, sq, buf, ga, wd, centered, mom);
    }
};
template <> struct OM<double> {
    typedef ts_om_k_d K;
    static __device__ __forceinline__ const ts_om_k_d *k(const OArgs &a) { return &a.kd; }
    static __device__ __forceinline__ K consts(const ts_optim_hparams *h) {
        return ts_om_consts_d(h);
    }
    typedef ts_om_x_d X;
    static __device__ __forceinline__ X xconsts(const ts_optim_hparams *h, const double *coef) {
        return ts_om_x_consts_d(h, coef);
    }
    static __device__ __forceinline__ double more(const X *x, double pv, double g, double *s0,
                                                  double *s1) {
        return ts_om_more_d(x, pv, g, s0, s1);
    }
    static __device__ __forceinline__ void bias(const ts_optim_hparams *h, double step, double *ns,
                                                double *bs) {
        ts_om_adam_bias_d(h, step, ns, bs);
    }
    static __device__ __forceinline__ double sgd(const ts_om_k_d *k, double pv, double g,
                                                 double *buf, bool wd, bool mom, bool fresh,
                                                 bool nest) {
        return ts_om_sgd_d(k, pv, g, buf, wd, mom, fresh, nest);
    }
    static __device__ __forceinline__ double adam(const ts_om_k_d *k, double nstep, double bc2s,
                                                  double pv, double g, double *m, double *v,
                                                  double *mx, bool adamw, bool wd, bool ams) {
        return ts_om_adam_d(k, nstep, bc2s, pv, g, m, v, mx, adamw, wd, ams);
    }
    static __device__ __forceinline__ double rmsprop(const ts_om_k_d *k, double pv, double g,
                                                     double *sq, double *buf, double *ga, bool wd,
                                                     bool centered, bool mom) {
        return ts_om_rmsprop_d(k, pv, g, sq, buf, ga, wd, centered, mom);
    }
};

/* Advances the step counts of the tensors with scalars, before optim_kernel reads them (as the
 * CPU's tensor_hparams does): one thread per tensor. */
__global__ void count_kernel(const float *skip, const OTensor *tab, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || (skip && *skip != 0) || !tab[i].sc) return;
    tab[i].sc[TS_OPTIM_SC_STEPS] += 1;
}

/* A parameter element through its float32 master when MASTER (the parameter stores the result
 * rounded once to T), directly otherwise. */
template <typename T, bool MASTER>
__device__ __forceinline__ typename tsc_acc<T>::type p_load(const T *p, const float *mw,
                                                            int64_t i) {
    if (MASTER) return mw[i];
    return tsc_load_acc(p[i]);
}
template <typename T, bool MASTER>
__device__ __forceinline__ void p_store(T *p, float *mw, int64_t i, typename tsc_acc<T>::type r) {
    if (MASTER) mw[i] = (float)r;
    p[i] = tsc_from_acc<T>(r);
}

/* T: the parameters' and gradients' type; S: the state's (f32 with masters, MASTER) */
template <typename T, typename S, bool MASTER>
__global__ void optim_kernel(OArgs a, const OTensor *tab, int n, int64_t nchunks) {
    typedef typename tsc_acc<T>::type CT;
    typedef OM<CT> M;
    if (a.skip && *a.skip != 0) return; /* Inf/NaN: skipped */
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        int lo = 0, hi = n - 1; /* the last tensor whose first chunk is <= c */
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (tab[mid].chunk0 <= c)
                lo = mid;
            else
                hi = mid - 1;
        }
        const OTensor t = tab[lo];
        const typename M::K *k = M::k(a);
        typename M::K ks;
        CT nstep = (CT)t.nstep, bc2s = (CT)t.bc2s;
        if (t.sc) { /* this tensor's rates and count, from the device */
            const ts_optim_hparams h = ts_om_with_scalars(a.h, t.sc);
            ks = M::consts(&h);
            k = &ks;
            if (a.kind == TS_OPTIM_ADAM || a.kind == TS_OPTIM_ADAMW)
                M::bias(&h, t.sc[TS_OPTIM_SC_STEPS], &nstep, &bc2s);
        }
        T *p = (T *)t.p;
        float *mw = t.mw;
        const T *g = (const T *)t.g;
        S *s0 = (S *)t.s[0], *s1 = (S *)t.s[1], *s2 = (S *)t.s[2];
        const int64_t b = (c - t.chunk0) * OPT_CHUNK;
        const int64_t e = b + OPT_CHUNK < t.numel ? b + OPT_CHUNK : t.numel;
        if (a.kind >= TS_OPTIM_ADAGRAD) { /* optim_math_adaptive.h: slots 0 and 1 */
            const typename M::X x = M::xconsts(&a.h, t.coef);
            for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
                CT v0 = s0 ? tsc_load_acc(s0[i]) : (CT)0, v1 = s1 ? tsc_load_acc(s1[i]) : (CT)0;
                p_store<T, MASTER>(
                    p, mw, i,
                    M::more(&x, p_load<T, MASTER>(p, mw, i), tsc_load_acc(g[i]), &v0, &v1));
                if (s0) s0[i] = tsc_from_acc<S>(v0);
                if (s1) s1[i] = tsc_from_acc<S>(v1);
            }
            continue;
        }
        for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
            const CT pv = p_load<T, MASTER>(p, mw, i), gv = tsc_load_acc(g[i]);
            if (a.kind == TS_OPTIM_SGD) {
                const bool fresh = t.fresh != 0;
                CT bv = a.mom && !fresh ? tsc_load_acc(s0[i]) : (CT)0;
                p_store<T, MASTER>(p, mw, i, M::sgd(k, pv, gv, &bv, a.wd, a.mom, fresh, a.nest));
                if (a.mom) s0[i] = tsc_from_acc<S>(bv);
            } else if (a.kind == TS_OPTIM_RMSPROP) {
                CT sq = tsc_load_acc(s0[i]);
                CT bv = a.mom ? tsc_load_acc(s1[i]) : (CT)0;
                CT ga = a.centered ? tsc_load_acc(s2[i]) : (CT)0;
                p_store<T, MASTER>(p, mw, i,
                                   M::rmsprop(k, pv, gv, &sq, &bv, &ga, a.wd, a.centered, a.mom));
                s0[i] = tsc_from_acc<S>(sq);
                if (a.mom) s1[i] = tsc_from_acc<S>(bv);
                if (a.centered) s2[i] = tsc_from_acc<S>(ga);
            } else {
                CT m = tsc_load_acc(s0[i]), v = tsc_load_acc(s1[i]);
                CT mx = a.ams ? tsc_load_acc(s2[i]) : (CT)0;
                p_store<T, MASTER>(
                    p, mw, i, M::adam(k, nstep, bc2s, pv, gv, &m, &v, &mx, a.adamw, a.wd, a.ams));
                s0[i] = tsc_from_acc<S>(m);
                s1[i] = tsc_from_acc<S>(v);
                if (a.ams) s2[i] = tsc_from_acc<S>(mx);
            }
        }
    }
}

/* The tensors of args with dtype dt and a master or not (usually all of them): one table, one
 * copy, one launch. */
static void optim_launch(int index, const struct ts_optim_step_args *args, ts_dtype dt,
                         bool master) {
    const ts_optim_hparams *h = &args->h;
    OTensor *tab = (OTensor *)malloc((size_t)args->n * sizeof(OTensor));
    if (!tab) {
        tsi_error_set(TS_ERR_OOM, "optim_step: out of host memory for the tensor table");
        return;
    }
    int n = 0;
    int64_t nchunks = 0;
    for (int i = 0; i < args->n; i++) {
        const ts_kview *pv = &args->param[i];
        float *mw = args->master ? (float *)args->master[i].data : nullptr;
        if (pv->dtype != dt || (mw != nullptr) != master) continue;
        int64_t numel = 1;
        for (int d = 0; d < pv->ndim; d++) numel *= pv->shape[d];
        if (numel <= 0) continue;
        OTensor t;
        t.p = pv->data;
        t.mw = mw;
        t.g = args->grad[i].data;
        for (int k = 0; k < TS_OPTIM_SLOTS; k++)
            t.s[k] = args->state[k] ? (void *)args->state[k][i].data : NULL;
        t.numel = numel;
        t.chunk0 = nchunks;
        t.fresh = args->fresh && args->fresh[i];
        t.nstep = t.bc2s = 0;
        t.sc = args->scalars ? (double *)args->scalars[i].data : nullptr;
        for (int k = 0; k < TS_OPTIM_COEFS; k++)
            t.coef[k] = args->coef ? args->coef[(size_t)i * TS_OPTIM_COEFS + k] : 0.0;
        if (!t.sc && (h->kind == TS_OPTIM_ADAM || h->kind == TS_OPTIM_ADAMW)) {
            if (dt == TS_F64) {
                ts_om_adam_bias_d(h, args->step[i], &t.nstep, &t.bc2s);
            } else {
                float ns, bs;
                ts_om_adam_bias_f(h, args->step[i], &ns, &bs);
                t.nstep = ns;
                t.bc2s = bs;
            }
        }
        tab[n++] = t;
        nchunks += (numel + OPT_CHUNK - 1) / OPT_CHUNK;
    }
    if (n == 0) {
        free(tab);
        return;
    }
    OArgs a;
    a.kf = ts_om_consts_f(h);
    a.kd = ts_om_consts_d(h);
    a.h = *h;
    a.skip = args->skip_if ? (const float *)args->skip_if->data : nullptr;
    a.kind = (int)h->kind;
    a.adamw = h->kind == TS_OPTIM_ADAMW;
    a.wd = h->weight_decay != 0 && !a.adamw; /* AdamW's decay is decoupled (adamw flag) */
    a.mom = h->kind == TS_OPTIM_RMSPROP ? h->momentum > 0 : h->momentum != 0;
    a.nest = h->nesterov;
    a.ams = h->amsgrad;
    a.centered = h->centered;
    cudaStream_t st = tsc_stream(index);
    const size_t bytes = (size_t)n * sizeof(OTensor);
    OTensor *dtab = (OTensor *)tsc_table_alloc(index, bytes);
    /* through pinned memory kept until the copy ran, so tab can go at once */
    if (dtab &&
        tsc_copy_table_h2d(index, dtab, tab, bytes, "optim_step: copying the tensor table")) {
        const unsigned grid = (unsigned)(nchunks < TSC_MAX_BLOCKS ? nchunks : TSC_MAX_BLOCKS);
        if (args->scalars) {
            count_kernel<<<(unsigned)((n + TSC_THREADS - 1) / TSC_THREADS), TSC_THREADS, 0, st>>>(
                a.skip, dtab, n);
            tsc_launch_check("optim_step: step counts", index);
        }
        if (!master)
            TSC_FLOAT_SWITCH(
                dt, T, optim_kernel<T, T, false><<<grid, TSC_THREADS, 0, st>>>(a, dtab, n, nchunks))
        else if (dt == TS_F16)
            optim_kernel<tsc_f16, float, true><<<grid, TSC_THREADS, 0, st>>>(a, dtab, n, nchunks);
        else if (dt == TS_BF16)
            optim_kernel<tsc_bf16, float, true><<<grid, TSC_THREADS, 0, st>>>(a, dtab, n, nchunks);
        tsc_launch_check("optim_step", index);
    }
    if (dtab) tsc_scratch_free(index, dtab);
    free(tab);
}

} /* namespace */

void tsc_optim_step(const ts_backend *be, int index, const struct ts_optim_step_args *args) {
    (void)be;
    if (args->n <= 0 || !tsc_begin(index)) return;
    /* the front end groups by dtype, so this is one launch; mixed calls get one per dtype (and
     * per master or none: masters are f16/bf16 parameters') */
    const ts_dtype dts[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 2; m++) {
            if (m && dts[k] != TS_F16 && dts[k] != TS_BF16) continue;
            bool any = false;
            for (int i = 0; i < args->n && !any; i++)
                any = args->param[i].dtype == dts[k] &&
                      (args->master && args->master[i].data) == (m != 0);
            if (any) optim_launch(index, args, dts[k], m != 0);
        }
}
