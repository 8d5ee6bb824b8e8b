/* cuda_random.cu — random fills (uniform, normal, bernoulli, randint) on the Philox stream of
 * philox.h: element i of the output (row-major) takes stream position offset + i, so a seed gives
 * the CPU's numbers. One thread per Philox block (four neighbouring positions). */
#include <type_traits>

#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/philox.h"

struct tsc_rand_params {
    int kind;
    double p0, p1;
    uint64_t seed, offset, numel;
    int64_t low;    /* randint */
    uint64_t range; /* randint: high - low */
    /* in a CUDA graph: {seed, base} read at run time, offset relative to base (cuda_graph.cu) */
    const uint64_t *counters;
};

/* Byte offset of row-major element i: dense, or through the (order-keeping) strided iterator. */
struct DenseOffset {
    uint64_t esz;
    TS_HD uint64_t at(uint64_t i) const { return i * esz; }
};
struct Strided32Offset {
    tsc_offsets32<1> o;
    TS_HD uint64_t at(uint64_t i) const {
        uint32_t off;
        o.get((uint32_t)i, &off);
        return off;
    }
};
struct Strided64Offset {
    tsc_offsets64<1> o;
    TS_HD uint64_t at(uint64_t i) const {
        uint64_t off;
        o.get(i, &off);
        return off;
    }
};

/* p0 + scale * x without a fused multiply-add, so the rounding is the CPU's */
TS_HD inline double affine_rn(double p0, double scale, double x) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(p0, __dmul_rn(scale, x));
#else
    return p0 + scale * x;
#endif
}

template <typename T, class O>
TSC_KERNEL k_random(tsc_rand_params p, char *out, O offs, uint64_t nblocks TSC_THREAD_PARAMS) {
    constexpr bool f64 = std::is_same<T, double>::value;
    uint64_t seed = p.seed, offset = p.offset;
    tsc_philox_at(p.counters, &seed, &offset);
    const uint64_t first = offset >> 2, end = offset + p.numel;
    const uint64_t step = TSC_NTHREADS;
    for (uint64_t b = TSC_TID; b < nblocks; b += step) {
        const uint64_t blk = first + b;
        uint32_t w[4][4]; /* [word][lane] */
        int nwords = 2;
        if (p.kind == TS_RAND_UNIFORM) nwords = f64 ? 2 : 1;
        if (p.kind == TS_RAND_NORMAL) nwords = f64 ? 4 : 2;
        if (p.kind == TS_RAND_BERNOULLI) nwords = 1;
        for (int d = 0; d < nwords; d++) ts_philox_block(seed, blk, (uint32_t)d, w[d]);
        TSC_UNROLL
        for (int lane = 0; lane < 4; lane++) {
            const uint64_t j = blk * 4 + (uint64_t)lane;
            if (j < offset || j >= end) continue;
            T *dst = (T *)(out + offs.at(j - offset));
            switch (p.kind) {
            case TS_RAND_UNIFORM: {
                double u =
                    f64 ? ts_philox_u53(w[0][lane], w[1][lane]) : (double)ts_philox_u24(w[0][lane]);
                *dst = tsc_st<T>(affine_rn(p.p0, p.p1 - p.p0, u));
                break;
            }
            case TS_RAND_NORMAL: {
                double u1, u2;
                if (f64) {
                    u1 = ts_philox_u53(w[0][lane], w[1][lane]);
                    u2 = ts_philox_u53(w[2][lane], w[3][lane]);
                } else {
                    u1 = (double)ts_philox_u24(w[0][lane]);
                    u2 = (double)ts_philox_u24(w[1][lane]);
                }
                *dst = tsc_st<T>(affine_rn(p.p0, p.p1, ts_philox_box_muller(u1, u2)));
                break;
            }
            case TS_RAND_BERNOULLI:
                *dst = tsc_st<T>((double)ts_philox_u24(w[0][lane]) < p.p0 ? 1.0 : 0.0);
                break;
            default: { /* randint */
                uint64_t r = ((uint64_t)w[1][lane] << 32) | (uint64_t)w[0][lane];
                *dst = tsc_st<T>((int64_t)((uint64_t)p.low + (p.range ? r % p.range : 0)));
                break;
            }
            }
        }
    }
}

template <typename T, class O>
static void launch(int index, const tsc_rand_params &p, char *out, const O &offs) {
    /* in a graph the base is not known yet: one block more covers any alignment */
    uint64_t nblocks = p.counters ? ((p.numel + 3) >> 2) + 1
                                  : ((p.offset + p.numel - 1) >> 2) - (p.offset >> 2) + 1;
    unsigned grid = tsc_grid_size(index, (int64_t)nblocks, TSC_THREADS);
    auto kernel = &k_random<T, O>;
    TSC_LAUNCH(kernel, grid, tsc_stream(index), p, out, offs, nblocks);
}

void tsc_random(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                double p0, double p1, uint64_t seed, uint64_t offset) {
    if (!tsc_set_device(index)) return;
    const ts_kview *views[1] = {out};
    tsc_iter it;
    tsc_iter_init(&it, 1, views, true); /* row-major order decides the stream positions */
    if (it.numel <= 0) return;
    tsc_rand_params p = {
        (int)kind, p0, p1, seed, offset, (uint64_t)it.numel, 0, 0, tsc_graph_counters(index)};
    if (kind == TS_RAND_RANDINT) {
        p.low = ts_d2i64(p0);
        p.range = (uint64_t)ts_d2i64(p1) - (uint64_t)p.low;
    }
    unsigned bcast;
    char *data = it.data[0];
    TSC_DISPATCH(out->dtype, T, {
        if (tsc_use_linear(&it, &bcast))
            launch<T>(index, p, data, DenseOffset{(uint64_t)it.esz[0]});
        else if (tsc_iter_fits32(&it))
            launch<T>(index, p, data, Strided32Offset{tsc_make_offsets32<1>(&it)});
        else
            launch<T>(index, p, data, Strided64Offset{tsc_make_offsets64<1>(&it)});
    });
    tsc_launch_check("random kernel", index);
}
