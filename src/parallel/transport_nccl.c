/* transport_nccl.c — the transport over NCCL (CUDA devices only): tensors made contiguous, their
 * buffers handed to cuda_nccl.cu's grouped ncclBroadcast / ncclReduce. Compiled only into CUDA
 * builds with NCCL; transport.c decides when to come here. */
#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)

#include <stdlib.h>

#include "backend/cuda/cuda_nccl.h"
#include "parallel/transport.h"

/* The host-side arrays one call needs: buffer pointers [n_devices * n_tensors], sums
 * [n_tensors], element counts and dtypes [n_tensors], device indices [n_devices]. */
typedef struct nccl_args {
    void **bufs, **sums;
    int64_t *counts;
    ts_dtype *dtypes;
    int *devices;
} nccl_args;

static void args_free(nccl_args *a) {
    free(a->bufs);
    free(a->sums);
    free(a->counts);
    free(a->dtypes);
    free(a->devices);
}

static bool args_alloc(const char *op, nccl_args *a, int n_tensors, const ts_device *devices,
                       int n_devices) {
    size_t nt = (size_t)n_tensors ? (size_t)n_tensors : 1;
    a->bufs = calloc(nt * (size_t)n_devices, sizeof *a->bufs);
    a->sums = calloc(nt, sizeof *a->sums);
    a->counts = calloc(nt, sizeof *a->counts);
    a->dtypes = calloc(nt, sizeof *a->dtypes);
    a->devices = calloc((size_t)n_devices, sizeof *a->devices);
    if (!a->bufs || !a->sums || !a->counts || !a->dtypes || !a->devices) {
        args_free(a);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    }
    for (int r = 0; r < n_devices; r++) a->devices[r] = devices[r].index;
    return true;
}

bool tsi_nccl_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                        const ts_device *devices, int n_devices, ts_tensor **dst) {
    const int total = n_tensors * (n_devices - 1);
    for (int k = 0; k < total; k++) dst[k] = NULL;
    nccl_args a;
    if (!args_alloc(op, &a, n_tensors, devices, n_devices)) return false;
    bool ok = true;
    /* the contiguous sources live in this scope until the collectives are queued; the caching
     * allocator orders their reuse after them on the same stream */
    ts_scope_begin();
    for (int i = 0; i < n_tensors && ok; i++) {
        ts_tensor *s = tsi_own(tsi_contiguous(op, src[i]));
        ok = s != NULL;
        if (!ok) break;
        a.bufs[i] = tsi_kview(s).data;
        a.counts[i] = tsi_numel(s->shape);
        a.dtypes[i] = s->dtype;
        for (int r = 1; r < n_devices && ok; r++) {
            ts_tensor *d = tsi_new(op, s->shape, s->dtype, devices[r]);
            dst[(r - 1) * n_tensors + i] = d;
            ok = d != NULL;
            if (ok) a.bufs[(size_t)r * n_tensors + i] = tsi_kview(d).data;
        }
    }
    ok = ok && tsc_nccl_broadcast(op, a.devices, n_devices, a.bufs, a.counts, a.dtypes, n_tensors);
    ts_scope_end();
    args_free(&a);
    if (!ok)
        for (int k = 0; k < total; k++) {
            ts_release(dst[k]);
            dst[k] = NULL;
        }
    return ok;
}

bool tsi_nccl_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                         const ts_device *devices, int n_devices, ts_tensor **out) {
    for (int i = 0; i < n_tensors; i++) out[i] = NULL;
    nccl_args a;
    if (!args_alloc(op, &a, n_tensors, devices, n_devices)) return false;
    bool ok = true;
    int n = 0; /* tensors with at least one gradient: packed to the front of the arrays */
    ts_scope_begin();
    for (int i = 0; i < n_tensors && ok; i++) {
        ts_tensor *like = NULL;
        for (int r = 0; r < n_devices && !like; r++) like = ins[r * n_tensors + i];
        if (!like) continue; /* no rank has one: no gradient, and no NCCL operation either */
        for (int r = 0; r < n_devices && ok; r++) {
            ts_tensor *t = ins[r * n_tensors + i];
            /* every rank takes part in a reduce: a missing contribution is zeros */
            ts_tensor *c =
                t ? tsi_own(tsi_contiguous(op, t))
                  : ts_zeros(like->shape, (ts_opts){.dtype = like->dtype, .device = devices[r]});
            ok = c != NULL;
            if (ok) a.bufs[(size_t)r * n_tensors + n] = tsi_kview(c).data;
        }
        if (!ok) break;
        out[i] = tsi_new(op, like->shape, like->dtype, devices[0]);
        ok = out[i] != NULL;
        if (!ok) break;
        a.sums[n] = tsi_kview(out[i]).data;
        a.counts[n] = tsi_numel(like->shape);
        a.dtypes[n] = like->dtype;
        n++;
    }
    /* rank r's buffers were written at stride n_tensors; cuda_nccl.cu reads them at stride n.
     * Moving rows up in order never overwrites an entry still to be read (r * n + k <=
     * r * n_tensors + k, and later rows start past this one's end). */
    if (ok && n < n_tensors)
        for (int r = 1; r < n_devices; r++)
            for (int k = 0; k < n; k++)
                a.bufs[(size_t)r * n + k] = a.bufs[(size_t)r * n_tensors + k];
    ok = ok && tsc_nccl_reduce_sum(op, a.devices, n_devices, a.bufs, a.sums, a.counts, a.dtypes, n);
    ts_scope_end();
    args_free(&a);
    if (!ok)
        for (int i = 0; i < n_tensors; i++) {
            ts_release(out[i]);
            out[i] = NULL;
        }
    return ok;
}

#else
/* ISO C wants at least one declaration in a translation unit */
typedef int tsi_transport_nccl_unused;
#endif
