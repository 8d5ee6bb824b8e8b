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
 * without padding and acc = raw - x_zp * wsum[co] + bias[co] over every tap. A channels_last
 * uint8 input (x_nhwc, decision 0053) is read where it lies when no padding needs x_zp's byte:
 * x_zp 0 (oneDNN's own padding is the u8 zero, so every tap is still x - x_zp) or no padding;
 * otherwise its padded copy is a memcpy a row. A channels_last output (out_nhwc) is requantized
 * straight into place; an NCHW one through a byte transpose. The weights: oneDNN's
 * layout plus each channel's sum, cached across calls (conv_dnnl_wcache.c) for constant weights.
 * The primitives: cached by geometry and thread count; a call holds the cache's lock while its
 * primitive runs (an evicted primitive is never one in use). Each image runs in bands of output
 * rows whose s32 sums stay in L2, a primitive per band geometry (decision 0055, "the bands"). */
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
bool tsi_qconv_dnnl_available(void) { return false; }
uint64_t tsi_qconv_dnnl_count(void) { return 0; }
uint64_t tsi_qconv_dnnl_inexact_count(void) { return 0; }
uint64_t tsi_qconv_dnnl_direct_count(void) { return 0; }
uint64_t tsi_qconv_dnnl_banded_count(void) { return 0; }
void tsi_qconv_dnnl_set_band_bytes(int64_t bytes) { (void)bytes; }
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

static atomic_uint_fast64_t runs, inexact, direct_runs, banded_runs;
uint64_t tsi_qconv_dnnl_count(void) { return atomic_load(&runs); }
uint64_t tsi_qconv_dnnl_inexact_count(void) { return atomic_load(&inexact); }
uint64_t tsi_qconv_dnnl_direct_count(void) { return atomic_load(&direct_runs); }
uint64_t tsi_qconv_dnnl_banded_count(void) { return atomic_load(&banded_runs); }

bool tsi_qconv_dnnl_available(void) { return tsi_qgemm_vnni_available() && tsi_dnnl_engine(); }

bool tsi_qconv_dnnl_fits(const ts_qconv_args *a) {
    if (!a->fmult || !tsi_qgemm_vnni_available()) return false;
    for (int64_t c = 0; c < a->cout; c++)
        if (a->w_zp[c]) return false;
    return true;
}

/* ------------------------------------------------------------------ the primitive cache */
typedef struct qkey {
    int64_t threads, n, c, hp, wp, cout, kh, kw, oh, ow, g, sh, sw, dh, dw;
    int64_t pt, pb, pw; /* oneDNN's own (zero) padding, top, bottom and each side: 0 when the
                         * input comes padded; a band of output rows has its own */
} qkey;

typedef struct qentry {
    qkey key;
    bool used;
    uint64_t stamp;
    dnnl_primitive_t prim, wreorder; /* the weight's reorder: goihw -> the primitive's */
    dnnl_memory_desc_t src, wuser, wprim, dst;
    dnnl_memory_t ms, mw, md; /* over src, wprim, dst: the data handles set at each use */
    size_t scratch;
} qentry;

#define CACHE_SIZE 64
static qentry cache[CACHE_SIZE];
static uint64_t clock_;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void entry_free(qentry *e) {
    if (e->ms) dnnl_memory_destroy(e->ms);
    if (e->mw) dnnl_memory_destroy(e->mw);
    if (e->md) dnnl_memory_destroy(e->md);
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
                dil = {k->dh - 1, k->dw - 1}, pad_l = {k->pt, k->pw}, pad_r = {k->pb, k->pw};
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
            strides, dil, pad_l, pad_r) == dnnl_success &&
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
             tsi_dnnl_make_reorder(&e->wuser, &e->wprim, &e->wreorder) &&
             dnnl_memory_create(&e->ms, &e->src, engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->mw, &e->wprim, engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&e->md, &e->dst, engine, DNNL_MEMORY_NONE) == dnnl_success;
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
/* the cached copy: oneDNN's layout, then cout int32 channel sums at wsum_off, then one int32:
 * 1 when no raw sum can reach 2^24 (255 * sum |w| below it in every channel: the epilogue need
 * not check the sums) */
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
    int64_t most = 0; /* the largest sum |w| of a channel */
    for (int64_t co = 0; ok && co < a->cout; co++) {
        int32_t s = 0;
        int64_t m = 0;
        for (int64_t k = 0; k < kg; k++) {
            s += a->wt[co * kg + k];
            m += a->wt[co * kg + k] < 0 ? -a->wt[co * kg + k] : a->wt[co * kg + k];
        }
        ws[co] = s;
        most = m > most ? m : most;
    }
    ws[a->cout] = 255 * most < EXACT_LIMIT;
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
    if (rows == 3 && ds == 3) { /* an image's 3 planes (the stem): 16 pixels through one tr16 */
        uint8_t in[16 * 16] = {0}, out[16 * 16];
        int64_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            for (int i = 0; i < 3; i++) memcpy(in + 16 * i, src + i * ss + j, 16);
            tr16(in, 16, out, 16, flip);
            for (int p = 0; p < 16; p++) memcpy(dst + (j + p) * 3, out + 16 * p, 3);
        }
        for (; j < cols; j++)
            for (int i = 0; i < 3; i++) dst[j * 3 + i] = src[i * ss + j] ^ flip;
        return;
    }
    const int64_t r16 = rows & ~(int64_t)15, c16 = cols & ~(int64_t)15;
    for (int64_t i = 0; i < r16; i += 16)
        for (int64_t j = 0; j < c16; j += 16)
            tr16(src + i * ss + j, ss, dst + j * ds + i, ds, flip);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = i < r16 ? c16 : 0; j < cols; j++) dst[j * ds + i] = src[i * ss + j] ^ flip;
}
/* image n (planes, or NHWC rows when a->x_nhwc) into the padded NHWC copy [hp][wp][C] (padding
 * padb, bytes ^ flip) */
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
        if (a->x_nhwc) { /* the row [W][C] as it lies */
            const uint8_t *src = x + y * W * C;
            uint8_t *d = row + p1 * C;
            if (!flip)
                memcpy(d, src, (size_t)(W * C));
            else
                for (int64_t i = 0; i < W * C; i++) d[i] = src[i] ^ flip;
            continue;
        }
        /* the row's C planes [C][W] (H * W apart) into [W][C] */
        transpose(x + y * W, H * W, C, W, row + p1 * C, C, flip);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TS_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))

/* count s32 sums (whole positions of [.][CO]) requantized into bytes; rc, fb and fm: each
 * channel's sum correction, float bias (PyTorch's x86 requantization; unread otherwise) and
 * multiplier repeated over L = lcm(CO, 16) values, so that the sums are read
 * as one flat run of 16-lane vectors whatever CO is (24 or 40 channels: no masked vectors), four
 * vectors packed into 64 bytes at a time (the float clamp has put every value in the output's
 * range: the packs' saturation never acts); false: some |sum| >= 2^24 */
TS_AVX512 static bool requant_flat(const ts_qconv_args *a, const int32_t *acc, int64_t count,
                                   const int32_t *rc, const float *fb, const float *fm, int64_t L,
                                   bool check, uint8_t *out) {
    const __m512 lo = _mm512_set1_ps((float)(a->out_min - a->out_zp)),
                 hi = _mm512_set1_ps((float)(a->out_max - a->out_zp));
    const __m512i zp = _mm512_set1_epi32(a->out_zp), zp16 = _mm512_set1_epi16((short)a->out_zp),
                  lim = _mm512_set1_epi32(EXACT_LIMIT - 1),
                  order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const bool u = a->out_unsigned;
    const int64_t K = L / 16, V = count / 16;
    __m512i big = _mm512_setzero_si512();
    int64_t v = 0, k = 0;
    /* the float32 product of the corrected sum (plus the float bias: PyTorch's x86; ORT's adds
     * nothing, and skips the add, the branch hoisted out of the loops), clamped, rounded half to
     * even (no zero point) */
    const bool add_fb = a->acc_fbias != NULL;
#define TS_RQ_SUM(s, kk)                                                                           \
    (add_fb ? _mm512_add_ps(                                                                       \
                  _mm512_cvtepi32_ps(_mm512_add_epi32(s, _mm512_loadu_si512(rc + 16 * (kk)))),     \
                  _mm512_loadu_ps(fb + 16 * (kk)))                                                 \
            : _mm512_cvtepi32_ps(_mm512_add_epi32(s, _mm512_loadu_si512(rc + 16 * (kk)))))
#define TS_RQ(s, kk)                                                                               \
    _mm512_cvtps_epi32(_mm512_min_ps(                                                              \
        _mm512_max_ps(_mm512_mul_ps(TS_RQ_SUM(s, kk), _mm512_loadu_ps(fm + 16 * (kk))), lo), hi))
    for (; v + 4 <= V; v += 4) {
        __m512i q[4];
        for (int j = 0; j < 4; j++) {
            const __m512i s = _mm512_loadu_si512(acc + 16 * (v + j));
            if (check) big = _mm512_max_epi32(big, _mm512_abs_epi32(s));
            q[j] = TS_RQ(s, k);
            if (++k == K) k = 0;
        }
        /* the zero point added in int16 (the values lie in [out_min - zp, out_max - zp]) */
        const __m512i ab = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zp16),
                      cd = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zp16);
        const __m512i r = u ? _mm512_packus_epi16(ab, cd) : _mm512_packs_epi16(ab, cd);
        _mm512_storeu_si512(out + 16 * v, _mm512_permutexvar_epi32(order, r));
    }
    for (; v * 16 < count; v++) { /* the last vectors, the last one partial */
        const __mmask16 m =
            (__mmask16)(count - 16 * v >= 16 ? 0xffffu : (1u << (count - 16 * v)) - 1u);
        const __m512i s = _mm512_maskz_loadu_epi32(m, acc + 16 * v);
        if (check) big = _mm512_max_epi32(big, _mm512_abs_epi32(s));
        const __m512i q = _mm512_add_epi32(TS_RQ(s, k), zp);
        _mm_mask_storeu_epi8(out + 16 * v, m,
                             u ? _mm512_cvtusepi32_epi8(q) : _mm512_cvtsepi32_epi8(q));
        if (++k == K) k = 0;
    }
#undef TS_RQ
#undef TS_RQ_SUM
    return !_mm512_cmpgt_epi32_mask(big, lim);
}
#else
static bool requant_flat(const ts_qconv_args *a, const int32_t *acc, int64_t count,
                         const int32_t *rc, const float *fb, const float *fm, int64_t L, bool check,
                         uint8_t *out) {
    (void)a, (void)acc, (void)count, (void)rc, (void)fb, (void)fm, (void)L, (void)check, (void)out;
    return false;
}
#endif

/* ------------------------------------------------------------------ the bands */
/* The output image runs in bands of output rows whose s32 sums fit in L2 (BAND_BYTES a thread),
 * so that the epilogue reads them from cache and oneDNN's stores of them stay there too (whole
 * images: MobileNetV2's 112x112x96 expansion wrote 4.8 MB of sums a call, read back once). Each
 * band is its own primitive over its rows of the input: a band of rows needs the input rows
 * [o0 * sh - pt, ...) of the (padded) image, so bands away from the edges have no padding and the
 * first and last have the top and bottom rows of it (oneDNN's asymmetric padding), the same taps
 * as the whole image's convolution; a band therefore adds no copy. Distinct geometries a call:
 * first, middle, last (more only when the padding is taller than a band). */
#define BAND_BYTES (256 * 1024)
static _Atomic int64_t band_bytes = BAND_BYTES;
void tsi_qconv_dnnl_set_band_bytes(int64_t bytes) {
    atomic_store(&band_bytes, bytes > 0 ? bytes : BAND_BYTES);
}
#define MAX_SLOTS  6

typedef struct band_slot {
    const qentry *e;
    dnnl_memory_t ms, md; /* the entry's, over its descriptors; the data handles set per band */
} band_slot;

/* band [o0, o0 + nb)'s key and the first input row it reads (in the copy's rows when !direct) */
static void band_key(const ts_qconv_args *a, bool direct, int64_t hp, int64_t wp, int64_t o0,
                     int64_t nb, qkey *k, int64_t *row0) {
    const int64_t keff = (a->kh - 1) * a->dil[0] + 1;
    int64_t y0 = o0 * a->stride[0], y1 = y0 + (nb - 1) * a->stride[0] + keff, pt = 0, pb = 0;
    if (direct) { /* rows of the unpadded image, oneDNN pads */
        y0 -= a->pad[0], y1 -= a->pad[0];
        pt = y0 < 0 ? -y0 : 0;
        pb = y1 > hp ? y1 - hp : 0;
        y0 = y0 < 0 ? 0 : y0;
        y1 = y1 > hp ? hp : y1;
    }
    *k = (qkey){.threads = tsi_dnnl_threads(),
                .n = 1, /* the primitive runs one image */
                .c = a->c,
                .hp = y1 - y0,
                .wp = wp,
                .cout = a->cout,
                .kh = a->kh,
                .kw = a->kw,
                .oh = nb,
                .ow = a->ow,
                .g = a->groups,
                .sh = a->stride[0],
                .sw = a->stride[1],
                .dh = a->dil[0],
                .dw = a->dil[1],
                .pt = pt,
                .pb = pb,
                .pw = direct ? a->pad[1] : 0};
    *row0 = y0;
}

/* the band height in output rows: the whole image, or rows of about BAND_BYTES of sums a thread,
 * balanced over the bands */
static int64_t band_rows(const ts_qconv_args *a, int threads) {
    const int64_t row = a->ow * a->cout * (int64_t)sizeof(int32_t),
                  want = atomic_load(&band_bytes) * (threads > 0 ? threads : 1);
    if (row * a->oh <= want) return a->oh;
    const int64_t bh = want / row > 0 ? want / row : 1, nbands = (a->oh + bh - 1) / bh;
    return (a->oh + nbands - 1) / nbands;
}

static band_slot *slot_of(band_slot *slots, int nslots, const qentry *e) {
    for (int i = 0; i < nslots; i++)
        if (slots[i].e == e) return &slots[i];
    return NULL;
}

static const band_slot *slot_by_key(const band_slot *slots, int nslots, const qkey *k) {
    for (int i = 0; i < nslots; i++)
        if (!memcmp(&slots[i].e->key, k, sizeof *k)) return &slots[i];
    return NULL;
}

/* The primitives of the bands of height bh into slots (with their memory objects); false when
 * oneDNN declined one, or they would want the weights in different layouts (one cached copy). */
static bool plan_bands(const ts_qconv_args *a, bool direct, int64_t hp, int64_t wp, int64_t bh,
                       band_slot *slots, int *nslots) {
    *nslots = 0;
    for (int64_t o0 = 0; o0 < a->oh; o0 += bh) {
        const int64_t nb = a->oh - o0 < bh ? a->oh - o0 : bh;
        qkey k;
        int64_t row0;
        band_key(a, direct, hp, wp, o0, nb, &k, &row0);
        if (k.hp <= 0) return false; /* a band wholly in the padding: run the image whole */
        const qentry *e = lookup(&k);
        if (!e->prim) return false;
        if (slot_of(slots, *nslots, e)) continue;
        if (*nslots == MAX_SLOTS ||
            (*nslots && !dnnl_memory_desc_equal(&e->wprim, &slots[0].e->wprim)))
            return false;
        slots[(*nslots)++] = (band_slot){e, e->ms, e->md};
    }
    return true;
}

static void free_slots(band_slot *slots, int *nslots) {
    (void)slots; /* the memory objects are the entries' */
    *nslots = 0;
}

/* ------------------------------------------------------------------ the call */
tsi_qdnnl_status tsi_qconv_dnnl(const ts_qconv_args *a) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    if (!engine || !tsi_qconv_dnnl_fits(a)) return TSI_QDNNL_DECLINED;
    /* direct: the channels_last input read where it lies, padded by oneDNN with the u8 zero,
     * which is x_zp's byte only when x_zp is 0 */
    const bool direct =
        a->x_nhwc && a->x_unsigned && (a->x_zp == 0 || (a->pad[0] == 0 && a->pad[1] == 0));
    const int64_t N = a->n, C = a->c, CO = a->cout, OW = a->ow, P = a->oh * OW,
                  hp = direct ? a->h : a->h + 2 * a->pad[0],
                  wp = direct ? a->w : a->w + 2 * a->pad[1];
    const uint8_t flip = a->x_unsigned ? 0 : 0x80;
    const int32_t xzp = a->x_zp + (a->x_unsigned ? 0 : 128);
    const int64_t L = CO * 16 /
                      (CO % 16 == 0  ? 16
                       : CO % 8 == 0 ? 8
                       : CO % 4 == 0 ? 4
                       : CO % 2 == 0 ? 2
                                     : 1);
    tsi_qdnnl_status st = TSI_QDNNL_DECLINED;
    ts_block *blk = NULL, *wblk = NULL, *sblk = NULL;
    tsi_wcache_entry *wref = NULL;
    dnnl_memory_t mw = NULL, msp = NULL;
    band_slot slots[MAX_SLOTS];
    int nslots = 0;
    pthread_mutex_lock(&cache_lock);
    /* the bands' primitives; the whole image when they cannot be had */
    int64_t bh = band_rows(a, tsi_dnnl_threads());
    if (!plan_bands(a, direct, hp, wp, bh, slots, &nslots)) {
        free_slots(slots, &nslots);
        bh = a->oh;
        if (!plan_bands(a, direct, hp, wp, bh, slots, &nslots)) goto done;
    }
    /* one stream, made once: used under the lock only */
    static dnnl_stream_t stream;
    if (!stream && dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        stream = NULL;
        goto done;
    }
    /* one image at a time, a band of rows at a time: its copy, sums and bytes stay in cache (the
     * whole batch's s32 sums in one call: batch 32 of ResNet-50's 56x56 layers ran 2x slower than
     * the own kernels) */
    const size_t xb = direct ? 0 : ((size_t)(hp * wp * C) + 63) & ~(size_t)63,
                 yb = ((size_t)(bh * OW * CO) * sizeof(int32_t) + 63) & ~(size_t)63,
                 rb = (size_t)L * (sizeof(int32_t) + 2 * sizeof(float)),
                 tb = a->out_nhwc ? 0 : ((size_t)(P * CO) + 63) & ~(size_t)63;
    const qentry *e0 = slots[0].e;
    const size_t wbytes = dnnl_memory_desc_get_size(&e0->wprim),
                 wsum_off = (wbytes + 63) & ~(size_t)63,
                 wall = wsum_off + (size_t)(CO + 1) * sizeof(int32_t);
    uint8_t *buf = tsi_host_scratch_get(xb + yb + rb + tb, &blk);
    if (!buf) {
        tsi_kernel_oom("qlinear_conv2d", xb + yb + rb + tb);
        st = TSI_QDNNL_FAILED;
        goto done;
    }
    uint8_t *xpad = buf, *tmp = buf + xb + yb + rb;
    int32_t *acc = (int32_t *)(void *)(buf + xb), *rowc = (int32_t *)(void *)(buf + xb + yb);
    float *fm = (float *)(void *)(rowc + L), *fb = fm + L;
    /* the weights and their channel sums: cached, or made in scratch for this call */
    wfill wf = {e0, a, stream, wsum_off};
    const void *wbuf = NULL;
    if (a->w_uid) {
        const tsi_conv_weight_id wid = {a->w_uid, a->w_version, a->w_offset};
        wlayout lay;
        memset(&lay, 0, sizeof lay);
        lay.md = e0->wprim;
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
    const bool check = !wsum[CO];
    for (int64_t co = 0; co < CO; co++) /* int32 wrap-around, as ORT's sums */
        rowc[co] = (int32_t)(uint32_t)((uint64_t)(a->bias ? (int64_t)a->bias[co] : 0) -
                                       (uint64_t)((int64_t)xzp * wsum[co]));
    for (int64_t i = 0; i < L; i += CO) { /* repeated over L = lcm(CO, 16) for requant_flat */
        memcpy(rowc + i, rowc, (size_t)CO * sizeof *rowc);
        memcpy(fm + i, a->fmult, (size_t)CO * sizeof *fm);
        if (a->acc_fbias) memcpy(fb + i, a->acc_fbias, (size_t)CO * sizeof *fb);
    }
    mw = e0->mw;
    if (dnnl_memory_set_data_handle(mw, (void *)wbuf) != dnnl_success) goto done;
    size_t scratch = 0;
    for (int i = 0; i < nslots; i++)
        scratch = slots[i].e->scratch > scratch ? slots[i].e->scratch : scratch;
    if (scratch && !tsi_dnnl_scratchpad(scratch, &msp, &sblk)) goto done;
    int bad = 0;
    const int64_t row_bytes = wp * C; /* a row of the input oneDNN reads (wp = w when direct) */
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *xn = (const uint8_t *)a->x + n * C * a->h * a->w;
        if (!direct) pad_nhwc(a, xn, hp, wp, (uint8_t)xzp, flip, xpad);
        const uint8_t *src = direct ? xn : xpad;
        uint8_t *on = (uint8_t *)a->out + n * CO * P;
        for (int64_t o0 = 0; o0 < a->oh; o0 += bh) {
            const int64_t nb = a->oh - o0 < bh ? a->oh - o0 : bh;
            qkey k;
            int64_t row0;
            band_key(a, direct, hp, wp, o0, nb, &k, &row0);
            const band_slot *sl = slot_by_key(slots, nslots, &k); /* planned above */
            if (!sl ||
                dnnl_memory_set_data_handle(sl->ms, (void *)(src + row0 * row_bytes)) !=
                    dnnl_success ||
                dnnl_memory_set_data_handle(sl->md, acc) != dnnl_success)
                goto done;
            dnnl_exec_arg_t args[4] = {
                {DNNL_ARG_SRC, sl->ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, sl->md}};
            int nargs = 3;
            if (msp) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, msp};
            if (dnnl_primitive_execute(sl->e->prim, stream, nargs, args) != dnnl_success ||
                dnnl_stream_wait(stream) != dnnl_success)
                goto done;
            bad |= !requant_flat(a, acc, nb * OW * CO, rowc, fb, fm, L, check,
                                 (a->out_nhwc ? on : tmp) + o0 * OW * CO);
        }
        if (!a->out_nhwc) transpose(tmp, CO, P, CO, on, P, 0);
    }
    if (bad) {
        atomic_fetch_add(&inexact, 1);
        goto done;
    }
    atomic_fetch_add(&runs, 1);
    if (direct) atomic_fetch_add(&direct_runs, 1);
    if (bh < a->oh) atomic_fetch_add(&banded_runs, 1);
    st = TSI_QDNNL_DONE;
done:
    free_slots(slots, &nslots);
    if (msp) dnnl_memory_destroy(msp);
    tsi_host_scratch_put(sblk);
    pthread_mutex_unlock(&cache_lock);
    tsi_wcache_release(wref);
    tsi_host_scratch_put(wblk);
    tsi_host_scratch_put(blk);
    return st;
}
#endif
