/* sdpa_select.c — the CPU attention's choice of path, threads and chunking (sdpa_select.h): the
 * table of thresholds, each row with the measurement behind it, and the one function that reads
 * it. The figures come from bench/results/transformer.md (hosts and load described there);
 * decision 0027 says why the choice is made here. */
#include "backend/cpu/sdpa_select.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/gemm_amx.h"

static const tsi_sdpa_limits limits = {
    /* The AMX path forms a batch's whole L x S score matrix (float32 scores, bf16 weights and,
     * backward, float32 dP: 10 bytes a score, 2.5 MiB at 512 x 512), which stays in a core's L2
     * up to about 512 x 512; past it the flash kernels' blocks of 64 keys do. The path itself is
     * measured at 256 x 256 (transformer.md "bf16 on AMX tiles": one [16, 4, 256, 64] causal
     * call, one thread, AMX host: forward 4.6-4.8 ms and backward 10.1-10.2 against the flash
     * kernels' 7.3-7.7 and 15.2-15.8); the 512 x 512 edge is NOT MEASURED: the cache reasoning. */
    .amx_max_scores = 512 * 512,
    /* Below a million multiply-adds a parallel region's start and join (microseconds) cost more
     * than the second thread saves. NOT MEASURED in bench/results: the code's reasoning since
     * the flash kernels came (commit 5ad2de5). */
    .parallel_min_macs = 1e6,
    /* With fewer than 4 batches the backward deals each batch's key blocks into chunks so that 4
     * (batch, chunk) items are shared (a causal mask's uneven blocks even out), their partial dq
     * added in chunk order. NOT MEASURED: the code's reasoning (commit 5ad2de5); a function of
     * the shapes only, so the bits never depend on the thread count. */
    .backward_min_items = 4,
    /* Keys whose rows lie a multiple of 4 KiB apart: the exporters' head split leaves GPT-mini's
     * key rows 16 KiB apart, all in one cache set when a block of keys is gathered column by
     * column: 30 ms per layer ([16, 4, 256, 64]) against 16 after a 1 ms contiguous copy (Zen 3;
     * src/onnx/rewrite_xformer.c's measurement, commit 5ccc2a4). */
    .keys_copy_row_bytes = 4096,
};

const tsi_sdpa_limits *tsi_sdpa_limits_get(void) { return &limits; }

tsi_sdpa_host tsi_sdpa_host_now(void) {
    tsi_sdpa_host h = {.threads = 1, .tiles = tsi_amx_gemm_ready()};
#ifdef TS_HAVE_OPENMP
    h.threads = omp_get_max_threads();
#endif
    return h;
}

/* the AMX kernel computes bf16 without dropout; past the score limit a batch leaves the cache */
static bool amx_takes(const ts_sdpa_args *a, int64_t L, int64_t S, bool tiles) {
    return a->q.dtype == TS_BF16 && a->dropout_p == 0 && L * S <= limits.amx_max_scores && tiles;
}

tsi_sdpa_choice tsi_sdpa_select(const ts_sdpa_args *a, bool backward, int64_t blk,
                                tsi_sdpa_host host) {
    const int nb = a->q.ndim - 2;
    int64_t N = 1;
    for (int d = 0; d < nb; d++) N *= a->q.shape[d];
    const int64_t L = a->q.shape[nb], E = a->q.shape[nb + 1];
    const int64_t S = a->k.shape[nb], Ev = a->v.shape[nb + 1];
    tsi_sdpa_choice c = {.path = amx_takes(a, L, S, host.tiles) ? TSI_SDPA_PATH_AMX
                                                                : TSI_SDPA_PATH_FLASH,
                         .chunks = 1};
    /* the flash backward: at least backward_min_items (batch, key-chunk) items to share */
    const int64_t min_items = limits.backward_min_items;
    if (c.path == TSI_SDPA_PATH_FLASH && backward && N < min_items) {
        const int64_t nk = (S + blk - 1) / blk;
        c.chunks = min_items / N < nk ? min_items / N : nk;
        if (c.chunks < 1) c.chunks = 1;
    }
    /* what the threads share: whole batches on the AMX path, (batch, key chunk) items in the flash
     * backward, (batch, query block) items in its forward */
    const int64_t items = c.path == TSI_SDPA_PATH_AMX ? N
                          : backward                  ? N * c.chunks
                                                      : N * ((L + blk - 1) / blk);
    int threads = host.threads;
    const double macs = (double)N * (double)L * (double)S * (double)(E + Ev);
    if (macs < limits.parallel_min_macs) threads = 1;
    if (threads > items) threads = (int)items;
    if (threads < 1) threads = 1;
    c.threads = threads;
    return c;
}

bool tsi_sdpa_keys_copy(int64_t S, int64_t row_bytes) {
    const int64_t align = limits.keys_copy_row_bytes;
    return S > 1 && row_bytes >= align && row_bytes % align == 0;
}
