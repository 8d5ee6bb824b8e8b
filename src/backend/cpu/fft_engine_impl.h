/* fft_engine_impl.h — the FFT passes and transforms in one precision, included by fft_engine.c
 * with FT (float or double), CT (tsi_cf32 or tsi_cf64), FN(x) (x's name in this precision) and
 * TWF(p, f) (the plan's table f in this precision: p->f##32 or p->f##64) defined, TWT the type of
 * its entries and CZERO a zero part. CT is the table's type (one line, fft_engine.c) or a pair of
 * vectors of lines (fft_lines_vec.c: the same arithmetic lane by lane, the twiddles broadcast).
 *
 * The passes are FFTPACK's (as pocketfft has them): the pass of radix ip after factors whose
 * product is l1 reads cc[a + ido (b + ip c)] and writes ch[a + ido (c + l1 u)], ido = n / (l1 ip):
 * each output u of a butterfly over b is multiplied by the twiddle e^(+-2 pi i u l1 a / n). */

#define CC(a, b, c) cc[(a) + ido * ((b) + cdim * (c))]
#define CH(a, b, c) ch[(a) + ido * ((b) + l1 * (c))]
#define WA(x, a)    wa[(a)-1 + (x) * (ido - 1)]

static inline CT FN(add)(CT a, CT b) { return (CT){a.r + b.r, a.i + b.i}; }
static inline CT FN(sub)(CT a, CT b) { return (CT){a.r - b.r, a.i - b.i}; }
/* v w, or v conj(w) when fwd (the tables hold e^(+...)) */
static inline CT FN(twm)(CT v, TWT w, bool fwd) {
    return fwd ? (CT){v.r * w.r + v.i * w.i, v.i * w.r - v.r * w.i}
               : (CT){v.r * w.r - v.i * w.i, v.r * w.i + v.i * w.r};
}
/* i v */
static inline CT FN(mul_i)(CT v) { return (CT){-v.i, v.r}; }
/* output u of the butterfly at (a, k), twiddled (a = 0: the twiddle is 1) */
static inline void FN(put)(CT *ch, int64_t at, CT y, const TWT *wa, int64_t ido, int64_t a, int u,
                           bool fwd) {
    ch[at] = a > 0 && u > 0 ? FN(twm)(y, WA(u - 1, a), fwd) : y;
}
#define PUT(a, k, u, y) FN(put)(ch, (a) + ido * ((k) + l1 * (u)), (y), wa, ido, (a), (u), fwd)

/* radix 2, one loop per direction with the untwiddled a = 0 peeled off (as FN(pass4) below) */
static inline __attribute__((always_inline)) void
FN(pass2_dir)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    const int64_t cdim = 2;
    for (int64_t k = 0; k < l1; k++) {
        CH(0, k, 0) = FN(add)(CC(0, 0, k), CC(0, 1, k));
        CH(0, k, 1) = FN(sub)(CC(0, 0, k), CC(0, 1, k));
        for (int64_t a = 1; a < ido; a++) {
            const CT x0 = CC(a, 0, k), x1 = CC(a, 1, k);
            CH(a, k, 0) = FN(add)(x0, x1);
            CH(a, k, 1) = FN(twm)(FN(sub)(x0, x1), WA(0, a), fwd);
        }
    }
}

static void FN(pass2)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    if (fwd)
        FN(pass2_dir)(ido, l1, cc, ch, wa, true);
    else
        FN(pass2_dir)(ido, l1, cc, ch, wa, false);
}

static void FN(pass3)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    const int64_t cdim = 3;
    const FT s = (FT)(fwd ? -0.866025403784438646763723170752936183L
                          : 0.866025403784438646763723170752936183L);
    for (int64_t k = 0; k < l1; k++)
        for (int64_t a = 0; a < ido; a++) {
            const CT x0 = CC(a, 0, k), x1 = CC(a, 1, k), x2 = CC(a, 2, k);
            const CT t = FN(add)(x1, x2), d = FN(sub)(x1, x2);
            const CT c = {x0.r - (FT)0.5 * t.r, x0.i - (FT)0.5 * t.i};
            const CT e = FN(mul_i)((CT){s * d.r, s * d.i});
            PUT(a, k, 0, FN(add)(x0, t));
            PUT(a, k, 1, FN(add)(c, e));
            PUT(a, k, 2, FN(sub)(c, e));
        }
}

/* the butterfly of radix 4 at (a, k); tw: a > 0 (twiddled outputs). Always inlined, so that
 * FN(pass4) compiles one loop per direction with the untwiddled a = 0 peeled off */
static inline __attribute__((always_inline)) void FN(bfly4)(int64_t ido, int64_t l1, const CT *cc,
                                                            CT *ch, const TWT *wa, int64_t a,
                                                            int64_t k, bool fwd, bool tw) {
    const int64_t cdim = 4;
    const CT x0 = CC(a, 0, k), x1 = CC(a, 1, k), x2 = CC(a, 2, k), x3 = CC(a, 3, k);
    const CT t1 = FN(sub)(x0, x2), t2 = FN(add)(x0, x2);
    const CT t3 = FN(add)(x1, x3), d = FN(sub)(x1, x3);
    /* (x1 - x3) times -i (forward) or i */
    const CT t4 = fwd ? (CT){d.i, -d.r} : (CT){-d.i, d.r};
    const CT y1 = FN(add)(t1, t4), y2 = FN(sub)(t2, t3), y3 = FN(sub)(t1, t4);
    CH(a, k, 0) = FN(add)(t2, t3);
    CH(a, k, 1) = tw ? FN(twm)(y1, WA(0, a), fwd) : y1;
    CH(a, k, 2) = tw ? FN(twm)(y2, WA(1, a), fwd) : y2;
    CH(a, k, 3) = tw ? FN(twm)(y3, WA(2, a), fwd) : y3;
}

static inline __attribute__((always_inline)) void
FN(pass4_dir)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    for (int64_t k = 0; k < l1; k++) {
        FN(bfly4)(ido, l1, cc, ch, wa, 0, k, fwd, false);
        for (int64_t a = 1; a < ido; a++) FN(bfly4)(ido, l1, cc, ch, wa, a, k, fwd, true);
    }
}

static void FN(pass4)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    if (fwd)
        FN(pass4_dir)(ido, l1, cc, ch, wa, true);
    else
        FN(pass4_dir)(ido, l1, cc, ch, wa, false);
}

static void FN(pass5)(int64_t ido, int64_t l1, const CT *cc, CT *ch, const TWT *wa, bool fwd) {
    const int64_t cdim = 5;
    const FT c1 = (FT)0.309016994374947424102293417182819059L,
             c2 = (FT)-0.809016994374947424102293417182819059L;
    const FT sg = fwd ? (FT)-1 : (FT)1, s1 = sg * (FT)0.951056516295153572116439333379382143L,
             s2 = sg * (FT)0.587785252292473129168705954639072769L;
    for (int64_t k = 0; k < l1; k++)
        for (int64_t a = 0; a < ido; a++) {
            const CT x0 = CC(a, 0, k), x1 = CC(a, 1, k), x2 = CC(a, 2, k), x3 = CC(a, 3, k),
                     x4 = CC(a, 4, k);
            const CT t1 = FN(add)(x1, x4), t2 = FN(add)(x2, x3);
            const CT t3 = FN(sub)(x1, x4), t4 = FN(sub)(x2, x3);
            const CT ra = {x0.r + c1 * t1.r + c2 * t2.r, x0.i + c1 * t1.i + c2 * t2.i};
            const CT rb = {x0.r + c2 * t1.r + c1 * t2.r, x0.i + c2 * t1.i + c1 * t2.i};
            const CT ia = FN(mul_i)((CT){s1 * t3.r + s2 * t4.r, s1 * t3.i + s2 * t4.i});
            const CT ib = FN(mul_i)((CT){s2 * t3.r - s1 * t4.r, s2 * t3.i - s1 * t4.i});
            PUT(a, k, 0, FN(add)(x0, FN(add)(t1, t2)));
            PUT(a, k, 1, FN(add)(ra, ia));
            PUT(a, k, 2, FN(add)(rb, ib));
            PUT(a, k, 3, FN(sub)(rb, ib));
            PUT(a, k, 4, FN(sub)(ra, ia));
        }
}

/* an odd radix ip <= TSI_FFT_MAX_RADIX: the sums and differences of x_j and x_(ip-j) times the
 * cosines and sines of the roots rt[r] = e^(2 pi i r / ip) give outputs u and ip - u at once */
static void FN(passg)(int64_t ido, int64_t l1, int64_t ip, const CT *cc, CT *ch, const TWT *wa,
                      const TWT *rt, bool fwd) {
    const int64_t cdim = ip, hp = (ip - 1) / 2;
    CT sa[TSI_FFT_MAX_RADIX / 2 + 1], sb[TSI_FFT_MAX_RADIX / 2 + 1];
    for (int64_t k = 0; k < l1; k++)
        for (int64_t a = 0; a < ido; a++) {
            const CT x0 = CC(a, 0, k);
            CT y0 = x0;
            for (int64_t j = 1; j <= hp; j++) {
                const CT xj = CC(a, j, k), xm = CC(a, ip - j, k);
                sa[j] = FN(add)(xj, xm), sb[j] = FN(sub)(xj, xm);
                y0 = FN(add)(y0, sa[j]);
            }
            PUT(a, k, 0, y0);
            for (int64_t u = 1; u <= hp; u++) {
                CT re = x0, im = {CZERO, CZERO};
                int64_t r = 0;
                for (int64_t j = 1; j <= hp; j++) {
                    r += u;
                    if (r >= ip) r -= ip;
                    re.r += sa[j].r * rt[r].r, re.i += sa[j].i * rt[r].r;
                    im.r += sb[j].r * rt[r].i, im.i += sb[j].i * rt[r].i;
                }
                /* sum_j x_j e^(-+2 pi i j u / ip) = re -+ i im */
                const CT e = FN(mul_i)(im);
                PUT(a, k, (int)u, fwd ? FN(sub)(re, e) : FN(add)(re, e));
                PUT(a, k, (int)(ip - u), fwd ? FN(add)(re, e) : FN(sub)(re, e));
            }
        }
}

#undef CC
#undef CH
#undef WA
#undef PUT

/* the passes of a FACTORS plan from c, alternating with work: the buffer that holds the result */
static CT *FN(passes)(const tsi_fft_plan *p, CT *c, CT *work, bool fwd) {
    const int64_t n = p->n;
    CT *p1 = c, *p2 = work;
    int64_t l1 = 1;
    for (int f = 0; f < p->nfct; f++) {
        const int64_t ip = p->fct[f].p, ido = n / (l1 * ip);
        const TWT *wa = TWF(p, tw) + p->fct[f].tw;
        switch (ip) {
        case 2:
            FN(pass2)(ido, l1, p1, p2, wa, fwd);
            break;
        case 3:
            FN(pass3)(ido, l1, p1, p2, wa, fwd);
            break;
        case 4:
            FN(pass4)(ido, l1, p1, p2, wa, fwd);
            break;
        case 5:
            FN(pass5)(ido, l1, p1, p2, wa, fwd);
            break;
        default:
            FN(passg)(ido, l1, ip, p1, p2, wa, TWF(p, tw) + p->fct[f].rt, fwd);
            break;
        }
        CT *t = p1;
        p1 = p2, p2 = t;
        l1 *= ip;
    }
    return p1;
}

static void FN(run_factors)(const tsi_fft_plan *p, CT *c, CT *work, bool fwd) {
    const CT *r = FN(passes)(p, c, work, fwd);
    if (r != c) memcpy(c, r, sizeof(CT) * (size_t)p->n);
}

/* X_k = conj(w_k) sum_j (x_j conj(w_j)) w_(k-j), w_j = e^(i pi j^2 / n) (conjugated
 * backwards): a cyclic convolution of length m through the inner plan, kern holding the
 * transformed w / m */
static void FN(run_bluestein)(const tsi_fft_plan *p, CT *c, CT *work, bool fwd) {
    const int64_t n = p->n, m = p->m;
    const TWT *w = TWF(p, chirp), *kern = TWF(p, kern);
    CT *a = work, *w2 = work + m;
    for (int64_t j = 0; j < n; j++) a[j] = FN(twm)(c[j], w[j], !fwd);
    memset(a + n, 0, sizeof(CT) * (size_t)(m - n));
    FN(run_factors)(p->inner, a, w2, true);
    /* the backward kernel is conj(kern[-k]) = conj(kern[k]): the wrapped chirp is symmetric */
    for (int64_t k = 0; k < m; k++) a[k] = FN(twm)(a[k], kern[k], !fwd);
    FN(run_factors)(p->inner, a, w2, false);
    for (int64_t k = 0; k < n; k++) c[k] = FN(twm)(a[k], w[k], !fwd);
}

/* the transform of c: the buffer that holds it, c or (FACTORS plans) work */
static CT *FN(run_to)(const tsi_fft_plan *p, CT *c, CT *work, bool fwd) {
    if (p->kind != FFT_PLAN_BLUESTEIN) return FN(passes)(p, c, work, fwd);
    FN(run_bluestein)(p, c, work, fwd);
    return c;
}

static inline void FN(run)(const tsi_fft_plan *p, CT *c, CT *work, bool fwd) {
    const CT *r = FN(run_to)(p, c, work, fwd);
    if (r != c) memcpy(c, r, sizeof(CT) * (size_t)p->n);
}

/* A real transform of even length n = 2h (a REAL_EVEN plan): c[0..h] = X_0 .. X_h of x, c[0..h)
 * holding x packed as (x_2j, x_2j+1) on entry: the half-length transform Z, then
 * X_k = E + W^k O and X_(h-k) = conj(E - W^k O), E = (Z_k + conj Z_(h-k)) / 2,
 * O = (Z_k - conj Z_(h-k)) / 2i, W = e^(-2 pi i / n). */
static void FN(r2c_even)(const tsi_fft_plan *p, CT *c, CT *work) {
    const int64_t h = p->n / 2;
    const TWT *w = TWF(p, chirp);
    const CT *z = FN(run_to)(p->inner, c, work, true); /* Z, split into c */
    const CT z0 = z[0];
    c[0] = (CT){z0.r + z0.i, CZERO}, c[h] = (CT){z0.r - z0.i, CZERO};
    for (int64_t k = 1; 2 * k <= h; k++) {
        const CT zk = z[k], zm = z[h - k];
        const CT e = {(FT)0.5 * (zk.r + zm.r), (FT)0.5 * (zk.i - zm.i)};
        const CT d = {(FT)0.5 * (zk.r - zm.r), (FT)0.5 * (zk.i + zm.i)};
        const CT o = FN(twm)((CT){d.i, -d.r}, w[k], false); /* W^k d / i */
        c[k] = FN(add)(e, o);
        if (2 * k < h) c[h - k] = (CT){e.r - o.r, o.i - e.i};
    }
}

/* Its inverse, unscaled, c[0..h] = X_0 .. X_h in (imaginary parts of X_0 and X_h unread), the n
 * outputs out as reals (x_2j, x_2j+1) in the h first elements of the buffer returned (c or work):
 * Z'_k = E' + i O', E' = X_k + conj X_(h-k), O' = (X_k - conj X_(h-k)) W^-k,
 * Z'_(h-k) = conj(E') + i conj(O'), then the inverse half-length transform. */
static CT *FN(c2r_even)(const tsi_fft_plan *p, CT *c, CT *work) {
    const int64_t h = p->n / 2;
    const TWT *w = TWF(p, chirp);
    const CT x0h = {c[0].r, c[h].r}; /* the real parts of X_0 and X_h */
    c[0] = (CT){x0h.r + x0h.i, x0h.r - x0h.i};
    for (int64_t k = 1; 2 * k <= h; k++) {
        const CT xk = c[k], xm = c[h - k];
        const CT e = {xk.r + xm.r, xk.i - xm.i};
        const CT o = FN(twm)((CT){xk.r - xm.r, xk.i + xm.i}, w[k], true);
        c[k] = FN(add)(e, FN(mul_i)(o));
        if (2 * k < h) c[h - k] = (CT){e.r + o.i, o.r - e.i};
    }
    return FN(run_to)(p->inner, c, work, false);
}
