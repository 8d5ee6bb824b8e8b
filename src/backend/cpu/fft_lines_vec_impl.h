/* fft_lines_vec_impl.h — the gather, transform and scatter of one group of lines in one
 * precision and vector width, included by fft_lines_vec.c after fft_engine_impl.h with FT, CT
 * (a pair of vectors VF of L lanes) and FN(x) defined. */

/* the buffers as scalars: element j's real lanes at [j 2L, j 2L + L), its imaginary ones next */
typedef FT FN(scalar) __attribute__((may_alias));
/* a vector read or written at any FT-aligned address, and the shuffle masks' lane type */
typedef FT FN(uv) __attribute__((vector_size(sizeof(VF)), aligned(sizeof(FT)), may_alias));
#define FV_L ((int64_t)(sizeof(VF) / sizeof(FT)))
static inline VF FN(vld)(const FT *p) { return *(const FN(uv) *)(const void *)p; }
static inline void FN(vst)(FT *p, VF v) { *(FN(uv) *)(void *)p = v; }

#ifdef FV_T8
typedef int32_t FN(mask) __attribute__((vector_size(32)));
#define FV_EVEN ((FN(mask)){0, 2, 4, 6, 8, 10, 12, 14})
#define FV_ODD  ((FN(mask)){1, 3, 5, 7, 9, 11, 13, 15})
#define FV_ILO  ((FN(mask)){0, 8, 1, 9, 2, 10, 3, 11})
#define FV_IHI  ((FN(mask)){4, 12, 5, 13, 6, 14, 7, 15})
/* 8 x 8 floats transposed in place (8 lanes): row b of 4 interleaved elements of line b becomes
 * the real lanes and the imaginary lanes of those 4 elements, in buf's order (its own inverse) */
static inline void FN(t8)(VF *x) {
    const FN(mask) lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
    const FN(mask) qa = {0, 1, 8, 9, 4, 5, 12, 13}, qb = {2, 3, 10, 11, 6, 7, 14, 15};
    const FN(mask) pa = {0, 1, 2, 3, 8, 9, 10, 11}, pb = {4, 5, 6, 7, 12, 13, 14, 15};
    VF t[8], u[8];
    for (int k = 0; k < 4; k++)
        t[2 * k] = __builtin_shuffle(x[2 * k], x[2 * k + 1], lo),
              t[2 * k + 1] = __builtin_shuffle(x[2 * k], x[2 * k + 1], hi);
    for (int k = 0; k < 2; k++) {
        u[4 * k] = __builtin_shuffle(t[4 * k], t[4 * k + 2], qa);
        u[4 * k + 1] = __builtin_shuffle(t[4 * k], t[4 * k + 2], qb);
        u[4 * k + 2] = __builtin_shuffle(t[4 * k + 1], t[4 * k + 3], qa);
        u[4 * k + 3] = __builtin_shuffle(t[4 * k + 1], t[4 * k + 3], qb);
    }
    for (int k = 0; k < 4; k++)
        x[k] = __builtin_shuffle(u[k], u[k + 4], pa),
        x[k + 4] = __builtin_shuffle(u[k], u[k + 4], pb);
}
#else
typedef int64_t FN(mask) __attribute__((vector_size(32)));
#define FV_EVEN ((FN(mask)){0, 2, 4, 6})
#define FV_ODD  ((FN(mask)){1, 3, 5, 7})
#define FV_ILO  ((FN(mask)){0, 4, 1, 5})
#define FV_IHI  ((FN(mask)){2, 6, 3, 7})
#endif

/* cnt elements of g lines into buf (the g lines read side by side, buf written in order): element
 * j's parts at src[j es + b ils] and im further; lanes from g on are zero. Whole vectors where a
 * group of full width allows: 8 contiguous float lines of interleaved pairs by 8 x 8 transposes;
 * neighbouring complex lines (ils 2: element j of every line in 2L consecutive scalars) by one
 * deinterleave; neighbouring real lines (ils 1, the packed pairs of R2C) by two plain loads. */
static void FN(ld)(CT *buf, const FT *src, int64_t es, int64_t im, int64_t ils, int64_t g,
                   int64_t cnt) {
    FN(scalar) *bf = (FN(scalar) *)(void *)buf;
    int64_t j = 0;
    if (g == FV_L && ils == 2 && im == 1) {
        for (; j < cnt; j++) {
            const VF a = FN(vld)(src + j * es), b = FN(vld)(src + j * es + FV_L);
            buf[j].r = __builtin_shuffle(a, b, FV_EVEN), buf[j].i = __builtin_shuffle(a, b, FV_ODD);
        }
        return;
    }
    if (g == FV_L && ils == 1) {
        for (; j < cnt; j++)
            buf[j].r = FN(vld)(src + j * es), buf[j].i = FN(vld)(src + j * es + im);
        return;
    }
#ifdef FV_T8
    if (g == 8 && es == 2 && im == 1) /* 8 lines of interleaved pairs: 4 elements a transpose */
        for (; j + 4 <= cnt; j += 4) {
            VF x[8];
            for (int b = 0; b < 8; b++) x[b] = FN(vld)(src + b * ils + j * 2);
            FN(t8)(x);
            for (int b = 0; b < 4; b++) buf[j + b].r = x[2 * b], buf[j + b].i = x[2 * b + 1];
        }
#endif
    for (; j < cnt; j++) {
        FN(scalar) *d = bf + j * 2 * FV_L;
        const FT *s = src + j * es;
        for (int64_t b = 0; b < g; b++) d[b] = s[b * ils], d[FV_L + b] = s[b * ils + im];
        for (int64_t b = g; b < FV_L; b++) d[b] = 0, d[FV_L + b] = 0;
    }
}

/* cnt elements of buf (its g first lanes) times scale into g lines, as FN(ld) reads them */
static void FN(st)(FT *dst, int64_t es, int64_t im, int64_t ols, CT *buf, int64_t g, int64_t cnt,
                   FT scale) {
    const FN(scalar) *bf = (const FN(scalar) *)(const void *)buf;
    const bool sc = scale != (FT)1;
    int64_t j = 0;
    if (g == FV_L && ols == 2 && im == 1) {
        for (; j < cnt; j++) {
            VF r = buf[j].r, i = buf[j].i;
            if (sc) r = scale * r, i = scale * i;
            FN(vst)(dst + j * es, __builtin_shuffle(r, i, FV_ILO));
            FN(vst)(dst + j * es + FV_L, __builtin_shuffle(r, i, FV_IHI));
        }
        return;
    }
    if (g == FV_L && ols == 1) {
        for (; j < cnt; j++) {
            VF r = buf[j].r, i = buf[j].i;
            if (sc) r = scale * r, i = scale * i;
            FN(vst)(dst + j * es, r), FN(vst)(dst + j * es + im, i);
        }
        return;
    }
#ifdef FV_T8
    if (g == 8 && es == 2 && im == 1) /* 8 elements at a time: a whole cache line of each line */
        for (; j + 8 <= cnt; j += 8) {
            VF x[8], y[8];
            for (int b = 0; b < 4; b++) {
                x[2 * b] = buf[j + b].r, x[2 * b + 1] = buf[j + b].i;
                y[2 * b] = buf[j + 4 + b].r, y[2 * b + 1] = buf[j + 4 + b].i;
                if (sc)
                    x[2 * b] = scale * x[2 * b], x[2 * b + 1] = scale * x[2 * b + 1],
                          y[2 * b] = scale * y[2 * b], y[2 * b + 1] = scale * y[2 * b + 1];
            }
            FN(t8)(x);
            FN(t8)(y);
            for (int b = 0; b < 8; b++)
                FN(vst)(dst + b * ols + j * 2, x[b]), FN(vst)(dst + b * ols + j * 2 + 8, y[b]);
        }
#endif
    for (; j < cnt; j++) {
        const FN(scalar) *s = bf + j * 2 * FV_L;
        FT *d = dst + j * es;
        for (int64_t b = 0; b < g; b++)
            d[b * ols] = scale * s[b], d[b * ols + im] = scale * s[FV_L + b];
    }
}

static void FN(group)(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n, const FT *src,
                      int64_t si, int64_t ils, FT *dst, int64_t so, int64_t ols, int64_t g,
                      FT scale, CT *buf, CT *work) {
    const int64_t h = n / 2;
    switch (kind) {
    case TS_FFT_C2C: /* the scatter reads the buffer the passes ended in */
        FN(ld)(buf, src, si, 1, ils, g, n);
        FN(st)(dst, so, 1, ols, FN(run_to)(p, buf, work, fwd), g, n, scale);
        break;
    case TS_FFT_R2C: /* packed: element j is (x_2j, x_2j+1) */
        FN(ld)(buf, src, 2 * si, si, ils, g, h);
        FN(r2c_even)(p, buf, work);
        FN(st)(dst, so, 1, ols, buf, g, h + 1, scale);
        break;
    case TS_FFT_C2R:
        FN(ld)(buf, src, si, 1, ils, g, h + 1);
        FN(st)(dst, 2 * so, so, ols, FN(c2r_even)(p, buf, work), g, h, scale);
        break;
    }
}
#undef FV_L
#undef FV_EVEN
#undef FV_ODD
#undef FV_ILO
#undef FV_IHI
