/* test_special_airy.c — torch.special.airy_ai (ts_airy_ai, kernel_math_special.h's ts_airy_ai_d) on
 * every device: float64 against values of mpmath 1.3's airyai at 40 digits (correctly rounded to
 * double; Ai(0) = 0.35502805388781723926 is also Abramowitz & Stegun 10.4.4) in each region of the
 * method (the Taylor steps about the nodes, their edges at odd multiples of 1/8, both sides of
 * |x| = 10 where the asymptotic expansions take over, large |x| where zeta's last bits decide, a
 * zero, the subnormal tail); float32 as the rounded float64; PyTorch's edges (NaN at +-inf);
 * result dtypes; strided inputs; the refusal under a graph (PyTorch has no derivative). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "tessera/special.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* (x, Ai(x)): mpmath.airyai(x) at mp.dps = 40, float() of it */
static const double table[][2] = {
    {0.0, 0.3550280538878172},
    {1e-300, 0.3550280538878172},
    {-0.0, 0.3550280538878172},
    {0.1, 0.3292031299435381},
    {-0.1, 0.3808486681201215},
    {0.125, 0.32278593902677793},
    {-0.125, 0.38725965240839577},
    {0.3, 0.2788064819550049},
    {-0.7, 0.5110003975750101},
    {1.0, 0.13529241631288141},
    {-1.0, 0.5355608832923521},
    {1.875, 0.04212963624499835},
    {-2.09, 0.17005055173203004},
    {2.09, 0.03042031836319838},
    {3.125, 0.005247362754352638},
    {-3.375, -0.40798010467638945},
    {5.0, 0.00010834442813607442},
    {-5.0, 0.35076100902411433},
    {7.7, 1.0976168502027779e-07},
    {-7.9, 0.041701883617386706},
    {9.875, 1.643377581429377e-10},
    {-9.875, 0.15848608645287116},
    {9.99, 1.1405176956374916e-10},
    {-9.99, 0.0501821171621398},
    {10.0, 1.1047532552898686e-10},
    {-10.0, 0.04024123848644319},
    {10.01, 1.0700936543950783e-10},
    {-10.01, 0.03026012358586105},
    {12.5, 2.39682782607805e-14},
    {-12.5, -0.27627456138116024},
    {15.0, 2.1649625207379925e-18},
    {-15.0, 0.2782174908708289},
    {20.0, 1.6916728686705404e-27},
    {-20.0, -0.1764061270779847},
    {25.77, 1.6642658723814695e-39},
    {-25.77, 0.008220733765676834},
    {37.0, 7.8697207468866e-67},
    {-37.0, 0.006853376908681703},
    {50.0, 4.5849417240748285e-104},
    {-50.0, -0.1618814236123209},
    {100.0, 2.6344821520881846e-291},
    {-100.0, 0.1767533932395529},
    {-1000.0, 0.05597189577301992},
    {-123456.75, -0.02278084256866237},
    /* the double nearest the first zero a1 = -2.338107410459767038489 (mpmath.airyaizero(1)) */
    {-2.338107410459767, 2.743319340666283e-17},
};
enum { NT = sizeof table / sizeof *table };

/* the scale errors are measured against: |Ai| for x >= 0 (it decays: relative accuracy); the
 * envelope |x|^(-1/4) / sqrt(pi) of the oscillation for x < 0 (near a zero only the absolute error
 * means anything: the input's own rounding moves Ai by ~eps |x Ai'|) */
static double scale(double x, double ai) {
    return x >= 0 ? fabs(ai) : pow(fmax(-x, 1.0), -0.25) / sqrt(3.14159265358979323846);
}

/* Each result within 4.5 eps (1e-15) of its scale: the node values are correctly rounded (0.5
 * ulp), the Taylor sum of |h| <= 1/8 adds about one; the asymptotic forms round exp / sin / cos,
 * the fourth root and the sums (a few ulp in all); measured worst over [-40, 40]: 2.9. */
static void test_values(void) {
    double x[NT], got[NT];
    for (int i = 0; i < NT; i++) x[i] = table[i][0];
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *t = ts_to(ts_tensor_f64(TS_SHAPE(NT), x, (ts_opts){.dtype = TS_F64}), devs[di]);
        ts_tensor *y = ts_airy_ai(t);
        CHECK(y && ts_dtype_of(y) == TS_F64 && ts_device_equal(ts_device_of(y), devs[di]));
        if (rd(y, got, NT)) {
            double worst = 0;
            int at = 0;
            for (int i = 0; i < NT; i++) {
                const double e = fabs(got[i] - table[i][1]) / scale(x[i], table[i][1]);
                if (!(e <= worst)) worst = e, at = i;
            }
            ts_test_record(worst <= 4.5 * DBL_EPSILON);
            if (!(worst <= 4.5 * DBL_EPSILON))
                ts_test_failf(__FILE__, __LINE__,
                              "airy_ai f64 on %s: x = %.17g got %.17g want %.17g (%.2f eps)",
                              ts_device_str(devs[di]), x[at], got[at], table[at][1],
                              worst / DBL_EPSILON);
        } else {
            CHECK(false);
        }
        /* float32: the float64 result rounded (an input rounded to float first: these x are) */
        float xf[NT];
        for (int i = 0; i < NT; i++) xf[i] = (float)x[i];
        ts_tensor *tf = ts_to(ts_tensor_f32(TS_SHAPE(NT), xf, (ts_opts){0}), devs[di]);
        ts_tensor *yf = ts_airy_ai(tf);
        CHECK(yf && ts_dtype_of(yf) == TS_F32);
        ts_tensor *yd = ts_airy_ai(ts_to_dtype(tf, TS_F64));
        double gf[NT], gd[NT];
        if (rd(yf, gf, NT) && rd(yd, gd, NT)) {
            int bad = -1;
            for (int i = 0; i < NT; i++)
                if (gf[i] != (double)(float)gd[i]) bad = i;
            CHECK(bad < 0);
        } else {
            CHECK(false);
        }
        ts_scope_end();
    }
}

/* x = 103.9: Ai = 2.0652690463570116e-308 is subnormal (PyTorch gives 0 above 103.892); within a
 * few units of the last place there, 0 once e^-zeta is below the smallest subnormal */
static void test_tail_and_edges(void) {
    const double x[7] = {103.9, 800, 1e300, INFINITY, -INFINITY, NAN, -1e300};
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        double got[7];
        ts_tensor *t = ts_to(ts_tensor_f64(TS_SHAPE(7), x, (ts_opts){.dtype = TS_F64}), devs[di]);
        CHECK(rd(ts_airy_ai(t), got, 7));
        CHECK(fabs(got[0] - 2.0652690463570116e-308) <= 8 * 4.9406564584124654e-324);
        CHECK(got[1] == 0 && got[2] == 0 && !signbit(got[1]));
        CHECK(isnan(got[3]) && isnan(got[4]) && isnan(got[5]));
        CHECK(isnan(got[6]) || fabs(got[6]) < 1e-70); /* zeta overflows: PyTorch's NaN too */
        /* a strided (transposed) input gives the same values as its contiguous copy */
        double v[6] = {-3, -1.5, 0, 1.5, 3, 11}, a[6], b[6];
        ts_tensor *m =
            ts_to(ts_tensor_f64(TS_SHAPE(2, 3), v, (ts_opts){.dtype = TS_F64}), devs[di]);
        ts_tensor *tr = ts_transpose(m, 0, 1);
        CHECK(rd(ts_contiguous(ts_airy_ai(tr)), a, 6) && rd(ts_airy_ai(ts_contiguous(tr)), b, 6));
        CHECK(memcmp(a, b, sizeof a) == 0);
        /* integers and bool compute in float32 (PyTorch's dtype) */
        const double iv[3] = {-1, 0, 2};
        ts_tensor *ti =
            ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(3), iv, (ts_opts){0}), TS_I64), devs[di]);
        ts_tensor *yi = ts_airy_ai(ti), *yb = ts_airy_ai(ts_to_dtype(ti, TS_BOOL));
        double gi[3];
        CHECK(yi && ts_dtype_of(yi) == TS_F32 && yb && ts_dtype_of(yb) == TS_F32);
        CHECK(rd(yi, gi, 3) && gi[1] == (double)(float)0.3550280538878172 &&
              gi[0] == (double)(float)0.5355608832923521);
        ts_scope_end();
    }
}

/* PyTorch has no derivative: under a graph the call is refused, naming the op; detached it runs */
static void test_refusals(void) {
    ts_scope_begin();
    const double v[2] = {0.5, -0.5};
    ts_tensor *g = ts_tensor_f64(TS_SHAPE(2), v, (ts_opts){.dtype = TS_F64, .requires_grad = true});
    CHECK(ts_airy_ai(g) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "airy_ai: autograd is not implemented");
    ts_tensor *y = ts_airy_ai(ts_detach(g));
    CHECK(y && !ts_requires_grad(y));
    CHECK(ts_airy_ai(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_tail_and_edges();
    test_refusals();
    return ts_test_finish();
}
