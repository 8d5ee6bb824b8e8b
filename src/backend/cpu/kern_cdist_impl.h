/* kern_cdist_impl.h — one vector-ISA variant of cdist's tile loop, included by kern_cdist.c with
 * CD_NAME(x) (the function's name in this variant), CD_ATTR (its target attribute, or nothing)
 * and CD_FMA(a, b, c) (a * b + c) defined. The tile: 4-row groups of the packed x1 rows (row-major,
 * ld doubles apart) against blocks of 8 packed x2 rows (stored column by column: element m of the
 * block's row r at y[m * 8 + r]), columns [m0, m1): every x1 value is broadcast and its distances
 * to 8 x2 rows accumulate in two vectors, so each output's sum runs over m in order in one lane
 * (no horizontal sums). acc (CD_JB doubles a row) holds the running values across column
 * ranges. */

CD_ATTR static inline cd_v4 CD_NAME(load)(const double *p) {
    cd_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
CD_ATTR static inline cd_v4 CD_NAME(splat)(const double *p) {
    const double v = *p;
    return (cd_v4){v, v, v, v};
}
CD_ATTR static inline void CD_NAME(store)(double *p, cd_v4 v) { memcpy(p, &v, sizeof v); }

CD_ATTR static inline cd_v4 CD_NAME(vabs)(cd_v4 d) {
    const cd_i4 mag = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    return (cd_v4)((cd_i4)d & mag);
}

/* a = max(a, |d|), a NaN taking over and staying */
CD_ATTR static inline cd_v4 CD_NAME(vmax)(cd_v4 a, cd_v4 d) {
    const cd_v4 ad = CD_NAME(vabs)(d);
    const cd_i4 take = (ad > a) | (ad != ad);
    return (cd_v4)(((cd_i4)a & ~take) | ((cd_i4)ad & take));
}

#define CD_ACC_P2(a, d)   ((a) = CD_FMA((d), (d), (a)))
#define CD_ACC_P1(a, d)   ((a) += CD_NAME(vabs)(d))
#define CD_ACC_P0(a, d)   ((a) -= __builtin_convertvector((d) != 0, cd_v4))
#define CD_ACC_PINF(a, d) ((a) = CD_NAME(vmax)((a), (d)))

/* ni (a multiple of 4) x1 rows against nb blocks of 8 x2 rows (ystride doubles apart) */
#define CD_TILE(KIND, ACC)                                                                         \
    CD_ATTR static void CD_NAME(tile_##KIND)(const double *xp, int64_t ld, int ni,                 \
                                             const double *yp, int64_t ystride, int nb,            \
                                             int64_t m0, int64_t m1, double *acc) {                \
        for (int i = 0; i < ni; i += 4) {                                                          \
            const double *x0 = xp + (size_t)i * (size_t)ld, *x1 = x0 + ld, *x2 = x1 + ld,          \
                         *x3 = x2 + ld;                                                            \
            for (int b = 0; b < nb; b++) {                                                         \
                const double *y = yp + (size_t)b * (size_t)ystride;                                \
                double *r0 = acc + (size_t)i * CD_JB + 8 * b, *r1 = r0 + CD_JB, *r2 = r1 + CD_JB,  \
                       *r3 = r2 + CD_JB;                                                           \
                cd_v4 a0 = CD_NAME(load)(r0), b0 = CD_NAME(load)(r0 + 4);                          \
                cd_v4 a1 = CD_NAME(load)(r1), b1 = CD_NAME(load)(r1 + 4);                          \
                cd_v4 a2 = CD_NAME(load)(r2), b2 = CD_NAME(load)(r2 + 4);                          \
                cd_v4 a3 = CD_NAME(load)(r3), b3 = CD_NAME(load)(r3 + 4);                          \
                for (int64_t m = m0; m < m1; m++) {                                                \
                    const cd_v4 yl = CD_NAME(load)(y + 8 * m), yh = CD_NAME(load)(y + 8 * m + 4);  \
                    const cd_v4 v0 = CD_NAME(splat)(x0 + m), v1 = CD_NAME(splat)(x1 + m);          \
                    const cd_v4 v2 = CD_NAME(splat)(x2 + m), v3 = CD_NAME(splat)(x3 + m);          \
                    ACC(a0, v0 - yl);                                                              \
                    ACC(b0, v0 - yh);                                                              \
                    ACC(a1, v1 - yl);                                                              \
                    ACC(b1, v1 - yh);                                                              \
                    ACC(a2, v2 - yl);                                                              \
                    ACC(b2, v2 - yh);                                                              \
                    ACC(a3, v3 - yl);                                                              \
                    ACC(b3, v3 - yh);                                                              \
                }                                                                                  \
                CD_NAME(store)(r0, a0), CD_NAME(store)(r0 + 4, b0);                                \
                CD_NAME(store)(r1, a1), CD_NAME(store)(r1 + 4, b1);                                \
                CD_NAME(store)(r2, a2), CD_NAME(store)(r2 + 4, b2);                                \
                CD_NAME(store)(r3, a3), CD_NAME(store)(r3 + 4, b3);                                \
            }                                                                                      \
        }                                                                                          \
    }

CD_TILE(p2, CD_ACC_P2)
CD_TILE(p1, CD_ACC_P1)
CD_TILE(p0, CD_ACC_P0)
CD_TILE(pinf, CD_ACC_PINF)

#undef CD_TILE
#undef CD_ACC_P2
#undef CD_ACC_P1
#undef CD_ACC_P0
#undef CD_ACC_PINF

CD_ATTR static void CD_NAME(tile)(cd_kind kind, const double *xp, int64_t ld, int ni,
                                  const double *yp, int64_t ystride, int nb, int64_t m0, int64_t m1,
                                  double *acc) {
    switch (kind) {
    case TS_CD_P2:
        CD_NAME(tile_p2)(xp, ld, ni, yp, ystride, nb, m0, m1, acc);
        break;
    case TS_CD_P1:
        CD_NAME(tile_p1)(xp, ld, ni, yp, ystride, nb, m0, m1, acc);
        break;
    case TS_CD_P0:
        CD_NAME(tile_p0)(xp, ld, ni, yp, ystride, nb, m0, m1, acc);
        break;
    case TS_CD_PINF:
        CD_NAME(tile_pinf)(xp, ld, ni, yp, ystride, nb, m0, m1, acc);
        break;
    default:
        break;
    }
}
