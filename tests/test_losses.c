/* test_losses.c — cross_entropy (indices, K-dim, probabilities, ignore_index, label_smoothing,
 * weights, reductions), nll_loss, mse, l1, smooth_l1 and bce_with_logits on cpu and sim:0 in f32
 * and f64 against PyTorch 1.13; their error paths; gradcheck in f64 and gradients against
 * PyTorch's. */
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
 * in t.flatten().tolist()))) L = seq(20, 0.9, 0.3, 2.0).reshape(4, 5); T = torch.tensor([1, 0, 4,
 * 2]); W = torch.tensor([0.2, 1.0, 0.5, 2.0, 1.5]) Ti = torch.tensor([1, -100, 4, 2]) for r in
 * ("mean", "sum", "none"): out("CE_" + r.upper(), F.cross_entropy(L, T, reduction=r))
 * out("CE_W_MEAN", F.cross_entropy(L, T, weight=W)); out("CE_W_NONE", F.cross_entropy(L, T,
 * weight=W, reduction="none")) out("CE_IGN_MEAN", F.cross_entropy(L, Ti)); out("CE_IGN_W_MEAN",
 * F.cross_entropy(L, Ti, weight=W)) out("CE_IGN2_SUM", F.cross_entropy(L, T, ignore_index=2,
 * reduction="sum")) out("CE_IGN2_W_NONE", F.cross_entropy(L, T, weight=W, ignore_index=2,
 * reduction="none")) for r in ("mean", "sum", "none"): out("CE_LS_" + r.upper(), F.cross_entropy(L,
 * T, label_smoothing=0.1, reduction=r)) out("CE_LS_W_IGN_MEAN", F.cross_entropy(L, Ti, weight=W,
 * label_smoothing=0.1)) out("CE_LS_W_IGN_NONE", F.cross_entropy(L, Ti, weight=W,
 * label_smoothing=0.1, reduction="none")) K = seq(24, 0.7, 0.2, 1.5).reshape(2, 3, 2, 2); KT =
 * torch.tensor([0, 2, 1, 1, 2, 0, 0, 1]).reshape(2, 2, 2) KTi = torch.tensor([0, 2, -100, 1, 2, 0,
 * 0, 1]).reshape(2, 2, 2); KW = torch.tensor([0.5, 2.0, 1.0]) out("CEK_MEAN", F.cross_entropy(K,
 * KT)); out("CEK_W_IGN_NONE", F.cross_entropy(K, KTi, weight=KW, reduction="none"))
 * out("CEK_W_IGN_MEAN", F.cross_entropy(K, KTi, weight=KW))
 * P = torch.softmax(seq(20, 0.4, 1.1, 2.0).reshape(4, 5), 1)
 * for r in ("mean", "sum", "none"): out("CEP_" + r.upper(), F.cross_entropy(L, P, reduction=r))
 * out("CEP_LS_W_MEAN", F.cross_entropy(L, P, weight=W, label_smoothing=0.2))
 * KP = torch.softmax(seq(24, 0.4, 1.1, 2.0).reshape(2, 3, 2, 2), 1)
 * out("CEPK_MEAN", F.cross_entropy(K, KP)); out("CEPK_W_NONE", F.cross_entropy(K, KP, weight=KW,
 * reduction="none")) U = seq(5, 0.9, 0.3, 2.0) out("CEU", F.cross_entropy(U, torch.tensor(3)));
 * out("CEU_P", F.cross_entropy(U, P[0])) out("NLL_MEAN", F.nll_loss(L, T)); out("NLL_NONE",
 * F.nll_loss(L, T, reduction="none")) out("NLL_W_IGN_MEAN", F.nll_loss(L, Ti, weight=W));
 * out("NLL_W_IGN_SUM", F.nll_loss(L, Ti, weight=W, reduction="sum")) out("NLLK_W_IGN_MEAN",
 * F.nll_loss(K, KTi, weight=KW)) A = seq(20, 1.1, 0.2, 2.0).reshape(4, 5); B = seq(20, 0.5,
 * 0.7, 1.5).reshape(4, 5) for r in ("mean", "sum", "none"): out("MSE_" + r.upper(), F.mse_loss(A,
 * B, reduction=r)) out("MSE_BCAST", F.mse_loss(A, B[0].expand(4, 5))) for r in ("mean", "sum",
 * "none"): out("L1_" + r.upper(), F.l1_loss(A, B, reduction=r)) out("SL1_MEAN", F.smooth_l1_loss(A,
 * B)); out("SL1_NONE", F.smooth_l1_loss(A, B, reduction="none")) out("SL1_B05_SUM",
 * F.smooth_l1_loss(A, B, beta=0.5, reduction="sum")); out("SL1_B2_NONE", F.smooth_l1_loss(A, B,
 * beta=2.0, reduction="none")) X = seq(12, 1.7, 0.3, 4.0); X[0] = 30; X[5] = -30; X[11] = 12; X =
 * X.reshape(3, 4) Y = ((seq(12, 0.8, 0.5) + 1) / 2).reshape(3, 4); BW =
 * torch.tensor([0.5, 1.0, 2.0, 1.5]); PW = torch.tensor([3.0, 0.5, 1.0, 2.0]) for r in ("mean",
 * "sum", "none"): out("BCE_" + r.upper(), F.binary_cross_entropy_with_logits(X, Y, reduction=r))
 * out("BCE_W_PW_MEAN", F.binary_cross_entropy_with_logits(X, Y, weight=BW, pos_weight=PW))
 * out("BCE_PW_NONE", F.binary_cross_entropy_with_logits(X, Y, pos_weight=PW, reduction="none"))
 * # gradients
 * l_ = L.clone().requires_grad_(); F.cross_entropy(l_, Ti, weight=W,
 * label_smoothing=0.1).backward(); out("G_CE", l_.grad) x_ = X.clone().requires_grad_();
 * F.binary_cross_entropy_with_logits(x_, Y, weight=BW, pos_weight=PW, reduction="sum").backward();
 * out("G_BCE", x_.grad) a_ = A.clone().requires_grad_(); F.smooth_l1_loss(a_, B,
 * beta=0.5).backward(); out("G_SL1", a_.grad)
 */
static const double CE_MEAN[] = {2.1612472762315034};
static const double CE_SUM[] = {8.6449891049260135};
static const double CE_NONE[] = {0.87386378627524985, 4.6585382082441349, 0.71447318115530101,
                                 2.3981139292513274};
static const double CE_W_MEAN[] = {1.2738556763383413};
static const double CE_W_NONE[] = {0.87386378627524985, 0.93170764164882702, 1.0717097717329516,
                                   1.1990569646256637};
static const double CE_IGN_MEAN[] = {1.3288169655606261};
static const double CE_IGN_W_MEAN[] = {1.0482101742112884};
static const double CE_IGN2_SUM[] = {6.2468751756746865};
static const double CE_IGN2_W_NONE[] = {0.87386378627524985, 0.93170764164882702,
                                        1.0717097717329516, 0};
static const double CE_LS_MEAN[] = {2.1746514776200319};
static const double CE_LS_SUM[] = {8.6986059104801274};
static const double CE_LS_NONE[] = {0.99850670314256185, 4.4370136825992503, 0.85113092222896813,
                                    2.4119546025093466};
static const double CE_LS_W_IGN_MEAN[] = {1.21511734751628};
static const double CE_LS_W_IGN_NONE[] = {1.0442898277828259, 0, 1.1771264597119859,
                                          1.4239357550540281};
static const double CEK_MEAN[] = {1.6360292886288734};
static const double CEK_W_IGN_NONE[] = {
    0.41363242190513072, 1.3007845707755641,  0,
    6.881689817706711,   0.54797034090655483, 0.67746386265606062,
    0.96275898449007546, 0.36628802770631119};
static const double CEK_W_IGN_MEAN[] = {1.4867450701528542};
static const double CEP_MEAN[] = {2.346273606804365};
static const double CEP_SUM[] = {9.3850944272174601};
static const double CEP_NONE[] = {1.7390964570630527, 3.6152846933003224, 1.5816644209357313,
                                  2.449048855918353};
static const double CEP_LS_W_MEAN[] = {2.2728803212619706};
static const double CEPK_MEAN[] = {1.3406746489934476};
static const double CEPK_W_NONE[] = {0.83331078450713902, 0.82579442368332623, 0.76083880095678036,
                                     0.79923161935640641, 5.1676180844901491,  3.6441573503404583,
                                     1.3532828455787724,  0.95742570990164255};
static const double CEU[] = {2.4557019420899682};
static const double CEU_P[] = {1.7390964570630527};
static const double NLL_MEAN[] = {-0.18555128428426049};
static const double NLL_NONE[] = {-1.8640781719344526, 1.9923292176716814, -0.65494887827538606,
                                  -0.21550730459888459};
static const double NLL_W_IGN_MEAN[] = {-0.98475171388232463};
static const double NLL_W_IGN_SUM[] = {-2.954255141646974};
static const double NLLK_W_IGN_MEAN[] = {-0.17172749019166603};
static const double MSE_MEAN[] = {3.2402249185275154};
static const double MSE_SUM[] = {64.804498370550306};
static const double MSE_NONE[] = {
    0.32374719537233393, 0.27990209424691731,   0.018651598319728607, 3.6645868386828329,
    6.9087590101066887,  1.027810452618716,     3.1790209384043799,   10.924653383287042,
    5.4015424053933669,  0.0056311045245036866, 1.2821647619590504,   0.16146692979588739,
    0.7629618930517168,  0.46143261527001239,   1.6046430121143362,   9.5195659867725499,
    7.4466670980535188,  0.054517344526002223,  4.9886626982556868,   6.7881110097950392};
static const double MSE_BCAST[] = {2.6208871460243901};
static const double L1_MEAN[] = {1.4759452396604433};
static const double L1_SUM[] = {29.518904793208868};
static const double L1_NONE[] = {
    0.56898786926641409, 0.52905774188354648,  0.1365708545764015, 1.9143110611086258,
    2.6284518276176736,  1.0138098700539051,   1.7829809136399581, 3.3052463422999265,
    2.3241218568296644,  0.075040685794465434, 1.1323271444061784, 0.40182947850535727,
    0.87347689897999981, 0.67928831527563638,  1.2667450462166159, 3.0853793910591532,
    2.7288582040944376,  0.23348949553674192,  2.2335314410716691, 2.6054003549924989};
static const double SL1_MEAN[] = {1.0527659420471929};
static const double SL1_NONE[] = {
    0.16187359768616696, 0.13995104712345866,   0.0093257991598643033, 1.4143110611086258,
    2.1284518276176736,  0.5138098700539051,    1.2829809136399581,    2.8052463422999265,
    1.8241218568296644,  0.0028155522622518433, 0.63232714440617843,   0.080733464897943696,
    0.3814809465258584,  0.2307163076350062,    0.76674504621661588,   2.5853793910591532,
    2.2288582040944376,  0.027258672263001112,  1.7335314410716691,    2.1054003549924989};
static const double SL1_B05_SUM[] = {24.912241255962027};
static const double SL1_B2_NONE[] = {
    0.080936798843083482, 0.069975523561729328,  0.0046628995799321516, 0.91614670967070821,
    1.6284518276176736,   0.25695261315467899,   0.79475523460109498,   2.3052463422999265,
    1.3241218568296644,   0.0014077761311259217, 0.3205411904897626,    0.040366732448971848,
    0.1907404732629292,   0.1153581538175031,    0.40116075302858406,   2.0853793910591532,
    1.7288582040944376,   0.013629336131500556,  1.2335314410716691,    1.6054003549924989};
static const double BCE_MEAN[] = {2.1586272479506321};
static const double BCE_SUM[] = {25.903526975407583};
static const double BCE_NONE[] = {7.8086169209370482,  0.092258550271667003, 2.0878185081170098,
                                  1.9597468344873492,  2.2831473447439108,   0.33704823502363834,
                                  0.32431207493248149, 0.79993795043999993,  0.8397980767379627,
                                  0.50323385330498904, 3.6143290232604244,   5.2532796031511069};
static const double BCE_W_PW_MEAN[] = {2.8327825017671273};
static const double BCE_PW_NONE[] = {7.8086169209371867,  0.079502464459361016, 2.0878185081170098,
                                     3.9025855711641708,  2.307944246665687,    0.1685241175118648,
                                     0.32431207493248149, 1.4733896717157,      0.87180671078338345,
                                     0.25437283672572514, 3.6143290232604239,   5.2532830575838743};
static const double G_CE[] = {0.037771006996024002,
                              -0.1669982410193416,
                              0.11837309097495231,
                              0.015382052460375484,
                              -0.0045279094120102125,
                              0,
                              0,
                              0,
                              0,
                              0,
                              0.15672247010798174,
                              0.02372869241003589,
                              0.01352650111935827,
                              0.02880228709939673,
                              -0.22277995073677265,
                              0.087995337928836778,
                              0.06677010793424179,
                              -0.13654912492219257,
                              -0.010074528607951397,
                              -0.0081417923329346192};
static const double G_BCE[] = {0.13014361534883334,  0.0051617495126171087, -1.6487477650430258,
                               -1.7532478640207663,  0.34469471215364211,   -0.0056174705836326971,
                               -0.11016756696537394, -0.81962542695720031,  0.079509711006163331,
                               -0.19219124216406608, -1.762482805571955,    0.65664478447456742};
static const double G_SL1[] = {
    -0.050000000000000003, 0.050000000000000003,  -0.013657085457640151, -0.050000000000000003,
    -0.050000000000000003, -0.050000000000000003, 0.050000000000000003,  0.050000000000000003,
    0.050000000000000003,  0.0075040685794465437, -0.050000000000000003, -0.040182947850535729,
    0.050000000000000003,  0.050000000000000003,  -0.050000000000000003, -0.050000000000000003,
    -0.050000000000000003, -0.023348949553674194, 0.050000000000000003,  0.050000000000000003};

/* ------------------------------------------------------------------ helpers */
#define N_OF(a) ((int64_t)(sizeof(a) / sizeof *(a)))

static void seq_host(double *v, int64_t n, double a, double b, double scale) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(a * (double)i + b) * scale;
}

/* sin(a i + b) * scale, as the script's seq() */
static ts_tensor *seqt(ts_shape s, double a, double b, double scale, ts_dtype dt, ts_device dev) {
    double v[64];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    seq_host(v, n, a, b, scale);
    return ts_tensor_f64(s, v, (ts_opts){.dtype = dt, .device = dev});
}

static ts_tensor *vec(int64_t n, const double *v, ts_dtype dt, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = dt, .device = dev});
}

static ts_tensor *idx(ts_shape s, const int64_t *v, ts_device dev) {
    return ts_tensor_i64(s, v, (ts_opts){.device = dev});
}

/* softmax over dim 1 of seq(n, 0.4, 1.1, 2) viewed as [outer, c, inner], in double on the host */
static ts_tensor *probs(ts_shape s, ts_dtype dt, ts_device dev) {
    double v[64], p[64];
    int64_t n = 1, c = s.dims[s.ndim == 1 ? 0 : 1], inner = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    for (int i = 2; i < s.ndim; i++) inner *= s.dims[i];
    seq_host(v, n, 0.4, 1.1, 2.0);
    for (int64_t o = 0; o < n / (c * inner); o++) {
        for (int64_t j = 0; j < inner; j++) {
            double z = 0;
            for (int64_t k = 0; k < c; k++) z += exp(v[(o * c + k) * inner + j]);
            for (int64_t k = 0; k < c; k++)
                p[(o * c + k) * inner + j] = exp(v[(o * c + k) * inner + j]) / z;
        }
    }
    return ts_tensor_f64(s, p, (ts_opts){.dtype = dt, .device = dev});
}

/* t holds ref[0..n) within tol * max(1, |ref|) */
static bool close_to(ts_tensor *t, const double *ref, int64_t n, double tol) {
    if (!t || ts_numel(t) != n) {
        printf("  expected %lld values, got %s\n", (long long)n, t ? "another count" : "NULL");
        return false;
    }
    double h[64];
    bool ok = ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        if (!(fabs(h[i] - ref[i]) <= tol * fmax(1.0, fabs(ref[i])))) {
            printf("  element %lld: got %.12g, expected %.12g\n", (long long)i, h[i], ref[i]);
            ok = false;
        }
    }
    return ok;
}
#define CHECK_CLOSE(t, ref) CHECK(close_to((t), (ref), N_OF(ref), tol))

static bool is_0dim(ts_tensor *t) { return t && ts_ndim(t) == 0; }
static bool msg_has(const char *s) { return strstr(ts_error_message(), s) != NULL; }

static const int64_t T_[4] = {1, 0, 4, 2}, TI_[4] = {1, -100, 4, 2};
static const int64_t KT_[8] = {0, 2, 1, 1, 2, 0, 0, 1}, KTI_[8] = {0, 2, -100, 1, 2, 0, 0, 1};
static const double W_[5] = {0.2, 1.0, 0.5, 2.0, 1.5}, KW_[3] = {0.5, 2.0, 1.0};
static const double BW_[4] = {0.5, 1.0, 2.0, 1.5}, PW_[4] = {3.0, 0.5, 1.0, 2.0};

static ts_tensor *bce_x(ts_dtype dt, ts_device dev) {
    double v[12];
    seq_host(v, 12, 1.7, 0.3, 4.0);
    v[0] = 30, v[5] = -30, v[11] = 12; /* saturated logits */
    return ts_tensor_f64(TS_SHAPE(3, 4), v, (ts_opts){.dtype = dt, .device = dev});
}
static ts_tensor *bce_y(ts_dtype dt, ts_device dev) {
    double v[12];
    seq_host(v, 12, 0.8, 0.5, 1.0);
    for (int i = 0; i < 12; i++) v[i] = (v[i] + 1) / 2;
    return ts_tensor_f64(TS_SHAPE(3, 4), v, (ts_opts){.dtype = dt, .device = dev});
}

/* ------------------------------------------------------------------ cross_entropy, nll */
static void test_cross_entropy(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = dt == TS_F64 ? 1e-12 : 3e-6;
    ts_tensor *l = seqt(TS_SHAPE(4, 5), 0.9, 0.3, 2.0, dt, dev);
    ts_tensor *t = idx(TS_SHAPE(4), T_, dev), *ti = idx(TS_SHAPE(4), TI_, dev);
    ts_tensor *w = vec(5, W_, dt, dev);
    ts_tensor *y = ts_cross_entropy(l, t);
    CHECK(is_0dim(y) && ts_dtype_of(y) == dt && ts_device_equal(ts_device_of(y), dev));
    CHECK_CLOSE(y, CE_MEAN);
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, (ts_loss_opts){.reduction = TS_REDUCTION_SUM}), CE_SUM);
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}), CE_NONE);
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, (ts_loss_opts){.weight = w}), CE_W_MEAN);
    CHECK_CLOSE(
        ts_cross_entropy_ex(l, t, (ts_loss_opts){.weight = w, .reduction = TS_REDUCTION_NONE}),
        CE_W_NONE);
    CHECK_CLOSE(ts_cross_entropy(l, ti), CE_IGN_MEAN);
    CHECK_CLOSE(ts_cross_entropy_ex(l, ti, (ts_loss_opts){.weight = w}), CE_IGN_W_MEAN);
    ts_loss_opts ign2 = {.has_ignore_index = true, .ignore_index = 2};
    ign2.reduction = TS_REDUCTION_SUM;
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, ign2), CE_IGN2_SUM);
    ign2.reduction = TS_REDUCTION_NONE, ign2.weight = w;
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, ign2), CE_IGN2_W_NONE);
    /* -100 is an ordinary (out of range) class once another ignore_index is set */
    ign2.weight = NULL;
    CHECK(!ts_cross_entropy_ex(l, ti, ign2));
    CHECK(msg_has("Target -100 is out of bounds."));
    CHECK_ERR(TS_ERR_ARG);
    /* label smoothing */
    ts_loss_opts ls = {.label_smoothing = 0.1};
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, ls), CE_LS_MEAN);
    ls.reduction = TS_REDUCTION_SUM;
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, ls), CE_LS_SUM);
    ls.reduction = TS_REDUCTION_NONE;
    CHECK_CLOSE(ts_cross_entropy_ex(l, t, ls), CE_LS_NONE);
    ls.weight = w;
    CHECK_CLOSE(ts_cross_entropy_ex(l, ti, ls), CE_LS_W_IGN_NONE);
    ls.reduction = TS_REDUCTION_MEAN;
    CHECK_CLOSE(ts_cross_entropy_ex(l, ti, ls), CE_LS_W_IGN_MEAN);
    /* K-dim: [N, C, d1, d2] with [N, d1, d2] targets */
    ts_tensor *k = seqt(TS_SHAPE(2, 3, 2, 2), 0.7, 0.2, 1.5, dt, dev);
    ts_tensor *kt = idx(TS_SHAPE(2, 2, 2), KT_, dev), *kti = idx(TS_SHAPE(2, 2, 2), KTI_, dev);
    ts_tensor *kw = vec(3, KW_, dt, dev);
    CHECK_CLOSE(ts_cross_entropy(k, kt), CEK_MEAN);
    ts_tensor *kn =
        ts_cross_entropy_ex(k, kti, (ts_loss_opts){.weight = kw, .reduction = TS_REDUCTION_NONE});
    CHECK(kn && ts_ndim(kn) == 3 && ts_size(kn, 2) == 2);
    CHECK_CLOSE(kn, CEK_W_IGN_NONE);
    CHECK_CLOSE(ts_cross_entropy_ex(k, kti, (ts_loss_opts){.weight = kw}), CEK_W_IGN_MEAN);
    /* probability targets */
    ts_tensor *p = probs(TS_SHAPE(4, 5), dt, dev);
    CHECK_CLOSE(ts_cross_entropy(l, p), CEP_MEAN);
    CHECK_CLOSE(ts_cross_entropy_ex(l, p, (ts_loss_opts){.reduction = TS_REDUCTION_SUM}), CEP_SUM);
    CHECK_CLOSE(ts_cross_entropy_ex(l, p, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}),
                CEP_NONE);
    CHECK_CLOSE(ts_cross_entropy_ex(l, p, (ts_loss_opts){.weight = w, .label_smoothing = 0.2}),
                CEP_LS_W_MEAN);
    ts_tensor *kp = probs(TS_SHAPE(2, 3, 2, 2), dt, dev);
    CHECK_CLOSE(ts_cross_entropy(k, kp), CEPK_MEAN);
    CHECK_CLOSE(
        ts_cross_entropy_ex(k, kp, (ts_loss_opts){.weight = kw, .reduction = TS_REDUCTION_NONE}),
        CEPK_W_NONE);
    /* unbatched: [C] logits with a 0-dim target or [C] probabilities */
    ts_tensor *u = seqt(TS_SHAPE(5), 0.9, 0.3, 2.0, dt, dev);
    ts_tensor *yu = ts_cross_entropy(u, idx(TS_SHAPE(), (int64_t[]){3}, dev));
    CHECK(is_0dim(yu));
    CHECK_CLOSE(yu, CEU);
    CHECK_CLOSE(ts_cross_entropy(u, ts_select(p, 0, 0)), CEU_P);
    /* nll_loss on arbitrary scores picks -input[target] */
    CHECK_CLOSE(ts_nll_loss(l, t, (ts_loss_opts){0}), NLL_MEAN);
    CHECK_CLOSE(ts_nll_loss(l, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}), NLL_NONE);
    CHECK_CLOSE(ts_nll_loss(l, ti, (ts_loss_opts){.weight = w}), NLL_W_IGN_MEAN);
    CHECK_CLOSE(ts_nll_loss(l, ti, (ts_loss_opts){.weight = w, .reduction = TS_REDUCTION_SUM}),
                NLL_W_IGN_SUM);
    CHECK_CLOSE(ts_nll_loss(k, kti, (ts_loss_opts){.weight = kw}), NLLK_W_IGN_MEAN);
    /* every target ignored: the mean is 0/0 as in PyTorch */
    ts_tensor *all_ign = idx(TS_SHAPE(4), (int64_t[]){-100, -100, -100, -100}, dev);
    CHECK(isnan(ts_item(ts_cross_entropy(l, all_ign))));
    CHECK_OK();
    ts_scope_end();
}

static void test_cross_entropy_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *l = seqt(TS_SHAPE(4, 5), 0.9, 0.3, 2.0, TS_F32, dev);
    ts_tensor *t = idx(TS_SHAPE(4), T_, dev);
    CHECK(!ts_cross_entropy(l, ts_tensor_f32(TS_SHAPE(4), (float[]){1, 0, 4, 2}, o)));
    CHECK(msg_has("expected scalar type Long but found Float"));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_cross_entropy(l, idx(TS_SHAPE(4), (int64_t[]){1, 7, 0, 0}, dev)));
    CHECK(msg_has("Target 7 is out of bounds."));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_nll_loss(l, idx(TS_SHAPE(4), (int64_t[]){1, -5, 0, 0}, dev), (ts_loss_opts){0}));
    CHECK(msg_has("nll_loss: Target -5 is out of bounds."));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_cross_entropy(l, idx(TS_SHAPE(3), T_, dev)));
    CHECK(msg_has("Expected input batch_size (4) to match target batch_size (3)."));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *k = seqt(TS_SHAPE(2, 3, 2, 2), 0.7, 0.2, 1.5, TS_F32, dev);
    CHECK(!ts_cross_entropy(k, idx(TS_SHAPE(2, 2, 3), (int64_t[12]){0}, dev)));
    CHECK(msg_has("Expected target size [2, 2, 2], got [2, 2, 3]"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_cross_entropy(k, idx(TS_SHAPE(2), (int64_t[2]){0}, dev)));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_cross_entropy(l, idx(TS_SHAPE(4), T_, ts_sim(1))));
    CHECK(msg_has("same device"));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_cross_entropy_ex(l, t, (ts_loss_opts){.weight = ts_ones(TS_SHAPE(3), o)}));
    CHECK(msg_has("weight tensor should be defined either for all 5 classes"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_nll_loss(
        l, t,
        (ts_loss_opts){.weight = ts_ones(TS_SHAPE(5), (ts_opts){.dtype = TS_F64, .device = dev})}));
    CHECK(msg_has("expected scalar type Float but found Double"));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_cross_entropy_ex(l, t, (ts_loss_opts){.label_smoothing = 1.5}));
    CHECK(msg_has("label_smoothing must be between 0.0 and 1.0"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_cross_entropy_ex(l, t, (ts_loss_opts){.reduction = (ts_reduction)7}));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(
        !ts_cross_entropy(l, ts_zeros(TS_SHAPE(4, 5), (ts_opts){.dtype = TS_I64, .device = dev})));
    CHECK(msg_has("Expected floating point type for target with class probabilities, got Long"));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(
        !ts_cross_entropy(ts_zeros(TS_SHAPE(4, 5), (ts_opts){.dtype = TS_I64, .device = dev}), t));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_cross_entropy(seqt(TS_SHAPE(5), 0.9, 0.3, 2.0, TS_F32, dev),
                            idx(TS_SHAPE(1), T_, dev)));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_cross_entropy(ts_scalar(1, o), idx(TS_SHAPE(), T_, dev)));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_cross_entropy(NULL, t));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ regression losses, bce */
static void test_pointwise(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = dt == TS_F64 ? 1e-12 : 3e-6;
    ts_tensor *a = seqt(TS_SHAPE(4, 5), 1.1, 0.2, 2.0, dt, dev);
    ts_tensor *b = seqt(TS_SHAPE(4, 5), 0.5, 0.7, 1.5, dt, dev);
    ts_loss_opts sum = {.reduction = TS_REDUCTION_SUM}, none = {.reduction = TS_REDUCTION_NONE};
    ts_tensor *m = ts_mse_loss(a, b);
    CHECK(is_0dim(m) && ts_dtype_of(m) == dt);
    CHECK_CLOSE(m, MSE_MEAN);
    CHECK_CLOSE(ts_mse_loss_ex(a, b, sum), MSE_SUM);
    CHECK_CLOSE(ts_mse_loss_ex(a, b, none), MSE_NONE);
    CHECK_CLOSE(ts_mse_loss(a, ts_select(b, 0, 0)), MSE_BCAST); /* broadcast, as PyTorch */
    CHECK_CLOSE(ts_l1_loss(a, b, (ts_loss_opts){0}), L1_MEAN);
    CHECK_CLOSE(ts_l1_loss(a, b, sum), L1_SUM);
    CHECK_CLOSE(ts_l1_loss(a, b, none), L1_NONE);
    CHECK_CLOSE(ts_smooth_l1_loss(a, b, (ts_loss_opts){0}), SL1_MEAN);
    CHECK_CLOSE(ts_smooth_l1_loss(a, b, none), SL1_NONE);
    CHECK_CLOSE(ts_smooth_l1_loss(a, b, (ts_loss_opts){.beta = 0.5, .reduction = TS_REDUCTION_SUM}),
                SL1_B05_SUM);
    CHECK_CLOSE(
        ts_smooth_l1_loss(a, b, (ts_loss_opts){.beta = 2.0, .reduction = TS_REDUCTION_NONE}),
        SL1_B2_NONE);
    ts_tensor *x = bce_x(dt, dev), *y = bce_y(dt, dev);
    ts_tensor *bw = vec(4, BW_, dt, dev), *pw = vec(4, PW_, dt, dev);
    CHECK_CLOSE(ts_bce_with_logits(x, y, (ts_loss_opts){0}), BCE_MEAN);
    CHECK_CLOSE(ts_bce_with_logits(x, y, sum), BCE_SUM);
    CHECK_CLOSE(ts_bce_with_logits(x, y, none), BCE_NONE);
    CHECK_CLOSE(ts_bce_with_logits(x, y, (ts_loss_opts){.weight = bw, .pos_weight = pw}),
                BCE_W_PW_MEAN);
    CHECK_CLOSE(
        ts_bce_with_logits(x, y, (ts_loss_opts){.pos_weight = pw, .reduction = TS_REDUCTION_NONE}),
        BCE_PW_NONE);
    CHECK_OK();
    ts_scope_end();
}

static void test_pointwise_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *a = ts_ones(TS_SHAPE(4, 5), o);
    CHECK(!ts_mse_loss(a, ts_ones(TS_SHAPE(3), o)));
    CHECK(msg_has("mse_loss"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_l1_loss(ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_I64, .device = dev}),
                      ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_I64, .device = dev}),
                      (ts_loss_opts){0}));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_mse_loss(a, ts_ones(TS_SHAPE(4, 5), (ts_opts){.device = ts_sim(1)})));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_smooth_l1_loss(a, a, (ts_loss_opts){.beta = -1}));
    CHECK(msg_has("smooth_l1_loss does not support negative values for beta"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_l1_loss(a, a, (ts_loss_opts){.reduction = (ts_reduction)-1}));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_bce_with_logits(a, ts_ones(TS_SHAPE(5), o), (ts_loss_opts){0}));
    CHECK(msg_has("Target size ([5]) must be the same as input size ([4, 5])"));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_bce_with_logits(a, a, (ts_loss_opts){.pos_weight = ts_ones(TS_SHAPE(3), o)}));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_bce_with_logits(a, a, (ts_loss_opts){.weight = ts_ones(TS_SHAPE(2, 4, 5), o)}));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_bce_with_logits(
        a, a, (ts_loss_opts){.weight = ts_ones(TS_SHAPE(5), (ts_opts){.device = ts_sim(1)})}));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_bce_with_logits(a, ts_ones(TS_SHAPE(4, 5), (ts_opts){.dtype = TS_I64, .device = dev}),
                              (ts_loss_opts){0}));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_mse_loss(a, NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradients */
static ts_device g_dev; /* where the gradcheck functions make their constant operands */

static ts_tensor *f_ce(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_loss_opts o = {.weight = vec(5, W_, TS_F64, g_dev), .label_smoothing = 0.1};
    return ts_cross_entropy_ex(in[0], idx(TS_SHAPE(4), TI_, g_dev), o);
}
static ts_tensor *f_ce_k(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_cross_entropy_ex(in[0], idx(TS_SHAPE(2, 2, 2), KTI_, g_dev),
                               (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
}
static ts_tensor *f_ce_probs(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_cross_entropy_ex(in[0], in[1], (ts_loss_opts){.weight = vec(5, W_, TS_F64, g_dev)});
}
static ts_tensor *f_nll(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_nll_loss(in[0], idx(TS_SHAPE(4), TI_, g_dev),
                       (ts_loss_opts){.weight = vec(5, W_, TS_F64, g_dev)});
}
static ts_tensor *f_mse(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_mse_loss(in[0], in[1]);
}
static ts_tensor *f_l1(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_l1_loss(in[0], in[1], (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
}
static ts_tensor *f_sl1(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_smooth_l1_loss(in[0], in[1], (ts_loss_opts){.beta = 0.5});
}
static ts_tensor *f_bce(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_loss_opts o = {.weight = vec(4, BW_, TS_F64, g_dev),
                      .pos_weight = vec(4, PW_, TS_F64, g_dev)};
    return ts_bce_with_logits(in[0], in[1], o);
}

static ts_tensor *leaf(ts_tensor *t) {
    ts_set_requires_grad(t, true);
    return t;
}

static void gradcheck_one(const char *what, ts_gradcheck_fn f, ts_tensor *const *in, int n) {
    bool ok = ts_gradcheck(f, NULL, in, n, (ts_gradcheck_opts){0});
    printf("gradcheck %-16s on %s: %s\n", what, ts_device_str(g_dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    g_dev = dev;
    ts_tensor *l = leaf(seqt(TS_SHAPE(4, 5), 0.9, 0.3, 2.0, TS_F64, dev));
    gradcheck_one("cross_entropy", f_ce, &l, 1);
    ts_tensor *k = leaf(seqt(TS_SHAPE(2, 3, 2, 2), 0.7, 0.2, 1.5, TS_F64, dev));
    gradcheck_one("cross_entropy K", f_ce_k, &k, 1);
    ts_tensor *lp[2] = {l, leaf(probs(TS_SHAPE(4, 5), TS_F64, dev))};
    gradcheck_one("ce probabilities", f_ce_probs, lp, 2);
    gradcheck_one("nll_loss", f_nll, &l, 1);
    ts_tensor *ab[2] = {leaf(seqt(TS_SHAPE(4, 5), 1.1, 0.2, 2.0, TS_F64, dev)),
                        leaf(seqt(TS_SHAPE(4, 5), 0.5, 0.7, 1.5, TS_F64, dev))};
    gradcheck_one("mse_loss", f_mse, ab, 2);
    gradcheck_one("l1_loss", f_l1, ab, 2);
    gradcheck_one("smooth_l1_loss", f_sl1, ab, 2);
    ts_tensor *xy[2] = {leaf(bce_x(TS_F64, dev)), leaf(bce_y(TS_F64, dev))};
    gradcheck_one("bce_with_logits", f_bce, xy, 2);
    ts_scope_end();
}

/* gradients against PyTorch's (G_CE, G_BCE, G_SL1 in the script) */
static void test_grads_vs_torch(ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    const double tol = dt == TS_F64 ? 1e-12 : 3e-6;
    ts_tensor *l = leaf(seqt(TS_SHAPE(4, 5), 0.9, 0.3, 2.0, dt, dev));
    ts_loss_opts ce = {.weight = vec(5, W_, dt, dev), .label_smoothing = 0.1};
    ts_tensor *loss = ts_cross_entropy_ex(l, idx(TS_SHAPE(4), TI_, dev), ce);
    CHECK_CLOSE(loss, CE_LS_W_IGN_MEAN); /* the forward recorded for autograd computes the same */
    ts_backward(loss);
    CHECK_CLOSE(ts_grad(l), G_CE);
    ts_tensor *x = leaf(bce_x(dt, dev));
    ts_loss_opts o = {.weight = vec(4, BW_, dt, dev),
                      .pos_weight = vec(4, PW_, dt, dev),
                      .reduction = TS_REDUCTION_SUM};
    ts_backward(ts_bce_with_logits(x, bce_y(dt, dev), o));
    CHECK_CLOSE(ts_grad(x), G_BCE);
    ts_tensor *a = leaf(seqt(TS_SHAPE(4, 5), 1.1, 0.2, 2.0, dt, dev));
    ts_backward(ts_smooth_l1_loss(a, seqt(TS_SHAPE(4, 5), 0.5, 0.7, 1.5, dt, dev),
                                  (ts_loss_opts){.beta = 0.5}));
    CHECK_CLOSE(ts_grad(a), G_SL1);
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
            test_cross_entropy(devs[d], dts[k]);
            test_pointwise(devs[d], dts[k]);
            test_grads_vs_torch(devs[d], dts[k]);
        }
        test_cross_entropy_errors(devs[d]);
        test_pointwise_errors(devs[d]);
        test_gradcheck(devs[d]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors); /* every temporary released */
    return ts_test_finish();
}
