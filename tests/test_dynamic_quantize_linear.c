/* test_dynamic_quantize_linear.c — ts_dynamic_quantize_linear, ONNX's DynamicQuantizeLinear
 * (include/tessera/quant.h, src/ops/dynamic_quantize_linear.c).
 *
 * References: a hand case whose scale is exactly 1 (ties to even, both ends, the zero point); the
 * definition written out here step by step in float32 on 1000 + 13 values (the cpu pass's vector
 * body and tail); the cpu pass against the tensor-op composition (a sim device runs that route)
 * bit for bit; an empty range; all negative (the range still reaches 0); values ending at an
 * unreadable page (the vector pass's tail reads nothing past the end); NaN takes the composed
 * route; the refusals. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__)
#include <dlpack/dlpack.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "tessera/quant.h"
#include "ts_test.h"

static bool run(ts_tensor *x, uint8_t *y, float *s, uint8_t *z, int64_t n) {
    ts_tensor *ts = NULL, *tz = NULL;
    ts_tensor *ty = ts_dynamic_quantize_linear(x, &ts, &tz);
    if (!ty || !ts || !tz) return false;
    CHECK_EQ(ts_dtype_of(ty), TS_U8);
    CHECK_EQ(ts_dtype_of(ts), TS_F32);
    CHECK_EQ(ts_dtype_of(tz), TS_U8);
    CHECK_EQ(ts_ndim(ts), 0);
    return ts_copy_to_host(ts_to(ty, ts_cpu()), y, (size_t)n) == TS_OK &&
           ts_copy_to_host(ts_to(ts, ts_cpu()), s, sizeof *s) == TS_OK &&
           ts_copy_to_host(ts_to(tz, ts_cpu()), z, 1) == TS_OK;
}

/* ONNX's formulas, each step one float32 operation */
static void reference(const float *x, int64_t n, uint8_t *y, float *s, uint8_t *z) {
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    const float sc = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    const float zf = nearbyintf(fminf(fmaxf(-lo / sc, 0.0f), 255.0f));
    for (int64_t i = 0; i < n; i++) {
        const float v = nearbyintf(x[i] / sc) + zf;
        y[i] = (uint8_t)fminf(fmaxf(v, 0.0f), 255.0f);
    }
    *s = sc, *z = (uint8_t)zf;
}

static void test_hand(void) {
    ts_scope_begin();
    /* range [-100, 155]: scale 255 / 255 = 1, zero point 100 */
    const float xv[] = {-100, 155, 2.5f, 3.5f, -0.5f, 7.49f, 0, -2.5f};
    const uint8_t want[] = {0, 255, 102, 104, 100, 107, 100, 98};
    uint8_t y[8], z;
    float s;
    CHECK(run(ts_tensor_f32(TS_SHAPE(2, 4), xv, (ts_opts){0}), y, &s, &z, 8));
    CHECK_EQ(s, 1.0f);
    CHECK_EQ(z, 100);
    for (int i = 0; i < 8; i++) CHECK_EQ(y[i], want[i]);
    /* all zero: scale 1, zero point 0; all positive: zero point 0 */
    const float zeros[3] = {0, 0, 0}, pos[3] = {1, 2, 5.1f};
    CHECK(run(ts_tensor_f32(TS_SHAPE(3), zeros, (ts_opts){0}), y, &s, &z, 3));
    CHECK(s == 1.0f && z == 0 && y[0] == 0 && y[2] == 0);
    CHECK(run(ts_tensor_f32(TS_SHAPE(3), pos, (ts_opts){0}), y, &s, &z, 3));
    CHECK(z == 0 && y[2] == 255);
    /* all negative: the range is [-5.1, 0], so the zero point is 255 and the largest value 0
     * maps to it (a range ending at -1 would give scale 4.1 / 255 and y[1] = 255) */
    const float neg[3] = {-1, -2, -5.1f};
    uint8_t wy[3], wz;
    float ws;
    reference(neg, 3, wy, &ws, &wz);
    CHECK(run(ts_tensor_f32(TS_SHAPE(3), neg, (ts_opts){0}), y, &s, &z, 3));
    CHECK(z == 255 && wz == 255 && s == ws && y[2] == 0 && memcmp(y, wy, 3) == 0);
    CHECK_OK();
    ts_scope_end();
}

static void test_random(void) {
    ts_scope_begin();
    const int64_t n = 1013;
    float *x = malloc(sizeof *x * (size_t)n);
    uint8_t *y = malloc((size_t)n), *want = malloc((size_t)n), *ysim = malloc((size_t)n);
    uint64_t r = 88172645463325252ull;
    for (int shift = 0; shift < 3; shift++) {
        for (int64_t i = 0; i < n; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            x[i] = (float)((double)(r % 2000001) / 1e5 - 10.0 + 4.0 * shift); /* [-10, 10] + 4s */
        }
        float s, sw, ssim;
        uint8_t z, zw, zsim;
        reference(x, n, want, &sw, &zw);
        ts_tensor *t = ts_tensor_f32(TS_SHAPE(n), x, (ts_opts){0});
        CHECK(run(t, y, &s, &z, n));
        CHECK_EQ(s, sw);
        CHECK_EQ(z, zw);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += y[i] != want[i];
        CHECK_EQ(bad, 0);
        /* the composed route (sim) gives the same bytes */
        CHECK(run(ts_to(t, ts_sim(0)), ysim, &ssim, &zsim, n));
        CHECK(ssim == s && zsim == z && memcmp(ysim, y, (size_t)n) == 0);
    }
    free(x), free(y), free(want), free(ysim);
    CHECK_OK();
    ts_scope_end();
}

static void test_edges(void) {
    ts_scope_begin();
    /* NaN or an infinity anywhere (either half of the AVX2 step, the tail): the cpu takes the
     * composed route too, so its bytes are the sim's (what those ops make of NaN; no guess) */
    const int64_t at[] = {9, 20, 37};
    for (int c = 0; c < 6; c++) {
        float v[40];
        for (int i = 0; i < 40; i++) v[i] = (float)(i % 7) - 3.0f;
        v[at[c % 3]] = c < 3 ? NAN : -INFINITY;
        uint8_t y[40], ys[40], z1, z2;
        float s1, s2;
        ts_tensor *t = ts_tensor_f32(TS_SHAPE(40), v, (ts_opts){0});
        const bool a = run(t, y, &s1, &z1, 40), b = run(ts_to(t, ts_sim(0)), ys, &s2, &z2, 40);
        CHECK_EQ(a, b);
        if (a && b) CHECK(memcmp(y, ys, 40) == 0 && memcmp(&s1, &s2, 4) == 0 && z1 == z2);
        ts_error_clear();
    }
    const float nanv[] = {1.0f, NAN, -1.0f};
    ts_tensor *s = NULL, *z = NULL;
    CHECK(!ts_dynamic_quantize_linear(ts_tensor_f32(TS_SHAPE(3), nanv, (ts_opts){0}), NULL, &z));
    CHECK_ERR_HAS(TS_ERR_ARG, "dynamic_quantize_linear: scale and zero_point");
    CHECK(!ts_dynamic_quantize_linear(ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I32}), &s, &z));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dynamic_quantize_linear: input must be float32");
    CHECK(!s && !z);
    CHECK_OK();
    ts_scope_end();
}

#if defined(__unix__)
static void keep_foreign(DLManagedTensor *m) { (void)m; /* the test unmaps the pages */ }

/* n values ending where an unreadable page begins, shared with the library through DLPack:
 * reading one value past the end faults. 32: two whole AVX2 steps, no tail; 37: a tail of 5 */
static void test_guard_page(int n) {
    enum { N = 40 };
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED) return;
    CHECK(mprotect(p + pg, pg, PROT_NONE) == 0);
    float *x = (float *)(void *)(p + pg) - n;
    for (int i = 0; i < n; i++) x[i] = (float)(i % 9) - 2.5f;
    int64_t shape[1] = {n};
    DLManagedTensor m = {.dl_tensor = {.data = x,
                                       .device = {kDLCPU, 0},
                                       .ndim = 1,
                                       .dtype = {kDLFloat, 32, 1},
                                       .shape = shape},
                         .deleter = keep_foreign};
    uint8_t y[N], want[N], z, zw;
    float s, sw;
    reference(x, n, want, &sw, &zw);
    ts_scope_begin();
    ts_tensor *t = ts_from_dlpack(&m);
    CHECK(t && run(t, y, &s, &z, n));
    CHECK(s == sw && z == zw && memcmp(y, want, (size_t)n) == 0);
    CHECK_OK();
    ts_scope_end(); /* the tensor goes before its pages */
    munmap(p, 2 * pg);
}
#endif

int main(void) {
    ts_sim_configure(1, 0);
    test_hand();
    test_random();
    test_edges();
#if defined(__unix__)
    test_guard_page(32);
    test_guard_page(37);
#endif
    return ts_test_finish();
}
