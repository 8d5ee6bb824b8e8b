/* test_nn_functional.c — linear, dropout, batch_norm, layer_norm and embedding on cpu and sim:0 in
 * f32 and f64 against PyTorch 1.13, their error paths, dropout statistics, running statistics,
 * and gradients (gradcheck in f64, and a few against PyTorch's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* Expected values: PyTorch 1.13 in float64, from this script (inputs are sin() sequences, made
 * the same way by seqt() below):
 *
 * import math, torch, torch.nn.functional as F
 * torch.set_default_dtype(torch.float64)
 * def seq(n, a, b, s=1.0): return torch.tensor([math.sin(a * i + b) * s for i in range(n)])
 * def out(name, t): print("static const double %s[] = {%s};" % (name, ", ".join("%.17g" % v for v
 * in t.flatten().tolist()))) x = seq(12, 1.3, 0.1).reshape(3, 4); w = seq(20, 0.7, 0.3,
 * 0.5).reshape(5, 4); b = seq(5, 2.1, 0.2) out("LIN_Y", F.linear(x, w, b)); out("LIN_Y_NOBIAS",
 * F.linear(x, w)) out("LIN_Y3", F.linear(seq(24, 1.3, 0.1).reshape(2, 3, 4), w, b)); out("LIN_Y1",
 * F.linear(seq(4, 1.3, 0.1), w, b)) out("LIN_YT", F.linear(seq(12, 1.3, 0.1).reshape(4, 3).t(), w,
 * b)) bx = seq(12, 1.3, 0.1, 2.0).reshape(4, 3) + 0.5; rm = torch.tensor([0.1, 0.2, 0.3]); rv =
 * torch.tensor([1.0, 1.5, 2.0]) bw = torch.tensor([0.5, 1.0, 2.0]); bb = torch.tensor([0.1, -0.2,
 * 0.3]) out("BN2_Y", F.batch_norm(bx, rm, rv, bw, bb, True, 0.1, 1e-5)); out("BN2_RM", rm);
 * out("BN2_RV", rv) x3 = seq(24, 0.9, 0.4, 1.5).reshape(2, 3, 4); rm = torch.tensor([0.1, 0.2,
 * 0.3]); rv = torch.tensor([1.0, 1.5, 2.0]) out("BN3_Y", F.batch_norm(x3, rm, rv, bw, bb, True,
 * 0.2, 1e-3)); out("BN3_RM", rm); out("BN3_RV", rv) x4 = seq(24, 0.6, 0.2, 3.0).reshape(2, 3, 2, 2)
 * out("BN4_Y", F.batch_norm(x4, None, None, None, None, True))
 * out("BN4_EVAL", F.batch_norm(x4, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1.0, 1.5, 2.0]),
 * bw, bb, False, 0.1, 1e-5)) lx = seq(24, 1.1, 0.5, 2.0).reshape(2, 3, 4) + 1.0 lw = seq(4, 0.8,
 * 0.1) + 1.0; lb = seq(4, 0.5, 0.9) out("LN_Y1", F.layer_norm(lx, (4,), lw, lb, 1e-5));
 * out("LN_Y2", F.layer_norm(lx, (3, 4), None, None, 1e-3)) ew = seq(15, 0.45, 0.25).reshape(5, 3)
 * out("EMB_Y", F.embedding(torch.tensor([[0, 4], [2, 2]]), ew))
 * # gradients compared with PyTorch: d/dw sum(linear(x, w, b)^2), d/dx sum(layer_norm(lx, (4,), lw,
 * lb) * lx) w_ = w.clone().requires_grad_(); (F.linear(x, w_, b) ** 2).sum().backward();
 * out("LIN_GW", w_.grad) x_ = lx.clone().requires_grad_(); (F.layer_norm(x_, (4,), lw, lb) *
 * seq(24, 0.3, 1.7).reshape(2, 3, 4)).sum().backward(); out("LN_GX", x_.grad) x_ =
 * bx.clone().requires_grad_(); (F.batch_norm(x_, None, None, bw, bb, True) * seq(12,
 * 0.3, 1.7).reshape(4, 3)).sum().backward(); out("BN_GX", x_.grad)
 */
static const double LIN_Y[] = {0.58434708783745237,  0.5717151769287655,   -1.009405234403207,
                               0.49803688173028271,  0.25905902290278293,  0.77735436986510298,
                               0.046388385704652091, -0.21246323874457851, -0.4784294320988528,
                               1.3022137788445241,   0.3552387502255191,   0.26441206397860167,
                               -0.20120118003393705, -0.71767583701097881, 1.7417983353996127};
static const double LIN_Y_NOBIAS[] = {
    0.3856777570423911,   -0.17399003524795456, -0.05780316051369095, 0.28291689364246631,
    -0.4753380749713304,  0.57868503907004176,  -0.69931682647206794, 0.7391388351449375,
    -0.69354942018666921, 0.5678166809704106,   0.15656941943045788,  -0.48129314819811836,
    0.75040089385557895,  -0.93279582509879522, 1.0074012375254995};
static const double LIN_Y3[] = {
    0.58434708783745237,  0.5717151769287655,   -1.009405234403207,   0.49803688173028271,
    0.25905902290278293,  0.77735436986510298,  0.046388385704652091, -0.21246323874457851,
    -0.4784294320988528,  1.3022137788445241,   0.3552387502255191,   0.26441206397860167,
    -0.20120118003393705, -0.71767583701097881, 1.7417983353996127,   -0.23330494183699901,
    0.99403431122186436,  -0.98759025117436561, 0.034608618318131668, 1.1105489658423595,
    -0.36267438523734674, 1.4596910061181447,   -1.7357250898004271,  0.97877064099388389,
    0.079462702516416739, 0.10464582484534546,  1.1664046081979627,   -1.6503633072138519,
    1.111197481729322,    -0.25545013576035913};
static const double LIN_Y1[] = {0.58434708783745237, 0.5717151769287655, -1.009405234403207,
                                0.49803688173028271, 0.25905902290278293};
static const double LIN_YT[] = {0.15608921466528755,  0.79740993008289529,  -1.0064566384180806,
                                0.26678566255456965,  0.69189055694610069,  0.27642212009286843,
                                0.68717726798924617,  -0.91906219005363077, 0.21232832124942247,
                                0.70711795576390624,  0.28284700704375038,  0.66268818124663575,
                                -0.87933874774159249, 0.16196077840270198,  0.76230936168139818};
static const double BN2_Y[] = {0.23173235583280793,  0.94680578917300717,  0.95646267258029627,
                               -0.36940599755766379, -1.7807363509733138,  0.61262118355263173,
                               0.86267515209904222,  -0.19743934643620117, -2.9233076069773181,
                               -0.32500151037418634, 0.23136990823650769,  2.5542237508443892};
static const double BN2_RM[] = {0.1224223589200775, 0.27423668331185902, 0.36124416301624079};
static const double BN2_RV[] = {1.1707573638722648, 1.5868677666429249, 2.0421284075252881};
static const double BN3_Y[] = {
    0.19051524431779557,  0.62863103725749936, 0.51030617927262401,  -0.074913436102298434,
    -0.85686716530732077, -1.2164496887900225, -0.39123422790299195, 0.99427260849660526,
    2.2817627238662626,   1.7407839796274878,  -0.72958876567384079, -3.2598266690820115,
    -0.85383581450341017, -0.4497607889625248, 0.21397902033388241,  0.63507855838643223,
    1.6052393258188586,   0.36181765538761523, -0.89120729155539435, -1.2055712161473495,
    -2.1962120872820496,  0.58137784054368735, 2.3069892188170753,   1.6747137591833892};
static const double BN3_RM[] = {0.16124011019429091, 0.056621117516101743, 0.34417165568301822};
static const double BN3_RV[] = {1.0205729312570071, 1.4022963331733207, 1.8015605696135282};
static const double BN4_Y[] = {
    -1.6844971806962068,  0.034264605487244658, 0.92264105429446375,  0.67029671340617802,
    2.1041961359439281,   0.93288234560987093,  -0.19681064348535487, -0.89024856877942049,
    -1.5859286039596985,  -1.0724798844036303,  -0.21347076077872887, 0.69102216618516443,
    0.63520706221758805,  0.93559262651391384,  0.090733044319408249, -1.6042379255425889,
    0.30402188863407115,  -0.63761525552369358, -0.98901160286698964, -0.62741429953241135,
    -0.64462267950192009, 0.27951506531230108,  1.0769224811206475,   1.4690422160258647};
static const double BN4_EVAL[] = {
    0.34800275618191095, 1.1260290062170786,   1.5281674541632717,   1.4139395705570941,
    0.89941234178009022, -0.50628516080632224, -1.8620334039885704,  -2.6942305213012334,
    -4.1926239807181958, -2.8024938347451442,  -0.47678060782479043, 1.9720771586899171,
    1.3980556534553983,  1.534030199801999,    1.1515903888723706,   0.38433344948667819,
    -1.2609826476293193, -2.3910444575459144,  -2.8127563608417705,  -2.3788022569680063,
    -1.6440973366101697, 0.8579475398646168,   3.0168780135759312,   4.0785175572366876};
static const double LN_Y1[] = {
    1.0764254076604485,   3.0473786827821834,   1.299755896912,       -1.882391264160987,
    -0.75063610855182938, 0.11071655473882204,  2.5524489625027855,   2.3998854486792927,
    1.9868455189083454,   -0.70149530247488856, -1.1409452107322904,  2.1135615703591664,
    1.8937536116177041,   2.5108939219406685,   0.094566432603882922, -1.6221406697094434,
    -0.97813275961223389, 1.1023666618523478,   3.1814589938722202,   1.3368339339118882,
    0.4736339895045486,   -1.0711497354874406,  0.61537483983462504,  3.2345759242794183};
static const double LN_Y2[] = {
    0.67573646993706438,  1.4294587904854872,   0.60031953179306663,  -0.90559149248447746,
    -1.4426030334406816,  -0.42386471344015125, 1.0373383289157523,   1.3441920741710032,
    0.16136436920048888,  -1.218541494633447,   -1.2875536851979019,  0.029744854693797299,
    1.2200266999364868,   1.0544039940031473,   -0.32332981830101332, -1.407576539603753,
    -1.0134629422022396,  0.42832057746532004,  1.3421818049768479,   0.72944610195018333,
    -0.74028420226508185, -1.4608764303057789,  -0.64486180562785822, 0.81601255997373912};
static const double EMB_Y[] = {0.24740395925452294,  0.64421768723769102,  0.91276394026052099,
                               -0.59171558063100937, -0.18216250427209502, 0.26366018237277838,
                               0.19042264736102704,  -0.25554110202683122, -0.65062513706516734,
                               0.19042264736102704,  -0.25554110202683122, -0.65062513706516734};
static const double LIN_GW[] = {
    -1.802262778347578,   1.1433114717670905,  2.4139317372490772,  0.14813635242059753,
    -0.42826687044999179, 0.78894413716302991, 0.8503501355326839,  -0.33400880681152506,
    0.50609937584408582,  -1.8427422746924795, -1.491962175718577,  1.0445460059786582,
    2.1584767082189793,   1.678931897419851,   -1.2602520764184466, -2.3531638058471289,
    -5.1803599879096627,  -1.0939954756098278, 4.5950749714172066,  3.5523498202023553};
static const double LN_GX[] = {
    -0.20414025792954871,   0.03865632877877645,   0.15442752503506951,   0.011056404115702301,
    -0.020552351560283354,  0.024499023574995924,  0.045511336366133998,  -0.049458008380846637,
    0.28592376988123291,    0.15800270282612816,   -0.12116502850932775,  -0.32276144419803443,
    0.10617570367152127,    -0.066488777359842377, -0.1063389969541747,   0.066652070642495648,
    -0.0025779533793872655, -0.1233018914781876,   -0.067914478632251224, 0.19379432348982634,
    -0.35927312444707327,   0.076415970089679153,  0.26364265179133528,   0.019214502566059277};
static const double BN_GX[] = {0.32880291478357115,  0.71926412920296923,  1.4534344018682981,
                               0.16712052712202186,  0.33508346866897248,  0.2902774581824808,
                               -0.14788096630994971, -0.37228011178146331, -0.52685268743883396,
                               -0.34804247559564327, -0.6820674860904784,  -1.2168591726119449};

/* ------------------------------------------------------------------ helpers */
#define N_OF(a) ((int64_t)(sizeof(a) / sizeof *(a)))

/* sin(a i + b) * scale + add for i in [0, numel), as the script's seq() */
static ts_tensor *seqt(ts_shape s, double a, double b, double scale, double add, ts_dtype dt,
                       ts_device dev) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = sin(a * (double)i + b) * scale + add;
    ts_tensor *t = ts_tensor_f64(s, v, (ts_opts){.dtype = dt, .device = dev});
    free(v);
    return t;
}

static ts_tensor *vec(int64_t n, const double *v, ts_dtype dt, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = dt, .device = dev});
}

/* t (any dtype, device, layout) holds ref[0..n) within tol */
static bool close_to(ts_tensor *t, const double *ref, int64_t n, double tol) {
    if (!t || ts_numel(t) != n) {
        printf("  expected %lld values, got %s\n", (long long)n, t ? "another count" : "NULL");
        return false;
    }
    double *h = malloc((size_t)n * sizeof *h);
    bool ok = ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        if (!(fabs(h[i] - ref[i]) <= tol)) {
            printf("  element %lld: got %.12g, expected %.12g\n", (long long)i, h[i], ref[i]);
            ok = false;
        }
    }
    free(h);
    return ok;
}
#define CHECK_CLOSE(t, ref, tol) CHECK(close_to((t), (ref), N_OF(ref), (tol)))

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t || ts_ndim(t) != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (ts_size(t, i) != s.dims[i]) return false;
    return true;
}

static bool msg_has(const char *s) { return strstr(ts_error_message(), s) != NULL; }

static double tol_of(ts_dtype dt) { return dt == TS_F64 ? 1e-12 : 2e-5; }

/* ------------------------------------------------------------------ linear */
static void test_linear(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = tol_of(dt);
    ts_tensor *x = seqt(TS_SHAPE(3, 4), 1.3, 0.1, 1, 0, dt, dev);
    ts_tensor *w = seqt(TS_SHAPE(5, 4), 0.7, 0.3, 0.5, 0, dt, dev);
    ts_tensor *b = seqt(TS_SHAPE(5), 2.1, 0.2, 1, 0, dt, dev);
    ts_tensor *y = ts_linear(x, w, b);
    CHECK(shape_is(y, TS_SHAPE(3, 5)));
    CHECK(y && ts_dtype_of(y) == dt && ts_device_equal(ts_device_of(y), dev));
    CHECK_CLOSE(y, LIN_Y, tol);
    CHECK_CLOSE(ts_linear(x, w, NULL), LIN_Y_NOBIAS, tol);
    ts_tensor *y3 = ts_linear(seqt(TS_SHAPE(2, 3, 4), 1.3, 0.1, 1, 0, dt, dev), w, b);
    CHECK(shape_is(y3, TS_SHAPE(2, 3, 5)));
    CHECK_CLOSE(y3, LIN_Y3, tol);
    ts_tensor *y1 = ts_linear(seqt(TS_SHAPE(4), 1.3, 0.1, 1, 0, dt, dev), w, b);
    CHECK(shape_is(y1, TS_SHAPE(5)));
    CHECK_CLOSE(y1, LIN_Y1, tol);
    ts_tensor *xt = ts_t(seqt(TS_SHAPE(4, 3), 1.3, 0.1, 1, 0, dt, dev)); /* strided input */
    CHECK_CLOSE(ts_linear(xt, w, b), LIN_YT, tol);
    CHECK_OK();
    /* the inputs are untouched (the bias is added in place only into the product) */
    CHECK_CLOSE(ts_linear(x, w, b), LIN_Y, tol);
    /* an empty batch gives an empty result */
    CHECK(shape_is(ts_linear(ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = dt, .device = dev}), w, b),
                   TS_SHAPE(0, 5)));
    CHECK_OK();
    ts_scope_end();
}

static void test_linear_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), o), *w = ts_ones(TS_SHAPE(4, 3), o);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(4, 5), o), NULL));
    CHECK(msg_has("linear") && msg_has("[4, 5]"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_linear(x, w, ts_ones(TS_SHAPE(5), o)));
    CHECK(msg_has("bias"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(4), o), NULL)); /* a 1-D weight of the wrong length */
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(3), o), ts_ones(TS_SHAPE(2), o))); /* 1-D w: 0-d bias */
    CHECK(msg_has("bias") && msg_has("1-D weight"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(1, 4, 3), o), NULL));
    CHECK(msg_has("weight must be 2-D"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(4, 3), (ts_opts){.dtype = TS_F64, .device = dev}), NULL));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_linear(x, ts_ones(TS_SHAPE(4, 3), (ts_opts){.device = ts_sim(1)}), NULL));
    CHECK(msg_has("same device"));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_linear(NULL, w, NULL));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_linear(ts_scalar(1, o), w, NULL));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
}

/* inputs PyTorch takes that look unusual (its OpInfo samples have them): a 1-D linear weight,
 * an empty 1-D batch_norm input, a negative rms_norm eps, an empty gather index of any dtype */
static void test_pytorch_edge_forms(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    const double xv[6] = {0.5, -1.25, 2.0, 1.5, 0.75, -3.0}, wv[3] = {2.0, -0.5, 0.25};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2, 3), xv, o), *w = ts_tensor_f64(TS_SHAPE(3), wv, o);
    /* linear with w [in]: x @ w, the last dim contracted away; a 0-d bias added */
    ts_tensor *y = ts_linear(x, w, NULL);
    CHECK(shape_is(y, TS_SHAPE(2)));
    double want[2];
    for (int r = 0; r < 2; r++)
        want[r] = xv[3 * r] * wv[0] + xv[3 * r + 1] * wv[1] + xv[3 * r + 2] * wv[2];
    CHECK(close_to(y, want, 2, 1e-15));
    ts_tensor *y0 = ts_linear(ts_tensor_f64(TS_SHAPE(3), xv, o), w, ts_scalar(0.5, o));
    CHECK(shape_is(y0, TS_SHAPE()) && y0 && fabs(ts_item(y0) - (want[0] + 0.5)) < 1e-15);
    /* batch_norm: an empty 1-D input has no channels; its output is an empty copy */
    ts_tensor *e = ts_zeros(TS_SHAPE(0), o);
    for (int training = 0; training < 2; training++)
        CHECK(shape_is(ts_batch_norm(e, ts_zeros(TS_SHAPE(0), o), ts_ones(TS_SHAPE(0), o), NULL,
                                     NULL, training, 0.1, 1e-5),
                       TS_SHAPE(0)));
    CHECK_OK();
    CHECK(!ts_batch_norm(w, NULL, NULL, NULL, NULL, true, 0.1, 1e-5)); /* 1-D with elements */
    CHECK(msg_has("2 or more dims"));
    CHECK_ERR(TS_ERR_SHAPE);
    /* rms_norm adds a negative eps as given: x / sqrt(mean(x^2) - 0.5) */
    ts_tensor *r = ts_rms_norm(x, TS_SHAPE(3), NULL, -0.5);
    double rw[6];
    for (int row = 0; row < 2; row++) {
        double ms = 0;
        for (int k = 0; k < 3; k++) ms += xv[3 * row + k] * xv[3 * row + k] / 3;
        for (int k = 0; k < 3; k++) rw[3 * row + k] = xv[3 * row + k] / sqrt(ms - 0.5);
    }
    CHECK(close_to(r, rw, 6, 1e-14));
    /* gather: an empty index of any dtype and dims gives an empty result of its shape */
    ts_tensor *gi = ts_empty(TS_SHAPE(2, 0), (ts_opts){.dtype = TS_U8, .device = dev});
    CHECK(shape_is(ts_gather(w, 0, gi), TS_SHAPE(2, 0)));
    CHECK_OK();
    CHECK(!ts_gather(w, 0, ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_U8, .device = dev})));
    CHECK(msg_has("int32/int64"));
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ dropout */
static void test_dropout(ts_device dev) {
    ts_scope_begin();
    const int64_t n = 20000;
    const double p = 0.3;
    ts_tensor *x = ts_ones(TS_SHAPE(n), (ts_opts){.device = dev});
    ts_manual_seed(7);
    ts_tensor *y = ts_dropout(x, p, true);
    CHECK(shape_is(y, TS_SHAPE(n)));
    float *h = calloc((size_t)n, sizeof *h);
    CHECK(ts_copy_to_host(y, h, (size_t)n * sizeof *h) == TS_OK);
    int64_t zeros = 0, scaled = 0;
    for (int64_t i = 0; i < n; i++) {
        zeros += h[i] == 0.0f;
        scaled += h[i] == (float)(1.0 / (1.0 - p));
    }
    free(h);
    /* a binomial fraction over 20000 draws: 5 standard deviations is 0.016 */
    CHECK_NEAR((double)zeros / (double)n, p, 0.016);
    CHECK_EQ(zeros + scaled, n); /* survivors are scaled by 1 / (1 - p) */
    /* the mean is kept in expectation */
    CHECK_NEAR(ts_item(ts_mean(y)), 1.0, 0.03);
    /* the same seed gives the same mask, on every device */
    ts_manual_seed(7);
    CHECK(ts_item(ts_sum(ts_ne(ts_dropout(x, p, true), y))) == 0);
    ts_manual_seed(7);
    ts_tensor *yc = ts_to(ts_dropout(ts_ones(TS_SHAPE(n), (ts_opts){0}), p, true), dev);
    CHECK(ts_item(ts_sum(ts_ne(yc, y))) == 0);
    /* a different seed, a different mask */
    ts_manual_seed(8);
    CHECK(ts_item(ts_sum(ts_ne(ts_dropout(x, p, true), y))) > 0);
    /* eval and p = 0 give the input itself */
    ts_tensor *e = ts_dropout(x, p, false);
    CHECK(e == x);
    CHECK(ts_dropout(x, 0, true) == x);
    /* p = 1 zeroes everything but NaN, as PyTorch's input * 0 */
    ts_tensor *z = ts_dropout(vec(3, (double[]){1, NAN, -2}, TS_F32, dev), 1, true);
    float zh[3] = {1, 1, 1};
    CHECK(ts_copy_to_host(z, zh, sizeof zh) == TS_OK);
    CHECK(zh[0] == 0 && isnan(zh[1]) && zh[2] == 0);
    /* in place: the same mask as ts_dropout for the same seed, written into x, x returned */
    ts_tensor *xi = ts_ones(TS_SHAPE(n), (ts_opts){.device = dev});
    ts_manual_seed(7);
    CHECK(ts_dropout_(xi, p, true) == xi);
    CHECK(ts_item(ts_sum(ts_ne(xi, y))) == 0);
    ts_tensor *ev = ts_ones(TS_SHAPE(4), (ts_opts){.device = dev});
    CHECK(ts_dropout_(ev, p, false) == ev && ts_item(ts_sum(ev)) == 4);
    CHECK_OK();
    CHECK(!ts_dropout_(x, 1.5, true));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_dropout(x, 1.5, true));
    CHECK(msg_has("dropout probability has to be between 0 and 1, but got 1.5"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_dropout(x, -0.1, false));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_dropout(x, NAN, true));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_dropout(ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_I64, .device = dev}), 0.5, true));
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ batch_norm */
static const double RM0[3] = {0.1, 0.2, 0.3}, RV0[3] = {1.0, 1.5, 2.0};
static const double BW[3] = {0.5, 1.0, 2.0}, BB[3] = {0.1, -0.2, 0.3};

static void test_batch_norm(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = tol_of(dt);
    ts_tensor *w = vec(3, BW, dt, dev), *b = vec(3, BB, dt, dev);
    /* [N, C], training, default momentum and eps: batch statistics, running stats updated */
    ts_tensor *rm = vec(3, RM0, dt, dev), *rv = vec(3, RV0, dt, dev);
    ts_tensor *x2 = seqt(TS_SHAPE(4, 3), 1.3, 0.1, 2, 0.5, dt, dev);
    CHECK_CLOSE(ts_batch_norm(x2, rm, rv, w, b, true, 0.1, 0), BN2_Y, tol);
    CHECK_CLOSE(rm, BN2_RM, tol);
    CHECK_CLOSE(rv, BN2_RV, tol);
    /* [N, C, L] with momentum 0.2 and eps 1e-3 */
    rm = vec(3, RM0, dt, dev), rv = vec(3, RV0, dt, dev);
    ts_tensor *x3 = seqt(TS_SHAPE(2, 3, 4), 0.9, 0.4, 1.5, 0, dt, dev);
    CHECK_CLOSE(ts_batch_norm(x3, rm, rv, w, b, true, 0.2, 1e-3), BN3_Y, tol);
    CHECK_CLOSE(rm, BN3_RM, tol);
    CHECK_CLOSE(rv, BN3_RV, tol);
    /* [N, C, H, W]: no running statistics, no affine; then eval with running statistics */
    ts_tensor *x4 = seqt(TS_SHAPE(2, 3, 2, 2), 0.6, 0.2, 3, 0, dt, dev);
    CHECK_CLOSE(ts_batch_norm(x4, NULL, NULL, NULL, NULL, true, 0, 0), BN4_Y, tol);
    rm = vec(3, RM0, dt, dev), rv = vec(3, RV0, dt, dev);
    ts_tensor *ye = ts_batch_norm(x4, rm, rv, w, b, false, 0, 0);
    CHECK(shape_is(ye, TS_SHAPE(2, 3, 2, 2)));
    CHECK_CLOSE(ye, BN4_EVAL, tol);
    /* eval leaves the running statistics alone */
    CHECK(ts_item(ts_sum(ts_ne(rm, vec(3, RM0, dt, dev)))) == 0);
    CHECK(ts_item(ts_sum(ts_ne(rv, vec(3, RV0, dt, dev)))) == 0);
    CHECK_OK();
    ts_scope_end();
}

static void test_batch_norm_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *rm = ts_zeros(TS_SHAPE(3), o), *rv = ts_ones(TS_SHAPE(3), o);
    /* a NULL input is named */
    CHECK(!ts_batch_norm(NULL, rm, rv, NULL, NULL, true, 0, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "batch_norm: input is NULL");
    CHECK(!ts_layer_norm(NULL, TS_SHAPE(3), NULL, NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "layer_norm: input is NULL");
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(1, 3), o), rm, rv, NULL, NULL, true, 0, 0));
    CHECK(msg_has("Expected more than 1 value per channel when training, got input size [1, 3]"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(1, 3, 1, 1), o), NULL, NULL, NULL, NULL, true, 0, 0));
    CHECK_ERR(TS_ERR_ARG);
    /* eval with one value per channel is fine */
    CHECK(ts_batch_norm(ts_ones(TS_SHAPE(1, 3), o), rm, rv, NULL, NULL, false, 0, 0) != NULL);
    CHECK_OK();
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4, 3), o), NULL, NULL, NULL, NULL, false, 0, 0));
    CHECK(msg_has("running_mean"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4, 3), o), ts_zeros(TS_SHAPE(4), o), rv, NULL, NULL, true,
                         0, 0));
    CHECK(msg_has("running_mean should contain 3 elements"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4, 3), o), NULL, NULL, ts_ones(TS_SHAPE(2), o), NULL,
                         true, 0, 0));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4), o), NULL, NULL, NULL, NULL, true, 0, 0));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_opts other = {.device = ts_sim(1)};
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4, 3), o), ts_zeros(TS_SHAPE(3), other),
                         ts_ones(TS_SHAPE(3), other), NULL, NULL, true, 0, 0));
    CHECK(msg_has("same device"));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_batch_norm(ts_ones(TS_SHAPE(4, 3), (ts_opts){.dtype = TS_I64, .device = dev}), NULL,
                         NULL, NULL, NULL, true, 0, 0));
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ layer_norm */
static void test_layer_norm(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = tol_of(dt);
    ts_tensor *x = seqt(TS_SHAPE(2, 3, 4), 1.1, 0.5, 2, 1, dt, dev);
    ts_tensor *w = seqt(TS_SHAPE(4), 0.8, 0.1, 1, 1, dt, dev);
    ts_tensor *b = seqt(TS_SHAPE(4), 0.5, 0.9, 1, 0, dt, dev);
    ts_tensor *y1 = ts_layer_norm(x, TS_SHAPE(4), w, b, 0);
    CHECK(shape_is(y1, TS_SHAPE(2, 3, 4)));
    CHECK_CLOSE(y1, LN_Y1, tol);
    CHECK_CLOSE(ts_layer_norm(x, TS_SHAPE(3, 4), NULL, NULL, 1e-3), LN_Y2, tol);
    CHECK_OK();
    ts_opts o = {.dtype = dt, .device = dev};
    CHECK(!ts_layer_norm(x, TS_SHAPE(3), NULL, NULL, 0));
    CHECK(msg_has("Given normalized_shape=[3], expected input with shape [*, ...[3]], but got "
                  "input of size [2, 3, 4]"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_layer_norm(x, TS_SHAPE(4), ts_ones(TS_SHAPE(5), o), NULL, 0));
    CHECK(msg_has("Expected weight to be of same shape as normalized_shape"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_layer_norm(x, TS_SHAPE(4), NULL, ts_ones(TS_SHAPE(1, 4), o), 0));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_layer_norm(x, TS_SHAPE(), NULL, NULL, 0));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_layer_norm(x, TS_SHAPE(1, 2, 3, 4), NULL, NULL, 0));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_layer_norm(x, TS_SHAPE(4), ts_ones(TS_SHAPE(4), (ts_opts){.device = ts_sim(1)}), NULL,
                         0));
    CHECK_ERR(TS_ERR_DEVICE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ embedding */
static void test_embedding(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    ts_tensor *w = seqt(TS_SHAPE(5, 3), 0.45, 0.25, 1, 0, dt, dev);
    ts_opts oi = {.device = dev};
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(2, 2), (int64_t[]){0, 4, 2, 2}, oi);
    ts_tensor *y = ts_embedding(w, idx);
    CHECK(shape_is(y, TS_SHAPE(2, 2, 3)));
    CHECK(y && ts_dtype_of(y) == dt);
    CHECK_CLOSE(y, EMB_Y, tol_of(dt));
    ts_tensor *y32 = ts_embedding(w, ts_tensor_i32(TS_SHAPE(4), (int32_t[]){0, 4, 2, 2}, oi));
    CHECK(shape_is(y32, TS_SHAPE(4, 3)));
    CHECK_CLOSE(y32, EMB_Y, tol_of(dt));
    ts_tensor *y0 = ts_embedding(w, ts_tensor_i64(TS_SHAPE(), (int64_t[]){4}, oi));
    CHECK(shape_is(y0, TS_SHAPE(3)));
    CHECK(close_to(y0, EMB_Y + 3, 3, tol_of(dt)));
    CHECK_OK();
    CHECK(!ts_embedding(w, ts_tensor_i64(TS_SHAPE(3), (int64_t[]){0, 5, 1}, oi)));
    CHECK(msg_has("index 5 is out of range") && msg_has("index out of range in self"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_embedding(w, ts_tensor_i64(TS_SHAPE(1), (int64_t[]){-1}, oi)));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_embedding(w, ts_ones(TS_SHAPE(2), oi)));
    CHECK(msg_has("int64 or int32"));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_embedding(ts_ones(TS_SHAPE(5), oi), idx));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_embedding(
        w, ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, (ts_opts){.device = ts_sim(1)})));
    CHECK_ERR(TS_ERR_DEVICE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradients */
static ts_device g_dev; /* where the gradcheck functions make their constant operands */

static ts_tensor *f_linear(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_linear(in[0], in[1], in[2]);
}
static ts_tensor *f_linear_nd(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_linear(ts_reshape(in[0], TS_SHAPE(2, 3, 2)), in[1], in[2]);
}
static ts_tensor *f_bn_train(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0, 0);
}
static ts_tensor *f_bn_eval(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *rm = vec(3, RM0, TS_F64, g_dev), *rv = vec(3, RV0, TS_F64, g_dev);
    return ts_batch_norm(in[0], rm, rv, in[1], in[2], false, 0, 0);
}
static ts_tensor *f_layer_norm(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_layer_norm(in[0], TS_SHAPE(3, 4), in[1], in[2], 0);
}
static ts_tensor *f_embedding(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *idx =
        ts_tensor_i64(TS_SHAPE(2, 3), (int64_t[]){1, 4, 1, 0, 2, 4}, (ts_opts){.device = g_dev});
    return ts_embedding(in[0], idx);
}
static ts_tensor *f_dropout(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_manual_seed(3); /* the same mask on every evaluation */
    return ts_dropout(in[0], 0.4, true);
}

static ts_tensor *leaf(ts_shape s, double a, double b, double scale, double add, ts_device dev) {
    ts_tensor *t = seqt(s, a, b, scale, add, TS_F64, dev);
    ts_set_requires_grad(t, true);
    return t;
}

static void gradcheck_one(const char *what, ts_gradcheck_fn f, ts_tensor *const *in, int n) {
    bool ok = ts_gradcheck(f, NULL, in, n, (ts_gradcheck_opts){0});
    printf("gradcheck %-12s on %s: %s\n", what, ts_device_str(g_dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    g_dev = dev;
    ts_tensor *lin[3] = {leaf(TS_SHAPE(3, 4), 1.3, 0.1, 1, 0, dev),
                         leaf(TS_SHAPE(5, 4), 0.7, 0.3, 0.5, 0, dev),
                         leaf(TS_SHAPE(5), 2.1, 0.2, 1, 0, dev)};
    gradcheck_one("linear", f_linear, lin, 3);
    ts_tensor *lin_nd[3] = {leaf(TS_SHAPE(12), 1.3, 0.1, 1, 0, dev),
                            leaf(TS_SHAPE(3, 2), 0.7, 0.3, 0.5, 0, dev),
                            leaf(TS_SHAPE(3), 2.1, 0.2, 1, 0, dev)};
    gradcheck_one("linear N-D", f_linear_nd, lin_nd, 3);
    ts_tensor *bn[3] = {leaf(TS_SHAPE(2, 3, 2), 0.9, 0.4, 1.5, 0, dev),
                        leaf(TS_SHAPE(3), 0.8, 0.1, 1, 1, dev),
                        leaf(TS_SHAPE(3), 0.5, 0.9, 1, 0, dev)};
    gradcheck_one("batch_norm", f_bn_train, bn, 3);
    gradcheck_one("bn eval", f_bn_eval, bn, 3);
    ts_tensor *ln[3] = {leaf(TS_SHAPE(2, 3, 4), 1.1, 0.5, 2, 1, dev),
                        leaf(TS_SHAPE(3, 4), 0.8, 0.1, 1, 1, dev),
                        leaf(TS_SHAPE(3, 4), 0.5, 0.9, 1, 0, dev)};
    gradcheck_one("layer_norm", f_layer_norm, ln, 3);
    ts_tensor *emb[1] = {leaf(TS_SHAPE(5, 3), 0.45, 0.25, 1, 0, dev)};
    gradcheck_one("embedding", f_embedding, emb, 1);
    ts_tensor *dr[1] = {leaf(TS_SHAPE(4, 5), 0.3, 0.2, 1, 0, dev)};
    gradcheck_one("dropout", f_dropout, dr, 1);
    ts_scope_end();
}

/* gradients against PyTorch's (LIN_GW, LN_GX, BN_GX in the script) */
static void test_grads_vs_torch(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = dt == TS_F64 ? 1e-10 : 1e-4;
    ts_tensor *x = seqt(TS_SHAPE(3, 4), 1.3, 0.1, 1, 0, dt, dev);
    ts_tensor *w = seqt(TS_SHAPE(5, 4), 0.7, 0.3, 0.5, 0, dt, dev);
    ts_tensor *b = seqt(TS_SHAPE(5), 2.1, 0.2, 1, 0, dt, dev);
    ts_set_requires_grad(w, true);
    ts_tensor *y = ts_linear(x, w, b);
    CHECK_CLOSE(y, LIN_Y, tol);
    ts_backward(ts_sum(ts_mul(y, y)));
    CHECK_CLOSE(ts_grad(w), LIN_GW, tol);

    ts_tensor *lx = seqt(TS_SHAPE(2, 3, 4), 1.1, 0.5, 2, 1, dt, dev);
    ts_tensor *lw = seqt(TS_SHAPE(4), 0.8, 0.1, 1, 1, dt, dev);
    ts_tensor *lb = seqt(TS_SHAPE(4), 0.5, 0.9, 1, 0, dt, dev);
    ts_set_requires_grad(lx, true);
    ts_tensor *g = seqt(TS_SHAPE(2, 3, 4), 0.3, 1.7, 1, 0, dt, dev);
    ts_tensor *ly = ts_layer_norm(lx, TS_SHAPE(4), lw, lb, 0);
    CHECK_CLOSE(ly, LN_Y1, tol); /* the forward recorded for autograd computes the same */
    ts_backward(ts_sum(ts_mul(ly, g)));
    CHECK_CLOSE(ts_grad(lx), LN_GX, tol);

    ts_tensor *bx = seqt(TS_SHAPE(4, 3), 1.3, 0.1, 2, 0.5, dt, dev);
    ts_set_requires_grad(bx, true);
    ts_tensor *bw = vec(3, BW, dt, dev), *bb = vec(3, BB, dt, dev);
    ts_tensor *g2 = seqt(TS_SHAPE(4, 3), 0.3, 1.7, 1, 0, dt, dev);
    ts_tensor *rm = vec(3, RM0, dt, dev), *rv = vec(3, RV0, dt, dev);
    ts_tensor *by = ts_batch_norm(bx, rm, rv, bw, bb, true, 0.1, 0);
    CHECK_CLOSE(by, BN2_Y, tol);
    /* the running statistics are updated outside the graph */
    CHECK(!ts_requires_grad(rm) && !ts_requires_grad(rv) && !ts_grad_fn_name(rm));
    CHECK_CLOSE(rm, BN2_RM, tol);
    CHECK_CLOSE(rv, BN2_RV, tol);
    ts_backward(ts_sum(ts_mul(by, g2)));
    CHECK_CLOSE(ts_grad(bx), BN_GX, tol);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ issue 52's forms */
/* t's values as doubles (n of them) */
static void host_vals(ts_tensor *t, double *out, int n) {
    ts_tensor *h = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    CHECK(h && ts_numel(h) == n);
    if (h) ts_copy_to_host(h, out, (size_t)n * sizeof(double));
}
#define CHECK_VALS(t, ...)                                                                         \
    do {                                                                                           \
        const double want_[] = {__VA_ARGS__};                                                      \
        const int n_ = (int)(sizeof want_ / sizeof *want_);                                        \
        double got_[64] = {0};                                                                     \
        host_vals((t), got_, n_);                                                                  \
        for (int i_ = 0; i_ < n_; i_++) CHECK_NEAR(got_[i_], want_[i_], 1e-6);                     \
    } while (0)

static ts_tensor *ivec(ts_device dev, ts_dtype dt, int n, const int64_t *v) {
    return ts_to_dtype(ts_from_data(TS_SHAPE(n), TS_I64, v, (ts_opts){.device = dev}), dt);
}

static void test_torch_forms(ts_device dev) {
    ts_scope_begin();
    const ts_opts f64 = {.device = dev, .dtype = TS_F64};
    /* bitwise ops, integer and bool; PyTorch's out-of-range shifts */
    ts_tensor *i = ivec(dev, TS_I64, 4, (int64_t[]){5, 3, 12, -1});
    ts_tensor *six = ivec(dev, TS_I64, 1, (int64_t[]){6});
    CHECK_VALS(ts_bitwise_and(i, six), 4, 2, 4, 6);
    CHECK_VALS(ts_bitwise_or(i, six), 7, 7, 14, -1);
    CHECK_VALS(ts_bitwise_xor(i, six), 3, 5, 10, -7);
    CHECK_VALS(ts_bitwise_not(i), -6, -4, -13, 0);
    ts_tensor *i32 = ivec(dev, TS_I32, 2, (int64_t[]){-8, 9});
    CHECK_VALS(ts_bitwise_right_shift(i32, ivec(dev, TS_I32, 2, (int64_t[]){40, 1})), -1, 4);
    CHECK_VALS(ts_bitwise_left_shift(i32, ivec(dev, TS_I32, 2, (int64_t[]){-1, 2})), 0, 36);
    ts_tensor *u8 = ivec(dev, TS_U8, 2, (int64_t[]){3, 255});
    CHECK_VALS(ts_bitwise_left_shift(u8, ivec(dev, TS_U8, 1, (int64_t[]){7})), 128, 128);
    CHECK_VALS(ts_bitwise_not(u8), 252, 0);
    CHECK_EQ(ts_dtype_of(ts_bitwise_and(u8, u8)), TS_U8);
    CHECK_OK();
    CHECK(!ts_bitwise_and(ts_ones(TS_SHAPE(2), f64), i));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "bitwise_and");
    CHECK(!ts_bitwise_left_shift(ts_to_dtype(u8, TS_BOOL), ts_to_dtype(u8, TS_BOOL)));
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *j = ts_clone(i);
    CHECK(ts_bitwise_and_(j, six) != NULL);
    CHECK_VALS(j, 4, 2, 4, 6);

    /* div with rounding modes: integers stay integers, floats trunc / floor */
    ts_tensor *a = ivec(dev, TS_I64, 4, (int64_t[]){5, -7, 7, -5});
    ts_tensor *b = ivec(dev, TS_I64, 4, (int64_t[]){2, 2, -2, -2});
    ts_tensor *q = ts_div_rounding(a, b, TS_ROUNDING_TRUNC);
    CHECK_EQ(ts_dtype_of(q), TS_I64);
    CHECK_VALS(q, 2, -3, -3, 2);
    CHECK_VALS(ts_div_rounding(a, b, TS_ROUNDING_FLOOR), 2, -4, -4, 2);
    CHECK_VALS(ts_div_rounding(a, b, TS_ROUNDING_NONE), 2.5, -3.5, -3.5, 2.5);
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(4), (double[]){5.5, -5.5, 1.0, -0.5}, f64);
    ts_tensor *two = ts_scalar(2, f64);
    CHECK_VALS(ts_div_rounding(x, two, TS_ROUNDING_TRUNC), 2, -2, 0, 0);
    CHECK_VALS(ts_div_rounding(x, two, TS_ROUNDING_FLOOR), 2, -3, 0, -1);
    /* a float result has PyTorch's gradient: zero for both operands */
    ts_tensor *xg = ts_clone(x), *tg = ts_full(TS_SHAPE(4), 3.0, f64);
    ts_set_requires_grad(xg, true);
    ts_set_requires_grad(tg, true);
    ts_tensor *fq = ts_div_rounding(xg, tg, TS_ROUNDING_FLOOR);
    CHECK(fq && ts_requires_grad(fq));
    ts_backward(ts_sum(ts_mul(fq, x)));
    CHECK_VALS(ts_grad(xg), 0, 0, 0, 0);
    CHECK_VALS(ts_grad(tg), 0, 0, 0, 0);
    CHECK_OK();
    CHECK(!ts_div_rounding(a, ts_zeros(TS_SHAPE(1), (ts_opts){.device = dev, .dtype = TS_I64}),
                           TS_ROUNDING_FLOOR));
    CHECK_ERR_HAS(TS_ERR_ARG, "ZeroDivisionError");

    /* round(decimals): half to even of x * 10^d */
    ts_tensor *r = ts_tensor_f64(TS_SHAPE(4), (double[]){1.25, 2.35, -0.125, 1250}, f64);
    CHECK_VALS(ts_round_decimals(r, 1), 1.2, 2.4, -0.1, 1250);
    CHECK_VALS(ts_round_decimals(r, -2), 0, 0, 0, 1200);
    CHECK(!ts_round_decimals(i, 1));
    CHECK_ERR(TS_ERR_DTYPE);

    /* clamp with tensor bounds: values and PyTorch's gradients */
    ts_tensor *cx = ts_tensor_f64(TS_SHAPE(5), (double[]){-2, 0, 1, 3, 5}, f64);
    ts_tensor *lo = ts_tensor_f64(TS_SHAPE(5), (double[]){0, 0, 2, 2, 6}, f64);
    ts_tensor *hi = ts_tensor_f64(TS_SHAPE(5), (double[]){1, 1, 3, 3, 4}, f64);
    ts_set_requires_grad(cx, true), ts_set_requires_grad(lo, true), ts_set_requires_grad(hi, true);
    ts_tensor *cy = ts_clamp_tensor(cx, lo, hi);
    CHECK_VALS(cy, 0, 0, 2, 3, 4);
    ts_backward(ts_sum(cy));
    /* PyTorch 2.x's: a tie (x == lo, x == hi) splits the gradient */
    CHECK_VALS(ts_grad(cx), 0, 0.5, 0, 0.5, 0);
    CHECK_VALS(ts_grad(lo), 1, 0.5, 1, 0, 0);
    CHECK_VALS(ts_grad(hi), 0, 0, 0, 0.5, 1);
    CHECK_VALS(ts_clamp_tensor(cx, NULL, ts_scalar(0, f64)), -2, 0, 0, 0, 0);
    CHECK(!ts_clamp_tensor(cx, NULL, NULL));
    CHECK_ERR(TS_ERR_ARG);

    /* squeeze over several dims; gather / scatter_add with int32 indices */
    ts_tensor *z = ts_zeros(TS_SHAPE(1, 2, 1, 3), f64);
    ts_tensor *sq = ts_squeeze_dims(z, TS_DIMS(0, 2));
    CHECK(sq && ts_ndim(sq) == 2 && ts_size(sq, 0) == 2 && ts_size(sq, 1) == 3);
    CHECK(!ts_squeeze_dims(z, TS_DIMS(0, -4)));
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *src = ts_tensor_f64(TS_SHAPE(2, 3), (double[]){1, -2, 3, 4, 5, -6}, f64);
    ts_tensor *gi = ts_to_dtype(ivec(dev, TS_I64, 2, (int64_t[]){0, 2}), TS_I32);
    gi = ts_reshape(gi, TS_SHAPE(2, 1));
    CHECK_VALS(ts_gather(src, 1, gi), 1, -6);
    CHECK_VALS(ts_scatter_add(ts_zeros(TS_SHAPE(2, 3), f64), 1, gi, ts_ones(TS_SHAPE(2, 1), f64)),
               1, 0, 0, 0, 0, 1);

    /* logspace */
    CHECK_VALS(ts_logspace(0, 2, 3, 10, f64), 1, 10, 100);
    CHECK_VALS(ts_logspace(0, 2, 3, 2, (ts_opts){.device = dev, .dtype = TS_I64}), 1, 2, 4);

    /* max pooling's indices, avg pooling's divisor_override */
    ts_tensor *px = ts_tensor_f64(TS_SHAPE(1, 1, 4, 4),
                                  (double[]){3, 1, 0, 2, 1, 9, 4, 4, 0, 0, 1, 5, 2, 7, 8, 1}, f64);
    ts_tensor *idx = NULL;
    ts_tensor *py = ts_max_pool2d_with_indices(px, (ts_pool2d_opts){.kernel = {2, 2}}, &idx);
    CHECK_VALS(py, 9, 4, 7, 8);
    CHECK(idx && ts_dtype_of(idx) == TS_I64);
    CHECK_VALS(idx, 5, 6, 13, 14);
    CHECK_VALS(ts_avg_pool2d(px, (ts_pool2d_opts){.kernel = {2, 2}, .divisor_override = 2}), 7, 5,
               4.5, 7.5);
    ts_tensor *ones = ts_ones(TS_SHAPE(1, 1, 3, 3), f64);
    CHECK_VALS(ts_avg_pool2d(ones, (ts_pool2d_opts){.kernel = {2, 2},
                                                    .padding = {1, 1},
                                                    .ceil_mode = true,
                                                    .divisor_override = 2}),
               0.5, 1, 1, 2);
    CHECK(!ts_avg_pool2d(px, (ts_pool2d_opts){.kernel = {2, 2}, .divisor_override = -1}));
    CHECK_ERR(TS_ERR_ARG);

    /* the backward of a matmul with an empty contraction: zeros of the operands' shapes */
    ts_tensor *ma = ts_randn(TS_SHAPE(2, 3, 0), f64), *mb = ts_randn(TS_SHAPE(0, 4), f64);
    ts_set_requires_grad(ma, true), ts_set_requires_grad(mb, true);
    ts_tensor *my = ts_matmul(ma, mb);
    CHECK_VALS(ts_sum(ts_abs(my)), 0);
    ts_backward(ts_sum(my));
    CHECK(ts_grad(mb) && ts_ndim(ts_grad(mb)) == 2 && ts_size(ts_grad(mb), 1) == 4);
    CHECK(ts_grad(ma) && ts_numel(ts_grad(ma)) == 0);

    /* MultiheadAttention(bias=False) */
    ts_module *mha = ts_multihead_attention_new(4, 2, (ts_mha_opts){.no_bias = true});
    CHECK(mha != NULL);
    if (mha) {
        ts_tensor_list l = ts_module_named_parameters(mha);
        CHECK_EQ(l.n, 2);
        ts_tensor_list_free(&l);
        ts_module_free(mha);
    }
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    ts_dtype dts[2] = {TS_F32, TS_F64};
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 2; k++) {
            test_linear(devs[d], dts[k]);
            test_batch_norm(devs[d], dts[k]);
            test_layer_norm(devs[d], dts[k]);
            test_embedding(devs[d], dts[k]);
            test_grads_vs_torch(devs[d], dts[k]);
        }
        test_linear_errors(devs[d]);
        test_dropout(devs[d]);
        test_batch_norm_errors(devs[d]);
        test_gradcheck(devs[d]);
        test_torch_forms(devs[d]);
        test_pytorch_edge_forms(devs[d]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors); /* every temporary released */
    return ts_test_finish();
}
