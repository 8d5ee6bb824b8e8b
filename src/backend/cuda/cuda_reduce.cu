/* cuda_reduce.cu — reductions over the trailing dims on CUDA (sum, prod, mean, max/min, var/std,
 * logsumexp, arg-max/min), with the CPU backend's semantics (kern_reduce_state.c): NaN propagates
 * through max/min and wins arg-max/min (its first occurrence), ties keep the first index, empty
 * reductions give SUM 0, PROD 1, MEAN/VAR/STD NaN, LOGSUMEXP -inf, integer sums wrap.
 *
 * Accumulation, as backend.h asks and the CPU does: every float dtype (f32, f16, bf16, f64) in
 * double, so sums and products that overflow float but not the result give the CPU's finite value
 * and variances keep their digits (reductions are memory-bound: the double arithmetic costs
 * little); integer sum/prod/max/min/arg in int64, integers under float ops in double. To keep the
 * rounding error small the reduced extent is cut into chunks of a bounded length; each chunk is
 * folded by a warp or block (every thread folding at most a few dozen elements in order, then a
 * shuffle tree) or, for the column path, by one thread, and the chunks' partial states are merged
 * by a second tree pass. Results are deterministic (no atomics; splits depend on shapes only).
 *
 * The fold, merge and store rules and the plan are __host__ __device__: under TSC_HOST_EMULATION
 * (tests/support/cuda_emulation.cu) the kernels are replaced by host loops that fold the same
 * lanes and combine them in the shuffle trees' exact order, so CI checks the reduction rules
 * against the CPU without a GPU. */
#include "backend/cuda/cuda_compute.h"

static_assert(TS_R_COUNT == 11, "a ts_reduce_op was added or removed: give it its CUDA fold, merge "
                                "and store here; then update the count");

namespace {

#define TSC_RHD __host__ __device__ __forceinline__

enum RKind { K_SUM, K_PROD, K_MAX, K_MIN, K_VAR, K_LSE, K_ARGMAX, K_ARGMIN, K_SUMSQ };

#define R_WARP_MAX_N   1024    /* rows up to this long: one warp per row (<= 32 per lane) */
#define R_BLOCK        256     /* threads of a block that folds one chunk */
#define R_BLOCK_CHUNK  4096    /* elements per block chunk (16 per thread) */
#define R_COL_CHUNK    64      /* elements one thread of the column path folds */
#define R_MAX_CHUNKS   16384   /* chunks per output at most (the merge pass stays short) */
#define R_MAX_PARTIALS 2097152 /* partial states in scratch at most (64 MiB of f64 states) */
#define R_COL_SMALL_N  16      /* rows up to this long go to the column path (one thread each) */
#define R_UNROLL       8       /* loads in flight in a column sum (r_lane_fold) */
#ifdef __CUDA_ARCH__ /* the host compiler (these folds are also host code) has no such pragma */
#define R_PRAGMA_UNROLL _Pragma("unroll")
#else
#define R_PRAGMA_UNROLL
#endif

/* A mergeable partial result. a: sum / product / extremum / mean (var) / max (logsumexp) / best
 * value (arg); b: M2 (var) or the scaled sum of exponentials (logsumexp); n: count (var);
 * idx: arg position, -1 while empty. Integer paths use A = int64_t. */
template <typename A> struct RState {
    A a, b;
    int64_t n, idx;
};

template <typename A> struct RIsInt { static const bool value = false; };
template <> struct RIsInt<int64_t> { static const bool value = true; };

template <typename A> TSC_RHD A r_lowest() { return (A)-INFINITY; }
template <> TSC_RHD int64_t r_lowest<int64_t>() { return INT64_MIN; }
template <typename A> TSC_RHD A r_highest() { return (A)INFINITY; }
template <> TSC_RHD int64_t r_highest<int64_t>() { return INT64_MAX; }

template <typename A> TSC_RHD A r_exp(A x) { return exp(x); }

/* loads into the accumulation type: double for every float dtype, int64 for integer kinds */
template <typename A> struct RLoad;
template <> struct RLoad<double> {
    template <typename T> static TSC_RHD double get(T v) { return tsc_to_double(v); }
};
template <> struct RLoad<int64_t> {
    template <typename T> static TSC_RHD int64_t get(T v) { return tsc_to_i64(v); }
};

template <int K, typename A> TSC_RHD RState<A> r_init() {
    RState<A> s;
    s.a = 0;
    s.b = 0;
    s.n = 0;
    s.idx = -1;
    if (K == K_PROD)
        s.a = 1;
    else if (K == K_MAX || K == K_LSE)
        s.a = r_lowest<A>();
    else if (K == K_MIN)
        s.a = r_highest<A>();
    return s;
}

/* Folds element x at reduced position pos into s. Positions reach a state in increasing order, so
 * arg ties keep the current one. */
template <int K, typename A> TSC_RHD void r_fold(RState<A> &s, A x, int64_t pos) {
    if constexpr (RIsInt<A>::value) {
        if constexpr (K == K_SUM) {
            s.a = (int64_t)((uint64_t)s.a + (uint64_t)x); /* wraps like PyTorch */
        } else if constexpr (K == K_PROD) {
            s.a = (int64_t)((uint64_t)s.a * (uint64_t)x);
        } else if constexpr (K == K_MAX) {
            s.a = x > s.a ? x : s.a;
        } else if constexpr (K == K_MIN) {
            s.a = x < s.a ? x : s.a;
        } else if constexpr (K == K_ARGMAX || K == K_ARGMIN) {
            if (s.idx < 0 || (K == K_ARGMAX ? x > s.a : x < s.a)) s.a = x, s.idx = pos;
        }
    } else {
        if constexpr (K == K_SUM) {
            s.a += x;
        } else if constexpr (K == K_SUMSQ) { /* TS_R_NORM2: the root is taken in r_store */
            s.a += x * x;
        } else if constexpr (K == K_PROD) {
            s.a *= x;
        } else if constexpr (K == K_MAX) {
            s.a = (x > s.a || x != x) ? x : s.a; /* a NaN sticks: nothing compares above it */
        } else if constexpr (K == K_MIN) {
            s.a = (x < s.a || x != x) ? x : s.a;
        } else if constexpr (K == K_VAR) { /* Welford */
            s.n += 1;
            const A d = x - s.a;
            s.a += d / (A)s.n;
            s.b += d * (x - s.a);
        } else if constexpr (K == K_LSE) {
            /* (max, sum exp(x - max)) updated online; infinities and NaN settle the answer the
             * way the CPU's per-chunk max-then-sum does */
            if (x != x || s.a != s.a) {
                s.a = x != x ? x : s.a;
                s.b = s.a;
            } else if (x == -INFINITY || s.a == INFINITY) {
                /* contributes nothing / the result is already +inf */
            } else if (x == INFINITY) {
                s.a = x;
                s.b = 1;
            } else if (x > s.a) {
                s.b = s.b * r_exp<A>(s.a - x) + (A)1;
                s.a = x;
            } else {
                s.b += r_exp<A>(x - s.a);
            }
        } else if constexpr (K == K_ARGMAX || K == K_ARGMIN) {
            const bool better = K == K_ARGMAX ? x > s.a : x < s.a;
            /* the first NaN wins and stays */
            if (s.idx < 0 || (s.a == s.a && (x != x || better))) s.a = x, s.idx = pos;
        }
    }
}

/* Merges R into L. Commutative for every kind: arg ties go to the smaller index, so partial
 * states may meet in any order (threads fold strided positions). */
template <int K, typename A> TSC_RHD void r_combine(RState<A> &L, const RState<A> &R) {
    if constexpr (K == K_SUMSQ) {
        L.a += R.a;
    } else if constexpr (K == K_SUM) {
        if constexpr (RIsInt<A>::value)
            L.a = (int64_t)((uint64_t)L.a + (uint64_t)R.a);
        else
            L.a += R.a;
    } else if constexpr (K == K_PROD) {
        if constexpr (RIsInt<A>::value)
            L.a = (int64_t)((uint64_t)L.a * (uint64_t)R.a);
        else
            L.a *= R.a;
    } else if constexpr (K == K_MAX) {
        L.a = (R.a > L.a || R.a != R.a) ? R.a : L.a;
    } else if constexpr (K == K_MIN) {
        L.a = (R.a < L.a || R.a != R.a) ? R.a : L.a;
    } else if constexpr (K == K_VAR) { /* Chan et al.'s parallel update */
        if (R.n == 0) return;
        if (L.n == 0) {
            L = R;
            return;
        }
        const A n = (A)(L.n + R.n), delta = R.a - L.a;
        L.a += delta * ((A)R.n / n);
        L.b += R.b + delta * delta * ((A)L.n * (A)R.n / n);
        L.n += R.n;
    } else if constexpr (K == K_LSE) {
        if (L.a != L.a || R.a != R.a) {
            L.a = L.b = (A)NAN;
        } else if (L.a == -INFINITY) {
            L = R;
        } else if (R.a != -INFINITY) {
            const A m = L.a > R.a ? L.a : R.a;
            if (m == INFINITY) {
                L.a = m;
                L.b = 1;
            } else {
                L.b = L.b * r_exp<A>(L.a - m) + R.b * r_exp<A>(R.a - m);
                L.a = m;
            }
        }
    } else if constexpr (K == K_ARGMAX || K == K_ARGMIN) {
        if (R.idx < 0) return;
        if (L.idx < 0) {
            L = R;
            return;
        }
        const bool ln = L.a != L.a, rn = R.a != R.a; /* always false for integers */
        bool take;
        if (ln || rn)
            take = rn && (!ln || R.idx < L.idx);
        else
            take = (K == K_ARGMAX ? R.a > L.a : R.a < L.a) || (R.a == L.a && R.idx < L.idx);
        if (take) L = R;
    }
}

#ifndef TSC_HOST_EMULATION
template <typename A>
__device__ __forceinline__ RState<A> r_shfl_down(const RState<A> &s, int off) {
    RState<A> r;
    r.a = __shfl_down_sync(0xffffffffu, s.a, off);
    r.b = __shfl_down_sync(0xffffffffu, s.b, off);
    r.n = __shfl_down_sync(0xffffffffu, s.n, off);
    r.idx = __shfl_down_sync(0xffffffffu, s.idx, off);
    return r;
}

/* Tree over the 32 lanes of a warp; lane 0 gets the result. */
template <int K, typename A> __device__ __forceinline__ RState<A> r_warp_reduce(RState<A> s) {
    for (int off = 16; off > 0; off >>= 1) {
        const RState<A> o = r_shfl_down(s, off);
        r_combine<K>(s, o);
    }
    return s;
}

/* Tree over a whole block (blockDim.x a multiple of 32, at most 1024); thread 0 gets the result.
 * Every thread of the block must call it. */
template <int K, typename A> __device__ __forceinline__ RState<A> r_block_reduce(RState<A> s) {
    __shared__ RState<A> sm[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    s = r_warp_reduce<K>(s);
    if (lane == 0) sm[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < nwarps ? sm[lane] : r_init<K, A>();
        s = r_warp_reduce<K>(s);
    }
    __syncthreads(); /* sm is reused by the next item */
    return s;
}
#else
/* The same trees on the host, lane by lane: __shfl_down_sync gives lane i the state of lane
 * i + off, or its own when that is past the warp. l[0] ends with the warp's result. */
template <int K, typename A> static RState<A> r_warp_reduce_host(RState<A> *l) {
    for (int off = 16; off > 0; off >>= 1) {
        RState<A> next[32];
        for (int i = 0; i < 32; i++) {
            next[i] = l[i];
            r_combine<K>(next[i], l[i + off < 32 ? i + off : i]);
        }
        for (int i = 0; i < 32; i++) l[i] = next[i];
    }
    return l[0];
}

template <int K, typename A> static RState<A> r_block_reduce_host(RState<A> *l, int threads) {
    RState<A> sm[32];
    const int nwarps = threads / 32;
    for (int w = 0; w < nwarps; w++) sm[w] = r_warp_reduce_host<K>(l + 32 * w);
    for (int lane = nwarps; lane < 32; lane++) sm[lane] = r_init<K, A>();
    return r_warp_reduce_host<K>(sm);
}
#endif

/* What every kernel of a reduction needs. lead: the kept dims (s0 input strides, s1 output
 * strides); red: the reduced dims (s0 input strides). */
struct RPlan {
    const char *in;
    char *out;
    ts_dtype out_dt;
    int op; /* ts_reduce_op */
    double corr;
    tsc_dims lead, red;
    int64_t outputs, n, chunk, nchunks;
    size_t out_es;
    void *partial; /* RState<A>[outputs * nchunks] when nchunks > 1 */
};

/* Finishes state s of output o (over all n reduced elements) and writes it. */
template <int K, typename A> TSC_RHD void r_store(const RPlan &P, int64_t o, const RState<A> &s) {
    int64_t io, oo;
    tsc_offset2(P.lead, o, &io, &oo);
    char *p = P.out + (size_t)oo * P.out_es;
    if constexpr (K == K_ARGMAX || K == K_ARGMIN) {
        tsc_store_i64(p, P.out_dt, s.idx);
    } else if constexpr (RIsInt<A>::value) {
        tsc_store_i64(p, P.out_dt, s.a);
    } else {
        double v = (double)s.a;
        if constexpr (K == K_SUMSQ) {
            v = sqrt(v);
        } else if constexpr (K == K_SUM) {
            if (P.op == TS_R_MEAN) v = P.n > 0 ? v / (double)P.n : NAN;
        } else if constexpr (K == K_VAR) {
            const double div = (double)P.n - P.corr;
            v = (double)s.b / (div > 0.0 ? div : 0.0); /* 0/0 = NaN, x/0 = inf, as PyTorch */
            if (P.op == TS_R_STD) v = sqrt(v);
        } else if constexpr (K == K_LSE) {
            v = isfinite(v) ? v + log((double)s.b) : v;
        }
        tsc_store_double(p, P.out_dt, v);
    }
}

/* Either the output (one chunk) or the partial state of (output o, chunk c). */
template <int K, typename A>
TSC_RHD void r_emit(const RPlan &P, int64_t o, int64_t c, const RState<A> &s) {
    if (P.nchunks == 1)
        r_store<K, A>(P, o, s);
    else
        ((RState<A> *)P.partial)[o * P.nchunks + c] = s;
}

/* Input offset (elements) of reduced position p. */
TSC_RHD int64_t r_red_off(const RPlan &P, int64_t p) {
    return P.red.nd == 1 ? p * P.red.s0[0] : tsc_offset(P.red, p);
}

/* One thread's share of chunk c of output o: every group-th reduced position from the chunk's
 * start + lane, folded in order. A sum folded by one thread (the column path, a bias gradient's
 * strided column) issues R_UNROLL loads before their folds: latency, not bandwidth, bounds it
 * one at a time. The folds keep their order, so the result is the same either way. */
template <typename T, typename A, int K>
TSC_RHD RState<A> r_lane_fold(const RPlan &P, int64_t o, int64_t c, int lane, int group) {
    int64_t io, oo;
    tsc_offset2(P.lead, o, &io, &oo);
    const T *base = (const T *)P.in + io;
    const int64_t p0 = c * P.chunk, p1 = p0 + P.chunk < P.n ? p0 + P.chunk : P.n;
    RState<A> s = r_init<K, A>();
    int64_t p = p0 + lane;
    if constexpr (K == K_SUM) {
        if (group == 1)
            for (; p + R_UNROLL <= p1; p += R_UNROLL) {
                A v[R_UNROLL];
                R_PRAGMA_UNROLL
                for (int u = 0; u < R_UNROLL; u++) v[u] = RLoad<A>::get(base[r_red_off(P, p + u)]);
                R_PRAGMA_UNROLL
                for (int u = 0; u < R_UNROLL; u++) r_fold<K>(s, v[u], p + u);
            }
    }
    for (; p < p1; p += group) r_fold<K>(s, RLoad<A>::get(base[r_red_off(P, p)]), p);
    return s;
}

/* One thread's share of the merge of output o's chunk states. */
template <typename A, int K>
TSC_RHD RState<A> r_lane_merge(const RPlan &P, int64_t o, int lane, int group) {
    const RState<A> *part = (const RState<A> *)P.partial;
    RState<A> s = r_init<K, A>();
    for (int64_t c = lane; c < P.nchunks; c += group) r_combine<K>(s, part[o * P.nchunks + c]);
    return s;
}

#ifndef TSC_HOST_EMULATION
/* Row path: a group (a warp, or the whole block when BLOCK) folds one chunk of one output, its
 * threads taking every group-th element (coalesced when the reduced dims are contiguous). */
template <typename T, typename A, int K, bool BLOCK> __global__ void r_rows_kernel(RPlan P) {
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    const int64_t items = P.outputs * P.nchunks;
    for (int64_t item = blockIdx.x * per_block + threadIdx.x / group; item < items;
         item += (int64_t)gridDim.x * per_block) {
        const int64_t o = item / P.nchunks, c = item % P.nchunks;
        RState<A> s = r_lane_fold<T, A, K>(P, o, c, lane, group);
        if (BLOCK)
            s = r_block_reduce<K>(s);
        else
            s = r_warp_reduce<K>(s);
        if (lane == 0) r_emit<K, A>(P, o, c, s);
    }
}

/* Column path: one thread folds one chunk of one output; neighbouring threads take neighbouring
 * outputs, which are neighbours in memory when the kept inner dim is contiguous. */
template <typename T, typename A, int K> __global__ void r_cols_kernel(RPlan P) {
    const int64_t items = P.outputs * P.nchunks;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < items;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = t % P.outputs, c = t / P.outputs;
        r_emit<K, A>(P, o, c, r_lane_fold<T, A, K>(P, o, c, 0, 1));
    }
}

/* Second pass: a group merges the nchunks partial states of one output and stores it. */
template <typename A, int K, bool BLOCK> __global__ void r_merge_kernel(RPlan P) {
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    for (int64_t o = blockIdx.x * per_block + threadIdx.x / group; o < P.outputs;
         o += (int64_t)gridDim.x * per_block) {
        RState<A> s = r_lane_merge<A, K>(P, o, lane, group);
        if (BLOCK)
            s = r_block_reduce<K>(s);
        else
            s = r_warp_reduce<K>(s);
        if (lane == 0) r_store<K, A>(P, o, s);
    }
}
#endif

enum RPath { PATH_WARP, PATH_BLOCK, PATH_COLS };

/* How the work is cut: path, chunk length, chunk count (see the file comment). */
static void r_choose(RPlan &P, RPath path) {
    const int64_t base = path == PATH_COLS    ? R_COL_CHUNK
                         : path == PATH_BLOCK ? R_BLOCK_CHUNK
                                              : (P.n > 0 ? P.n : 1);
    int64_t max_chunks = R_MAX_PARTIALS / P.outputs;
    if (max_chunks > R_MAX_CHUNKS) max_chunks = R_MAX_CHUNKS;
    if (max_chunks < 1) max_chunks = 1;
    int64_t chunk = base, need = (P.n + max_chunks - 1) / max_chunks;
    if (chunk < need) chunk = need;
    if (chunk < 1) chunk = 1;
    P.chunk = chunk;
    P.nchunks = P.n > chunk ? (P.n + chunk - 1) / chunk : 1;
}

#ifndef TSC_HOST_EMULATION
static unsigned r_blocks_for_groups(int64_t groups, int threads, int group) {
    return tsc_grid(groups, threads / group);
}

template <typename T, typename A, int K>
static void r_launch(int index, const RPlan &P, RPath path, cudaStream_t st) {
    const int64_t items = P.outputs * P.nchunks;
    if (path == PATH_COLS)
        r_cols_kernel<T, A, K><<<tsc_grid(items, TSC_THREADS), TSC_THREADS, 0, st>>>(P);
    else if (path == PATH_BLOCK)
        r_rows_kernel<T, A, K, true>
            <<<r_blocks_for_groups(items, R_BLOCK, R_BLOCK), R_BLOCK, 0, st>>>(P);
    else
        r_rows_kernel<T, A, K, false>
            <<<r_blocks_for_groups(items, TSC_THREADS, 32), TSC_THREADS, 0, st>>>(P);
    if (tsc_launch_check("reduce", index) && P.nchunks > 1) {
        if (P.nchunks > 8 * 32)
            r_merge_kernel<A, K, true>
                <<<r_blocks_for_groups(P.outputs, R_BLOCK, R_BLOCK), R_BLOCK, 0, st>>>(P);
        else
            r_merge_kernel<A, K, false>
                <<<r_blocks_for_groups(P.outputs, TSC_THREADS, 32), TSC_THREADS, 0, st>>>(P);
        tsc_launch_check("reduce", index);
    }
}
#else
/* The kernels' work item by item on the host: the same lanes, the same trees, the same order. */
template <typename T, typename A, int K>
static void r_launch(int index, const RPlan &P, RPath path, cudaStream_t st) {
    (void)index, (void)st;
    RState<A> lanes[R_BLOCK];
    const int64_t items = P.outputs * P.nchunks;
    const int group = path == PATH_BLOCK ? R_BLOCK : 32;
    for (int64_t item = 0; item < items; item++) {
        if (path == PATH_COLS) { /* item = thread: outputs vary fastest */
            const int64_t o = item % P.outputs, c = item / P.outputs;
            r_emit<K, A>(P, o, c, r_lane_fold<T, A, K>(P, o, c, 0, 1));
            continue;
        }
        const int64_t o = item / P.nchunks, c = item % P.nchunks;
        for (int l = 0; l < group; l++) lanes[l] = r_lane_fold<T, A, K>(P, o, c, l, group);
        r_emit<K, A>(P, o, c,
                     group == 32 ? r_warp_reduce_host<K>(lanes)
                                 : r_block_reduce_host<K>(lanes, group));
    }
    if (P.nchunks > 1) {
        const int mgroup = P.nchunks > 8 * 32 ? R_BLOCK : 32;
        for (int64_t o = 0; o < P.outputs; o++) {
            for (int l = 0; l < mgroup; l++) lanes[l] = r_lane_merge<A, K>(P, o, l, mgroup);
            r_store<K, A>(P, o,
                          mgroup == 32 ? r_warp_reduce_host<K>(lanes)
                                       : r_block_reduce_host<K>(lanes, mgroup));
        }
    }
}
#endif

template <typename T, typename A, int K> static void r_run(int index, RPlan P, RPath path) {
    r_choose(P, path);
    cudaStream_t st = tsc_stream(index);
    if (P.nchunks > 1) {
        P.partial = tsc_scratch_alloc(index, (size_t)(P.outputs * P.nchunks) * sizeof(RState<A>));
        if (!P.partial) return; /* TS_ERR_OOM recorded */
    }
    r_launch<T, A, K>(index, P, path, st);
    if (P.partial) tsc_scratch_free(index, P.partial);
}

static int r_kind(ts_reduce_op op) {
    switch (op) {
    case TS_R_SUM:
    case TS_R_MEAN:
        return K_SUM;
    case TS_R_PROD:
        return K_PROD;
    case TS_R_MAX:
        return K_MAX;
    case TS_R_MIN:
        return K_MIN;
    case TS_R_VAR:
    case TS_R_STD:
        return K_VAR;
    case TS_R_LOGSUMEXP:
        return K_LSE;
    case TS_R_NORM2:
        return K_SUMSQ;
    case TS_R_ARGMAX:
        return K_ARGMAX;
    default:
        return K_ARGMIN;
    }
}

/* float input, accumulated in A = double: every kind */
template <typename T, typename A>
static void r_dispatch_float(int index, const RPlan &P, RPath pa, int k) {
    switch (k) {
    case K_SUM:
        r_run<T, A, K_SUM>(index, P, pa);
        break;
    case K_PROD:
        r_run<T, A, K_PROD>(index, P, pa);
        break;
    case K_MAX:
        r_run<T, A, K_MAX>(index, P, pa);
        break;
    case K_MIN:
        r_run<T, A, K_MIN>(index, P, pa);
        break;
    case K_VAR:
        r_run<T, A, K_VAR>(index, P, pa);
        break;
    case K_LSE:
        r_run<T, A, K_LSE>(index, P, pa);
        break;
    case K_SUMSQ:
        r_run<T, A, K_SUMSQ>(index, P, pa);
        break;
    case K_ARGMAX:
        r_run<T, A, K_ARGMAX>(index, P, pa);
        break;
    default:
        r_run<T, A, K_ARGMIN>(index, P, pa);
        break;
    }
}

/* integer input: sum/prod/max/min/arg in int64; mean/var/std/logsumexp through double like the
 * CPU (the front end casts first, so these are rare) */
template <typename T>
static void r_dispatch_int(int index, const RPlan &P, RPath pa, ts_reduce_op op) {
    switch (op) {
    case TS_R_SUM:
        r_run<T, int64_t, K_SUM>(index, P, pa);
        break;
    case TS_R_PROD:
        r_run<T, int64_t, K_PROD>(index, P, pa);
        break;
    case TS_R_MAX:
        r_run<T, int64_t, K_MAX>(index, P, pa);
        break;
    case TS_R_MIN:
        r_run<T, int64_t, K_MIN>(index, P, pa);
        break;
    case TS_R_ARGMAX:
        r_run<T, int64_t, K_ARGMAX>(index, P, pa);
        break;
    case TS_R_ARGMIN:
        r_run<T, int64_t, K_ARGMIN>(index, P, pa);
        break;
    case TS_R_MEAN:
        r_run<T, double, K_SUM>(index, P, pa);
        break;
    case TS_R_VAR:
    case TS_R_STD:
        r_run<T, double, K_VAR>(index, P, pa);
        break;
    case TS_R_NORM2:
        r_run<T, double, K_SUMSQ>(index, P, pa);
        break;
    default:
        r_run<T, double, K_LSE>(index, P, pa);
        break;
    }
}

} /* namespace */

void tsc_reduce(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                const ts_kview *in, int nred, double param) {
    (void)be;
    const int nl = in->ndim - nred;
    RPlan P;
    P.in = in->data;
    P.out = out->data;
    P.out_dt = out->dtype;
    P.op = (int)op;
    P.corr = param;
    P.out_es = tsc_dtype_size(out->dtype);
    P.partial = NULL;
    P.outputs = 1;
    P.n = 1;
    for (int d = 0; d < nl; d++) P.outputs *= in->shape[d];
    for (int d = nl; d < in->ndim; d++) P.n *= in->shape[d];
    if (P.outputs == 0) return;
    /* out has in's leading dims, so one walk over them gives both offsets */
    P.lead = tsc_coalesce(nl, in->shape, in->strides, out->strides);
    P.red = tsc_coalesce(nred, in->shape + nl, in->strides + nl, NULL);
    if (P.n == 0) P.red.nd = 1, P.red.shape[0] = 0, P.red.s0[0] = 0;
    if (!tsc_set_device(index)) return;

    const bool row_contig = P.red.nd == 1 && (P.red.s0[0] == 1 || P.n <= 1);
    const int ll = P.lead.nd - 1;
    const bool col_layout = !row_contig && P.lead.s0[ll] == 1 && P.lead.shape[ll] >= 16;
    RPath path;
    if (P.n <= R_COL_SMALL_N || col_layout)
        path = PATH_COLS;
    else if (P.n <= R_WARP_MAX_N)
        path = PATH_WARP;
    else
        path = PATH_BLOCK;

    const int k = r_kind(op);
    switch (in->dtype) {
    case TS_F32:
        r_dispatch_float<float, double>(index, P, path, k);
        break;
    case TS_F16:
        r_dispatch_float<tsc_f16, double>(index, P, path, k);
        break;
    case TS_BF16:
        r_dispatch_float<tsc_bf16, double>(index, P, path, k);
        break;
    case TS_F64:
        r_dispatch_float<double, double>(index, P, path, k);
        break;
    case TS_I64:
        r_dispatch_int<int64_t>(index, P, path, op);
        break;
    case TS_I32:
        r_dispatch_int<int32_t>(index, P, path, op);
        break;
    case TS_U8:
        r_dispatch_int<uint8_t>(index, P, path, op);
        break;
    case TS_I8:
        r_dispatch_int<int8_t>(index, P, path, op);
        break;
    case TS_I16:
        r_dispatch_int<int16_t>(index, P, path, op);
        break;
    case TS_U16:
        r_dispatch_int<uint16_t>(index, P, path, op);
        break;
    case TS_U32:
        r_dispatch_int<uint32_t>(index, P, path, op);
        break;
    case TS_U64:
        r_dispatch_int<uint64_t>(index, P, path, op);
        break;
    case TS_BOOL:
        r_dispatch_int<tsc_b8>(index, P, path, op);
        break;
    default:
        break;
    }
}
