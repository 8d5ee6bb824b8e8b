/* test_losses_margin_pointwise.c — kl_div, huber, soft_margin, margin_ranking, hinge_embedding,
 * cosine_embedding, triplet_margin, poisson_nll, gaussian_nll, multilabel_margin,
 * multilabel_soft_margin and multi_margin (src/nn/loss_pointwise.c, loss_margin.c) on cpu and sim:0
 * in f32 and f64 against PyTorch in float64; gradients against PyTorch's; gradcheck in f64; error
 * paths.
 *
 * Expected values: PyTorch 2 in float64, from this script (seq() as seqt() below):
 *
 * import math, torch, torch.nn.functional as F
 * torch.set_default_dtype(torch.float64)
 * def seq(n, a, b, s=1.0): return torch.tensor([math.sin(a * i + b) * s for i in range(n)])
 * A = seq(12, 1.1, 0.2, 2.0).reshape(3, 4); B = seq(12, 0.5, 0.7, 1.5).reshape(3, 4)
 * C = seq(12, 0.3, 0.1, 1.0).reshape(3, 4)
 * Y = torch.tensor([1., -1, -1, 1, 1, 1, -1, 1, -1, 0, 1, -1]).reshape(3, 4)
 * LI = torch.log_softmax(A, 1); P = torch.softmax(B, 1); P[0, 1] = 0
 * KL_MEAN F.kl_div(LI, P); KL_BATCHMEAN (reduction="batchmean"); KL_NONE ("none")
 * KL_LOGT_SUM F.kl_div(LI, torch.log_softmax(B, 1), reduction="sum", log_target=True)
 * HUBER_NONE F.huber_loss(A, B, reduction="none", delta=0.8)
 * HUBER_W_MEAN F.huber_loss(A, B, delta=1.3, weight=C.abs()); SOFTM_MEAN F.soft_margin_loss(A, Y)
 * y3 = torch.tensor([1., -1, 1])
 * MRANK_NONE F.margin_ranking_loss(A[:, 0], B[:, 0], y3, margin=0.3, reduction="none")
 * HINGE_NONE F.hinge_embedding_loss(A, Y, margin=1.5, reduction="none")
 * COS_NONE F.cosine_embedding_loss(A, B, y3, margin=0.2, reduction="none")
 * COS_0D F.cosine_embedding_loss(A[1], B[1], torch.tensor(-1.), margin=-0.5)
 * TRIP_SWAP_NONE F.triplet_margin_loss(A, B, C, margin=1.0, swap=True, reduction="none")
 * TRIP_P1_MEAN F.triplet_margin_loss(A, B, C, margin=2.0, p=1); T = B.abs() * 3
 * POIS_FULL_NONE F.poisson_nll_loss(A, T, full=True, reduction="none")
 * POIS_NOLOG_FULL_SUM F.poisson_nll_loss(A.exp(), T, log_input=False, full=True, reduction="sum")
 * V = C.abs() + 0.1; V[1, 2] = 1e-9
 * GAUSS_FULL_NONE F.gaussian_nll_loss(A, B, V, full=True, reduction="none")
 * GAUSS_HOMO_MEAN F.gaussian_nll_loss(A, B, V[:, 0])
 * MT = torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [2, -1, 0, 0]])
 * MLM_NONE F.multilabel_margin_loss(A, MT, reduction="none")
 * MLM_1D F.multilabel_margin_loss(A[0], MT[0], reduction="none")
 * Z = (Y > 0).double(); MW = torch.tensor([0.5, 1.0, 2.0, 1.5])
 * MLSM_W_NONE F.multilabel_soft_margin_loss(A, Z, weight=MW, reduction="none")
 * t3 = torch.tensor([3, 0, 2]); MM_NONE F.multi_margin_loss(A, t3, reduction="none")
 * MM_P2_W_MEAN F.multi_margin_loss(A, t3, p=2, margin=0.7, weight=MW)
 * gradients (.grad of the leaf): G_GAUSS_IN, G_GAUSS_VAR of gaussian_nll_loss(A, B, V, "sum");
 * G_MM of MM_P2_W_MEAN; G_MLM of multilabel_margin_loss(A, MT); G_KL_IN of kl_div(LI, P,
 * "batchmean"); G_TRIP of triplet_margin_loss(A, B, C, swap=True)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static const double KL_MEAN[] = {0.29616419153386869};
static const double KL_BATCHMEAN[] = {1.1846567661354748};
static const double KL_NONE[] = {0.079957408670073893,  0,
                                 0.0023307544313907469, 0.41506452097332452,
                                 1.996456485434585,     0.54518760056903059,
                                 -0.088382411930949173, -0.16937086170204244,
                                 -0.21257872744404674,  0.077153159376262825,
                                 0.41920071142779208,   0.48895165860100354};
static const double KL_LOGT_SUM[] = {3.3698486222454354};
static const double HUBER_NONE[] = {
    0.16187359768616696, 0.13995104712345866,   0.0093257991598643033, 1.2114488488869009,
    1.782761462094139,   0.4910478960431241,    1.1063847309119665,    2.3241970738399416,
    1.5392974854637318,  0.0028155522622518433, 0.58586171552494271,   0.080733464897943696};
static const double HUBER_W_MEAN[] = {0.83224544273360268};
static const double SOFTM_MEAN[] = {1.2195128769655534};
static const double MRANK_NONE[] = {0.86898786926641414, 0, 0};
static const double HINGE_NONE[] = {0.39733866159012243, 0,
                                    0.14907363889769876, -0.70156645537924056,
                                    -1.987382007266929,  -1.1013710851952752,
                                    0.51177329772278213, 1.997882683679544,
                                    0.67576302951648681, 1.5,
                                    -1.9583554583026348, 2.0264635827316018};
static const double COS_NONE[] = {0.33564789684237128, 0, 0.61521257874645607};
static const double COS_0D[] = {0};
static const double TRIP_SWAP_NONE[] = {1.4527225321759434, 2.7292388507031871, 1.0412172522805316};
static const double TRIP_P1_MEAN[] = {2.4542778691095868};
static const double POIS_FULL_NONE[] = {
    1.9736758708906279, 2.2417949713508039,  1.7113846993230535, 5.6734976949851443,
    4.5397025170665479, 0.62172717344209394, 1.371056936216255,  2.5777373366198568,
    2.5101263007796835, 8.3768299038303109,  6.1374855951511318, 0.78753615854403902};
static const double POIS_NOLOG_FULL_SUM[] = {38.522554544768347};
static const double GAUSS_FULL_NONE[] = {
    0.92384563163627886, 0.84762353368990107, 0.78375869475595739, 2.8349854081429466,
    4.1976945198026954,  1.4337675055427046,  1589504.4803854441,  6.8834476227754227,
    4.6061927413641879,  0.50919299882141722, 4.4695320121697169,  0.62895342438264867};
static const double GAUSS_HOMO_MEAN[] = {1.8480689480659713};
static const double MLM_NONE[] = {2.7911352628629027, 0, 1.9806746162185132};
static const double MLM_1D[] = {2.7911352628629027};
static const double MLSM_W_NONE[] = {1.7847241384221317, 1.3115957789211741, 1.4306929991679842};
static const double MM_NONE[] = {2.195020189916133, 2.7117210806405687, 1.9806746162185132};
static const double MM_P2_W_MEAN[] = {7.4283488652303049};
static const double G_GAUSS_IN[] = {-2.8473109193343982, 1.080992876948403,   -0.18350928353142326,
                                    -2.0333192334113552, -2.4713756742764694, -0.92200273565100976,
                                    1782980.9136399582,  3.6381501659265623,  3.3274367151909723,
                                    0.17251202306906505, -7.9977528353471623, -1.1301913511958257};
static const double G_GAUSS_VAR[] = {-1.5515057079441577, 0.43734808498401545, 0.65500860638241665,
                                     -1.5361097399483077, -2.5837288373771581, 0.029677197688166623,
                                     -1589509969202.1899, -6.0677084038606655, -4.8200693856093748,
                                     1.1345764006758967,  -28.450469475345557, 0.76764092200024003};
static const double G_MM[] = {0.44972627924234065, 0.83217070655340653,  0.68812320412038541,
                              -1.9700201899161325, -0.82890702688018936, 0.13216757683930447,
                              0.30630072579534551, 0.39043872424553938,  1.1608641429287159,
                              0.46940472017229018, -2.3408994882913503,  0.71063062519034426};
static const double G_MLM[] = {-0.16666666666666666,
                               0.16666666666666666,
                               0.16666666666666666,
                               -0.16666666666666666,
                               0,
                               0,
                               0,
                               0,
                               0.083333333333333329,
                               0.083333333333333329,
                               -0.25,
                               0.083333333333333329};
static const double G_KL_IN[] = {-0.060569115649995182, -0,
                                 -0.10199826519485733,  -0.077494207784114089,
                                 -0.17892427587393001,  -0.086343337183567431,
                                 -0.04256952598441955,  -0.025496194291416353,
                                 -0.041107858802270691, -0.048955034705069622,
                                 -0.080644925890358446, -0.16262551393563451};
static const double G_TRIP[] = {-0.091603094792148648, 0.08517493232463616,  -0.021986836621803413,
                                -0.30819116478976405,  -0.18662523887027871, -0.071982447057646906,
                                0.12659526365803656,   0.23467913810704991,  0.26677125324827233,
                                0.21465680208443627,   0.11456725454164046,  -0.016119331446777227};

/* ------------------------------------------------------------------ helpers */
#define N_OF(a) ((int64_t)(sizeof(a) / sizeof *(a)))
#define MEAN    TS_REDUCTION_MEAN
#define SUM     TS_REDUCTION_SUM
#define NONE    TS_REDUCTION_NONE

static ts_dtype g_dt;
static ts_device g_dev;

static ts_tensor *seqt(ts_shape s, double a, double b, double scale) {
    double v[64];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    for (int64_t i = 0; i < n; i++) v[i] = sin(a * (double)i + b) * scale;
    return ts_tensor_f64(s, v, (ts_opts){.dtype = g_dt, .device = g_dev});
}
static ts_tensor *vals(ts_shape s, const double *v) {
    return ts_tensor_f64(s, v, (ts_opts){.dtype = g_dt, .device = g_dev});
}
static ts_tensor *idx(ts_shape s, const int64_t *v) {
    return ts_tensor_i64(s, v, (ts_opts){.device = g_dev});
}
static ts_tensor *A_(void) { return seqt(TS_SHAPE(3, 4), 1.1, 0.2, 2.0); }
static ts_tensor *B_(void) { return seqt(TS_SHAPE(3, 4), 0.5, 0.7, 1.5); }
static ts_tensor *C_(void) { return seqt(TS_SHAPE(3, 4), 0.3, 0.1, 1.0); }
static const double Y_[] = {1, -1, -1, 1, 1, 1, -1, 1, -1, 0, 1, -1};
static const double Y3_[] = {1, -1, 1};
static const double MW_[] = {0.5, 1.0, 2.0, 1.5};
static const int64_t MT_[] = {3, 0, -1, 1, 0, 1, 2, 3, 2, -1, 0, 0};
static const int64_t T3_[] = {3, 0, 2};
static ts_tensor *LI_(void) { return ts_log_softmax(A_(), 1); }
static ts_tensor *P_(void) { /* softmax(B) with P[0, 1] = 0 */
    ts_tensor *p = ts_softmax(B_(), 1);
    int64_t m[12] = {0, 1};
    return ts_masked_fill(p, ts_eq_scalar(idx(TS_SHAPE(3, 4), m), 1), 0);
}
static ts_tensor *V_(void) { /* |C| + 0.1 with V[1, 2] = 1e-9 */
    int64_t m[12] = {0, 0, 0, 0, 0, 0, 1};
    ts_tensor *v = ts_add_scalar(ts_abs(C_()), 0.1);
    return ts_masked_fill(v, ts_eq_scalar(idx(TS_SHAPE(3, 4), m), 1), 1e-9);
}
static ts_tensor *leaf(ts_tensor *t) {
    ts_set_requires_grad(t, true);
    return t;
}
static ts_tensor *col0(ts_tensor *t) { return ts_select(t, 1, 0); }

static bool close_to(ts_tensor *t, const double *ref, int64_t n, double tol) {
    if (!t || ts_numel(t) != n) {
        printf("  expected %lld values, got %s (%s)\n", (long long)n, t ? "another count" : "NULL",
               ts_test_error_str());
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

/* ------------------------------------------------------------------ values */
static void test_values(void) {
    ts_scope_begin();
    const double tol = g_dt == TS_F64 ? 1e-12 : 2e-5;
    ts_tensor *A = A_(), *B = B_(), *C = C_(), *Y = vals(TS_SHAPE(3, 4), Y_);
    ts_tensor *y3 = vals(TS_SHAPE(3), Y3_), *MW = vals(TS_SHAPE(4), MW_);
    ts_tensor *LI = LI_(), *P = P_();
    CHECK_CLOSE(ts_kl_div(LI, P, MEAN, false, false), KL_MEAN);
    CHECK_CLOSE(ts_kl_div(LI, P, MEAN, true, false), KL_BATCHMEAN);
    CHECK_CLOSE(ts_kl_div(LI, P, NONE, false, false), KL_NONE);
    CHECK_CLOSE(ts_kl_div(LI, ts_log_softmax(B, 1), SUM, false, true), KL_LOGT_SUM);
    CHECK_CLOSE(ts_huber_loss(A, B, NONE, 0.8, NULL), HUBER_NONE);
    CHECK_CLOSE(ts_huber_loss(A, B, MEAN, 1.3, ts_abs(C)), HUBER_W_MEAN);
    CHECK_CLOSE(ts_soft_margin_loss(A, Y, MEAN), SOFTM_MEAN);
    CHECK_CLOSE(ts_margin_ranking_loss(col0(A), col0(B), y3, 0.3, NONE), MRANK_NONE);
    CHECK_CLOSE(ts_hinge_embedding_loss(A, Y, 1.5, NONE), HINGE_NONE);
    CHECK_CLOSE(ts_cosine_embedding_loss(A, B, y3, 0.2, NONE), COS_NONE);
    CHECK_CLOSE(ts_cosine_embedding_loss(ts_select(A, 0, 1), ts_select(B, 0, 1),
                                         vals(TS_SHAPE(), (double[]){-1}), -0.5, MEAN),
                COS_0D);
    CHECK_CLOSE(ts_triplet_margin_loss(A, B, C, 1.0, 2, 1e-6, true, NONE), TRIP_SWAP_NONE);
    CHECK_CLOSE(ts_triplet_margin_loss(A, B, C, 2.0, 1, 1e-6, false, MEAN), TRIP_P1_MEAN);
    ts_tensor *T = ts_mul_scalar(ts_abs(B), 3);
    CHECK_CLOSE(ts_poisson_nll_loss(A, T, true, true, 1e-8, NONE), POIS_FULL_NONE);
    CHECK_CLOSE(ts_poisson_nll_loss(ts_exp(A), T, false, true, 1e-8, SUM), POIS_NOLOG_FULL_SUM);
    /* the Stirling term only where target > 1: none at 0 and at 1 (hand-computed: e^0.5,
     * e^0.5 - 0.5, e^0.5 - 1 + 2 log 2 - 2 + log(4 pi) / 2) */
    static const double POIS_EDGE[] = {1.6487212707001282, 1.1487212707001282, 1.3005277553046644};
    CHECK_CLOSE(ts_poisson_nll_loss(vals(TS_SHAPE(3), (double[]){0.5, 0.5, 0.5}),
                                    vals(TS_SHAPE(3), (double[]){0, 1, 2}), true, true, 1e-8, NONE),
                POIS_EDGE);
    ts_tensor *V = V_();
    CHECK_CLOSE(ts_gaussian_nll_loss(A, B, V, true, 1e-6, NONE), GAUSS_FULL_NONE);
    CHECK_CLOSE(ts_gaussian_nll_loss(A, B, ts_contiguous(col0(V)), false, 1e-6, MEAN),
                GAUSS_HOMO_MEAN);
    ts_tensor *MT = idx(TS_SHAPE(3, 4), MT_);
    CHECK_CLOSE(ts_multilabel_margin_loss(A, MT, NONE), MLM_NONE);
    ts_tensor *m1 = ts_multilabel_margin_loss(ts_select(A, 0, 0), ts_select(MT, 0, 0), NONE);
    CHECK_CLOSE(m1, MLM_1D);
    CHECK(m1 && ts_shape_of(m1).ndim == 0); /* PyTorch: 0-dim even with reduction none */
    ts_tensor *Z = ts_to_dtype(ts_gt_scalar(Y, 0), g_dt);
    CHECK_CLOSE(ts_multilabel_soft_margin_loss(A, Z, MW, NONE), MLSM_W_NONE);
    ts_tensor *t3 = idx(TS_SHAPE(3), T3_);
    CHECK_CLOSE(ts_multi_margin_loss(A, t3, 1, 1.0, NULL, NONE), MM_NONE);
    CHECK_CLOSE(ts_multi_margin_loss(A, t3, 2, 0.7, MW, MEAN), MM_P2_W_MEAN);
    CHECK_OK();
    ts_scope_end();
}

/* gradients against PyTorch's */
static void test_grads(void) {
    ts_scope_begin();
    const double tol = g_dt == TS_F64 ? 1e-10 : 5e-5;
    ts_tensor *a = leaf(A_()), *v = leaf(V_());
    ts_backward(ts_gaussian_nll_loss(a, B_(), v, false, 1e-6, SUM));
    CHECK_CLOSE(ts_grad(a), G_GAUSS_IN);
    CHECK_CLOSE(ts_grad(v), G_GAUSS_VAR); /* through the clamp as if unclamped */
    a = leaf(A_());
    ts_backward(
        ts_multi_margin_loss(a, idx(TS_SHAPE(3), T3_), 2, 0.7, vals(TS_SHAPE(4), MW_), MEAN));
    CHECK_CLOSE(ts_grad(a), G_MM);
    a = leaf(A_());
    ts_backward(ts_multilabel_margin_loss(a, idx(TS_SHAPE(3, 4), MT_), MEAN));
    CHECK_CLOSE(ts_grad(a), G_MLM);
    ts_tensor *li = leaf(ts_detach(LI_()));
    ts_backward(ts_kl_div(li, P_(), MEAN, true, false));
    CHECK_CLOSE(ts_grad(li), G_KL_IN);
    a = leaf(A_());
    ts_backward(ts_triplet_margin_loss(a, B_(), C_(), 1.0, 2, 1e-6, true, MEAN));
    CHECK_CLOSE(ts_grad(a), G_TRIP);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradcheck (f64) */
#define GC2(name, expr)                                                                            \
    static ts_tensor *name(ts_tensor *const *in, int n, void *ctx) {                               \
        (void)n, (void)ctx;                                                                        \
        ts_tensor *x = in[0], *t = in[1];                                                          \
        (void)t;                                                                                   \
        return (expr);                                                                             \
    }
GC2(f_kl, ts_kl_div(x, t, MEAN, true, false))
GC2(f_kl_log, ts_kl_div(x, t, SUM, false, true))
GC2(f_huber, ts_huber_loss(x, t, MEAN, 0.8, NULL))
GC2(f_softm, ts_soft_margin_loss(x, t, SUM))
GC2(f_mrank, ts_margin_ranking_loss(x, t, vals(TS_SHAPE(3, 4), Y_), 0.3, SUM))
GC2(f_hinge, ts_hinge_embedding_loss(x, vals(TS_SHAPE(3, 4), Y_), 1.5, SUM))
GC2(f_cos, ts_cosine_embedding_loss(x, t, vals(TS_SHAPE(3), Y3_), -0.2, SUM))
GC2(f_trip, ts_triplet_margin_loss(x, t, C_(), 1.0, 2, 1e-6, true, SUM))
GC2(f_trip3, ts_triplet_margin_loss(x, t, C_(), 1.0, 3, 1e-6, false, MEAN))
GC2(f_pois, ts_poisson_nll_loss(x, t, true, true, 1e-8, SUM))
GC2(f_pois_nolog, ts_poisson_nll_loss(ts_exp(x), t, false, false, 1e-8, MEAN))
GC2(f_gauss, ts_gaussian_nll_loss(x, B_(), t, true, 1e-6, SUM))
GC2(f_mlm, ts_multilabel_margin_loss(x, idx(TS_SHAPE(3, 4), MT_), SUM))
GC2(f_mlsm, ts_multilabel_soft_margin_loss(x, t, vals(TS_SHAPE(4), MW_), MEAN))
GC2(f_mm, ts_multi_margin_loss(x, idx(TS_SHAPE(3), T3_), 2, 0.7, vals(TS_SHAPE(4), MW_), SUM))

static void gradcheck_one(const char *what, ts_gradcheck_fn f, ts_tensor *x, ts_tensor *t) {
    ts_tensor *in[2] = {x, t};
    bool ok = ts_gradcheck(f, NULL, in, 2, (ts_gradcheck_opts){0});
    printf("gradcheck %-22s on %s: %s\n", what, ts_device_str(g_dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
}

static void test_gradcheck(void) {
    ts_scope_begin();
    g_dt = TS_F64;
    ts_tensor *A = leaf(A_()), *B = leaf(B_());
    /* P_ has a 0, where d/dt t log t is infinite (NaN, as PyTorch's): softmax(B) here */
    gradcheck_one("kl_div batchmean", f_kl, leaf(LI_()), leaf(ts_softmax(B_(), 1)));
    gradcheck_one("kl_div log_target", f_kl_log, A, B);
    gradcheck_one("huber_loss", f_huber, A, B);
    gradcheck_one("soft_margin_loss", f_softm, A, B);
    gradcheck_one("margin_ranking_loss", f_mrank, A, B);
    gradcheck_one("hinge_embedding_loss", f_hinge, A, B);
    gradcheck_one("cosine_embedding_loss", f_cos, A, B);
    gradcheck_one("triplet_margin_loss", f_trip, A, B);
    gradcheck_one("triplet_margin_loss p3", f_trip3, A, B);
    gradcheck_one("poisson_nll_loss", f_pois, A, leaf(ts_mul_scalar(ts_abs(B_()), 3)));
    gradcheck_one("poisson_nll_loss input", f_pois_nolog, A, leaf(ts_abs(B_())));
    gradcheck_one("gaussian_nll_loss", f_gauss, A, leaf(ts_add_scalar(ts_abs(C_()), 0.1)));
    gradcheck_one("multilabel_margin_loss", f_mlm, A, B);
    gradcheck_one("multilabel_soft_margin", f_mlsm, A,
                  leaf(ts_to_dtype(ts_gt_scalar(vals(TS_SHAPE(3, 4), Y_), 0), TS_F64)));
    gradcheck_one("multi_margin_loss", f_mm, A, B);
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    ts_scope_begin();
    g_dt = TS_F32;
    ts_tensor *A = A_(), *B = B_(), *y3 = vals(TS_SHAPE(3), Y3_);
    ts_tensor *t3 = idx(TS_SHAPE(3), T3_), *MT = idx(TS_SHAPE(3, 4), MT_);
    CHECK(!ts_kl_div(A, seqt(TS_SHAPE(2, 4), 1, 1, 1), MEAN, false, false));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_huber_loss(A, B, MEAN, 0, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "non-positive values for delta");
    CHECK(!ts_huber_loss(A, B, MEAN, 1, y3));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Weights and input must have the same size");
    CHECK(!ts_soft_margin_loss(t3, t3, MEAN));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "soft_margin_loss");
    CHECK(!ts_margin_ranking_loss(A, B, y3, 0, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "All input tensors should have same dimension");
    CHECK(!ts_cosine_embedding_loss(A, B, ts_unsqueeze(y3, 1), 0, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "multi-target not supported");
    CHECK(!ts_cosine_embedding_loss(y3, y3, y3, 0, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "1D target tensor expects 2D input tensors");
    CHECK(!ts_triplet_margin_loss(A, B, y3, 1, 2, 1e-6, false, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "same number of dimensions");
    CHECK(!ts_gaussian_nll_loss(A, B, seqt(TS_SHAPE(3, 2), 1, 1, 1), false, 1e-6, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "var is of incorrect size");
    CHECK(!ts_gaussian_nll_loss(A, B, B, false, 1e-6, MEAN)); /* B has negative entries */
    CHECK_ERR_HAS(TS_ERR_ARG, "var has negative entry");
    CHECK(!ts_multilabel_margin_loss(A, t3, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "inconsistent target size");
    CHECK(!ts_multilabel_margin_loss(A, ts_to_dtype(MT, TS_F32), MEAN));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "int64");
    CHECK(!ts_multilabel_margin_loss(A, ts_add_scalar(MT, 2), MEAN));
    CHECK_ERR_HAS(TS_ERR_ARG, "target out of range");
    CHECK(!ts_multi_margin_loss(A, t3, 3, 1, NULL, MEAN));
    CHECK_ERR_HAS(TS_ERR_ARG, "only p == 1 and p == 2 supported");
    CHECK(!ts_multi_margin_loss(A, idx(TS_SHAPE(2), T3_), 1, 1, NULL, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "inconsistent target size");
    CHECK(!ts_multi_margin_loss(A, t3, 1, 1, y3, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "inconsistent weight size");
    CHECK(!ts_multi_margin_loss(A, ts_add_scalar(t3, 2), 1, 1, NULL, MEAN));
    CHECK_ERR_HAS(TS_ERR_ARG, "target out of range");
    CHECK(!ts_multi_margin_loss(seqt(TS_SHAPE(3, 0), 1, 1, 1), t3, 1, 1, NULL, MEAN));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected non-empty vector or matrix");
    CHECK(!ts_soft_margin_loss(A, B, (ts_reduction)7));
    CHECK_ERR(TS_ERR_ARG);
    /* NULL where a tensor is required: TS_ERR_ARG naming the argument */
#define NUL(expr)                                                                                  \
    do {                                                                                           \
        CHECK(!(expr));                                                                            \
        CHECK_ERR_HAS(TS_ERR_ARG, "is NULL");                                                      \
    } while (0)
    NUL(ts_kl_div(NULL, B, MEAN, false, false));
    NUL(ts_huber_loss(A, NULL, MEAN, 1, NULL));
    NUL(ts_soft_margin_loss(NULL, B, MEAN));
    NUL(ts_margin_ranking_loss(A, B, NULL, 0, MEAN));
    NUL(ts_hinge_embedding_loss(A, NULL, 1, MEAN));
    NUL(ts_cosine_embedding_loss(A, NULL, y3, 0, MEAN));
    NUL(ts_triplet_margin_loss(A, B, NULL, 1, 2, 1e-6, false, MEAN));
    NUL(ts_poisson_nll_loss(NULL, B, true, false, 1e-8, MEAN));
    NUL(ts_gaussian_nll_loss(A, B, NULL, false, 1e-6, MEAN));
    NUL(ts_multilabel_margin_loss(A, NULL, MEAN));
    NUL(ts_multilabel_soft_margin_loss(NULL, B, NULL, MEAN));
    NUL(ts_multi_margin_loss(A, NULL, 1, 1, NULL, MEAN));
#undef NUL
    /* operands on two devices */
    ts_device other = g_dev.type == TS_CPU ? ts_sim(0) : ts_cpu();
    CHECK(!ts_margin_ranking_loss(A, ts_to(B, other), y3, 0, MEAN));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_multi_margin_loss(A, ts_to(t3, other), 1, 1, NULL, MEAN));
    CHECK_ERR(TS_ERR_DEVICE);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    ts_dtype dts[2] = {TS_F32, TS_F64};
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    for (int d = 0; d < 2; d++) {
        g_dev = devs[d];
        for (int k = 0; k < 2; k++) {
            g_dt = dts[k];
            test_values();
            test_grads();
        }
        test_gradcheck();
        test_errors();
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors); /* every temporary released */
    return ts_test_finish();
}
