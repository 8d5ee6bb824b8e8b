/* average.c — the one definition of averaging across the ranks of a group: dst = src / world.
 * DDP's buckets and FSDP's flat gradients divide each rank's gradient before the sum (PyTorch's
 * allreduce hook: no overflow past the average), an AVG collective divides the sum after it
 * (unless the library averaged, NCCL's ncclAvg); all of them through here, so every path rounds
 * the same way (a correctly rounded division, as PyTorch's div_). */
#include "dist/dist_internal.h"

void tsi_dist_divide_by_world(ts_tensor *dst, ts_tensor *src, int world) {
    if (world > 1 && tsi_numel(dst->shape) > 0) {
        const ts_backend *be = tsi_be(dst);
        ts_kview d = tsi_kview(dst), s = tsi_kview(src);
        be->binary_scalar(be, tsi_dev_index(dst), TS_B_DIV, &d, &s, (double)world);
    } else if (dst != src && tsi_numel(dst->shape) > 0) {
        ts_kview d = tsi_kview(dst), s = tsi_kview(src);
        tsi_be(dst)->copy(tsi_be(dst), tsi_dev_index(dst), &d, &s);
    }
    tsi_bump_version(dst);
}
