/* kern_batch_norm_impl.h — the fused batch norm kernels for one vector ISA and one dtype
 * (kern_norm_variant.h's parameters and helpers), included through kern_norm_isa.h by
 * kern_batch_norm.c. A task is a group of consecutive channels (bn_group): for each sample in
 * turn it visits the group's segments x[i, c0 .. c1, :], one stretch of memory. Each channel's
 * element (i, j) goes to lane j % 16 of its sums, in the order i, then j: the same order however
 * the channels are grouped and whichever thread runs the group. */

/* Adds the segment's d = x - k and d^2 (n elements) into the 16 lanes s and q. */
static inline void LN_NAME(seg_moments)(const T *x, int64_t n, double k, double *s, double *q) {
    const int64_t n16 = n & ~(int64_t)15;
    if (n16) {
        VD sv[NACC], qv[NACC];
        const VD kv = (VD){0} + k;
        for (int a = 0; a < NACC; a++) {
            memcpy(&sv[a], s + a * WD, sizeof sv[a]);
            memcpy(&qv[a], q + a * WD, sizeof qv[a]);
        }
        for (int64_t j = 0; j < n16; j += 16)
            for (int a = 0; a < NACC; a++) {
                const VD d = LN_NAME(load_d)(x + j + a * WD) - kv;
                sv[a] += d;
                qv[a] += d * d;
            }
        LN_NAME(lanes)(s, sv);
        LN_NAME(lanes)(q, qv);
    }
    for (int64_t j = n16; j < n; j++) {
        const double d = (double)x[j] - k;
        s[j & 15] += d;
        q[j & 15] += d * d;
    }
}

/* Backward's pass A over one segment: the sums of dy and of dy * (x - mean) (products in T)
 * into the 16 lanes s and q. */
static inline void LN_NAME(seg_grad_sums)(const T *x, const T *dy, int64_t n, T mt, double *s,
                                          double *q) {
    const int64_t n16 = n & ~(int64_t)15;
    if (n16) {
        VD sv[NACC], qv[NACC];
        const LN_VH mv = (LN_VH){0} + mt;
        for (int a = 0; a < NACC; a++) {
            memcpy(&sv[a], s + a * WD, sizeof sv[a]);
            memcpy(&qv[a], q + a * WD, sizeof qv[a]);
        }
        for (int64_t j = 0; j < n16; j += 16)
            for (int a = 0; a < NACC; a++) {
                const int64_t o = j + a * WD;
                const LN_VH d = LN_NAME(load_h)(dy + o);
                sv[a] += LN_NAME(to_d)(d);
                qv[a] += LN_NAME(to_d)(d * (LN_NAME(load_h)(x + o) - mv));
            }
        LN_NAME(lanes)(s, sv);
        LN_NAME(lanes)(q, qv);
    }
    for (int64_t j = n16; j < n; j++) {
        s[j & 15] += (double)dy[j];
        q[j & 15] += (double)(dy[j] * (x[j] - mt));
    }
}

/* The statistics of channels c0 .. c0 + g - 1 and their outputs. */
static void LN_NAME(forward_group)(const ts_batch_norm_args *a, int64_t c0, int64_t g) {
    const int64_t N = a->n, C = a->c, hw = a->hw, cnt = N * hw;
    const T *X = (const T *)a->x.data, *W = (const T *)a->weight.data;
    const T *B = (const T *)a->bias.data;
    T *Y = (T *)a->y.data, *M = (T *)a->mean.data, *R = (T *)a->invstd.data;
    T *Var = (T *)a->var.data;
    double s[BN_MAX_GROUP][16], q[BN_MAX_GROUP][16], k[BN_MAX_GROUP];
    T mt[BN_MAX_GROUP], st[BN_MAX_GROUP], bt[BN_MAX_GROUP];
    memset(s, 0, sizeof s[0] * (size_t)g), memset(q, 0, sizeof q[0] * (size_t)g);
    /* the shift k: the mean of the channel's first segments, at least 16 elements when there
     * are (the sums of d = x - k then cancel little; a NaN or an infinity stays one) */
    const int64_t n0 = bn_shift_samples(N, hw);
    for (int64_t i = 0; i < n0; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(seg_moments)(X + (i * C + c0 + c) * hw, hw, 0, s[c], q[c]);
    for (int64_t c = 0; c < g; c++) {
        k[c] = ln_sum16(s[c]) / (double)(n0 * hw);
        memset(s[c], 0, sizeof s[c]), memset(q[c], 0, sizeof q[c]);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(seg_moments)(X + (i * C + c0 + c) * hw, hw, k[c], s[c], q[c]);
    for (int64_t c = 0; c < g; c++) {
        const double sd = ln_sum16(s[c]),
                     v = (ln_sum16(q[c]) - sd * sd / (double)cnt) / (double)cnt;
        const double var = v < 0 ? 0 : v, inv = 1.0 / sqrt(var + a->eps);
        mt[c] = (T)(k[c] + sd / (double)cnt);
        M[c0 + c] = mt[c];
        R[c0 + c] = (T)inv;
        if (Var) Var[c0 + c] = (T)var;
        /* y = (x - mean) * scale + bias, scale = invstd * weight rounded once */
        st[c] = (T)(W ? (double)(T)inv * (double)W[c0 + c] : (double)(T)inv);
        bt[c] = B ? B[c0 + c] : 0;
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++) {
            const int64_t o = (i * C + c0 + c) * hw;
            const T *x = X + o, *w = NULL, *b = NULL; /* LN_MAP_ROW's names */
            const V mv = LN_NAME(splat)(mt[c]), sv = LN_NAME(splat)(st[c]);
            const V hv = LN_NAME(splat)(bt[c]);
            LN_MAP_ROW(Y + o, hw, (xv - mv) * sv + hv, 0, 0);
        }
}

/* The gradients of channels c0 .. c0 + g - 1. */
static void LN_NAME(backward_group)(const ts_batch_norm_args *a, int64_t c0, int64_t g) {
    const int64_t N = a->n, C = a->c, hw = a->hw, cnt = N * hw;
    const T *X = (const T *)a->x.data, *DY = (const T *)a->dy.data;
    const T *W = (const T *)a->weight.data, *M = (const T *)a->mean.data;
    const T *R = (const T *)a->invstd.data;
    T *DX = (T *)a->dx.data, *DW = (T *)a->dweight.data, *DB = (T *)a->dbias.data;
    double s[BN_MAX_GROUP][16], q[BN_MAX_GROUP][16];
    T c1[BN_MAX_GROUP], c2[BN_MAX_GROUP], sc[BN_MAX_GROUP];
    memset(s, 0, sizeof s[0] * (size_t)g), memset(q, 0, sizeof q[0] * (size_t)g);
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++) {
            const int64_t o = (i * C + c0 + c) * hw;
            LN_NAME(seg_grad_sums)(X + o, DY + o, hw, M[c0 + c], s[c], q[c]);
        }
    for (int64_t c = 0; c < g; c++) {
        const double sdy = ln_sum16(s[c]), sdx = ln_sum16(q[c]), inv = (double)R[c0 + c];
        if (DB) DB[c0 + c] = (T)sdy;
        if (DW) DW[c0 + c] = (T)(sdx * inv);
        /* dx = (dy - c1 - (x - mean) * c2) * sc */
        c1[c] = (T)(sdy / (double)cnt);
        c2[c] = (T)(sdx / (double)cnt * inv * inv);
        sc[c] = (T)(W ? inv * (double)W[c0 + c] : inv);
    }
    if (!DX) return;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++) {
            const int64_t o = (i * C + c0 + c) * hw;
            const T *x = X + o, *w = NULL, *b = DY + o; /* LN_MAP_ROW's names: dy loads as bv */
            const V mv = LN_NAME(splat)(M[c0 + c]), c1v = LN_NAME(splat)(c1[c]);
            const V c2v = LN_NAME(splat)(c2[c]), scv = LN_NAME(splat)(sc[c]);
            LN_MAP_ROW(DX + o, hw, (bv - c1v - (xv - mv) * c2v) * scv, 0, 1);
        }
}

static void LN_NAME(bn_forward)(const ts_batch_norm_args *a) {
    const int64_t g = bn_group(a), groups = (a->c + g - 1) / g;
    TS_PARALLEL_FOR_IF(bn_parallel(a, groups),
                       for (int64_t t = 0; t < groups; t++)
                           LN_NAME(forward_group)(a, t * g, a->c - t * g < g ? a->c - t * g : g););
}

static void LN_NAME(bn_backward)(const ts_batch_norm_args *a) {
    const int64_t g = bn_group(a), groups = (a->c + g - 1) / g;
    TS_PARALLEL_FOR_IF(bn_parallel(a, groups),
                       for (int64_t t = 0; t < groups; t++)
                           LN_NAME(backward_group)(a, t * g, a->c - t * g < g ? a->c - t * g : g););
}
