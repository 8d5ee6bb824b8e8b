/* kern_complex_impl.h — kern_complex.c's loops in one precision and one vector width, included
 * with FT (float or double), SUF (f32 / f64: kernel_math_complex.h's names), VF / VI (vectors of
 * W FT and of W same-size integers), the shuffle masks DUP_RE (each pair's real part twice),
 * DUP_IM (its imaginary part twice), SWAP (its parts exchanged) and BLEND (even lanes from the
 * first operand, odd from the second), and FN(x) (x's name in this variant) defined.
 *
 * The vector product is the scalar formula lane by lane: t1 = (ar br, ar bi), t2 = (ai bi,
 * ai br), then t1 - t2 in the real lanes and t1 + t2 in the imaginary ones, each product rounded
 * once (ISO C: no contraction into fused multiply-adds), so every variant gives the bits of
 * ts_cmul_SUF. Sums and differences are the parts' own (plain loops the compiler vectorises);
 * quotients are ts_cdiv_SUF element by element (Smith's branches); abs is ts_cabs_SUF. */

#define CX_CAT_(a, b) a##b
#define CX_CAT(a, b)  CX_CAT_(a, b)
#define CX_ADD        CX_CAT(ts_cadd_, SUF)
#define CX_SUB        CX_CAT(ts_csub_, SUF)
#define CX_MUL        CX_CAT(ts_cmul_, SUF)
#define CX_DIV        CX_CAT(ts_cdiv_, SUF)
#define CX_ABS        CX_CAT(ts_cabs_, SUF)

static inline VF FN(vld)(const FT *p) {
    VF v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void FN(vst)(FT *p, VF v) { memcpy(p, &v, sizeof v); }
#if defined(__clang__)
/* clang has no __builtin_shuffle with a vector mask: lane by lane (the same values) */
static inline VF FN(shuf1)(VF a, VI m) {
    VF r;
    for (int i = 0; i < W; i++) r[i] = a[m[i]];
    return r;
}
static inline VF FN(shuf2)(VF a, VF b, VI m) {
    VF r;
    for (int i = 0; i < W; i++) r[i] = m[i] < W ? a[m[i]] : b[m[i] - W];
    return r;
}
#define CX_SHUF1(a, m)    FN(shuf1)(a, m)
#define CX_SHUF2(a, b, m) FN(shuf2)(a, b, m)
#else
#define CX_SHUF1(a, m)    __builtin_shuffle(a, m)
#define CX_SHUF2(a, b, m) __builtin_shuffle(a, b, m)
#endif
static inline VF FN(vmul)(VF a, VF b) {
    const VF t1 = CX_SHUF1(a, DUP_RE) * b;
    const VF t2 = CX_SHUF1(a, DUP_IM) * CX_SHUF1(b, SWAP);
    return CX_SHUF2(t1 - t2, t1 + t2, BLEND);
}
#undef CX_SHUF1
#undef CX_SHUF2

/* one element at byte pointers */
static inline void FN(one)(ts_binary_op op, char *o, const char *x, const char *y) {
    const FT *a = (const FT *)(const void *)x, *b = (const FT *)(const void *)y;
    FT *r = (FT *)(void *)o;
    FT yr, yi;
    switch (op) {
    case TS_B_ADD:
        CX_ADD(a[0], a[1], b[0], b[1], &yr, &yi);
        break;
    case TS_B_SUB:
        CX_SUB(a[0], a[1], b[0], b[1], &yr, &yi);
        break;
    case TS_B_MUL:
        CX_MUL(a[0], a[1], b[0], b[1], &yr, &yi);
        break;
    default:
        CX_DIV(a[0], a[1], b[0], b[1], &yr, &yi);
        break;
    }
    r[0] = yr, r[1] = yi;
}

/* n elements: o, x, y dense pairs; xs / ys 0 for a broadcast operand (one pair), else 2 */
static void FN(dense)(ts_binary_op op, FT *o, const FT *x, int64_t xs, const FT *y, int64_t ys,
                      int64_t n) {
    const int64_t m = 2 * n;
    int64_t i = 0;
    if (op == TS_B_MUL) {
        VF vx = {0}, vy = {0};
        if (!xs)
            for (int k = 0; k < W; k++) vx[k] = x[k & 1];
        if (!ys)
            for (int k = 0; k < W; k++) vy[k] = y[k & 1];
        for (; i + W <= m; i += W)
            FN(vst)(o + i, FN(vmul)(xs ? FN(vld)(x + i) : vx, ys ? FN(vld)(y + i) : vy));
    } else if (op == TS_B_ADD || op == TS_B_SUB) {
        const bool add = op == TS_B_ADD;
        if (xs && ys) {
            if (add)
                for (; i < m; i++) o[i] = x[i] + y[i];
            else
                for (; i < m; i++) o[i] = x[i] - y[i];
        } else if (xs) {
            const FT br = y[0], bi = y[1];
            if (add)
                for (; i < m; i += 2) o[i] = x[i] + br, o[i + 1] = x[i + 1] + bi;
            else
                for (; i < m; i += 2) o[i] = x[i] - br, o[i + 1] = x[i + 1] - bi;
        }
    }
    for (; i < m; i += 2) {
        const FT *xi = x + (xs ? i : 0), *yi = y + (ys ? i : 0);
        FN(one)(op, (char *)(o + i), (const char *)xi, (const char *)yi);
    }
}

/* p[0] out, p[1] a, p[2] b at byte strides s; n elements */
static void FN(seg)(ts_binary_op op, char *const *p, const int64_t *s, int64_t n) {
    const int64_t es = (int64_t)(2 * sizeof(FT));
    if (s[0] == es && (s[1] == es || s[1] == 0) && (s[2] == es || s[2] == 0)) {
        FN(dense)
        (op, (FT *)(void *)p[0], (const FT *)(const void *)p[1], s[1] ? 2 : 0,
         (const FT *)(const void *)p[2], s[2] ? 2 : 0, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) FN(one)(op, p[0] + i * s[0], p[1] + i * s[1], p[2] + i * s[2]);
}

/* |x| (the unary slot's abs): p[0] the real out, p[1] the complex input at byte strides s; a
 * dense pair of operands in a plain loop the compiler vectorises (ts_cabs_SUF is branch-free) */
static void FN(abs_seg)(char *const *p, const int64_t *s, int64_t n) {
    if (s[0] == (int64_t)sizeof(FT) && s[1] == (int64_t)(2 * sizeof(FT))) {
        FT *o = (FT *)(void *)p[0];
        const FT *x = (const FT *)(const void *)p[1];
        for (int64_t i = 0; i < n; i++) o[i] = CX_ABS(x[2 * i], x[2 * i + 1]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const FT *x = (const FT *)(const void *)(p[1] + i * s[1]);
        *(FT *)(void *)(p[0] + i * s[0]) = CX_ABS(x[0], x[1]);
    }
}

#undef CX_ABS
#undef CX_ADD
#undef CX_SUB
#undef CX_MUL
#undef CX_DIV
