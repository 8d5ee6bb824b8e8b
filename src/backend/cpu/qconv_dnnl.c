/* qconv_dnnl.c — the quantized 2-D convolution through oneDNN's int8 primitive (qconv_dnnl.h).
 *
 * Why oneDNN does only the int32 part. oneDNN 2.6 (Debian's) stores every int8 convolution's
 * result through float32: its s32 destination is cvtps(cvtdq(sum)), so a sum of 2^24 or more may
 * come back rounded (measured: K = 600 taps of 255 x -127 sums gave -19398360 for -19398359), and
 * its u8 / s8 destination adds the destination zero point in float32 before rounding
 * (round(f + zp) against ONNX Runtime's round(f) + zp: a tie f = 0.5 with zp = 1 gives 2 against
 * ORT's 1), and adds the bias in float32 after converting the sum. So the primitive here computes
 * only the raw sums of u8 x s8 (no bias, no zero points, no scales: one rounding at most, which
 * is no rounding below 2^24), into s32 NHWC, and Tessera's epilogue does the rest as
 * qconv_vnni.c does, in int32 then ONNX Runtime's float32 requantization. A raw sum of magnitude
 * 2^24 or more (rounding is monotone: only those can be off) makes the call decline after the
 * fact; kern_qconv.c then runs the own kernels over the whole output.
 *
 * The input: copied once into a padded NHWC u8 buffer (padding = x_zp's byte, as the own kernels
 * pad; int8 inputs flipped by 128 with x_zp + 128, as kern_qlinear.c does), so that oneDNN runs
 * without padding and acc = raw - x_zp * wsum[co] + bias[co] over every tap. The weights: oneDNN's
 * layout plus each channel's sum, cached across calls (conv_dnnl_wcache.c) for constant weights.
 * The primitives: cached by geometry and thread count; a call holds the cache's lock while its
 * primitive runs (an evicted primitive is never one in use). */
#include "backend/cpu/qconv_dnnl.h"

#include <stdatomic.h>

#ifndef TS_HAVE_DNNL
bool tsi_qconv_dnnl_fits(const ts_qconv_args *a) {
    (void)a;
    return false;
}
tsi_qdnnl_status tsi_qconv_dnnl(const ts_qconv_args *a) {
    (void)a;
    return TSI_QDNNL_DECLINED;
}
uint64_t tsi_qconv_dnnl_count(void) { return 0; }
uint64_t tsi_qconv_dnnl_inexact_count(void) { return 0; }
#else
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/conv_dnnl_wcache.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/dnnl_common.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/omp_if.h"

#define EXACT_LIMIT 16777216 /* 2^24: below it oneDNN's float32 store leaves the sum exact */

static atomic_uint_fast64_t runs, inexact;
uint64_t tsi_qconv_dnnl_count(void) { return atomic_load(&runs); }
uint64_t tsi_qconv_dnnl_inexact_count(void) { return atomic_load(&inexact); }

bool tsi_qconv_dnnl_fits(const ts_qconv_args *a) {
    if (!a->fmult || !tsi_qgemm_vnni_available()) return false;
    for (int64_t c = 0; c < a->cout; c++)
        if (a->w_zp[c]) return false;
    return true;
}

/* ------------------------------------------------------------------ the primitive cache */
typedef struct qkey {
    int64_t threads, n, c, hp, wp, cout, kh, kw, oh, ow, g, sh, sw, dh, dw;
} qkey;

typedef struct qentry {
    qkey key;
    bool used;
    uint64_t stamp;
    dnnl_primitive_t prim, wreorder; /* the weight's reorder: goihw -> the primitive's */
    dnnl_memory_desc_t src, wuser, wprim, dst;
    size_t scratch;
} qentry;

#define CACHE_SIZE 64
static qentry cache[CACHE_SIZE];
static uint64_t clock_;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void entry_free(qentry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->wreorder) dnnl_primitive_destroy(e->wreorder);
    memset(e, 0, sizeof *e);
}

static bool build(qentry *e) {
    const qkey *k = &e->key;
    const dnnl_engine_t engine = tsi_dnnl_engine();
    const int64_t cg = k->c / k->g, og = k->cout / k->g;
    const int64_t sd[4] = {k->n, k->c, k->hp, k->wp}, dd[4] = {k->n, k->cout, k->oh, k->ow};
    dnnl_dims_t wd = {k->g, og, cg, k->kh, k->kw}, strides = {k->sh, k->sw},
                dil = {k->dh - 1, k->dw - 1}, zero = {0, 0};
    dnnl_memory_desc_t wany;
    tsi_dnnl_plain_md(&e->src, 4, sd, dnnl_nhwc, dnnl_u8);
    tsi_dnnl_plain_md(&e->dst, 4, dd, dnnl_nhwc, dnnl_s32);
    if (dnnl_memory_desc_init_by_tag(&e->wuser, 5, wd, dnnl_s8, dnnl_goihw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_s8, dnnl_format_tag_any) != dnnl_success)
        return false;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok =
        dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_convolution_direct, &e->src, &wany, NULL, &e->dst,
            strides, dil, zero, zero) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL) == dnnl_success;
    if (ok) {
        /* a reference kernel would be far slower than the own kernels: decline it */
        const char *impl = NULL;
        ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
             impl && !strstr(impl, "ref");
    }
    if (ok) {
        e->wprim = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        e->scratch = dnnl_memory_desc_get_size(
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
             tsi_dnnl_make_reorder(&e->wuser, &e->wprim, &e->wreorder);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* the entry of key, built if new (prim NULL: oneDNN declined it); called with the lock held */
static qentry *lookup(const qkey *key) {
    qentry *hit = NULL, *victim = &cache[0];
    for (int i = 0; i < CACHE_SIZE && !hit; i++) {
        if (cache[i].used && !memcmp(&cache[i].key, key, sizeof *key)) hit = &cache[i];
        if (!cache[i].used || (victim->used && cache[i].stamp < victim->stamp)) victim = &cache[i];
    }
    if (!hit) {
        entry_free(victim);
        victim->key = *key;
        if (!build(victim)) { /* kept, without a primitive: declined at once next time */
            entry_free(victim);
            victim->key = *key;
        }
        victim->used = true;
        hit = victim;
    }
    hit->stamp = ++clock_;
    return hit;
}

/* ------------------------------------------------------------------ the weights */
/* the cached copy: oneDNN's layout, then cout int32 channel sums at wsum_off */
typedef struct wlayout {
    dnnl_memory_desc_t md;
    int64_t tag; /* tells this copy from the float convolution's (which keys on the md alone) */
} wlayout;

typedef struct wfill {
    const qentry *e;
    const ts_qconv_args *a;
    dnnl_stream_t st;
    size_t wsum_off;
} wfill;

static bool fill_weight(void *ctx, void *buf) {
    const wfill *f = ctx;
    const ts_qconv_args *a = f->a;
    const dnnl_engine_t engine = tsi_dnnl_engine();
    dnnl_memory_t u = NULL, p = NULL;
    bool ok = dnnl_memory_create(&u, &f->e->wuser, engine, (void *)a->wt) == dnnl_success &&
              dnnl_memory_create(&p, &f->e->wprim, engine, buf) == dnnl_success;
    if (ok && f->e->wreorder) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, u}, {DNNL_ARG_TO, p}};
        ok = dnnl_primitive_execute(f->e->wreorder, f->st, 2, ra) == dnnl_success &&
             dnnl_stream_wait(f->st) == dnnl_success;
    } else if (ok) {
        memcpy(buf, a->wt, dnnl_memory_desc_get_size(&f->e->wuser));
    }
    if (u) dnnl_memory_destroy(u);
    if (p) dnnl_memory_destroy(p);
    const int64_t kg = a->c / a->groups * a->kh * a->kw;
    int32_t *ws = (int32_t *)(void *)((char *)buf + f->wsum_off);
    for (int64_t co = 0; ok && co < a->cout; co++) {
        int32_t s = 0;
        for (int64_t k = 0; k < kg; k++) s += a->wt[co * kg + k];
        ws[co] = s;
    }
    return ok;
}

/* ------------------------------------------------------------------ input and epilogue */
#if defined(__x86_64__)
#include <emmintrin.h>
/* a 16 x 16 byte block: dst row j, byte i = src row i, byte j (^ flip); four rounds of byte
 * interleaving of rows i and i + 8 */
static void tr16(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds, uint8_t flip) {
    const __m128i f = _mm_set1_epi8((char)flip);
    __m128i r[16], o[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(src + i * ss)), f);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 8; i++) {
            o[2 * i] = _mm_unpacklo_epi8(r[i], r[i + 8]);
            o[2 * i + 1] = _mm_unpackhi_epi8(r[i], r[i + 8]);
        }
        memcpy(r, o, sizeof r);
    }
    for (int j = 0; j < 16; j++) _mm_storeu_si128((__m128i *)(void *)(dst + j * ds), r[j]);
}
#else
static void tr16(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds, uint8_t flip) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) dst[j * ds + i] = src[i * ss + j] ^ flip;
}
#endif

/* rows x cols bytes (src rows ss apart) transposed into dst (rows ds apart), ^ flip */
static void transpose(const uint8_t *src, int64_t ss, int64_t rows, int64_t cols, uint8_t *dst,
                      int64_t ds, uint8_t flip) {
    const int64_t r16 = rows & ~(int64_t)15, c16 = cols & ~(int64_t)15;
    for (int64_t i = 0; i < r16; i += 16)
        for (int64_t j = 0; j < c16; j += 16)
            tr16(src + i * ss + j, ss, dst + j * ds + i, ds, flip);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = i < r16 ? c16 : 0; j < cols; j++) dst[j * ds + i] = src[i * ss + j] ^ flip;
}
/* image n's planes into the padded NHWC copy [hp][wp][C] (padding padb, bytes ^ flip) */
static void pad_nhwc(const ts_qconv_args *a, const uint8_t *x, int64_t hp, int64_t wp, uint8_t padb,
                     uint8_t flip, uint8_t *dst) {
    const int64_t C = a->c, H = a->h, W = a->w, p0 = a->pad[0], p1 = a->pad[1];
    for (int64_t yp = 0; yp < hp; yp++) {
        uint8_t *row = dst + yp * wp * C;
        const int64_t y = yp - p0;
        if (y < 0 || y >= H) {
            memset(row, padb, (size_t)(wp * C));
            continue;
        }
        memset(row, padb, (size_t)(p1 * C));
        memset(row + (p1 + W) * C, padb, (size_t)((wp - p1 - W) * C));
        /* the row's C planes [C][W] (H * W apart) into [W][C] */
        transpose(x + y * W, H * W, C, W, row + p1 * C, C, flip);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TS_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))

/* image n's s32 sums [P][CO] requantized into bytes [P][CO] (tmp); false: some |sum| >= 2^24 */
TS_AVX512 static bool requant_rows(const ts_qconv_args *a, const int32_t *acc, int64_t P,
                                   const int32_t *rowc, uint8_t *tmp) {
    const int64_t CO = a->cout;
    const __m512 lo = _mm512_set1_ps((float)(a->out_min - a->out_zp)),
                 hi = _mm512_set1_ps((float)(a->out_max - a->out_zp));
    const __m512i zp = _mm512_set1_epi32(a->out_zp), lim = _mm512_set1_epi32(EXACT_LIMIT - 1);
    __mmask16 bad = 0;
    for (int64_t p = 0; p < P; p++) {
        const int32_t *v = acc + p * CO;
        uint8_t *o = tmp + p * CO;
        for (int64_t c = 0; c < CO; c += 16) {
            const __mmask16 m = (__mmask16)(CO - c >= 16 ? 0xffffu : (1u << (CO - c)) - 1u);
            __m512i s = _mm512_maskz_loadu_epi32(m, v + c);
            bad |= _mm512_mask_cmpgt_epi32_mask(m, _mm512_abs_epi32(s), lim);
            s = _mm512_add_epi32(s, _mm512_maskz_loadu_epi32(m, rowc + c));
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_maskz_loadu_ps(m, a->fmult + c));
            f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
            _mm_mask_storeu_epi8(
                o + c, m, a->out_unsigned ? _mm512_cvtusepi32_epi8(q) : _mm512_cvtsepi32_epi8(q));
        }
    }
    return !bad;
}
#else
static bool requant_rows(const ts_qconv_args *a, const int32_t *acc, int64_t P, const int32_t *rowc,
                         uint8_t *tmp) {
    (void)a, (void)acc, (void)P, (void)rowc, (void)tmp;
    return false;
}
#endif

/* ------------------------------------------------------------------ the call */
tsi_qdnnl_status tsi_qconv_dnnl(const ts_qconv_args *a) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    if (!engine || !tsi_qconv_dnnl_fits(a)) return TSI_QDNNL_DECLINED;
    const int64_t N = a->n, C = a->c, CO = a->cout, P = a->oh * a->ow, hp = a->h + 2 * a->pad[0],
                  wp = a->w + 2 * a->pad[1];
    const qkey key = {tsi_dnnl_threads(),
                      1, /* the primitive runs one image */
                      C,
                      hp,
                      wp,
                      CO,
                      a->kh,
                      a->kw,
                      a->oh,
                      a->ow,
                      a->groups,
                      a->stride[0],
                      a->stride[1],
                      a->dil[0],
                      a->dil[1]};
    const uint8_t flip = a->x_unsigned ? 0 : 0x80;
    const int32_t xzp = a->x_zp + (a->x_unsigned ? 0 : 128);
    /* one image at a time: its copy, sums and bytes stay in cache (the whole batch's s32 sums in
     * one call: batch 32 of ResNet-50's 56x56 layers ran 2x slower than the own kernels) */
    const size_t xb = ((size_t)(hp * wp * C) + 63) & ~(size_t)63,
                 yb = (size_t)(P * CO) * sizeof(int32_t), rb = (size_t)CO * sizeof(int32_t),
                 tb = ((size_t)(P * CO) + 63) & ~(size_t)63;
    tsi_qdnnl_status st = TSI_QDNNL_DECLINED;
    ts_block *blk = NULL, *wblk = NULL, *sblk = NULL;
    tsi_wcache_entry *wref = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t ms = NULL, mw = NULL, md = NULL, msp = NULL;
    pthread_mutex_lock(&cache_lock);
    const qentry *e = lookup(&key);
    if (!e->prim || dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
        goto done;
    const size_t wbytes = dnnl_memory_desc_get_size(&e->wprim),
                 wsum_off = (wbytes + 63) & ~(size_t)63, wall = wsum_off + rb;
    uint8_t *buf = tsi_host_scratch_get(xb + yb + rb + tb, &blk);
    if (!buf) {
        tsi_kernel_oom("qlinear_conv2d", xb + yb + rb + tb);
        st = TSI_QDNNL_FAILED;
        goto done;
    }
    uint8_t *xpad = buf, *tmp = buf + xb + yb + rb;
    int32_t *acc = (int32_t *)(void *)(buf + xb), *rowc = (int32_t *)(void *)(buf + xb + yb);
    /* the weights and their channel sums: cached, or made in scratch for this call */
    wfill wf = {e, a, stream, wsum_off};
    const void *wbuf = NULL;
    if (a->w_uid) {
        const tsi_conv_weight_id wid = {a->w_uid, a->w_version, a->w_offset};
        wlayout lay;
        memset(&lay, 0, sizeof lay);
        lay.md = e->wprim;
        lay.tag = 0x71636f6e76; /* "qconv" */
        wbuf = tsi_wcache_get(&wid, &lay, sizeof lay, wall, fill_weight, &wf, &wref);
    }
    if (!wbuf) {
        void *w = tsi_host_scratch_get(wall, &wblk);
        if (!w) {
            tsi_kernel_oom("qlinear_conv2d", wall);
            st = TSI_QDNNL_FAILED;
            goto done;
        }
        if (!fill_weight(&wf, w)) goto done;
        wbuf = w;
    }
    const int32_t *wsum = (const int32_t *)(const void *)((const char *)wbuf + wsum_off);
    for (int64_t co = 0; co < CO; co++) /* int32 wrap-around, as ORT's sums */
        rowc[co] = (int32_t)(uint32_t)((uint64_t)(a->bias ? (int64_t)a->bias[co] : 0) -
                                       (uint64_t)((int64_t)xzp * wsum[co]));
    if (dnnl_memory_create(&ms, &e->src, engine, xpad) != dnnl_success ||
        dnnl_memory_create(&mw, &e->wprim, engine, (void *)wbuf) != dnnl_success ||
        dnnl_memory_create(&md, &e->dst, engine, acc) != dnnl_success)
        goto done;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    int nargs = 3;
    if (e->scratch) {
        if (!tsi_dnnl_scratchpad(e->scratch, &msp, &sblk)) goto done;
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, msp};
    }
    int bad = 0;
    for (int64_t n = 0; n < N; n++) {
        pad_nhwc(a, (const uint8_t *)a->x + n * C * a->h * a->w, hp, wp, (uint8_t)xzp, flip, xpad);
        if (dnnl_primitive_execute(e->prim, stream, nargs, args) != dnnl_success ||
            dnnl_stream_wait(stream) != dnnl_success)
            goto done;
        bad |= !requant_rows(a, acc, P, rowc, tmp);
        transpose(tmp, CO, P, CO, (uint8_t *)a->out + n * CO * P, P, 0);
    }
    if (bad) {
        atomic_fetch_add(&inexact, 1);
        goto done;
    }
    atomic_fetch_add(&runs, 1);
    st = TSI_QDNNL_DONE;
done:
    if (ms) dnnl_memory_destroy(ms);
    if (mw) dnnl_memory_destroy(mw);
    if (md) dnnl_memory_destroy(md);
    if (msp) dnnl_memory_destroy(msp);
    tsi_host_scratch_put(sblk);
    if (stream) dnnl_stream_destroy(stream);
    pthread_mutex_unlock(&cache_lock);
    tsi_wcache_release(wref);
    tsi_host_scratch_put(wblk);
    tsi_host_scratch_put(blk);
    return st;
}
#endif
