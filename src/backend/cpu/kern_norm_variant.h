/* kern_norm_variant.h — one variant (vector ISA and dtype) of the fused normalisation kernels,
 * included by kern_norm_isa.h with these parameters defined:
 *   LN_T        float or double: the tensors' element type (the saved statistics too)
 *   LN_V        a GCC vector of LN_VL LN_T (the elementwise passes)
 *   LN_VD       a GCC vector of LN_WD doubles (the sums)
 *   LN_VH       a GCC vector of LN_WD LN_T (what converts to one LN_VD)
 *   LN_TO_D(v)  optionally: an LN_VH as an LN_VD (intrinsics, where GCC's generic vector
 *               conversion takes four instructions for one)
 *   LN_NAME(x)  the name of function x for this variant
 *   LN_HALF     defined for the float variants (kernels over f16 / bf16 runs compile there)
 * It defines the short names below and the vector helpers, includes NORM_IMPL, and undefines all
 * of it again. Sums run in 16 logical double lanes (lane l takes the elements k with k % 16 == l,
 * held in 16 / LN_WD vectors, a scalar tail added lane by lane) added in one fixed tree. */

#define T    LN_T
#define V    LN_V
#define VL   LN_VL
#define VD   LN_VD
#define WD   LN_WD
#define NACC (16 / LN_WD)

static inline VD LN_NAME(to_d)(LN_VH h) {
#ifdef LN_TO_D
    return LN_TO_D(h);
#else
    return __builtin_convertvector(h, VD);
#endif
}

static inline LN_VH LN_NAME(load_h)(const T *p) {
    LN_VH h;
    memcpy(&h, p, sizeof h);
    return h;
}

static inline VD LN_NAME(load_d)(const T *p) { return LN_NAME(to_d)(LN_NAME(load_h)(p)); }

static inline V LN_NAME(splat)(T s) { return (V){0} + s; }

/* the accumulators' 16 lanes in order */
static inline void LN_NAME(lanes)(double *l, const VD *acc) {
    for (int k = 0; k < NACC; k++) memcpy(l + k * WD, &acc[k], sizeof acc[k]);
}

/* out[j] = EXPR over the row, EXPR in terms of the vectors xv, wv, bv at offset j (loaded from
 * x, w, b when used): whole vectors, then the last, partial one padded with zeros. */
#define LN_MAP_ROW(out, n, EXPR, USE_W, USE_B)                                                     \
    do {                                                                                           \
        int64_t j = 0;                                                                             \
        for (; j + VL <= (n); j += VL) {                                                           \
            V xv, wv = {0}, bv = {0};                                                              \
            memcpy(&xv, x + j, sizeof xv);                                                         \
            if (USE_W) memcpy(&wv, w + j, sizeof wv);                                              \
            if (USE_B) memcpy(&bv, b + j, sizeof bv);                                              \
            const V r_ = (EXPR);                                                                   \
            memcpy((out) + j, &r_, sizeof r_);                                                     \
        }                                                                                          \
        if (j < (n)) {                                                                             \
            const size_t cnt_ = (size_t)((n)-j) * sizeof(T);                                       \
            V xv = {0}, wv = {0}, bv = {0};                                                        \
            memcpy(&xv, x + j, cnt_);                                                              \
            if (USE_W) memcpy(&wv, w + j, cnt_);                                                   \
            if (USE_B) memcpy(&bv, b + j, cnt_);                                                   \
            const V r_ = (EXPR);                                                                   \
            memcpy((out) + j, &r_, cnt_);                                                          \
        }                                                                                          \
    } while (0)

#include NORM_IMPL

#undef LN_MAP_ROW
#undef T
#undef V
#undef VL
#undef VD
#undef WD
#undef NACC
#undef LN_T
#undef LN_V
#undef LN_VL
#undef LN_VD
#undef LN_WD
#undef LN_VH
#undef LN_NAME
#undef LN_TO_D
#undef LN_HALF
