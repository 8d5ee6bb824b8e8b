/* vec_kernels_impl.h — the array loops of vec_kernels.h for one vector width, included per ISA by
 * vec_kernels.c after vec_math_impl.h. Besides vec_math_impl.h's names the includer defines
 *   TSV_W     float lanes of TSV_F (4, 8 or 16)
 *   TSV_H     uint16 vector with TSV_W lanes
 *   TSV_F16C  0 (software conversions), 256 or 512 (the F16C instructions at that width)
 *   TSV_ISA   the ts_cpu_isa it is compiled for
 * and gets the table TSV_NAME(tsv_kernels); at its end every TSV_ parameter is undefined again. */

typedef uint32_t TSV_NAME(tsv_u32) __attribute__((vector_size(sizeof(TSV_F))));

/* y = FN(x) over whole vectors; the last, partial vector is padded with PAD */
#define TSV_MAP1(FN, PAD)                                                                          \
    do {                                                                                           \
        int64_t i_ = 0;                                                                            \
        for (; i_ + TSV_W <= n; i_ += TSV_W) {                                                     \
            TSV_F v_;                                                                              \
            memcpy(&v_, x + i_, sizeof v_);                                                        \
            v_ = FN(v_);                                                                           \
            memcpy(y + i_, &v_, sizeof v_);                                                        \
        }                                                                                          \
        if (i_ < n) {                                                                              \
            TSV_F v_ = TSV_NAME(tsv_splat)(PAD);                                                   \
            memcpy(&v_, x + i_, (size_t)(n - i_) * sizeof(float));                                 \
            v_ = FN(v_);                                                                           \
            memcpy(y + i_, &v_, (size_t)(n - i_) * sizeof(float));                                 \
        }                                                                                          \
    } while (0)

/* y = FN(g, x) likewise */
#define TSV_MAP2(FN)                                                                               \
    do {                                                                                           \
        int64_t i_ = 0;                                                                            \
        for (; i_ + TSV_W <= n; i_ += TSV_W) {                                                     \
            TSV_F g_, v_;                                                                          \
            memcpy(&g_, g + i_, sizeof g_);                                                        \
            memcpy(&v_, x + i_, sizeof v_);                                                        \
            v_ = FN(g_, v_);                                                                       \
            memcpy(y + i_, &v_, sizeof v_);                                                        \
        }                                                                                          \
        if (i_ < n) {                                                                              \
            TSV_F g_ = {0}, v_ = {0};                                                              \
            memcpy(&g_, g + i_, (size_t)(n - i_) * sizeof(float));                                 \
            memcpy(&v_, x + i_, (size_t)(n - i_) * sizeof(float));                                 \
            v_ = FN(g_, v_);                                                                       \
            memcpy(y + i_, &v_, (size_t)(n - i_) * sizeof(float));                                 \
        }                                                                                          \
    } while (0)

/* erfinv of floats, kernel_math.h's ts_erfinv_f in double vectors, a chunk at a time in three
 * short loops (each of whose iterations the CPU overlaps: one loop of the whole formula is one
 * long dependent chain per vector): the doubles (1 - |x|)(1 + |x|) (1 where |x| >= 1 or NaN),
 * their logs (tsv_log_unit_d, 1e-11 relative where ts_erfinv_f takes libm's: the float results
 * agree but for rare roundings of a near tie, within its 1 ulp), the polynomial; the scalar
 * function where |x| >= 1 or NaN. The logs and polynomials run with multiply-adds (tsv_*_fd,
 * within 3.6e-16 relative of the exact formula's doubles over every float) and their floats are
 * stored; a fourth loop, only for a chunk where some lane's result may round otherwise
 * (tsv_clear_of_tie, margin 2^-40 relative; none over every float on AVX-512) or |x| >= 1, stores
 * the exact formula's over those vectors (out of line: the fast loop keeps its constants in
 * registers, 2.27 -> 1.84 ns an element on one Zen 4 core), so the float results are the exact
 * formula's. */
typedef float TSV_NAME(tsv_half_f) __attribute__((vector_size(sizeof(TSV_F) / 2)));
/* the double-vector formulas' ends: the doubles of x[i ..] (past n: 0), and the floats back to
 * y[i ..] (up to n), with the scalar function fb in the lanes outside ok (rare) */
/* (whole vectors copy with a constant size, one load or store; a memcpy of a variable size was a
 * call per vector) */
static inline TSV_D TSV_NAME(tsv_load_fd)(const float *x, int64_t i, int64_t n) {
    enum { DW = sizeof(TSV_D) / sizeof(double) };
    TSV_NAME(tsv_half_f) h = {0};
    if (n - i >= DW)
        memcpy(&h, x + i, sizeof h);
    else
        memcpy(&h, x + i, (size_t)(n - i) * sizeof(float));
    return __builtin_convertvector(h, TSV_D);
}
static inline void TSV_NAME(tsv_store_fd)(float *y, int64_t i, int64_t n, TSV_D r, TSV_D xd,
                                          TSV_L ok, float (*fb)(float)) {
    enum { DW = sizeof(TSV_D) / sizeof(double) };
    const size_t m = (size_t)(n - i < DW ? n - i : DW);
    const TSV_NAME(tsv_half_f) f = __builtin_convertvector(r, TSV_NAME(tsv_half_f));
    if (m == DW)
        memcpy(y + i, &f, sizeof f);
    else
        memcpy(y + i, &f, m * sizeof(float));
    if (TSV_NAME(tsv_mask_d)(ok) != (1u << DW) - 1)
        for (size_t k = 0; k < m; k++)
            if (!ok[k]) y[i + k] = fb((float)xd[k]);
}
/* The filter of the fast paths: the lanes of y (within d of the exact formula's double) whose
 * whole interval [y - d, y + d] rounds to one float, the float of y: the exact formula's double
 * lies in it, so it rounds to that float too (rounding is monotonic; d includes a margin for the
 * rounding of y -+ d). Compared as bits, so -0 and +0 differ. */
typedef int32_t TSV_NAME(tsv_half_i) __attribute__((vector_size(sizeof(TSV_F) / 2)));
static inline TSV_L TSV_NAME(tsv_rounds_as)(TSV_D y, TSV_D d) {
    const TSV_NAME(tsv_half_f) lo = __builtin_convertvector(y - d, TSV_NAME(tsv_half_f)),
                               hi = __builtin_convertvector(y + d, TSV_NAME(tsv_half_f));
    return __builtin_convertvector((TSV_NAME(tsv_half_i))lo == (TSV_NAME(tsv_half_i))hi, TSV_L);
}
/* The same test by integer operations, for a margin of k units in y's last place (0 < k < 2^27;
 * the units of y's binade, half as large below it): the lanes of y of a normal float's size,
 * [2^-126, 2^128), whose 29 bits below float's precision lie more than k from the half-way
 * pattern 2^28, the only place within a binade where rounding to float changes (the binades'
 * edges are floats, 2^27 units from any half-way point). */
typedef uint64_t TSV_NAME(tsv_du) __attribute__((vector_size(sizeof(TSV_D))));
static inline TSV_L TSV_NAME(tsv_clear_of_tie)(TSV_D y, int64_t k) {
    const TSV_NAME(tsv_du) b = (TSV_NAME(tsv_du))y;
    const TSV_NAME(tsv_du) low = (b & 0x1fffffffu) - (uint64_t)(0x10000000 - k);
    const TSV_NAME(tsv_du) mag = (b & 0x7fffffffffffffffu) - 0x3810000000000000u; /* 2^-126 */
    return (TSV_L)((low > (uint64_t)(2 * k)) & (mag < 0x47f0000000000000u - 0x3810000000000000u));
}
/* erfinv's exact formula (|x| < 1; finite elsewhere), out of line */
__attribute__((noinline)) static TSV_D TSV_NAME(tsv_erfinv_exact_d)(TSV_D xd) {
    const TSV_D ax = (TSV_D)((TSV_L)xd & 0x7fffffffffffffffLL);
    const TSV_D d =
        TSV_NAME(tsv_sel_d)(ax < 1.0, (1.0 - ax) * (1.0 + ax), TSV_NAME(tsv_splat_d)(1.0));
    return TSV_NAME(tsv_erfinv_poly_d)(xd, -TSV_NAME(tsv_log_unit_d)(d));
}

/* exact: the exact formula in every lane (math_f32's TSV_ERFINV_EXACT, for the tests) */
static void TSV_NAME(tsv_erfinv_f32)(float *y, const float *x, int64_t n, bool exact) {
    enum { DW = sizeof(TSV_D) / sizeof(double), CH = 256 / DW };
    TSV_D xd[CH], w[CH];
    for (int64_t i0 = 0; i0 < n; i0 += CH * DW) {
        const int64_t len = n - i0 < CH * DW ? n - i0 : CH * DW, nv = (len + DW - 1) / DW;
        for (int64_t v = 0; v < nv; v++) {
            xd[v] = TSV_NAME(tsv_load_fd)(x, i0 + v * DW, n);
            const TSV_D ax = (TSV_D)((TSV_L)xd[v] & 0x7fffffffffffffffLL);
            const TSV_D d = (1.0 - ax) * (1.0 + ax);
            w[v] = TSV_NAME(tsv_sel_d)(ax < 1.0, d, TSV_NAME(tsv_splat_d)(1.0));
        }
        /* the fast path: the same formula with multiply-adds, within 1e-15 relative of it; a lane
         * within 2^-40 |r| of a tie (2^13 units of r's binade: |r| < 2^(e + 1)) is unsure, as is
         * |x| >= 1 or NaN (r = +-0 only where x is: the exact formula's too) */
        for (int64_t v = 0; v < nv; v++) w[v] = -TSV_NAME(tsv_log_unit_fd)(w[v]);
        TSV_L unsure = {0};
        for (int64_t v = 0; v < nv; v++) {
            const TSV_D ax = (TSV_D)((TSV_L)xd[v] & 0x7fffffffffffffffLL);
            const TSV_D r = TSV_NAME(tsv_erfinv_poly_fd)(xd[v], w[v]);
            unsure |= ~(TSV_NAME(tsv_clear_of_tie)(r, 1 << 13) | (r == 0.0)) | ~(ax < 1.0);
            w[v] = r;
            const TSV_NAME(tsv_half_f) f = __builtin_convertvector(r, TSV_NAME(tsv_half_f));
            const int64_t i = i0 + v * DW;
            if (n - i >= DW)
                memcpy(y + i, &f, sizeof f);
            else
                memcpy(y + i, &f, (size_t)(n - i) * sizeof(float));
        }
        if (!exact && TSV_NAME(tsv_mask_d)(unsure) == 0) continue;
        for (int64_t v = 0; v < nv; v++) { /* the vectors with an unsure lane: the exact formula */
            const TSV_D ax = (TSV_D)((TSV_L)xd[v] & 0x7fffffffffffffffLL);
            const TSV_L in = ax < 1.0;
            const TSV_L sure = (TSV_NAME(tsv_clear_of_tie)(w[v], 1 << 13) | (w[v] == 0.0)) & in;
            if (exact || TSV_NAME(tsv_mask_d)(sure) != (1u << DW) - 1) {
                const TSV_D exact_d = TSV_NAME(tsv_erfinv_exact_d)(xd[v]);
                TSV_NAME(tsv_store_fd)(y, i0 + v * DW, n, exact_d, xd[v], in, ts_erfinv_f);
            }
        }
    }
}

/* lgamma of floats in double vectors, a chunk at a time in short loops as erfinv: x > 0 shifted
 * to z = x + k >= 8 (k < 8) with the product p = x (x + 1) ... (x + k - 1), then
 * lgamma(x) = Stirling(z) - log p (tsv_log_d's logs; about 1e-15 absolute near lgamma's zeros
 * at 1 and 2, which are exactly 0; 1e-15 relative elsewhere: well inside float's rounding);
 * libm's lgammaf where x <= 0, +inf or NaN (the reflection's poles and signs). That exact formula
 * runs only where the fast path may round otherwise: one log per lane, of p where x < 8 (then
 * lgamma(x) = lgamma(z) - log p with lgamma(z) on [8, 9) a polynomial) and of z = x above
 * (Stirling's series), with multiply-adds; within 2^-40 |y| + 2^-43 of the exact formula's
 * double y (measured: below 1.1e-14 relative and 1.5e-14 absolute, over every float). */
static inline TSV_D TSV_NAME(tsv_lgamma_exact_d)(TSV_D xd, TSV_D z, TSV_D p) {
    const TSV_D lz = TSV_NAME(tsv_log_d)(z), lp = TSV_NAME(tsv_log_d)(p);
    const TSV_L zero = (xd == 1.0) | (xd == 2.0); /* exactly 0, as lgammaf */
    return TSV_NAME(tsv_sel_d)(zero, TSV_NAME(tsv_splat_d)(0.0),
                               TSV_NAME(tsv_lgamma_stirling_d)(z, lz) - lp);
}
static void TSV_NAME(tsv_lgamma_f32)(float *y, const float *x, int64_t n, bool exact) {
    enum { DW = sizeof(TSV_D) / sizeof(double), CH = 256 / DW };
    TSV_D xd[CH], z[CH], p[CH];
    for (int64_t i0 = 0; i0 < n; i0 += CH * DW) {
        const int64_t len = n - i0 < CH * DW ? n - i0 : CH * DW, nv = (len + DW - 1) / DW;
        for (int64_t v = 0; v < nv; v++) {
            xd[v] = TSV_NAME(tsv_load_fd)(x, i0 + v * DW, n);
            const TSV_L ok = (xd[v] > 0.0) & (xd[v] < 3.5e38);
            TSV_D zz = TSV_NAME(tsv_sel_d)(ok, xd[v], TSV_NAME(tsv_splat_d)(8.0)),
                  pp = TSV_NAME(tsv_splat_d)(1.0);
            for (int k = 0; k < 8; k++) {
                const TSV_L low = zz < 8.0;
                pp = TSV_NAME(tsv_sel_d)(low, pp * zz, pp);
                zz = TSV_NAME(tsv_sel_d)(low, zz + 1.0, zz);
            }
            z[v] = zz, p[v] = pp;
        }
        for (int64_t v = 0; v < nv; v++) {
            const TSV_L ok = (xd[v] > 0.0) & (xd[v] < 3.5e38), small = xd[v] < 8.0;
            const unsigned m_small = TSV_NAME(tsv_mask_d)(small & ok);
            const TSV_D l = TSV_NAME(tsv_log_pos_fd)(TSV_NAME(tsv_sel_d)(small, p[v], z[v]));
            TSV_D r;
            if (m_small == (1u << DW) - 1) {
                r = TSV_NAME(tsv_lgamma_8to9_fd)(z[v]) - l;
            } else if (m_small == 0) {
                r = TSV_NAME(tsv_lgamma_stirling_fd)(z[v], l);
            } else {
                r = TSV_NAME(tsv_sel_d)(small, TSV_NAME(tsv_lgamma_8to9_fd)(z[v]) - l,
                                        TSV_NAME(tsv_lgamma_stirling_fd)(z[v], l));
            }
            const TSV_L zero = (xd[v] == 1.0) | (xd[v] == 2.0); /* exactly 0, as lgammaf */
            r = TSV_NAME(tsv_sel_d)(zero, TSV_NAME(tsv_splat_d)(0.0), r);
            const TSV_D rabs = (TSV_D)((TSV_L)r & 0x7fffffffffffffffLL);
            TSV_L sure =
                TSV_NAME(tsv_rounds_as)(r, TSV_NAME(tsv_mad_d)(rabs, TSV_NAME(tsv_splat_d)(0x1p-40),
                                                               TSV_NAME(tsv_splat_d)(0x1p-43))) |
                zero | ~ok;
            if (exact) sure = (TSV_L){0};
            if (TSV_NAME(tsv_mask_d)(sure) != (1u << DW) - 1) /* near a tie: the exact formula */
                r = TSV_NAME(tsv_sel_d)(sure, r, TSV_NAME(tsv_lgamma_exact_d)(xd[v], z[v], p[v]));
            TSV_NAME(tsv_store_fd)(y, i0 + v * DW, n, r, xd[v], ok, lgammaf);
        }
    }
}

/* digamma of floats in double vectors, as kernel_math.h's ts_digamma_d for x > 0: shifted to
 * z = x + k >= 10 with the sum of 1/(x + i) kept as one fraction (positive terms: no
 * cancellation; one division), log z - 1/(2z) - the series in B2..B14, minus that sum (about
 * 1e-15 absolute near digamma's root at 1.4616, 1e-15 relative elsewhere); ts_digamma_f where
 * x <= 0, inf or NaN (reflection, poles). */
static void TSV_NAME(tsv_digamma_f32)(float *y, const float *x, int64_t n) {
    enum { DW = sizeof(TSV_D) / sizeof(double), CH = 256 / DW };
    TSV_D xd[CH], z[CH], q[CH];
    for (int64_t i0 = 0; i0 < n; i0 += CH * DW) {
        const int64_t len = n - i0 < CH * DW ? n - i0 : CH * DW, nv = (len + DW - 1) / DW;
        for (int64_t v = 0; v < nv; v++) {
            xd[v] = TSV_NAME(tsv_load_fd)(x, i0 + v * DW, n);
            const TSV_L ok = (xd[v] > 0.0) & (xd[v] < 3.5e38);
            TSV_D zz = TSV_NAME(tsv_sel_d)(ok, xd[v], TSV_NAME(tsv_splat_d)(10.0)),
                  num = TSV_NAME(tsv_splat_d)(0.0), den = TSV_NAME(tsv_splat_d)(1.0);
            for (int k = 0; k < 10; k++) { /* num / den += 1 / zz */
                const TSV_L low = zz < 10.0;
                num = TSV_NAME(tsv_sel_d)(low, num * zz + den, num);
                den = TSV_NAME(tsv_sel_d)(low, den * zz, den);
                zz = TSV_NAME(tsv_sel_d)(low, zz + 1.0, zz);
            }
            z[v] = zz, q[v] = num / den;
        }
        for (int64_t v = 0; v < nv; v++) {
            const TSV_D r = 1.0 / z[v], yy = r * r;
            z[v] = TSV_NAME(tsv_log_d)(z[v]) - 0.5 * r - TS_DIGAMMA_SERIES(yy) - q[v];
        }
        for (int64_t v = 0; v < nv; v++) {
            const TSV_L ok = (xd[v] > 0.0) & (xd[v] < 3.5e38);
            TSV_NAME(tsv_store_fd)(y, i0 + v * DW, n, z[v], xd[v], ok, ts_digamma_f);
        }
    }
}

static void TSV_NAME(tsv_unary_f32)(ts_unary_op op, float *y, const float *x, int64_t n) {
    switch (op) {
    case TS_U_EXP:
        TSV_MAP1(TSV_NAME(tsv_exp), 0.0f);
        break;
    case TS_U_LOG:
        TSV_MAP1(TSV_NAME(tsv_log), 1.0f);
        break;
    case TS_U_TANH:
        TSV_MAP1(TSV_NAME(tsv_tanh), 0.0f);
        break;
    case TS_U_ERF:
        TSV_MAP1(TSV_NAME(tsv_erf), 0.0f);
        break;
    case TS_U_SIGMOID:
        TSV_MAP1(TSV_NAME(tsv_sigmoid), 0.0f);
        break;
    case TS_U_GELU:
        TSV_MAP1(TSV_NAME(tsv_gelu), 0.0f);
        break;
    case TS_U_SILU:
        TSV_MAP1(TSV_NAME(tsv_silu), 0.0f);
        break;
    case TS_U_ERFINV:
        TSV_NAME(tsv_erfinv_f32)(y, x, n, false);
        break;
    case TS_U_LGAMMA:
        TSV_NAME(tsv_lgamma_f32)(y, x, n, false);
        break;
    case TS_U_DIGAMMA:
        TSV_NAME(tsv_digamma_f32)(y, x, n);
        break;
    default:
        break;
    }
}

static void TSV_NAME(tsv_bwd_f32)(ts_binary_op op, float *y, const float *g, const float *x,
                                  int64_t n) {
    if (op == TS_B_GELU_BWD)
        TSV_MAP2(TSV_NAME(tsv_gelu_bwd));
    else if (op == TS_B_SILU_BWD)
        TSV_MAP2(TSV_NAME(tsv_silu_bwd));
}

static void TSV_NAME(tsv_math_f32)(int fn, float *y, const float *x, int64_t n) {
    if (fn == TSV_ERF)
        TSV_MAP1(TSV_NAME(tsv_erf), 0.0f);
    else if (fn == TSV_ONEP_ERF)
        TSV_MAP1(TSV_NAME(tsv_onep_erf), 0.0f);
    else if (fn == TSV_LGAMMA_EXACT)
        TSV_NAME(tsv_lgamma_f32)(y, x, n, true);
    else if (fn == TSV_ERFINV_EXACT)
        TSV_NAME(tsv_erfinv_f32)(y, x, n, true);
    else if (fn == TSV_EXP || fn == TSV_LOG || fn == TSV_TANH) {
        const ts_unary_op op = fn == TSV_EXP ? TS_U_EXP : fn == TSV_LOG ? TS_U_LOG : TS_U_TANH;
        TSV_NAME(tsv_unary_f32)(op, y, x, n);
    }
}

static void TSV_NAME(tsv_fma_f32)(float *y, const float *a, const float *b, const float *c,
                                  int64_t n) {
    for (int64_t i = 0; i < n; i += TSV_W) {
        const size_t m = (size_t)(n - i < TSV_W ? n - i : TSV_W) * sizeof(float);
        TSV_F va = {0}, vb = {0}, vc = {0};
        memcpy(&va, a + i, m), memcpy(&vb, b + i, m), memcpy(&vc, c + i, m);
        va = TSV_NAME(tsv_fma)(va, vb, vc);
        memcpy(y + i, &va, m);
    }
}

/* ------------------------------------------------------------------ softmax and logsumexp */
/* The largest element, NaN ignored (a NaN still makes the row's sum NaN later) */
static float TSV_NAME(tsv_max_f32)(const float *x, int64_t n) {
    /* four running maxima: one would be a chain of compare-and-select latencies */
    TSV_F m[4];
    for (int k = 0; k < 4; k++) m[k] = TSV_NAME(tsv_splat)(-__builtin_inff());
    int64_t i = 0;
    for (; i + 4 * TSV_W <= n; i += 4 * TSV_W)
        for (int k = 0; k < 4; k++) {
            TSV_F v;
            memcpy(&v, x + i + k * TSV_W, sizeof v);
            m[k] = TSV_NAME(tsv_sel)(v > m[k], v, m[k]);
        }
    for (; i + TSV_W <= n; i += TSV_W) {
        TSV_F v;
        memcpy(&v, x + i, sizeof v);
        m[0] = TSV_NAME(tsv_sel)(v > m[0], v, m[0]);
    }
    for (int k = 1; k < 4; k++) m[0] = TSV_NAME(tsv_sel)(m[k] > m[0], m[k], m[0]);
    float r = -__builtin_inff();
    for (int l = 0; l < TSV_W; l++) r = m[0][l] > r ? m[0][l] : r;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

/* 16 logical double lanes: lane l sums the elements k with k % 16 == l; the accumulators hold
 * them in order (TSV_D has TSV_W / 2 lanes), and the final sum is one fixed tree. */
#define TSV_ACCS (32 / TSV_W)
static double TSV_NAME(tsv_sum16)(const TSV_D *acc) {
    double l[16];
    memcpy(l, acc, sizeof l);
    for (int w = 8; w > 0; w /= 2)
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return l[0];
}

/* a TSV_F's lanes in double: two TSV_D */
typedef double TSV_NAME(tsv_wide_d) __attribute__((vector_size(2 * sizeof(TSV_F))));

/* two blocks of 16 floats, x and x + 16: e = exp(x - m) into y (when y); each lane's two
 * exponentials (elements k and k + 16) are added in float, then to acc in double. Converting and
 * adding in double once per pair instead of per element cost a quarter of the softmax row; the
 * float addition of two positive terms is exact to half an ulp, below exp's own error. */
static inline void TSV_NAME(tsv_exp_pair_block)(float *y, const float *x, TSV_F m, TSV_D *acc) {
    for (int v = 0; v < 16 / TSV_W; v++) {
        TSV_F e, f;
        memcpy(&e, x + v * TSV_W, sizeof e);
        memcpy(&f, x + 16 + v * TSV_W, sizeof f);
        e = TSV_NAME(tsv_exp_le0)(e - m);
        f = TSV_NAME(tsv_exp_le0)(f - m);
        if (y) {
            memcpy(y + v * TSV_W, &e, sizeof e);
            memcpy(y + 16 + v * TSV_W, &f, sizeof f);
        }
        TSV_D d[2];
        const TSV_NAME(tsv_wide_d) w = __builtin_convertvector(e + f, TSV_NAME(tsv_wide_d));
        memcpy(d, &w, sizeof d);
        acc[2 * v] += d[0];
        acc[2 * v + 1] += d[1];
    }
}

/* Lane l of the 16 double lanes sums the elements k = l mod 16: runs of 32 as pairs (k, k + 16)
 * added in float first, the last, partial run padded with -inf (whose exponential, 0, adds
 * exactly: a lone block of 16 sums as it would alone). */
static double TSV_NAME(tsv_exp_sum_f32)(float *y, const float *x, float m, int64_t n) {
    TSV_D acc[TSV_ACCS];
    for (int k = 0; k < TSV_ACCS; k++) acc[k] = (TSV_D){0};
    const TSV_F mv = TSV_NAME(tsv_splat)(m);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) TSV_NAME(tsv_exp_pair_block)(y ? y + i : NULL, x + i, mv, acc);
    if (i < n) {
        float xb[32], yb[32];
        for (int k = 0; k < 32; k++) xb[k] = i + k < n ? x[i + k] : -__builtin_inff();
        TSV_NAME(tsv_exp_pair_block)(yb, xb, mv, acc);
        if (y) memcpy(y + i, yb, (size_t)(n - i) * sizeof(float));
    }
    return TSV_NAME(tsv_sum16)(acc);
}

/* softmax (y = e^(x - m) times the reciprocal of their sum, rounded to float) or log_softmax
 * (y = (x - m) - log(sum)) of one row, the sum in double; y may alias x */
static inline __attribute__((always_inline)) void
TSV_NAME(tsv_softmax_row_body)(float *y, const float *x, int64_t n, const bool lg) {
    const float m = TSV_NAME(tsv_max_f32)(x, n);
    TSV_F a, c; /* y = (x - a) - c, or y = e * a */
    if (lg) {
        a = TSV_NAME(tsv_splat)(m);
        c = TSV_NAME(tsv_splat)(logf((float)TSV_NAME(tsv_exp_sum_f32)(NULL, x, m, n)));
    } else {
        a = TSV_NAME(tsv_splat)((float)(1.0 / TSV_NAME(tsv_exp_sum_f32)(y, x, m, n)));
        c = a;
    }
    const float *const src = lg ? x : y;
    int64_t i = 0;
    for (; i + TSV_W <= n; i += TSV_W) {
        TSV_F v;
        memcpy(&v, src + i, sizeof v);
        v = lg ? (v - a) - c : v * a;
        memcpy(y + i, &v, sizeof v);
    }
    for (; i < n; i++) y[i] = lg ? (src[i] - m) - c[0] : src[i] * a[0];
}
static void TSV_NAME(tsv_softmax_row_f32)(float *y, const float *x, int64_t n, bool lg) {
    if (lg) /* a constant for the body's loops */
        TSV_NAME(tsv_softmax_row_body)(y, x, n, true);
    else
        TSV_NAME(tsv_softmax_row_body)(y, x, n, false);
}

/* The gradient of one softmax row (gx = y (g - s), s = sum(g y)) or log_softmax row
 * (gx = g - e^y s, s = sum(g)). s: 16 float lanes, lane j summing the terms of the elements
 * k = j mod 16 of the whole blocks of 16, the lanes then added in double in lane order, then the
 * remaining elements' terms one by one; rounded to float. gx may alias y or g. */
static inline __attribute__((always_inline)) void
TSV_NAME(tsv_softmax_bwd_row_body)(float *gx, const float *y, const float *g, int64_t n,
                                   const bool lg) {
    TSV_F acc[16 / TSV_W];
    for (int v = 0; v < 16 / TSV_W; v++) acc[v] = (TSV_F){0};
    int64_t k = 0;
    for (; k + 16 <= n; k += 16)
        for (int v = 0; v < 16 / TSV_W; v++) {
            TSV_F gv, yv;
            memcpy(&gv, g + k + v * TSV_W, sizeof gv);
            memcpy(&yv, y + k + v * TSV_W, sizeof yv);
            acc[v] += lg ? gv : gv * yv;
        }
    float lanes[16];
    memcpy(lanes, acc, sizeof lanes);
    double s = 0;
    for (int j = 0; j < 16; j++) s += (double)lanes[j];
    for (; k < n; k++) s += (double)(lg ? g[k] : g[k] * y[k]);
    const TSV_F sv = TSV_NAME(tsv_splat)((float)s);
    int64_t i = 0;
    for (; i + TSV_W <= n; i += TSV_W) {
        TSV_F gv, yv;
        memcpy(&gv, g + i, sizeof gv);
        memcpy(&yv, y + i, sizeof yv);
        gv = lg ? gv - TSV_NAME(tsv_exp)(yv) * sv : yv * (gv - sv);
        memcpy(gx + i, &gv, sizeof gv);
    }
    if (i < n) { /* the last, partial vector padded with zeros */
        const size_t bytes = (size_t)(n - i) * sizeof(float);
        TSV_F gv = {0}, yv = {0};
        memcpy(&gv, g + i, bytes);
        memcpy(&yv, y + i, bytes);
        gv = lg ? gv - TSV_NAME(tsv_exp)(yv) * sv : yv * (gv - sv);
        memcpy(gx + i, &gv, bytes);
    }
}
static void TSV_NAME(tsv_softmax_bwd_row_f32)(float *gx, const float *y, const float *g, int64_t n,
                                              bool lg) {
    if (lg)
        TSV_NAME(tsv_softmax_bwd_row_body)(gx, y, g, n, true);
    else
        TSV_NAME(tsv_softmax_bwd_row_body)(gx, y, g, n, false);
}

#define TSV_WD (TSV_W / 2) /* double lanes */
static double TSV_NAME(tsv_exp_sum_f64)(const double *x, double m, int64_t n) {
    TSV_D acc[TSV_ACCS];
    for (int k = 0; k < TSV_ACCS; k++) acc[k] = (TSV_D){0};
    const TSV_D mv = TSV_NAME(tsv_splat_d)(m);
    int64_t i = 0;
    for (; i < n; i += 16) {
        double xb[16];
        const double *p = x + i;
        if (i + 16 > n) { /* padded with -inf */
            for (int k = 0; k < 16; k++) xb[k] = i + k < n ? x[i + k] : -__builtin_inf();
            p = xb;
        }
        for (int v = 0; v < TSV_ACCS; v++) {
            TSV_D e;
            memcpy(&e, p + v * TSV_WD, sizeof e);
            acc[v] += TSV_NAME(tsv_exp_d)(e - mv);
        }
    }
    return TSV_NAME(tsv_sum16)(acc);
}

/* ------------------------------------------------------------------ random, double math */
static void TSV_NAME(tsv_normal_f64)(double *y, const double *u1, const double *u2, double mean,
                                     double std, int64_t n) {
    for (int64_t i = 0; i < n; i += TSV_WD) {
        TSV_D a = {0}, b = {0};
        const int64_t m = n - i < TSV_WD ? n - i : TSV_WD;
        memcpy(&a, u1 + i, (size_t)m * sizeof(double));
        memcpy(&b, u2 + i, (size_t)m * sizeof(double));
        const TSV_D r = mean + std * TSV_NAME(tsv_box_muller_d)(a, b);
        memcpy(y + i, &r, (size_t)m * sizeof(double));
    }
}

static void TSV_NAME(tsv_math_f64)(int fn, double *y, const double *x, int64_t n) {
    for (int64_t i = 0; i < n; i += TSV_WD) {
        TSV_D a = {0}, r = {0};
        const int64_t m = n - i < TSV_WD ? n - i : TSV_WD;
        memcpy(&a, x + i, (size_t)m * sizeof(double));
        if (fn == TSV_EXP)
            r = TSV_NAME(tsv_exp_d)(a);
        else if (fn == TSV_LOG)
            r = TSV_NAME(tsv_log_d)(a);
        else if (fn == TSV_COS)
            r = TSV_NAME(tsv_cos_d)(a);
        memcpy(y + i, &r, (size_t)m * sizeof(double));
    }
}

/* ------------------------------------------------------------------ f16 / bf16 */
static void TSV_NAME(tsv_f16_to_f32)(float *y, const uint16_t *x, int64_t n) {
    int64_t i = 0;
#if TSV_F16C == 512
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
#elif TSV_F16C == 256
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
#endif
    for (; i < n; i++) y[i] = ts_f16_to_f32(x[i]);
}

static void TSV_NAME(tsv_f32_to_f16)(uint16_t *y, const float *x, int64_t n) {
    int64_t i = 0;
#if TSV_F16C == 512
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(
            (__m256i *)(y + i),
            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif TSV_F16C == 256
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(
            (__m128i *)(y + i),
            _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) y[i] = ts_f32_to_f16(x[i]);
}

static void TSV_NAME(tsv_bf16_to_f32)(float *y, const uint16_t *x, int64_t n) {
    int64_t i = 0;
    for (; i + TSV_W <= n; i += TSV_W) {
        TSV_H h;
        memcpy(&h, x + i, sizeof h);
        const TSV_NAME(tsv_u32) v = __builtin_convertvector(h, TSV_NAME(tsv_u32)) << 16;
        memcpy(y + i, &v, sizeof v);
    }
    for (; i < n; i++) y[i] = ts_bf16_to_f32(x[i]);
}

/* ts_f32_to_bf16 lane by lane: NaN keeps its top bits and turns quiet, the rest round to even */
static void TSV_NAME(tsv_f32_to_bf16)(uint16_t *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + TSV_W <= n; i += TSV_W) {
        TSV_NAME(tsv_u32) v;
        memcpy(&v, x + i, sizeof v);
        const TSV_NAME(tsv_u32) hi = v >> 16;
        const TSV_NAME(tsv_u32) nan = (TSV_NAME(tsv_u32))((v & 0x7fffffffu) > 0x7f800000u);
        const TSV_NAME(tsv_u32) r = ((v + 0x7fffu + (hi & 1u)) >> 16) & ~nan;
        const TSV_H h = __builtin_convertvector(r | (nan & (hi | 0x40u)), TSV_H);
        memcpy(y + i, &h, sizeof h);
    }
    for (; i < n; i++) y[i] = ts_f32_to_bf16(x[i]);
}

static const ts_vec_kernels TSV_NAME(tsv_kernels) = {
    .isa = TSV_ISA,
    .unary_f32 = TSV_NAME(tsv_unary_f32),
    .bwd_f32 = TSV_NAME(tsv_bwd_f32),
    .max_f32 = TSV_NAME(tsv_max_f32),
    .exp_sum_f32 = TSV_NAME(tsv_exp_sum_f32),
    .exp_sum_f64 = TSV_NAME(tsv_exp_sum_f64),
    .softmax_row_f32 = TSV_NAME(tsv_softmax_row_f32),
    .softmax_bwd_row_f32 = TSV_NAME(tsv_softmax_bwd_row_f32),
    .normal_f64 = TSV_NAME(tsv_normal_f64),
    .f16_to_f32 = TSV_NAME(tsv_f16_to_f32),
    .f32_to_f16 = TSV_NAME(tsv_f32_to_f16),
    .bf16_to_f32 = TSV_NAME(tsv_bf16_to_f32),
    .f32_to_bf16 = TSV_NAME(tsv_f32_to_bf16),
    .math_f32 = TSV_NAME(tsv_math_f32),
    .math_f64 = TSV_NAME(tsv_math_f64),
    .fma_f32 = TSV_NAME(tsv_fma_f32),
};

#undef TSV_MAP1
#undef TSV_MAP2
#undef TSV_ACCS
#undef TSV_WD
/* the includer's parameters, ready for the next width */
#undef TSV_F
#undef TSV_I
#undef TSV_D
#undef TSV_L
#undef TSV_H
#undef TSV_W
#undef TSV_F16C
#undef TSV_ISA
#undef TSV_NAME
#undef TSV_FMA
#undef TSV_MASK_D
#undef TSV_SQRT_D
#undef TSV_FMA_D
