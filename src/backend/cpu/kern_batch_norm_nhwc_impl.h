/* kern_batch_norm_nhwc_impl.h — the channels_last batch norm kernels for one vector ISA and one
 * dtype (kern_norm_variant.h's parameters and helpers; the float variants take f16 / bf16 too),
 * included through kern_norm_isa.h by kern_batch_norm_nhwc.c. The tensors are [R, C] matrices
 * (R = n * hw rows, a pixel's channels contiguous), so vectors run across channels: each lane is
 * one channel, and a channel's sum takes the rows of a block one after another, whatever the
 * vector width (every variant gives the same bits) and whichever thread runs the block. A block
 * is walked in tiles of a few rows and at most BN_TILE_CH channels, read in place or, f16 / bf16,
 * converted to float first, small enough to stay in L1 while each group of channels is read. */

/* The tile rows r0 .. r0 + rows - 1, channels c0 .. c0 + cw - 1 of v ([R, C]) as T, with *ld its
 * row stride: in place, or an f16 / bf16 view converted into buf (ld = cw). */
static inline const T *LN_NAME(tile_in)(const ts_batch_norm_args *a, const ts_kview *v, int64_t r0,
                                        int64_t rows, int64_t c0, int64_t cw, T *buf, int64_t *ld) {
#ifdef LN_HALF
    if (v->dtype != TS_F32) {
        /* all the channels: the tile is one stretch of memory, one conversion */
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        const int64_t n = cw == a->c ? rows * cw : cw;
        for (int64_t r = 0; r < rows; r += n / cw)
            ts_vec_load_f32(vk, buf + r * cw, (const char *)v->data + ((r0 + r) * a->c + c0) * 2,
                            v->dtype, 2, n);
        *ld = cw;
        return buf;
    }
#else
    (void)rows, (void)cw, (void)buf;
#endif
    *ld = a->c;
    return (const T *)v->data + r0 * a->c + c0;
}

/* Where a tile of v is written: in place, or buf (ld = cw) for tile_out_done to round. */
static inline T *LN_NAME(tile_out)(const ts_batch_norm_args *a, const ts_kview *v, int64_t r0,
                                   int64_t c0, int64_t cw, T *buf, int64_t *ld) {
#ifdef LN_HALF
    if (v->dtype != TS_F32) {
        *ld = cw;
        return buf;
    }
#else
    (void)cw, (void)buf;
#endif
    *ld = a->c;
    return (T *)v->data + r0 * a->c + c0;
}

static inline void LN_NAME(tile_out_done)(const ts_batch_norm_args *a, const ts_kview *v,
                                          int64_t r0, int64_t rows, int64_t c0, int64_t cw,
                                          const T *buf) {
#ifdef LN_HALF
    if (v->dtype != TS_F32) {
        const ts_vec_kernels *vk = tsi_vec_kernels_get();
        const int64_t n = cw == a->c ? rows * cw : cw;
        for (int64_t r = 0; r < rows; r += n / cw)
            ts_vec_store_f32(vk, (char *)v->data + ((r0 + r) * a->c + c0) * 2, v->dtype, 2,
                             buf + r * cw, n);
    }
#else
    (void)a, (void)v, (void)r0, (void)rows, (void)c0, (void)cw, (void)buf;
#endif
}

/* Adds each channel's d = x - k[c] and d^2 over the tile's rows into s[c] and q[c]: 16 channels
 * at a time in registers, then one vector of WD, then one by one (the same operations per
 * channel in each, so the same bits). */
static void LN_NAME(tile_moments)(const T *x, int64_t ld, int64_t rows, int64_t cw, const double *k,
                                  double *s, double *q) {
    int64_t c = 0;
    for (; c + 16 <= cw; c += 16) {
        VD kv[NACC], sv[NACC], qv[NACC];
        for (int j = 0; j < NACC; j++) {
            memcpy(&kv[j], k + c + j * WD, sizeof kv[j]);
            memcpy(&sv[j], s + c + j * WD, sizeof sv[j]);
            memcpy(&qv[j], q + c + j * WD, sizeof qv[j]);
        }
        for (int64_t r = 0; r < rows; r++)
            for (int j = 0; j < NACC; j++) {
                const VD d = LN_NAME(load_d)(x + r * ld + c + j * WD) - kv[j];
                sv[j] += d;
                qv[j] += d * d;
            }
        LN_NAME(lanes)(s + c, sv);
        LN_NAME(lanes)(q + c, qv);
    }
    for (; c + WD <= cw; c += WD) {
        VD kv, sv, qv;
        memcpy(&kv, k + c, sizeof kv), memcpy(&sv, s + c, sizeof sv), memcpy(&qv, q + c, sizeof qv);
        for (int64_t r = 0; r < rows; r++) {
            const VD d = LN_NAME(load_d)(x + r * ld + c) - kv;
            sv += d;
            qv += d * d;
        }
        memcpy(s + c, &sv, sizeof sv), memcpy(q + c, &qv, sizeof qv);
    }
    for (; c < cw; c++)
        for (int64_t r = 0; r < rows; r++) {
            const double d = (double)x[r * ld + c] - k[c];
            s[c] += d;
            q[c] += d * d;
        }
}

/* Backward's pass A over a tile: each channel's sums of dy and of dy * (x - m[c]) (the product
 * in T) into s[c] and q[c], in the order of tile_moments. */
static void LN_NAME(tile_grad_sums)(const T *x, int64_t ldx, const T *dy, int64_t ldd, int64_t rows,
                                    int64_t cw, const T *m, double *s, double *q) {
    int64_t c = 0;
    for (; c + 16 <= cw; c += 16) {
        LN_VH mv[NACC];
        VD sv[NACC], qv[NACC];
        for (int j = 0; j < NACC; j++) {
            mv[j] = LN_NAME(load_h)(m + c + j * WD);
            memcpy(&sv[j], s + c + j * WD, sizeof sv[j]);
            memcpy(&qv[j], q + c + j * WD, sizeof qv[j]);
        }
        for (int64_t r = 0; r < rows; r++)
            for (int j = 0; j < NACC; j++) {
                const LN_VH d = LN_NAME(load_h)(dy + r * ldd + c + j * WD);
                sv[j] += LN_NAME(to_d)(d);
                qv[j] += LN_NAME(to_d)(d * (LN_NAME(load_h)(x + r * ldx + c + j * WD) - mv[j]));
            }
        LN_NAME(lanes)(s + c, sv);
        LN_NAME(lanes)(q + c, qv);
    }
    for (; c + WD <= cw; c += WD) {
        const LN_VH mv = LN_NAME(load_h)(m + c);
        VD sv, qv;
        memcpy(&sv, s + c, sizeof sv), memcpy(&qv, q + c, sizeof qv);
        for (int64_t r = 0; r < rows; r++) {
            const LN_VH d = LN_NAME(load_h)(dy + r * ldd + c);
            sv += LN_NAME(to_d)(d);
            qv += LN_NAME(to_d)(d * (LN_NAME(load_h)(x + r * ldx + c) - mv));
        }
        memcpy(s + c, &sv, sizeof sv), memcpy(q + c, &qv, sizeof qv);
    }
    for (; c < cw; c++)
        for (int64_t r = 0; r < rows; r++) {
            const T d = dy[r * ldd + c];
            s[c] += (double)d;
            q[c] += (double)(d * (x[r * ldx + c] - m[c]));
        }
}

/* y = (x - m[c]) * sc[c] + h[c] over a tile: VL channels at a time held in registers down the
 * rows, the last few channels one by one (the same operations). */
static void LN_NAME(tile_output)(const T *x, int64_t ldx, T *y, int64_t ldy, int64_t rows,
                                 int64_t cw, const T *m, const T *sc, const T *h) {
    int64_t c = 0;
    for (; c + VL <= cw; c += VL) {
        V mv, sv, hv;
        memcpy(&mv, m + c, sizeof mv), memcpy(&sv, sc + c, sizeof sv),
            memcpy(&hv, h + c, sizeof hv);
        for (int64_t r = 0; r < rows; r++) {
            V xv;
            memcpy(&xv, x + r * ldx + c, sizeof xv);
            const V yv = (xv - mv) * sv + hv;
            memcpy(y + r * ldy + c, &yv, sizeof yv);
        }
    }
    for (; c < cw; c++)
        for (int64_t r = 0; r < rows; r++) y[r * ldy + c] = (x[r * ldx + c] - m[c]) * sc[c] + h[c];
}

/* dx = (dy - c1[c] - (x - m[c]) * c2[c]) * sc[c] over a tile, as tile_output. */
static void LN_NAME(tile_dx)(const T *x, int64_t ldx, const T *dy, int64_t ldd, T *dx, int64_t ldo,
                             int64_t rows, int64_t cw, const T *m, const T *c1, const T *c2,
                             const T *sc) {
    int64_t c = 0;
    for (; c + VL <= cw; c += VL) {
        V mv, c1v, c2v, sv;
        memcpy(&mv, m + c, sizeof mv), memcpy(&c1v, c1 + c, sizeof c1v);
        memcpy(&c2v, c2 + c, sizeof c2v), memcpy(&sv, sc + c, sizeof sv);
        for (int64_t r = 0; r < rows; r++) {
            V xv, dv;
            memcpy(&xv, x + r * ldx + c, sizeof xv);
            memcpy(&dv, dy + r * ldd + c, sizeof dv);
            const V o = (dv - c1v - (xv - mv) * c2v) * sv;
            memcpy(dx + r * ldo + c, &o, sizeof o);
        }
    }
    for (; c < cw; c++)
        for (int64_t r = 0; r < rows; r++)
            dx[r * ldo + c] = (dy[r * ldd + c] - c1[c] - (x[r * ldx + c] - m[c]) * c2[c]) * sc[c];
}

/* ------------------------------------------------------------------ rows r0 .. r1 - 1
 * The passes over a range of rows, tile by tile: channel ranges outside, rows inside, so each
 * channel still takes its rows in order. Only the f16 / bf16 runs need the buffers. */
#ifdef LN_HALF
#define BN_BUF BN_TILE
#else
#define BN_BUF 1
#endif
#define BN_TILES(r0, r1, ...)                                                                      \
    for (int64_t c0 = 0; c0 < a->c; c0 += BN_TILE_CH) {                                            \
        const int64_t cw = a->c - c0 < BN_TILE_CH ? a->c - c0 : BN_TILE_CH;                        \
        const int64_t rt = BN_TILE_MIN / cw > BN_TILE_ROWS ? BN_TILE_MIN / cw : BN_TILE_ROWS;      \
        for (int64_t r = (r0); r < (r1); r += rt) {                                                \
            const int64_t rows = (r1)-r < rt ? (r1)-r : rt;                                        \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

static void LN_NAME(rows_moments)(const ts_batch_norm_args *a, int64_t r0, int64_t r1,
                                  const double *k, double *s, double *q) {
    T xb[BN_BUF];
    int64_t ld;
    BN_TILES(r0, r1, {
        const T *x = LN_NAME(tile_in)(a, &a->x, r, rows, c0, cw, xb, &ld);
        LN_NAME(tile_moments)(x, ld, rows, cw, k + c0, s + c0, q + c0);
    })
}

static void LN_NAME(rows_output)(const ts_batch_norm_args *a, int64_t r0, int64_t r1, const T *m,
                                 const T *sc, const T *h) {
    T xb[BN_BUF], yb[BN_BUF];
    int64_t ldx, ldy;
    BN_TILES(r0, r1, {
        const T *x = LN_NAME(tile_in)(a, &a->x, r, rows, c0, cw, xb, &ldx);
        T *y = LN_NAME(tile_out)(a, &a->y, r, c0, cw, yb, &ldy);
        LN_NAME(tile_output)(x, ldx, y, ldy, rows, cw, m + c0, sc + c0, h + c0);
        LN_NAME(tile_out_done)(a, &a->y, r, rows, c0, cw, yb);
    })
}

static void LN_NAME(rows_grad_sums)(const ts_batch_norm_args *a, int64_t r0, int64_t r1, const T *m,
                                    double *s, double *q) {
    T xb[BN_BUF], db[BN_BUF];
    int64_t ldx, ldd;
    BN_TILES(r0, r1, {
        const T *x = LN_NAME(tile_in)(a, &a->x, r, rows, c0, cw, xb, &ldx);
        const T *dy = LN_NAME(tile_in)(a, &a->dy, r, rows, c0, cw, db, &ldd);
        LN_NAME(tile_grad_sums)(x, ldx, dy, ldd, rows, cw, m + c0, s + c0, q + c0);
    })
}

static void LN_NAME(rows_dx)(const ts_batch_norm_args *a, int64_t r0, int64_t r1, const T *m,
                             const T *c1, const T *c2, const T *sc) {
    T xb[BN_BUF], db[BN_BUF], ob[BN_BUF];
    int64_t ldx, ldd, ldo;
    BN_TILES(r0, r1, {
        const T *x = LN_NAME(tile_in)(a, &a->x, r, rows, c0, cw, xb, &ldx);
        const T *dy = LN_NAME(tile_in)(a, &a->dy, r, rows, c0, cw, db, &ldd);
        T *dx = LN_NAME(tile_out)(a, &a->dx, r, c0, cw, ob, &ldo);
        LN_NAME(tile_dx)(x, ldx, dy, ldd, dx, ldo, rows, cw, m + c0, c1 + c0, c2 + c0, sc + c0);
        LN_NAME(tile_out_done)(a, &a->dx, r, rows, c0, cw, ob);
    })
}
#undef BN_TILES
#undef BN_BUF

/* ------------------------------------------------------------------ forward and backward */
static void LN_NAME(nhwc_forward)(const ts_batch_norm_args *a) {
    bn_plan p;
    if (!bn_plan_begin(a, &p)) return;
    const int64_t C = a->c, cnt = p.rows;
    const T *W = (const T *)a->weight.data, *B = (const T *)a->bias.data;
    T *M = (T *)a->mean.data, *R = (T *)a->invstd.data, *Var = (T *)a->var.data;
    T *mt = (T *)p.t, *st = mt + C, *bt = st + C;
    /* the shift k: each channel's mean over the first rows, 16 when there are (the sums of
     * d = x - k then cancel little; a NaN or an infinity stays one) */
    const int64_t n0 = cnt < 16 ? cnt : 16;
    memset(p.part, 0, sizeof(double) * 2 * (size_t)C);
    memset(p.k, 0, sizeof(double) * (size_t)C);
    LN_NAME(rows_moments)(a, 0, n0, p.k, p.part, p.part + C);
    for (int64_t c = 0; c < C; c++) p.k[c] = p.part[c] / (double)n0;
    TS_PARALLEL_FOR_IF(
        bn_plan_parallel(a, &p), for (int64_t b = 0; b < p.nb; b++) {
            double *s = p.part + 2 * C * b;
            memset(s, 0, sizeof(double) * 2 * (size_t)C);
            LN_NAME(rows_moments)(a, b * p.rb, bn_block_end(&p, b), p.k, s, s + C);
        });
    for (int64_t c = 0; c < C; c++) {
        double sd = 0, sq = 0;
        for (int64_t b = 0; b < p.nb; b++)
            sd += p.part[2 * C * b + c], sq += p.part[2 * C * b + C + c];
        const double v = (sq - sd * sd / (double)cnt) / (double)cnt;
        const double var = v < 0 ? 0 : v, inv = 1.0 / sqrt(var + a->eps);
        mt[c] = (T)(p.k[c] + sd / (double)cnt);
        M[c] = mt[c];
        R[c] = (T)inv;
        if (Var) Var[c] = (T)var;
        /* y = (x - mean) * scale + bias, scale = invstd * weight rounded once */
        st[c] = (T)(W ? (double)(T)inv * (double)W[c] : (double)(T)inv);
        bt[c] = B ? B[c] : 0;
    }
    TS_PARALLEL_FOR_IF(bn_plan_parallel(a, &p),
                       for (int64_t b = 0; b < p.nb; b++)
                           LN_NAME(rows_output)(a, b * p.rb, bn_block_end(&p, b), mt, st, bt););
    bn_plan_end(&p);
}

static void LN_NAME(nhwc_backward)(const ts_batch_norm_args *a) {
    bn_plan p;
    if (!bn_plan_begin(a, &p)) return;
    const int64_t C = a->c, cnt = p.rows;
    const T *W = (const T *)a->weight.data, *M = (const T *)a->mean.data;
    const T *R = (const T *)a->invstd.data;
    T *DW = (T *)a->dweight.data, *DB = (T *)a->dbias.data;
    T *c1 = (T *)p.t, *c2 = c1 + C, *sc = c2 + C;
    TS_PARALLEL_FOR_IF(
        bn_plan_parallel(a, &p), for (int64_t b = 0; b < p.nb; b++) {
            double *s = p.part + 2 * C * b;
            memset(s, 0, sizeof(double) * 2 * (size_t)C);
            LN_NAME(rows_grad_sums)(a, b * p.rb, bn_block_end(&p, b), M, s, s + C);
        });
    for (int64_t c = 0; c < C; c++) {
        double sdy = 0, sdx = 0;
        for (int64_t b = 0; b < p.nb; b++)
            sdy += p.part[2 * C * b + c], sdx += p.part[2 * C * b + C + c];
        const double inv = (double)R[c];
        if (DB) DB[c] = (T)sdy;
        if (DW) DW[c] = (T)(sdx * inv);
        /* dx = (dy - c1 - (x - mean) * c2) * sc */
        c1[c] = (T)(sdy / (double)cnt);
        c2[c] = (T)(sdx / (double)cnt * inv * inv);
        sc[c] = (T)(W ? inv * (double)W[c] : inv);
    }
    if (a->dx.data)
        TS_PARALLEL_FOR_IF(bn_plan_parallel(a, &p),
                           for (int64_t b = 0; b < p.nb; b++)
                               LN_NAME(rows_dx)(a, b * p.rb, bn_block_end(&p, b), M, c1, c2, sc););
    bn_plan_end(&p);
}
