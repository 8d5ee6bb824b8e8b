/* kern_layer_norm_impl.h — the fused layer norm row kernels for one vector ISA and one dtype
 * (kern_norm_variant.h's parameters and helpers), included through kern_norm_isa.h by
 * kern_layer_norm.c. The elementwise passes use whole vectors and a padded last one, so an
 * element's value never depends on where its row sits. */

/* A first mean m0 of the row, summed in T over 16 lanes (cheap: pass 2 corrects it); in double
 * when that overflowed. */
static double LN_NAME(first_mean)(const T *x, int64_t n) {
    const int64_t n16 = n & ~(int64_t)15;
    V a[16 / VL];
    for (int k = 0; k < 16 / VL; k++) a[k] = (V){0};
    for (int64_t j = 0; j < n16; j += 16)
        for (int k = 0; k < 16 / VL; k++) {
            V v;
            memcpy(&v, x + j + k * VL, sizeof v);
            a[k] += v;
        }
    T t[16];
    memcpy(t, a, sizeof t);
    for (int64_t j = n16; j < n; j++) t[j & 15] += x[j];
    double l[16];
    for (int k = 0; k < 16; k++) l[k] = (double)t[k];
    const double m0 = ln_sum16(l) / (double)n;
    if (isfinite(m0)) return m0;
    for (int k = 0; k < 16; k++) l[k] = 0;
    for (int64_t j = 0; j < n; j++) l[j & 15] += (double)x[j];
    return ln_sum16(l) / (double)n;
}

/* The row's mean and biased variance in double by the corrected two-pass method: with d = x - m0,
 * mean = m0 + sum(d) / n and var = (sum(d^2) - sum(d)^2 / n) / n, which cancels m0's error to
 * first order. A NaN stays a NaN. */
static void LN_NAME(moments)(const T *x, int64_t n, double *mean, double *var) {
    const int64_t n16 = n & ~(int64_t)15;
    const double m = LN_NAME(first_mean)(x, n);
    VD s[NACC], q[NACC];
    const VD mv = (VD){0} + m;
    for (int k = 0; k < NACC; k++) s[k] = q[k] = (VD){0};
    for (int64_t j = 0; j < n16; j += 16)
        for (int k = 0; k < NACC; k++) {
            const VD d = LN_NAME(load_d)(x + j + k * WD) - mv;
            s[k] += d;
            q[k] += d * d;
        }
    double ls[16], lq[16];
    LN_NAME(lanes)(ls, s);
    LN_NAME(lanes)(lq, q);
    for (int64_t j = n16; j < n; j++) {
        const double d = (double)x[j] - m;
        ls[j & 15] += d;
        lq[j & 15] += d * d;
    }
    const double sd = ln_sum16(ls);
    const double v = (ln_sum16(lq) - sd * sd / (double)n) / (double)n;
    *mean = m + sd / (double)n;
    *var = v < 0 ? 0 : v;
}

/* RMSNorm's statistic: the row's mean of x^2, summed in double (16 lanes, as moments) */
static double LN_NAME(mean_square)(const T *x, int64_t n) {
    const int64_t n16 = n & ~(int64_t)15;
    VD q[NACC];
    for (int k = 0; k < NACC; k++) q[k] = (VD){0};
    for (int64_t j = 0; j < n16; j += 16)
        for (int k = 0; k < NACC; k++) {
            const VD d = LN_NAME(load_d)(x + j + k * WD);
            q[k] += d * d;
        }
    double lq[16];
    LN_NAME(lanes)(lq, q);
    for (int64_t j = n16; j < n; j++) lq[j & 15] += (double)x[j] * (double)x[j];
    return ln_sum16(lq) / (double)n;
}

/* y = (x - mean) * rstd * w + b for one row (w, b NULL: absent); writes the row's mean and rstd.
 * rms (mean_out NULL, b NULL): mean 0 and the mean of x^2 for the variance, y = x * rstd * w. */
static void LN_NAME(forward_row)(const T *x, const T *w, const T *b, T *y, int64_t n, double eps,
                                 bool rms, T *mean_out, T *rstd_out) {
    double m = 0, var;
    if (rms)
        var = LN_NAME(mean_square)(x, n);
    else
        LN_NAME(moments)(x, n, &m, &var);
    const T mt = (T)m, rt = (T)(1.0 / sqrt(var + eps));
    if (!rms) *mean_out = mt;
    *rstd_out = rt;
    if (rms) {
        const V rv = LN_NAME(splat)(rt);
        if (w)
            LN_MAP_ROW(y, n, xv * rv * wv, 1, 0);
        else
            LN_MAP_ROW(y, n, xv * rv, 0, 0);
        return;
    }
    const V mv = LN_NAME(splat)(mt), rv = LN_NAME(splat)(rt);
    if (w && b)
        LN_MAP_ROW(y, n, (xv - mv) * rv * wv + bv, 1, 1);
    else if (w)
        LN_MAP_ROW(y, n, (xv - mv) * rv * wv, 1, 0);
    else if (b)
        LN_MAP_ROW(y, n, (xv - mv) * rv + bv, 0, 1);
    else
        LN_MAP_ROW(y, n, (xv - mv) * rv, 0, 0);
}

/* The fused residual add of one row: h = x + res in T (ts_add's bits: one IEEE addition per
 * element, whatever the vector width) */
static void LN_NAME(add_row)(const T *x, const T *res, T *h, int64_t n) {
    int64_t j = 0;
    for (; j + VL <= n; j += VL) {
        V xv, rv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&rv, res + j, sizeof rv);
        xv += rv;
        memcpy(h + j, &xv, sizeof xv);
    }
    for (; j < n; j++) h[j] = x[j] + res[j];
}

/* One row; with a residual the row normalised is h = x + residual, written first (the later
 * passes read it back from L1). */
static void LN_NAME(forward_one)(const ts_layer_norm_args *a, int64_t r) {
    const int64_t n = a->cols;
    const T *x = (const T *)a->x.data + r * n;
    if (a->residual.data) {
        T *h = (T *)a->h.data + r * n;
        LN_NAME(add_row)(x, (const T *)a->residual.data + r * n, h, n);
        x = h;
    }
    LN_NAME(forward_row)
    (x, (const T *)a->weight.data, (const T *)a->bias.data, (T *)a->y.data + r * n, n, a->eps,
     a->rms, a->rms ? NULL : (T *)a->mean.data + r, (T *)a->rstd.data + r);
}

static void LN_NAME(forward)(const ts_layer_norm_args *a) {
    const int64_t rows = a->rows;
    TS_PARALLEL_FOR_IF(tsi_norm_parallel(rows * a->cols, rows),
                       for (int64_t r = 0; r < rows; r++) LN_NAME(forward_one)(a, r););
}

/* The terms of one whole vector at column j: pw += dy xhat, pb += dy (ln_pidx's layout) */
static inline __attribute__((always_inline)) void LN_NAME(add_terms)(T *pw, T *pb, int64_t j, V d,
                                                                     V xv, V mv, V rv,
                                                                     const bool want_w,
                                                                     const bool want_b) {
    if (want_w) {
        V p;
        memcpy(&p, pw + ln_pidx(j), sizeof p);
        p += d * ((xv - mv) * rv);
        memcpy(pw + ln_pidx(j), &p, sizeof p);
    }
    if (want_b) {
        V p;
        memcpy(&p, pb + ln_pidx(j), sizeof p);
        p += d;
        memcpy(pb + ln_pidx(j), &p, sizeof p);
    }
}

/* Backward pass A over one row, in T as pass B: xhat = (x - mean) * rstd, g = dy * w; the sums of
 * g and of g * xhat in double (16 logical lanes); the row's terms of dweight (dy * xhat) and
 * dbias (dy) added into the sub-block's partial sums pw, pb (in T, at ln_pidx), those of columns
 * from b_end (pass B adds the others). Inlined with constant flags, so each use is its own
 * loop. */
static inline __attribute__((always_inline)) void
LN_NAME(row_sums)(const T *x, const T *dy, const T *w, T *pw, T *pb, int64_t n, T mt, T rt,
                  double *s1_out, double *s2_out, const bool has_w, const bool want_w,
                  const bool want_b, const int64_t b_end) {
    const int64_t n16 = n & ~(int64_t)15;
    const LN_VH mv = (LN_VH){0} + mt, rv = (LN_VH){0} + rt;
    VD s1[NACC], s2[NACC];
    for (int k = 0; k < NACC; k++) s1[k] = s2[k] = (VD){0};
    for (int64_t j = 0; j < n16; j += 16)
        for (int k = 0; k < NACC; k++) {
            const int64_t o = j + k * WD;
            const LN_VH d = LN_NAME(load_h)(dy + o), xh = (LN_NAME(load_h)(x + o) - mv) * rv;
            const LN_VH g = has_w ? d * LN_NAME(load_h)(w + o) : d;
            s1[k] += LN_NAME(to_d)(g);
            s2[k] += LN_NAME(to_d)(g * xh);
        }
    /* without dx, the partial sums in a loop of their own, at the full width (inside the one
     * above they spilled its double sums to the stack: AVX2's 16 registers); with dx, pass B adds
     * them while it has the row's x and dy in registers */
    if ((want_w || want_b) && b_end == 0) {
        const V mf = LN_NAME(splat)(mt), rf = LN_NAME(splat)(rt);
        for (int64_t j = 0; j < n16; j += VL) {
            V d, xv = mf;
            memcpy(&d, dy + j, sizeof d);
            if (want_w) memcpy(&xv, x + j, sizeof xv);
            LN_NAME(add_terms)(pw, pb, j, d, xv, mf, rf, want_w, want_b);
        }
    }
    double l1[16], l2[16];
    LN_NAME(lanes)(l1, s1);
    LN_NAME(lanes)(l2, s2);
    for (int64_t j = n16; j < n; j++) {
        const T d = dy[j], xh = (x[j] - mt) * rt, g = has_w ? d * w[j] : d;
        l1[j & 15] += (double)g;
        l2[j & 15] += (double)(g * xh);
        if (want_w && j >= b_end) pw[ln_pidx(j)] += d * xh;
        if (want_b && j >= b_end) pb[ln_pidx(j)] += d;
    }
    *s1_out = ln_sum16(l1);
    *s2_out = ln_sum16(l2);
}

/* Pass B: dx = rstd * (g - c1 - xhat * c2), c1 = mean(g), c2 = mean(g * xhat), in T. */
static inline V LN_NAME(dx_vec)(V xv, V g, V mv, V rv, V c1, V c2) {
    const V xh = (xv - mv) * rv;
    return rv * (g - c1 - xh * c2);
}

/* with want_w / want_b, also the row's dweight and dbias terms of its whole vectors, into pw, pb
 * (row_sums adds the rest) */
static inline __attribute__((always_inline)) void
LN_NAME(row_dx)(const T *x, const T *dy, const T *w, T *dx, int64_t n, T mt, T rt, double s1,
                double s2, const bool has_w, T *pw, T *pb, const bool want_w, const bool want_b) {
    const V mv = LN_NAME(splat)(mt), rv = LN_NAME(splat)(rt);
    const V c1 = LN_NAME(splat)((T)(s1 / (double)n)), c2 = LN_NAME(splat)((T)(s2 / (double)n));
    int64_t j = 0;
    for (; j + VL <= n; j += VL) {
        V xv, d, g, wv;
        memcpy(&xv, x + j, sizeof xv);
        memcpy(&d, dy + j, sizeof d);
        g = d;
        if (has_w) {
            memcpy(&wv, w + j, sizeof wv);
            g = g * wv;
        }
        const V r = LN_NAME(dx_vec)(xv, g, mv, rv, c1, c2);
        memcpy(dx + j, &r, sizeof r);
        LN_NAME(add_terms)(pw, pb, j, d, xv, mv, rv, want_w, want_b);
    }
    if (j < n) {
        const size_t cnt = (size_t)(n - j) * sizeof(T);
        V xv = {0}, g = {0}, wv = {0};
        memcpy(&xv, x + j, cnt);
        memcpy(&g, dy + j, cnt);
        if (has_w) {
            memcpy(&wv, w + j, cnt);
            g = g * wv;
        }
        const V r = LN_NAME(dx_vec)(xv, g, mv, rv, c1, c2);
        memcpy(dx + j, &r, cnt);
    }
}

static inline __attribute__((always_inline)) void
LN_NAME(backward_row)(const ts_layer_norm_args *a, int64_t r, T *pw, T *pb, const bool has_w,
                      const bool want_w, const bool want_b) {
    const int64_t n = a->cols;
    const T *x = (const T *)a->x.data + r * n, *dy = (const T *)a->dy.data + r * n;
    const T *w = (const T *)a->weight.data;
    /* rms: mean 0, so xhat = x * rstd, and no mean(g) term in dx */
    const T mt = a->rms ? (T)0 : ((const T *)a->mean.data)[r], rt = ((const T *)a->rstd.data)[r];
    double s1 = 0, s2 = 0;
    /* with dx, pass B takes the dweight / dbias terms of the row's whole vectors */
    const int64_t b_end = a->dx.data ? n & ~(int64_t)(VL - 1) : 0;
    LN_NAME(row_sums)(x, dy, w, pw, pb, n, mt, rt, &s1, &s2, has_w, want_w, want_b, b_end);
    if (a->rms) s1 = 0;
    if (a->dx.data) {
        T *dxr = (T *)a->dx.data + r * n;
        LN_NAME(row_dx)(x, dy, w, dxr, n, mt, rt, s1, s2, has_w, pw, pb, want_w, want_b);
    }
}

/* The rows of block blk (ln_plan) in order. Their dweight / dbias terms are summed in T over
 * sub-blocks of LN_SUB rows (pl->ld values after the block's double sums, laid out by ln_pidx:
 * half the cache footprint of double sums for float), each sub-block's sums then added into the
 * block's in double. */
static inline __attribute__((always_inline)) void
LN_NAME(backward_block)(const ts_layer_norm_args *a, const ln_plan *pl, int64_t blk, double *ws,
                        const bool has_w, const bool want_w, const bool want_b) {
    const bool sums = want_w || want_b;
    double *acc = sums ? ln_block_sums(pl, ws, blk, sizeof(T)) : NULL;
    T *pw = sums ? (T *)(acc + pl->ld) : NULL, *pb = sums ? pw + LN_PI : NULL;
    if (sums) memset(acc, 0, (size_t)pl->ld * sizeof(double));
    const int64_t r0 = ln_block_start(pl, blk), r1 = ln_block_start(pl, blk + 1);
    for (int64_t s0 = r0; s0 < r1; s0 += LN_SUB) {
        const int64_t s1 = s0 + LN_SUB < r1 ? s0 + LN_SUB : r1;
        if (sums) memset(pw, 0, (size_t)pl->ld * sizeof(T));
        for (int64_t r = s0; r < s1; r++)
            LN_NAME(backward_row)(a, r, pw, pb, has_w, want_w, want_b);
        if (sums)
            for (int64_t i = 0; i < pl->ld; i++) acc[i] += (double)pw[i];
    }
}

#define LN_BLOCKS(HW, WW, WB)                                                                      \
    do {                                                                                           \
        TS_PARALLEL_FOR_IF(par, for (int64_t blk = 0; blk < pl.blocks; blk++)                      \
                                    LN_NAME(backward_block)(a, &pl, blk, ws, HW, WW, WB););        \
    } while (0)

static void LN_NAME(backward)(const ts_layer_norm_args *a, double *ws) {
    const ln_plan pl = ln_plan_for(a);
    const bool par = tsi_norm_parallel(a->rows * a->cols, pl.blocks);
    const bool has_w = a->weight.data != NULL;
    const bool want_w = a->dweight.data != NULL, want_b = a->dbias.data != NULL;
    /* each combination its own loop: the flags are constants inside */
    if (has_w) {
        if (want_w && want_b)
            LN_BLOCKS(true, true, true);
        else if (want_w)
            LN_BLOCKS(true, true, false);
        else if (want_b)
            LN_BLOCKS(true, false, true);
        else
            LN_BLOCKS(true, false, false);
    } else {
        if (want_b)
            LN_BLOCKS(false, false, true);
        else
            LN_BLOCKS(false, false, false);
    }
    if (!want_w && !want_b) return;
    /* dweight[j] (dbias[j]) = the blocks' partial sums added in block order, LN_COMBINE columns
     * at a time */
    const int64_t n = a->cols, chunks = (n + LN_COMBINE - 1) / LN_COMBINE;
    T *dw = (T *)a->dweight.data, *db = (T *)a->dbias.data;
    const bool cpar = par && tsi_norm_parallel(n * pl.blocks, pl.blocks);
    TS_PARALLEL_FOR_IF(
        cpar, for (int64_t c = 0; c < chunks; c++) {
            const int64_t j0 = c * LN_COMBINE, m = n - j0 < LN_COMBINE ? n - j0 : LN_COMBINE;
            double sw[LN_COMBINE], sb[LN_COMBINE];
            memset(sw, 0, sizeof sw), memset(sb, 0, sizeof sb);
            for (int64_t k = 0; k < pl.blocks; k++) {
                const double *pw = ln_block_sums(&pl, ws, k, sizeof(T)) + 2 * j0, *pb = pw + LN_PI;
                if (want_w)
                    for (int64_t j = 0; j < m; j++) sw[j] += pw[ln_pidx(j)];
                if (want_b)
                    for (int64_t j = 0; j < m; j++) sb[j] += pb[ln_pidx(j)];
            }
            for (int64_t j = 0; j < m; j++) {
                if (want_w) dw[j0 + j] = (T)sw[j];
                if (want_b) db[j0 + j] = (T)sb[j];
            }
        });
}

#undef LN_BLOCKS
