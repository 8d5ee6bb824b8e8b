/* kern_sdpa_impl.h — the fused attention kernels (flash attention on the CPU), included by
 * kern_sdpa.c once per (ISA, dtype) with the target set. The includer defines
 *   SDPA_T        float or double
 *   SDPA_VT       a GCC vector of SDPA_VL of them
 *   SDPA_MR       rows of a register tile; SDPA_NV vectors across it (tile width W = NV * VL)
 *   SDPA_BLK      rows of a query block and of a key/value block (a multiple of MR and W)
 *   SDPA_EXP(v)   e^v on an SDPA_VT (or leaves it undefined: scalar exp per lane)
 *   SDPA_NAME(x)  the name of function x for this variant
 *   SDPA_IO       the tensors' element type, when it is not SDPA_T (f16 / bf16 bits computed in
 *                 float): then SDPA_LD(x) widens one element and SDPA_ST(x) rounds one back, every
 *                 operand is packed (converted) before the products, and lse stays SDPA_T
 * Every product is a register-tiled loop over packed, zero-padded operands in the thread's
 * workspace (so any stride, any head size and every edge run the same full tiles); softmax rows
 * are vector loops over whole blocks. See kern_sdpa.c for the plan and the threading. */

#define T   SDPA_T
#define VT  SDPA_VT
#define VL  SDPA_VL
#define MR  SDPA_MR
#define NV  SDPA_NV
#define W   (SDPA_NV * SDPA_VL)
#define BLK SDPA_BLK
#ifdef SDPA_IO
#define IO      SDPA_IO
#define LD(x)   SDPA_LD(x)
#define ST(x)   SDPA_ST(x)
#define SAME_IO 0
#else
#define IO      SDPA_T
#define LD(x)   (x)
#define ST(x)   (x)
#define SAME_IO 1
#endif
#ifndef NO_LO
#define NO_LO (-((int64_t)1 << 40)) /* gemm_band's bounds for no band */
#define NO_HI ((int64_t)1 << 40)
#endif

/* C[MR x W] (+)= sum_p A(i, p) * B(p, 0..W), A(i, p) = a[i * rsa + p * csa], B rows of ldb. */
static void SDPA_NAME(ukr)(int64_t kc, const T *a, int64_t rsa, int64_t csa, const T *b,
                           int64_t ldb, T *c, int64_t ldc, bool acc) {
    VT s[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) s[i][v] = acc ? *(const VT *)(c + i * ldc + v * VL) : (VT){0};
    for (int64_t p = 0; p < kc; p++) {
        VT bv[NV];
        for (int v = 0; v < NV; v++) bv[v] = *(const VT *)(b + p * ldb + v * VL);
        for (int i = 0; i < MR; i++) {
            const T ai = a[i * rsa + p * csa];
            for (int v = 0; v < NV; v++) s[i][v] += ai * bv[v];
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) *(VT *)(c + i * ldc + v * VL) = s[i][v];
}

/* C[m x n] (+)= A[m x kc] B[kc x n]; m a multiple of MR, n of W. */
static void SDPA_NAME(gemm)(int64_t m, int64_t n, int64_t kc, const T *a, int64_t rsa, int64_t csa,
                            const T *b, int64_t ldb, T *c, int64_t ldc, bool acc) {
    for (int64_t j = 0; j < n; j += W)
        for (int64_t i = 0; i < m; i += MR)
            SDPA_NAME(ukr)(kc, a + i * rsa, rsa, csa, b + j, ldb, c + i * ldc + j, ldc, acc);
}

/* gemm over a band: the strip of MR rows from row i sums p in [lo + i, hi + i + MR) only (clipped
 * to [0, kc)), where a causal mask leaves the other terms zero; skipping them leaves the sums as
 * they were. */
static void SDPA_NAME(gemm_band)(int64_t m, int64_t n, int64_t kc, const T *a, int64_t rsa,
                                 int64_t csa, const T *b, int64_t ldb, T *c, int64_t ldc, bool acc,
                                 int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < m; i += MR) {
        int64_t p0 = lo + i, p1 = hi + i + MR;
        p0 = p0 < 0 ? 0 : p0 > kc ? kc : p0;
        p1 = p1 < p0 ? p0 : p1 > kc ? kc : p1;
        for (int64_t j = 0; j < n; j += W) SDPA_NAME(ukr)
        (p1 - p0, a + i * rsa + p0 * csa, rsa, csa, b + p0 * ldb + j, ldb, c + i * ldc + j, ldc,
         acc);
    }
}

/* e^x lane by lane */
static inline VT SDPA_NAME(vexp)(VT x) {
#ifdef SDPA_EXP
    return SDPA_EXP(x);
#else
    for (int l = 0; l < VL; l++) x[l] = exp(x[l]);
    return x;
#endif
}

/* the larger of a and b, lane by lane (b where either is NaN) */
static inline VT SDPA_NAME(vmax)(VT a, VT b) {
    const __typeof__(a > b) m = a > b;
    return (VT)((m & (__typeof__(m))a) | (~m & (__typeof__(m))b));
}

/* x with 0 in the lanes where m is set */
static inline VT SDPA_NAME(vzero_where)(__typeof__((VT){0} > (VT){0}) m, VT x) {
    return (VT)(~m & (__typeof__(m))x);
}

/* rows [r0, r0 + nr) x cols [0, ncol) of a row-strided source into dst[BLK-padded rows x ld],
 * times scale; rows nr..rows_pad and columns ncol..ld are zero */
static void SDPA_NAME(pack)(T *dst, int64_t ld, int64_t rows_pad, const IO *src, int64_t rs,
                            int64_t nr, int64_t ncol, T scale) {
    for (int64_t r = 0; r < rows_pad; r++) {
        T *d = dst + r * ld;
        if (r < nr) {
            const IO *s = src + r * rs;
            for (int64_t c = 0; c < ncol; c++) d[c] = LD(s[c]) * scale;
            for (int64_t c = ncol; c < ld; c++) d[c] = 0;
        } else {
            memset(d, 0, (size_t)ld * sizeof(T));
        }
    }
}

/* dst[c][r] = src[r][c] for the padded [rows x cols] block src (ld_src) into dst (ld_dst = rows) */
static void SDPA_NAME(transpose)(T *dst, int64_t ld_dst, const T *src, int64_t ld_src, int64_t rows,
                                 int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * ld_dst + r] = src[r * ld_src + c];
}

/* The mask's values along a row (along = 1: element (n, i, j0 + t)) or a column (along = 0:
 * element (n, i0 + t, j)) of the scores, t < cnt, applied to s[t]: a false bool masks the score
 * out, a float is added to it. */
static void SDPA_NAME(mask_apply)(const ts_sdpa_args *a, const sdpa_plan *pl, int64_t n, int64_t i0,
                                  int64_t j0, int along, int64_t cnt, T *s) {
    const ts_kview *m = &a->mask;
    const int64_t si = m->strides[m->ndim - 2], sj = m->strides[m->ndim - 1];
    const int64_t base = sdpa_batch_offset(m, pl, n) + i0 * si + j0 * sj, step = along ? sj : si;
    if (m->dtype == TS_BOOL) {
        const uint8_t *mp = (const uint8_t *)m->data + base;
        for (int64_t t = 0; t < cnt; t++)
            if (!mp[t * step]) s[t] = -INFINITY;
    } else {
        const IO *mp = (const IO *)m->data + base;
        for (int64_t t = 0; t < cnt; t++) s[t] += LD(mp[t * step]);
    }
}

/* ---------------------------------------------------------------------------- forward */
/* The scores are computed transposed, S^T = K Qs^T [keys x queries], so the online softmax runs
 * down the columns with a vector of queries per step (maxima, exponentials and sums of VL rows at
 * once, no horizontal reductions) and K is read as it is packed: the queries are transposed once
 * per item instead of each key block once per query block. */
static void SDPA_NAME(fwd_item)(const sdpa_plan *pl, const ts_sdpa_args *a, int64_t n, int64_t qb,
                                char *ws) {
    const int64_t L = pl->L, S = pl->S, E = pl->E, Ev = pl->Ev, Ep = pl->Ep, Evp = pl->Evp;
    T *Qt = (T *)ws, *Kb = Qt + Ep * BLK, *Vp = Kb + BLK * Ep, *St = Vp + BLK * Evp;
    T *O = St + BLK * BLK, *mrow = O + BLK * Evp, *lrow = mrow + BLK, *alpha = lrow + BLK;
    uint8_t *keep = (uint8_t *)(alpha + BLK);
    const int64_t q0 = qb * BLK, nr = L - q0 < BLK ? L - q0 : BLK;
    const int64_t mrows = (nr + MR - 1) / MR * MR;
    const IO *q = (const IO *)a->q.data + sdpa_batch_offset(&a->q, pl, n);
    const IO *k = (const IO *)a->k.data + sdpa_batch_offset(&a->k, pl, n);
    const IO *v = (const IO *)a->v.data + sdpa_batch_offset(&a->v, pl, n);
    const int64_t qrs = a->q.strides[a->q.ndim - 2], krs = a->k.strides[a->k.ndim - 2];
    const int64_t vrs = a->v.strides[a->v.ndim - 2];
    /* the scaled queries transposed, Qt [E x BLK], columns past nr zero */
    const T scale = (T)a->scale;
    for (int64_t e = 0; e < E; e++) {
        T *d = Qt + e * BLK;
        for (int64_t r = 0; r < nr; r++) d[r] = LD(q[(q0 + r) * qrs + e]) * scale;
        for (int64_t r = nr; r < BLK; r++) d[r] = 0;
    }
    memset(O, 0, sizeof(T) * BLK * Evp);
    for (int64_t r = 0; r < BLK; r++) mrow[r] = -INFINITY, lrow[r] = 0;
    const int64_t last_row = q0 + nr - 1;
    const int64_t nkb = a->causal ? (last_row < S ? last_row / BLK + 1 : pl->nk) : pl->nk;
    const T drop_scale = (T)sdpa_dropout_scale(a->dropout_p);
    const bool v_direct = SAME_IO && Ev == Evp && vrs % VL == 0 && (uintptr_t)v % sizeof(VT) == 0;
    for (int64_t kb = 0; kb < nkb; kb++) {
        const int64_t c0 = kb * BLK, nc = S - c0 < BLK ? S - c0 : BLK;
        const int64_t mcols = (nc + MR - 1) / MR * MR;
        /* K is the products' broadcast operand, read in place when the block is whole (and of
         * the compute type); V their vector operand, read in place when its rows are whole,
         * aligned vectors */
        const T *Kp = Kb, *Vr = Vp;
        int64_t kld = Ep, vld = Evp;
        if (SAME_IO && nc == BLK)
            Kp = (const T *)(k + c0 * krs), kld = krs;
        else
            SDPA_NAME(pack)(Kb, Ep, BLK, k + c0 * krs, krs, nc, E, (T)1);
        if (v_direct)
            Vr = (const T *)(v + c0 * vrs), vld = vrs;
        else
            SDPA_NAME(pack)(Vp, Evp, nc, v + c0 * vrs, vrs, nc, Ev, (T)1);
        SDPA_NAME(gemm)(mcols, BLK, E, Kp, kld, 1, Qt, BLK, St, BLK, false);
        const bool diag = a->causal && c0 + nc - 1 > q0;
        for (int64_t c = 0; c < nc; c++) { /* key c0 + c: mask, and hide it from earlier queries */
            T *s = St + c * BLK;
            if (a->has_mask) SDPA_NAME(mask_apply)(a, pl, n, q0, c0 + c, 0, nr, s);
            if (diag)
                for (int64_t r = 0; r < nr && q0 + r < c0 + c; r++) s[r] = -INFINITY;
        }
        /* per query: the new maximum m, alpha = e^(m_old - m), the weights e^(s - m) and their
         * sum; a query that sees no key yet keeps m = -inf and takes weights e^-inf = 0 */
        for (int64_t r0 = 0; r0 < BLK; r0 += VL) {
            VT mx = *(const VT *)(mrow + r0);
            for (int64_t c = 0; c < nc; c++)
                mx = SDPA_NAME(vmax)(*(const VT *)(St + c * BLK + r0), mx);
            const VT m_eff = SDPA_NAME(vzero_where)(mx == -INFINITY, mx);
            const VT al = SDPA_NAME(vexp)(*(const VT *)(mrow + r0) - m_eff);
            VT sum = (VT){0};
            for (int64_t c = 0; c < nc; c++) {
                VT *s = (VT *)(St + c * BLK + r0);
                const VT x = SDPA_NAME(vexp)(*s - m_eff);
                *s = x;
                sum += x;
            }
            *(VT *)(lrow + r0) = *(const VT *)(lrow + r0) * al + sum;
            *(VT *)(mrow + r0) = mx;
            *(VT *)(alpha + r0) = al;
        }
        for (int64_t r = 0; r < nr; r++)
            if (alpha[r] != 1) {
                T *o = O + r * Evp;
                for (int64_t e = 0; e < Evp; e++) o[e] *= alpha[r];
            }
        if (a->dropout_p > 0) {
            sdpa_keep_tile(a, pl, n, q0, nr, c0, nc, keep, BLK);
            for (int64_t c = 0; c < nc; c++)
                for (int64_t r = 0; r < nr; r++) {
                    T *s = St + c * BLK + r;
                    *s = keep[r * BLK + c] ? *s * drop_scale : 0;
                }
        }
        /* O += P V with P(r, c) = St[c][r] */
        SDPA_NAME(gemm_band)
        (mrows, Evp, nc, St, 1, BLK, Vr, vld, O, Evp, true, NO_LO, a->causal ? q0 - c0 : NO_HI);
    }
    IO *out = (IO *)a->out.data + sdpa_batch_offset(&a->out, pl, n);
    T *lse = (T *)a->lse.data + sdpa_batch_offset(&a->lse, pl, n);
    const int64_t ors = a->out.strides[a->out.ndim - 2];
    for (int64_t r = 0; r < nr; r++) {
        IO *o = out + (q0 + r) * ors;
        const T l = lrow[r], inv = l > 0 ? 1 / l : 0;
        for (int64_t e = 0; e < Ev; e++) o[e] = ST(O[r * Evp + e] * inv);
        lse[q0 + r] = l > 0 ? mrow[r] + (T)log(l) : INFINITY;
    }
}

/* --------------------------------------------------------------------------- backward */
/* Key/value blocks kb0, kb0 + step, ... of batch n: dk and dv of those blocks, and their share of
 * dq accumulated (unscaled) into dq_acc [Lp x Ep]. The weights are recomputed as P = e^(Qs K^T -
 * lse) [queries x keys] and dP = dO V^T: K and V are transposed once per key block (not each
 * query block once per key block), and D = rowsum(dO * out) once per item into Dall [Lp]. */
static void SDPA_NAME(bwd_item)(const sdpa_plan *pl, const ts_sdpa_args *a, int64_t n, int64_t kb0,
                                int64_t step, char *ws, T *dq_acc) {
    const int64_t L = pl->L, S = pl->S, E = pl->E, Ev = pl->Ev, Ep = pl->Ep, Evp = pl->Evp;
    T *Kb = (T *)ws, *Vb = Kb + BLK * Ep, *Kt = Vb + BLK * Evp, *Vt = Kt + Ep * BLK;
    T *Qs = Vt + Evp * BLK, *dO = Qs + BLK * Ep, *P = dO + BLK * Evp, *Pd = P + BLK * BLK;
    T *dP = Pd + BLK * BLK, *dK = dP + BLK * BLK, *dV = dK + BLK * Ep, *Dall = dV + BLK * Evp;
    uint8_t *keep = (uint8_t *)(Dall + pl->Lp);
    const IO *q = (const IO *)a->q.data + sdpa_batch_offset(&a->q, pl, n);
    const IO *k = (const IO *)a->k.data + sdpa_batch_offset(&a->k, pl, n);
    const IO *v = (const IO *)a->v.data + sdpa_batch_offset(&a->v, pl, n);
    const IO *o = (const IO *)a->out.data + sdpa_batch_offset(&a->out, pl, n);
    const IO *go = (const IO *)a->dout.data + sdpa_batch_offset(&a->dout, pl, n);
    const T *lse = (const T *)a->lse.data + sdpa_batch_offset(&a->lse, pl, n);
    const int64_t qrs = a->q.strides[a->q.ndim - 2], krs = a->k.strides[a->k.ndim - 2];
    const int64_t vrs = a->v.strides[a->v.ndim - 2], ors = a->out.strides[a->out.ndim - 2];
    const int64_t grs = a->dout.strides[a->dout.ndim - 2];
    const bool drop = a->dropout_p > 0;
    const T drop_scale = (T)sdpa_dropout_scale(a->dropout_p);
    for (int64_t i = 0; i < pl->Lp; i++) { /* VL lanes of partial sums, then the lanes in order */
        T d = 0;
        if (i < L) {
            const IO *orow = o + i * ors, *grow = go + i * grs;
            VT acc = (VT){0}, x = (VT){0}, y = (VT){0};
            int64_t e = 0;
            for (; e + VL <= Ev; e += VL) {
#if SAME_IO
                memcpy(&x, grow + e, sizeof x);
                memcpy(&y, orow + e, sizeof y);
#else
                for (int l = 0; l < VL; l++) x[l] = LD(grow[e + l]), y[l] = LD(orow[e + l]);
#endif
                acc += x * y;
            }
            for (int l = 0; l < VL; l++) d += acc[l];
            for (; e < Ev; e++) d += LD(grow[e]) * LD(orow[e]);
        }
        Dall[i] = d;
    }
    for (int64_t kb = kb0; kb < pl->nk; kb += step) {
        const int64_t c0 = kb * BLK, nc = S - c0 < BLK ? S - c0 : BLK;
        const int64_t mcols = (nc + MR - 1) / MR * MR;
        SDPA_NAME(pack)(Kb, Ep, BLK, k + c0 * krs, krs, nc, E, (T)1);
        SDPA_NAME(pack)(Vb, Evp, BLK, v + c0 * vrs, vrs, nc, Ev, (T)1);
        SDPA_NAME(transpose)(Kt, BLK, Kb, Ep, BLK, E);
        SDPA_NAME(transpose)(Vt, BLK, Vb, Evp, BLK, Ev);
        memset(dK, 0, sizeof(T) * BLK * Ep);
        memset(dV, 0, sizeof(T) * BLK * Evp);
        for (int64_t qb = a->causal ? c0 / BLK : 0; qb < pl->nq; qb++) {
            const int64_t q0 = qb * BLK, nr = L - q0 < BLK ? L - q0 : BLK;
            const int64_t mrows = (nr + MR - 1) / MR * MR;
            SDPA_NAME(pack)(Qs, Ep, BLK, q + q0 * qrs, qrs, nr, E, (T)a->scale);
            SDPA_NAME(pack)(dO, Evp, BLK, go + q0 * grs, grs, nr, Ev, (T)1);
            /* P [queries x keys] = e^(Qs K^T (+ mask) - lse); keys past nc weigh 0 */
            SDPA_NAME(gemm)(mrows, BLK, E, Qs, Ep, 1, Kt, BLK, P, BLK, false);
            const bool diag = a->causal && c0 + nc - 1 > q0;
            for (int64_t r = 0; r < nr; r++) {
                T *p = P + r * BLK;
                if (a->has_mask) SDPA_NAME(mask_apply)(a, pl, n, q0 + r, c0, 1, nc, p);
                int64_t c = diag ? q0 + r - c0 + 1 : nc; /* keys after query q0 + r, padding */
                for (c = c < 0 ? 0 : c > nc ? nc : c; c < BLK; c++) p[c] = -INFINITY;
                const VT l = (VT){0} + lse[q0 + r];
                for (int64_t c1 = 0; c1 < BLK; c1 += VL)
                    *(VT *)(p + c1) = SDPA_NAME(vexp)(*(const VT *)(p + c1) - l);
            }
            for (int64_t r = nr; r < mrows; r++) memset(P + r * BLK, 0, sizeof(T) * BLK);
            const T *Pv = P; /* the weights as dropout left them */
            if (drop) {
                sdpa_keep_tile(a, pl, n, q0, nr, c0, nc, keep, BLK);
                for (int64_t r = 0; r < mrows; r++)
                    for (int64_t c = 0; c < BLK; c++)
                        Pd[r * BLK + c] =
                            r < nr && c < nc && keep[r * BLK + c] ? P[r * BLK + c] * drop_scale : 0;
                Pv = Pd;
            }
            /* dV += Pv^T dO;  dPv = dO V^T */
            const int64_t band_lo = a->causal ? c0 - q0 : NO_LO;
            const int64_t band_hi = a->causal ? q0 - c0 : NO_HI;
            SDPA_NAME(gemm_band)
            (mcols, Evp, nr, Pv, 1, BLK, dO, Evp, dV, Evp, true, band_lo, NO_HI);
            SDPA_NAME(gemm)(mrows, BLK, Ev, dO, Evp, 1, Vt, BLK, dP, BLK, false);
            /* dS = P (dP - D), dP = dPv through the dropout mask */
            for (int64_t r = 0; r < mrows; r++) {
                T *dp = dP + r * BLK;
                const T *p = P + r * BLK, D = Dall[q0 + r];
                if (drop)
                    for (int64_t c = 0; c < BLK; c++) {
                        const bool kept = r < nr && c < nc && keep[r * BLK + c];
                        dp[c] = p[c] * ((kept ? dp[c] * drop_scale : 0) - D);
                    }
                else
                    for (int64_t c = 0; c < BLK; c++) dp[c] = p[c] * (dp[c] - D);
            }
            /* dK += dS^T Qs;  dQ (unscaled) += dS K */
            SDPA_NAME(gemm_band)(mcols, Ep, nr, dP, 1, BLK, Qs, Ep, dK, Ep, true, band_lo, NO_HI);
            SDPA_NAME(gemm_band)
            (mrows, Ep, nc, dP, BLK, 1, Kb, Ep, dq_acc + q0 * Ep, Ep, true, NO_LO, band_hi);
        }
        IO *dk = (IO *)a->dk.data + sdpa_batch_offset(&a->dk, pl, n);
        IO *dv = (IO *)a->dv.data + sdpa_batch_offset(&a->dv, pl, n);
        const int64_t dkrs = a->dk.strides[a->dk.ndim - 2], dvrs = a->dv.strides[a->dv.ndim - 2];
        for (int64_t c = 0; c < nc; c++) {
            IO *dkr = dk + (c0 + c) * dkrs, *dvr = dv + (c0 + c) * dvrs;
            for (int64_t e = 0; e < E; e++) dkr[e] = ST(dK[c * Ep + e]);
            for (int64_t e = 0; e < Ev; e++) dvr[e] = ST(dV[c * Evp + e]);
        }
    }
}

/* dq rows of batch n = scale * the sum of its chunks' accumulators, in chunk order */
static void SDPA_NAME(dq_write)(const sdpa_plan *pl, const ts_sdpa_args *a, int64_t n, const T *acc,
                                int64_t chunks) {
    IO *dq = (IO *)a->dq.data + sdpa_batch_offset(&a->dq, pl, n);
    const int64_t rs = a->dq.strides[a->dq.ndim - 2], chunk = pl->Lp * pl->Ep;
    const T scale = (T)a->scale;
    for (int64_t i = 0; i < pl->L; i++)
        for (int64_t e = 0; e < pl->E; e++) {
            T s = acc[i * pl->Ep + e];
            for (int64_t c = 1; c < chunks; c++) s += acc[c * chunk + i * pl->Ep + e];
            dq[i * rs + e] = ST(s * scale);
        }
}

static size_t SDPA_NAME(thread_bytes)(const sdpa_plan *pl, bool backward) {
    const int64_t Ep = pl->Ep, Evp = pl->Evp;
    int64_t elems = backward ? 4 * BLK * Ep + 4 * BLK * Evp + 3 * BLK * BLK + pl->Lp
                             : BLK * Ep + Ep * BLK + 2 * BLK * Evp + BLK * BLK + 3 * BLK;
    size_t bytes = (size_t)elems * sizeof(T) + (size_t)BLK * BLK; /* + the keep tile */
    if (backward && pl->chunks == 1) bytes += (size_t)(pl->Lp * pl->Ep) * sizeof(T);
    return (bytes + 63) & ~(size_t)63;
}

static void SDPA_NAME(forward)(const sdpa_plan *pl, const ts_sdpa_args *a, char *ws) {
    const size_t tb = SDPA_NAME(thread_bytes)(pl, false);
    const int64_t items = pl->N * pl->nq;
    (void)tb;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(a->threads) if (a->threads > 1)
#endif
    {
        char *mine = ws + tb * (size_t)sdpa_thread_num();
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t it = 0; it < items; it++)
            SDPA_NAME(fwd_item)(pl, a, it / pl->nq, pl->nq - 1 - it % pl->nq, mine);
    }
}

static void SDPA_NAME(backward)(const sdpa_plan *pl, const ts_sdpa_args *a, char *ws) {
    const size_t tb = SDPA_NAME(thread_bytes)(pl, true);
    const int64_t C = pl->chunks, items = pl->N * C;
    T *partials = (T *)(ws + tb * (size_t)a->threads); /* chunks > 1: [N][C][Lp x Ep] */
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(a->threads) if (a->threads > 1)
#endif
    {
        char *mine = ws + tb * (size_t)sdpa_thread_num();
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t it = 0; it < items; it++) {
            const int64_t n = it / C, ch = it % C;
            T *acc = C == 1 ? (T *)(mine + tb) - pl->Lp * pl->Ep
                            : partials + (n * C + ch) * pl->Lp * pl->Ep;
            memset(acc, 0, sizeof(T) * (size_t)(pl->Lp * pl->Ep));
            SDPA_NAME(bwd_item)(pl, a, n, ch, C, mine, acc);
            if (C == 1) SDPA_NAME(dq_write)(pl, a, n, acc, 1);
        }
        if (C > 1) {
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t n = 0; n < pl->N; n++)
                SDPA_NAME(dq_write)(pl, a, n, partials + n * C * pl->Lp * pl->Ep, C);
        }
    }
}

#undef IO
#undef LD
#undef ST
#undef SAME_IO
#undef T
#undef VT
#undef VL
#undef MR
#undef NV
#undef W
#undef BLK
