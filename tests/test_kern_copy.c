/* test_kern_copy.c — the f16/bf16 conversions and the CPU copy (all 64 dtype pairs) and fill
 * kernels, checked against plain double-precision references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_math.h"
#include "kern_elem_ref.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ f16 / bf16 conversions */
static void test_half_conversions(void) {
    /* every half pattern decodes to the reference value and survives the round trip */
    int bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = ref_f16_val((uint16_t)h);
        float got = ts_f16_to_f32((uint16_t)h);
        if (!(isnan(want) ? isnan(got) : (double)got == want && !signbit(got) == !signbit(want)))
            bad16++;
        uint16_t back = ts_f32_to_f16(got);
        if (isnan(want) ? !isnan(ref_f16_val(back)) : back != h) bad16++;
        want = ref_bf16_val((uint16_t)h);
        got = ts_bf16_to_f32((uint16_t)h);
        if (!(isnan(want) ? isnan(got) : (double)got == want)) badbf++;
        back = ts_f32_to_bf16(got);
        if (isnan(want) ? !isnan(ref_bf16_val(back)) : back != h) badbf++;
    }
    CHECK_EQ(bad16, 0);
    CHECK_EQ(badbf, 0);

    /* f32 -> half rounding: midpoints (ties) between neighbours, one f32 ulp either side,
     * subnormals, the overflow edge, and random bit patterns */
    bad16 = badbf = 0;
    float samples[64] = {0.0f,     -0.0f,    1.0f,        65504.0f,     65519.99f, 65520.0f,
                         65536.0f, 1e-8f,    2.98e-8f,    5.96e-8f,     6.1e-5f,   1e38f,
                         3.4e38f,  INFINITY, -INFINITY,   NAN,          1e-40f,    -1e-45f,
                         0.1f,     0.3f,     1.00390625f, 1.0009765625f};
    int ns = 22;
    for (uint32_t h = 0; h < 0x7c00; h += 7) { /* half ties and their neighbours */
        double lo = ref_f16_val((uint16_t)h), hi = ref_f16_val((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2);
        float c[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            if (ts_f32_to_f16(c[k]) != ref_f16(c[k])) bad16++;
            if (ts_f32_to_f16(-c[k]) != ref_f16(-c[k])) bad16++;
        }
    }
    for (uint32_t b = 0; b < 0x7f80; b += 3) { /* bf16 ties */
        float lo = (float)ref_bf16_val((uint16_t)b), hi = (float)ref_bf16_val((uint16_t)(b + 1));
        float mid = (float)(((double)lo + hi) / 2);
        float c[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++)
            if (ts_f32_to_bf16(c[k]) != ref_bf16(c[k])) badbf++;
    }
    uint32_t rng = 12345;
    for (int i = 0; i < 400000 + ns; i++) {
        float x;
        if (i < ns) {
            x = samples[i];
        } else {
            rng = rng * 1664525u + 1013904223u;
            uint32_t u = rng ^ (rng >> 13);
            memcpy(&x, &u, 4);
        }
        uint16_t h = ts_f32_to_f16(x), rh = ref_f16(x);
        if (isnan(x) ? !isnan(ref_f16_val(h)) : h != rh) bad16++;
        uint16_t b = ts_f32_to_bf16(x), rb = ref_bf16(x);
        if (isnan(x) ? !isnan(ref_bf16_val(b)) : b != rb) badbf++;
#ifdef __FLT16_MAX__ /* the compiler's own conversion as a second reference */
        _Float16 cf = (_Float16)x;
        uint16_t ch;
        memcpy(&ch, &cf, 2);
        if (!isnan(x) && ch != h) bad16++;
#endif
    }
    CHECK_EQ(bad16, 0);
    CHECK_EQ(badbf, 0);
    CHECK_EQ(ts_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ(ts_f32_to_f16(5.9604645e-8f / 2), 0); /* tie at half the smallest subnormal -> 0 */
    CHECK_EQ(ts_f32_to_f16(-3.0f * 5.9604645e-8f / 2), 0x8002); /* 1.5 ulp -> 2 (even) */
    CHECK_EQ(ts_f32_to_bf16(3.4028235e38f), 0x7f80);            /* rounds up into Inf */
}

/* ------------------------------------------------------------------ copy and fill */
#define NCV 16
static const double COPY_VALS[NCV] = {0,       -0.0, 1,    -1,  1.5,   -1.5, 2.5,  100.75,
                                      -100.75, 0.3,  1e-3, 255, 256.5, -3.7, 7000, 7};

static double ref_convert(ts_dtype to, double v) {
    if (isflt(to)) return to == TS_F64 ? v : as_dtype(to, (float)v);
    if (to == TS_BOOL) return v != 0;
    return as_dtype(to, trunc(v)); /* toward zero, then wrap through int64 */
}

static void test_copy(void) {
    for (int di = 0; di < NDT; di++) {
        for (int si = 0; si < NDT; si++) {
            ts_dtype D = ALL[di], S = ALL[si];
            char src[NCV * 8], dst[NCV * 8];
            double want[NCV];
            for (int i = 0; i < NCV; i++) {
                put(S, src, i, COPY_VALS[i]);
                want[i] = ref_convert(D, get(S, src, i));
            }
            char what[64];
            snprintf(what, sizeof what, "copy %s <- %s", ts_dtype_name(D), ts_dtype_name(S));
            /* contiguous */
            ts_kview vd = kv1(dst, D, NCV), vs = kv1(src, S, NCV);
            tsi_cpu_copy(NULL, 0, &vd, &vs);
            for (int i = 0; i < NCV; i++) expect_val(get(D, dst, i), want[i], D, what, i);
            /* transposed source into a contiguous 4x4 */
            int64_t sh[2] = {4, 4}, c[2] = {4, 1}, t[2] = {1, 4}, b[2] = {0, 1};
            vd = kv(dst, D, 2, sh, c), vs = kv(src, S, 2, sh, t);
            tsi_cpu_copy(NULL, 0, &vd, &vs);
            for (int i = 0; i < NCV; i++)
                expect_val(get(D, dst, i), want[(i % 4) * 4 + i / 4], D, what, i);
            /* broadcast row into a transposed destination */
            vd = kv(dst, D, 2, sh, t), vs = kv(src, S, 2, sh, b);
            tsi_cpu_copy(NULL, 0, &vd, &vs);
            for (int i = 0; i < NCV; i++) expect_val(get(D, dst, i), want[i / 4], D, what, i);
            group_done();
        }
    }
    /* specials between float types and to bool */
    const double sp[4] = {NAN, INFINITY, -INFINITY, -0.0};
    for (int di = 0; di < NDT; di++) {
        for (int si = 0; si < 4; si++) {
            ts_dtype D = ALL[di], S = ALL[si];
            if (!isflt(D) && D != TS_BOOL) continue;
            char src[32], dst[32];
            for (int i = 0; i < 4; i++) put(S, src, i, sp[i]);
            ts_kview vd = kv1(dst, D, 4), vs = kv1(src, S, 4);
            tsi_cpu_copy(NULL, 0, &vd, &vs);
            for (int i = 0; i < 4; i++)
                expect_val(get(D, dst, i), D == TS_BOOL ? (i < 3) : sp[i], D, "copy special", i);
            if (isflt(D)) CHECK(signbit(get(D, dst, 3)));
            group_done();
        }
    }
}

static void test_fill(void) {
    const double vals[3] = {2.5, -3.0, 0.0};
    for (int di = 0; di < NDT; di++) {
        for (int k = 0; k < 3; k++) {
            ts_dtype D = ALL[di];
            char buf[24 * 8];
            memset(buf, 0x5a, sizeof buf);
            ts_kview v = kv1(buf, D, 24);
            tsi_cpu_fill(NULL, 0, &v, vals[k]);
            for (int i = 0; i < 24; i++)
                expect_val(get(D, buf, i), ref_convert(D, vals[k]), D, "fill", i);
            /* strided: every other element, the rest untouched */
            int64_t n = 12, st = 2;
            memset(buf, 0, sizeof buf);
            v = kv(buf, D, 1, &n, &st);
            tsi_cpu_fill(NULL, 0, &v, 1.0);
            for (int i = 0; i < 24; i++) expect_val(get(D, buf, i), i % 2 ? 0 : 1, D, "fill", i);
            group_done();
        }
    }
}

int main(void) {
    test_half_conversions();
    test_copy();
    test_fill();
    return ts_test_finish();
}
