/* kern_fft_impl.h — the lines of the fft slot in one precision, included by kern_fft.c with FT
 * (float or double), CT (tsi_cf32 or tsi_cf64) and FN(x) (x's name in this precision) defined.
 * Lines go in groups of up to jb->block neighbours (lines next to each other along the innermost
 * other dim): each group is gathered from its strided view into one buffer a line (n elements, bs
 * apart), element j of every line in turn, so that a dim that is not last is still read a cache
 * line at a time; then each line is transformed there (work: the plan's scratch) and the group
 * scattered, scaled, to out the same way. Offsets and strides are in scalars (a complex element is
 * two). A real line of even length is packed two reals an element ((FT *)buf holds it as is). */

/* cnt complex elements of g lines (ls apart) into the buffers */
static void FN(load_c)(CT *buf, int64_t bs, const FT *src, int64_t si, int64_t ls, int64_t g,
                       int64_t cnt) {
    if (g == 1) {
        for (int64_t j = 0; j < cnt; j++) buf[j] = (CT){src[j * si], src[j * si + 1]};
        return;
    }
    for (int64_t j = 0; j < cnt; j++)
        for (int64_t b = 0; b < g; b++) {
            const FT *p = src + j * si + b * ls;
            buf[b * bs + j] = (CT){p[0], p[1]};
        }
}

/* cnt reals: packed (two an element) or as real parts with zero imaginary parts */
static void FN(load_r)(CT *buf, int64_t bs, const FT *src, int64_t si, int64_t ls, int64_t g,
                       int64_t cnt, bool packed) {
    for (int64_t j = 0; j < cnt; j++)
        for (int64_t b = 0; b < g; b++) {
            const FT v = src[j * si + b * ls];
            if (packed)
                ((FT *)(void *)(buf + b * bs))[j] = v;
            else
                buf[b * bs + j] = (CT){v, 0};
        }
}

static void FN(store_c)(FT *dst, int64_t so, int64_t ls, const CT *buf, int64_t bs, int64_t g,
                        int64_t cnt, FT scale) {
    if (g == 1) {
        for (int64_t j = 0; j < cnt; j++)
            dst[j * so] = scale * buf[j].r, dst[j * so + 1] = scale * buf[j].i;
        return;
    }
    for (int64_t j = 0; j < cnt; j++)
        for (int64_t b = 0; b < g; b++) {
            FT *p = dst + j * so + b * ls;
            const CT v = buf[b * bs + j];
            p[0] = scale * v.r, p[1] = scale * v.i;
        }
}

/* cnt reals: packed, or the real parts */
static void FN(store_r)(FT *dst, int64_t so, int64_t ls, const CT *buf, int64_t bs, int64_t g,
                        int64_t cnt, FT scale, bool packed) {
    for (int64_t j = 0; j < cnt; j++)
        for (int64_t b = 0; b < g; b++)
            dst[j * so + b * ls] = scale * (packed ? ((const FT *)(const void *)(buf + b * bs))[j]
                                                   : buf[b * bs + j].r);
}

/* g lines: the first at scalar offsets ioff / ooff, the next ils / ols further each */
static void FN(group)(const fft_job *jb, int64_t ioff, int64_t ooff, int64_t ils, int64_t ols,
                      int64_t g, CT *buf, CT *work) {
    const int64_t n = jb->n, h = n / 2, si = jb->in_s, so = jb->out_s, bs = n;
    const FT *src = (const FT *)(const void *)jb->in->data + ioff;
    FT *dst = (FT *)(void *)jb->out->data + ooff;
    const FT scale = (FT)jb->scale;
    const tsi_fft_plan *p = jb->plan;
    const bool even = p->kind == FFT_PLAN_REAL_EVEN;
    if (jb->vl) { /* the group's lines in the lanes of vectors (fft_lines_vec.h) */
        FN(vgroup)(p, jb->kind, jb->forward, n, src, si, ils, dst, so, ols, g, scale, buf, work);
        return;
    }
    switch (jb->kind) {
    case TS_FFT_C2C:
        FN(load_c)(buf, bs, src, si, ils, g, n);
        for (int64_t b = 0; b < g; b++) FN(run)(p, buf + b * bs, work, jb->forward);
        FN(store_c)(dst, so, ols, buf, bs, g, n, scale);
        break;
    case TS_FFT_R2C:
        FN(load_r)(buf, bs, src, si, ils, g, n, even);
        for (int64_t b = 0; b < g; b++) {
            if (even)
                FN(r2c_even)(p, buf + b * bs, work);
            else
                FN(run)(p, buf + b * bs, work, true);
        }
        FN(store_c)(dst, so, ols, buf, bs, g, h + 1, scale);
        break;
    case TS_FFT_C2R:
        FN(load_c)(buf, bs, src, si, ils, g, h + 1);
        for (int64_t b = 0; b < g; b++) {
            CT *c = buf + b * bs;
            if (even) {
                FN(c2r_even)(p, c, work);
            } else { /* odd n: the Hermitian extension; the real parts ignore Im X_0 */
                for (int64_t k = 1; k <= h; k++) c[n - k] = (CT){c[k].r, -c[k].i};
                FN(run)(p, c, work, false);
            }
        }
        FN(store_r)(dst, so, ols, buf, bs, g, n, scale, even);
        break;
    }
}

/* lines [l0, l1) with the scratch of one thread: jb->block buffers of n (h + 1 <= n), then the work
 */
static void FN(lines)(const fft_job *jb, int64_t l0, int64_t l1, void *scratch) {
    CT *buf = scratch, *work = buf + jb->block * jb->n;
    const int last = jb->nd - 1;
    for (int64_t l = l0; l < l1;) {
        int64_t r = l, io = 0, oo = 0, g = 1;
        for (int d = last; d >= 0; d--) {
            const int64_t c = r % jb->shape[d];
            r /= jb->shape[d];
            io += c * jb->in_o[d], oo += c * jb->out_o[d];
            if (d == last) { /* neighbours along the innermost dim, within the range */
                g = jb->shape[d] - c;
                if (g > jb->block) g = jb->block;
                if (g > l1 - l) g = l1 - l;
            }
        }
        FN(group)
        (jb, io, oo, last >= 0 ? jb->in_o[last] : 0, last >= 0 ? jb->out_o[last] : 0, g, buf, work);
        l += g;
    }
}
