/* fft_lines_vec_impl.h — the gather, transform and scatter of one group of lines in one
 * precision and vector width, included by fft_lines_vec.c after fft_engine_impl.h with FT, CT
 * (a pair of vectors VF of L lanes) and FN(x) defined. */

/* the buffers as scalars: element j's real lanes at [j 2L, j 2L + L), its imaginary ones next */
typedef FT FN(scalar) __attribute__((may_alias));
#define FV_L ((int64_t)(sizeof(VF) / sizeof(FT)))

#ifdef FV_T8
/* 8 x 8 floats transposed in place (8 lanes): row b of 4 interleaved elements of line b becomes
 * the real lanes and the imaginary lanes of those 4 elements, in buf's order */
typedef int32_t FN(mask) __attribute__((vector_size(32)));
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
#endif

/* cnt elements of g lines into buf, element by element (the g lines read side by side, buf
 * written in order): element j's parts at src[j es + b ils] and im further; lanes from g on are
 * zero */
static void FN(ld)(CT *buf, const FT *src, int64_t es, int64_t im, int64_t ils, int64_t g,
                   int64_t cnt) {
    FN(scalar) *bf = (FN(scalar) *)(void *)buf;
    int64_t j = 0;
#ifdef FV_T8
    if (g == 8 && es == 2 && im == 1) /* 8 lines of interleaved pairs: 4 elements a transpose */
        for (; j + 4 <= cnt; j += 4) {
            VF x[8];
            for (int b = 0; b < 8; b++) memcpy(&x[b], src + b * ils + j * 2, sizeof(VF));
            FN(t8)(x);
            memcpy(bf + j * 16, x, sizeof x);
        }
#endif
    for (; j < cnt; j++) {
        FN(scalar) *d = bf + j * 2 * FV_L;
        const FT *s = src + j * es;
        for (int64_t b = 0; b < g; b++) d[b] = s[b * ils], d[FV_L + b] = s[b * ils + im];
        for (int64_t b = g; b < FV_L; b++) d[b] = 0, d[FV_L + b] = 0;
    }
}

static void FN(st)(FT *dst, int64_t es, int64_t im, int64_t ols, CT *buf, int64_t g, int64_t cnt,
                   FT scale) {
    const FN(scalar) *bf = (const FN(scalar) *)(const void *)buf;
    if (scale != (FT)1)
        for (int64_t j = 0; j < cnt; j++) buf[j].r = scale * buf[j].r, buf[j].i = scale * buf[j].i;
    int64_t j = 0;
#ifdef FV_T8
    if (g == 8 && es == 2 && im == 1)
        for (; j + 4 <= cnt; j += 4) {
            VF x[8];
            memcpy(x, bf + j * 16, sizeof x);
            FN(t8)(x);
            for (int b = 0; b < 8; b++) memcpy(dst + b * ols + j * 2, &x[b], sizeof(VF));
        }
#endif
    for (; j < cnt; j++) {
        const FN(scalar) *s = bf + j * 2 * FV_L;
        FT *d = dst + j * es;
        for (int64_t b = 0; b < g; b++) d[b * ols] = s[b], d[b * ols + im] = s[FV_L + b];
    }
}

static void FN(group)(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n, const FT *src,
                      int64_t si, int64_t ils, FT *dst, int64_t so, int64_t ols, int64_t g,
                      FT scale, CT *buf, CT *work) {
    const int64_t h = n / 2;
    switch (kind) {
    case TS_FFT_C2C:
        FN(ld)(buf, src, si, 1, ils, g, n);
        FN(run)(p, buf, work, fwd);
        FN(st)(dst, so, 1, ols, buf, g, n, scale);
        break;
    case TS_FFT_R2C: /* packed: element j is (x_2j, x_2j+1) */
        FN(ld)(buf, src, 2 * si, si, ils, g, h);
        FN(r2c_even)(p, buf, work);
        FN(st)(dst, so, 1, ols, buf, g, h + 1, scale);
        break;
    case TS_FFT_C2R:
        FN(ld)(buf, src, si, 1, ils, g, h + 1);
        FN(c2r_even)(p, buf, work);
        FN(st)(dst, 2 * so, so, ols, buf, g, h, scale);
        break;
    }
}
#undef FV_L
