/* test_kern_random.c — the CPU random kernel and philox.h: known-answer Philox vectors, value
 * ranges, moments and the normal's shape (Kolmogorov-Smirnov), and the stream layout (strided
 * outputs, offsets, thread counts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_kernels.h"
#include "backend/kernel_math.h"
#include "backend/philox.h"
#include "kern_access.h"
#include "stats.h"
#include "ts_test.h"

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        bool ok_ = (cond);                                                                         \
        ts_test_record(ok_);                                                                       \
        if (!ok_) ts_test_failf(__FILE__, __LINE__, __VA_ARGS__);                                  \
    } while (0)

static void gen(ts_random_kind kind, ts_dtype dt, void *data, int nd, const int64_t *shape,
                const int64_t *strides, double p0, double p1, uint64_t seed, uint64_t offset) {
    ts_kview v = kv(data, dt, nd, shape, strides);
    tsi_cpu_random(NULL, 0, kind, &v, p0, p1, seed, offset);
}

static void test_random(void) {
    /* Philox-4x32-10 known-answer vectors (Random123 kat_vectors) */
    {
        uint32_t out[4];
        ts_philox4x32_10((const uint32_t[4]){0, 0, 0, 0}, (const uint32_t[2]){0, 0}, out);
        CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu &&
              out[3] == 0x9b00dbd8u);
        ts_philox4x32_10((const uint32_t[4]){~0u, ~0u, ~0u, ~0u}, (const uint32_t[2]){~0u, ~0u},
                         out);
        CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u &&
              out[3] == 0x6d5451fdu);
        ts_philox4x32_10((const uint32_t[4]){0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                         (const uint32_t[2]){0xa4093822u, 0x299f31d0u}, out);
        CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdcceb && out[2] == 0x5001e420u &&
              out[3] == 0x24126ea1u);
    }
    enum { N = 100000 };
    int64_t sh[1] = {N}, st[1] = {1};
    double *d = malloc(N * sizeof *d), *d2 = malloc(N * sizeof *d2);
    float *f = malloc(N * sizeof *f), *f2 = malloc(N * sizeof *f2);
    int64_t *iv = malloc(N * sizeof *iv);
    /* uniform: range and mean, f32 and f64; the f32 stream is the one philox.h defines */
    gen(TS_RAND_UNIFORM, TS_F32, f, 1, sh, st, 2.0, 5.0, 42, 0);
    gen(TS_RAND_UNIFORM, TS_F64, d, 1, sh, st, 2.0, 5.0, 42, 0);
    double sf = 0, sd = 0;
    int out_of_range = 0;
    for (int i = 0; i < N; i++) {
        out_of_range += !(f[i] >= 2.0f && f[i] < 5.0f) + !(d[i] >= 2.0 && d[i] < 5.0);
        sf += f[i];
        sd += d[i];
    }
    CHECK_EQ(out_of_range, 0);
    CHECK_NEAR(sf / N, 3.5, 0.02);
    CHECK_NEAR(sd / N, 3.5, 0.02);
    CHECK((float)(2.0 + 3.0 * ts_philox_uniform_at(42, 12345, 0)) == f[12345]);
    CHECK(2.0 + 3.0 * ts_philox_uniform_at(42, 777, 1) == d[777]);
    /* normal: mean and std */
    for (int t = 0; t < 2; t++) {
        if (t == 0)
            gen(TS_RAND_NORMAL, TS_F32, f, 1, sh, st, 1.0, 2.0, 7, 3);
        else
            gen(TS_RAND_NORMAL, TS_F64, d, 1, sh, st, 1.0, 2.0, 7, 3);
        double s = 0, s2 = 0;
        for (int i = 0; i < N; i++) {
            double v = t == 0 ? f[i] : d[i];
            s += v;
            s2 += v * v;
        }
        double mean = s / N, sdv = sqrt(s2 / N - mean * mean);
        CHECK_NEAR(mean, 1.0, 0.03);
        CHECK_NEAR(sdv, 2.0, 0.03);
        /* and the shape: Kolmogorov-Smirnov against the normal CDF (erfc), false alarms 1e-9 */
        double *z = malloc(N * sizeof *z);
        for (int i = 0; i < N; i++) z[i] = ((t == 0 ? f[i] : d[i]) - 1.0) / 2.0;
        double ks = ts_stats_ks(z, N, ts_stats_normal_cdf);
        CHECK(ks <= ts_stats_ks_critical(N, 1e-9));
        free(z);
    }
    CHECK_NEAR(1.0 + 2.0 * ts_philox_normal_at(7, 3 + 999, 1), d[999], 1e-15);
    /* bernoulli and randint */
    gen(TS_RAND_BERNOULLI, TS_F32, f, 1, sh, st, 0.3, 0, 9, 0);
    double ones = 0;
    int non01 = 0;
    for (int i = 0; i < N; i++) ones += f[i], non01 += f[i] != 0.0f && f[i] != 1.0f;
    CHECK_EQ(non01, 0);
    CHECK_NEAR(ones / N, 0.3, 0.01);
    gen(TS_RAND_RANDINT, TS_I64, iv, 1, sh, st, -3, 7, 9, 0);
    int counts[10] = {0}, outside = 0;
    for (int i = 0; i < N; i++) {
        if (iv[i] < -3 || iv[i] >= 7)
            outside++;
        else
            counts[iv[i] + 3]++;
    }
    CHECK_EQ(outside, 0);
    for (int k = 0; k < 10; k++) CHECK_NEAR(counts[k], N / 10, 500);
    /* contiguous vs strided output: same numbers at the same row-major position */
    {
        int64_t s2[2] = {200, 500}, cs[2] = {500, 1}, ts[2] = {1, 200};
        for (int kind = 0; kind < 4; kind++) {
            ts_dtype dt = kind == TS_RAND_RANDINT  ? TS_I32
                          : kind == TS_RAND_NORMAL ? TS_F64
                                                   : TS_F32;
            char *a = malloc(N * esz(dt)), *b = malloc(N * esz(dt));
            gen((ts_random_kind)kind, dt, a, 2, s2, cs, 0, 10, 1234, 77);
            gen((ts_random_kind)kind, dt, b, 2, s2, ts, 0, 10, 1234, 77);
            int bad = 0;
            for (int64_t i = 0; i < 200; i++)
                for (int64_t j = 0; j < 500; j++)
                    bad += get(dt, a, i * 500 + j) != get(dt, b, i + j * 200);
            EXPECT(bad == 0, "random kind %d: strided output differs (%d)", kind, bad);
            free(a);
            free(b);
        }
    }
    /* counter property: element i of a tensor from offset 0 == element 0 from offset i */
    for (int kind = 0; kind < 4; kind++)
        for (int t = 0; t < 2; t++) {
            ts_dtype dt = kind == TS_RAND_RANDINT ? (t ? TS_I64 : TS_I32) : (t ? TS_F64 : TS_F32);
            int64_t s1[1] = {1000}, s5[1] = {5};
            char *a = malloc(1000 * 8), *b = malloc(5 * 8);
            gen((ts_random_kind)kind, dt, a, 1, s1, st, -1, 100, 99, 0);
            int bad = 0;
            for (int64_t i = 0; i < 995; i += 37) {
                gen((ts_random_kind)kind, dt, b, 1, s5, st, -1, 100, 99, (uint64_t)i);
                for (int k = 0; k < 5; k++) bad += get(dt, b, k) != get(dt, a, i + k);
            }
            EXPECT(bad == 0, "random kind %d dtype %d: counter property broken (%d)", kind, dt,
                   bad);
            free(a);
            free(b);
        }
#ifdef TS_HAVE_OPENMP
    /* thread count does not matter */
    for (int kind = 0; kind < 4; kind++) {
        omp_set_num_threads(1);
        gen((ts_random_kind)kind, TS_F32, f, 1, sh, st, 0, 3, 5, 11);
        omp_set_num_threads(2);
        gen((ts_random_kind)kind, TS_F32, f2, 1, sh, st, 0, 3, 5, 11);
        EXPECT(memcmp(f, f2, N * sizeof *f) == 0, "random kind %d depends on threads", kind);
    }
#endif
    /* f16/bf16 and integer outputs stay in range */
    {
        uint16_t h[1000];
        uint8_t u[1000];
        float fl[1000];
        int64_t s1[1] = {1000};
        gen(TS_RAND_UNIFORM, TS_F16, h, 1, s1, st, -1, 1, 3, 0);
        int bad = 0;
        for (int i = 0; i < 1000; i++) bad += !(fabsf(ts_f16_to_f32(h[i])) <= 1.0f);
        gen(TS_RAND_NORMAL, TS_BF16, h, 1, s1, st, 0, 1, 3, 0);
        for (int i = 0; i < 1000; i++) bad += !(fabsf(ts_bf16_to_f32(h[i])) < 7.0f);
        gen(TS_RAND_BERNOULLI, TS_BOOL, u, 1, s1, st, 0.5, 0, 3, 0);
        for (int i = 0; i < 1000; i++) bad += u[i] > 1;
        gen(TS_RAND_RANDINT, TS_U8, u, 1, s1, st, 0, 10, 3, 0);
        for (int i = 0; i < 1000; i++) bad += u[i] >= 10;
        gen(TS_RAND_RANDINT, TS_F32, fl, 1, s1, st, -5, 5, 3, 0);
        for (int i = 0; i < 1000; i++) bad += !(fl[i] >= -5 && fl[i] < 5 && fl[i] == floorf(fl[i]));
        CHECK_EQ(bad, 0);
    }
    /* a 0-dim output is element 0 of the stream at `offset` */
    {
        float one = -1;
        gen(TS_RAND_UNIFORM, TS_F32, &one, 0, NULL, NULL, 0, 1, 8, 123);
        CHECK(one == (float)ts_philox_uniform_at(8, 123, 0));
    }
    free(iv);
    free(f2);
    free(f);
    free(d2);
    free(d);
}

int main(void) {
    test_random();
    return ts_test_finish();
}
