/* kern_batch_norm_impl.h — the fused batch norm kernels for one vector ISA and one dtype
 * (kern_norm_variant.h's parameters and helpers; the float variants take f16 / bf16 too),
 * included through kern_norm_isa.h by
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

/* ------------------------------------------------------------------ segments of any dtype
 * The passes over one segment (o: its first element, n: its length) of the [n, c, hw] tensors,
 * in T; in the float variants (LN_HALF) also for an f16 / bf16 x (with y, dy, dx of its dtype):
 * the segment converted to float in chunks of BN_HALF_CHUNK (a multiple of 16, so every element
 * keeps its lane), the same float arithmetic, the outputs rounded to the half dtype once. An f16 /
 * bf16 run therefore gives exactly what the float kernel gives its widened copy, rounded. */
#ifdef LN_HALF
static inline bool LN_NAME(is_half)(const ts_batch_norm_args *a) { return a->x.dtype != TS_F32; }
static inline const char *LN_NAME(half_at)(const ts_kview *v, int64_t o) {
    return (const char *)v->data + o * 2;
}
#endif

/* The moments of x's segment about k into the 16 lanes s and q. */
static inline void LN_NAME(moments_at)(const ts_batch_norm_args *a, int64_t o, int64_t n, double k,
                                       double *s, double *q) {
#ifdef LN_HALF
    if (LN_NAME(is_half)(a)) {
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        float xb[BN_HALF_CHUNK];
        for (int64_t p0 = 0; p0 < n; p0 += BN_HALF_CHUNK) {
            const int64_t m = n - p0 < BN_HALF_CHUNK ? n - p0 : BN_HALF_CHUNK;
            ts_vec_load_f32(vk, xb, LN_NAME(half_at)(&a->x, o + p0), a->x.dtype, 2, m);
            LN_NAME(seg_moments)(xb, m, k, s, q);
        }
        return;
    }
#endif
    LN_NAME(seg_moments)((const T *)a->x.data + o, n, k, s, q);
}

/* y's segment: (x - m) * sc + h. */
static inline void LN_NAME(output_at)(const ts_batch_norm_args *a, int64_t o, int64_t n, T m, T sc,
                                      T h) {
    const V mv = LN_NAME(splat)(m), sv = LN_NAME(splat)(sc), hv = LN_NAME(splat)(h);
    const T *w = NULL, *b = NULL; /* LN_MAP_ROW's names */
#ifdef LN_HALF
    if (LN_NAME(is_half)(a)) {
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        float xb[BN_HALF_CHUNK], yb[BN_HALF_CHUNK];
        for (int64_t p0 = 0; p0 < n; p0 += BN_HALF_CHUNK) {
            const int64_t cnt = n - p0 < BN_HALF_CHUNK ? n - p0 : BN_HALF_CHUNK;
            ts_vec_load_f32(vk, xb, LN_NAME(half_at)(&a->x, o + p0), a->x.dtype, 2, cnt);
            const T *x = xb;
            LN_MAP_ROW(yb, cnt, (xv - mv) * sv + hv, 0, 0);
            ts_vec_store_f32(vk, (char *)LN_NAME(half_at)(&a->y, o + p0), a->y.dtype, 2, yb, cnt);
        }
        return;
    }
#endif
    const T *x = (const T *)a->x.data + o;
    LN_MAP_ROW((T *)a->y.data + o, n, (xv - mv) * sv + hv, 0, 0);
}

/* The sums of dy and dy * (x - m) over the segment into the 16 lanes s and q. */
static inline void LN_NAME(grad_sums_at)(const ts_batch_norm_args *a, int64_t o, int64_t n, T m,
                                         double *s, double *q) {
#ifdef LN_HALF
    if (LN_NAME(is_half)(a)) {
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        float xb[BN_HALF_CHUNK], db[BN_HALF_CHUNK];
        for (int64_t p0 = 0; p0 < n; p0 += BN_HALF_CHUNK) {
            const int64_t cnt = n - p0 < BN_HALF_CHUNK ? n - p0 : BN_HALF_CHUNK;
            ts_vec_load_f32(vk, xb, LN_NAME(half_at)(&a->x, o + p0), a->x.dtype, 2, cnt);
            ts_vec_load_f32(vk, db, LN_NAME(half_at)(&a->dy, o + p0), a->dy.dtype, 2, cnt);
            LN_NAME(seg_grad_sums)(xb, db, cnt, m, s, q);
        }
        return;
    }
#endif
    const T *x = (const T *)a->x.data + o, *dy = (const T *)a->dy.data + o;
    LN_NAME(seg_grad_sums)(x, dy, n, m, s, q);
}

/* dx's segment: (dy - c1 - (x - m) * c2) * sc. */
static inline void LN_NAME(dx_at)(const ts_batch_norm_args *a, int64_t o, int64_t n, T m, T c1,
                                  T c2, T sc) {
    const V mv = LN_NAME(splat)(m), c1v = LN_NAME(splat)(c1);
    const V c2v = LN_NAME(splat)(c2), scv = LN_NAME(splat)(sc);
    const T *w = NULL; /* LN_MAP_ROW's names: dy loads as bv */
#ifdef LN_HALF
    if (LN_NAME(is_half)(a)) {
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        float xb[BN_HALF_CHUNK], db[BN_HALF_CHUNK], rb[BN_HALF_CHUNK];
        for (int64_t p0 = 0; p0 < n; p0 += BN_HALF_CHUNK) {
            const int64_t cnt = n - p0 < BN_HALF_CHUNK ? n - p0 : BN_HALF_CHUNK;
            ts_vec_load_f32(vk, xb, LN_NAME(half_at)(&a->x, o + p0), a->x.dtype, 2, cnt);
            ts_vec_load_f32(vk, db, LN_NAME(half_at)(&a->dy, o + p0), a->dy.dtype, 2, cnt);
            const T *x = xb, *b = db;
            LN_MAP_ROW(rb, cnt, (bv - c1v - (xv - mv) * c2v) * scv, 0, 1);
            ts_vec_store_f32(vk, (char *)LN_NAME(half_at)(&a->dx, o + p0), a->dx.dtype, 2, rb, cnt);
        }
        return;
    }
#endif
    const T *x = (const T *)a->x.data + o, *b = (const T *)a->dy.data + o;
    LN_MAP_ROW((T *)a->dx.data + o, n, (bv - c1v - (xv - mv) * c2v) * scv, 0, 1);
}

/* The statistics of channels c0 .. c0 + g - 1 and their outputs (x and y of dtype T, or f16 /
 * bf16 with everything else T = float). */
static void LN_NAME(forward_group)(const ts_batch_norm_args *a, int64_t c0, int64_t g) {
    const int64_t N = a->n, C = a->c, hw = a->hw, cnt = N * hw;
    const T *W = (const T *)a->weight.data, *B = (const T *)a->bias.data;
    T *M = (T *)a->mean.data, *R = (T *)a->invstd.data, *Var = (T *)a->var.data;
    double s[BN_MAX_GROUP][16], q[BN_MAX_GROUP][16], k[BN_MAX_GROUP];
    T mt[BN_MAX_GROUP], st[BN_MAX_GROUP], bt[BN_MAX_GROUP];
    memset(s, 0, sizeof s[0] * (size_t)g), memset(q, 0, sizeof q[0] * (size_t)g);
    /* the shift k: the mean of the channel's first segments, at least 16 elements when there
     * are (the sums of d = x - k then cancel little; a NaN or an infinity stays one) */
    const int64_t n0 = bn_shift_samples(N, hw);
    for (int64_t i = 0; i < n0; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(moments_at)(a, (i * C + c0 + c) * hw, hw, 0, s[c], q[c]);
    for (int64_t c = 0; c < g; c++) {
        k[c] = ln_sum16(s[c]) / (double)(n0 * hw);
        memset(s[c], 0, sizeof s[c]), memset(q[c], 0, sizeof q[c]);
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(moments_at)(a, (i * C + c0 + c) * hw, hw, k[c], s[c], q[c]);
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
        for (int64_t c = 0; c < g; c++)
            LN_NAME(output_at)(a, (i * C + c0 + c) * hw, hw, mt[c], st[c], bt[c]);
}

/* The gradients of channels c0 .. c0 + g - 1. */
static void LN_NAME(backward_group)(const ts_batch_norm_args *a, int64_t c0, int64_t g) {
    const int64_t N = a->n, C = a->c, hw = a->hw, cnt = N * hw;
    const T *W = (const T *)a->weight.data, *M = (const T *)a->mean.data;
    const T *R = (const T *)a->invstd.data;
    T *DW = (T *)a->dweight.data, *DB = (T *)a->dbias.data;
    double s[BN_MAX_GROUP][16], q[BN_MAX_GROUP][16];
    T c1[BN_MAX_GROUP], c2[BN_MAX_GROUP], sc[BN_MAX_GROUP];
    memset(s, 0, sizeof s[0] * (size_t)g), memset(q, 0, sizeof q[0] * (size_t)g);
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(grad_sums_at)(a, (i * C + c0 + c) * hw, hw, M[c0 + c], s[c], q[c]);
    for (int64_t c = 0; c < g; c++) {
        const double sdy = ln_sum16(s[c]), sdx = ln_sum16(q[c]), inv = (double)R[c0 + c];
        if (DB) DB[c0 + c] = (T)sdy;
        if (DW) DW[c0 + c] = (T)(sdx * inv);
        /* dx = (dy - c1 - (x - mean) * c2) * sc */
        c1[c] = (T)(sdy / (double)cnt);
        c2[c] = (T)(sdx / (double)cnt * inv * inv);
        sc[c] = (T)(W ? inv * (double)W[c0 + c] : inv);
    }
    if (!a->dx.data) return;
    for (int64_t i = 0; i < N; i++)
        for (int64_t c = 0; c < g; c++)
            LN_NAME(dx_at)(a, (i * C + c0 + c) * hw, hw, M[c0 + c], c1[c], c2[c], sc[c]);
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
