/* kern_sdpa_amx.h — bf16 attention whose block products run on AMX tiles (kern_sdpa_amx.c): the
 * path kern_sdpa.c takes for bf16 on a host with AMX when one batch's L x S scores fit a thread's
 * cache (the choice is sdpa_select.c's). */
#ifndef TS_KERN_SDPA_AMX_H
#define TS_KERN_SDPA_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Element offset of batch n (over the nb batch dims of sizes bshape, the last fastest) in view
 * v, whose batch dims broadcast by stride 0: both attention paths' addressing. */
static inline int64_t tsi_sdpa_batch_offset(const ts_kview *v, const int64_t *bshape, int nb,
                                            int64_t n) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        off += (n % bshape[d]) * v->strides[d];
        n /= bshape[d];
    }
    return off;
}

/* Whether tsi_sdpa_select sends these arguments to this path (bf16, no dropout, L x S within
 * tsi_sdpa_limits' amx_max_scores) with the tiles of this file's tsi_amx_gemm_ready (the CPU,
 * Linux's grant and the caps; a test compiled against the emulated tiles asks through it). */
bool tsi_sdpa_amx_takes(const ts_sdpa_args *a);
/* Bytes of workspace for `threads` threads (each works on whole batches), 64-byte aligned. */
size_t tsi_sdpa_amx_workspace(const ts_sdpa_args *a, int threads, bool backward);
/* The kernels, with a->threads threads (the same contract as the flash kernels: out and lse;
 * dq, dk and dv). */
void tsi_sdpa_amx_forward(const ts_sdpa_args *a, void *ws);
void tsi_sdpa_amx_backward(const ts_sdpa_args *a, void *ws);

#endif /* TS_KERN_SDPA_AMX_H */
