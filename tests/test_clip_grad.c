/* test_clip_grad.c — gradient clipping (torch.nn.utils.clip_grad_norm_) against PyTorch 1.13 and
 * float64 arithmetic on cpu and sim:0: every norm type, the tensor form that never reads the
 * device (inside a captured step too), float16 gradients summed in float32, gradients on two
 * devices, and the argument errors. The module form is in test_optim.c's test_module. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_ref.h"
#include "ts_test.h"

/* torch.nn.utils.clip_grad_norm_ on the grads of step 1 (G * 2.5 - 0.2), f64:
 * for nt in (2, 1, float('inf'), 3):
 *     p0.grad = torch.tensor(G0, dtype=torch.float64) * 2.5 - 0.2
 *     p1.grad = torch.tensor(G1, dtype=torch.float64) * 2.5 - 0.2
 *     n = torch.nn.utils.clip_grad_norm_([p0, p1], 1.0, nt)
 *     print(nt, n.item(), p0.grad.tolist() + p1.grad.tolist())
 * p1.grad = None; print(torch.nn.utils.clip_grad_norm_([p0, p1], 100.0).item()) */
static void test_clip(void) {
    ts_scope_begin(); /* the tensors made here belong to it */
    static const struct {
        double norm_type, total, g[10];
    } want[] = {
        {2,
         3.8413864684512027,
         {0.1431774338092879, -0.5727097352371516, 0.27333873727227687, 0.013016130346298897,
          -0.18222582484818456, 0.5336613441982548, -0.44254843177416253, 0.11063710794354063,
          0.2082580855407824, -0.08460484725094285}},
        {1,
         9.85,
         {0.055837557782989065, -0.22335023113195626, 0.10659897394934276, 0.005076141616635368,
          -0.07106598263289517, 0.20812180628205013, -0.17258881496560255, 0.04314720374140064,
          0.08121826586616591, -0.0329949205081299}},
        {INFINITY,
         2.2,
         {0.249999886363688, -0.999999545454752, 0.4772725103306771, 0.022727262396698904,
          -0.3181816735537847, 0.9318177582646552, -0.7727269214877629, 0.19318173037194072,
          0.3636361983471825, -0.1477272055785429}},
        {3,
         2.9801032856863645,
         {0.18455729977024157, -0.7382291990809663, 0.35233666319773393, 0.01677793634274923,
          -0.23489110879848926, 0.6878953900527185, -0.570449835653474, 0.1426124589133685,
          0.26844698148398777, -0.10905658622787003}},
    };
    for (int i = 0; i < 4; i++) {
        for (int dv = 0; dv < 2; dv++) {
            ts_tensor *p[2];
            make_params(p, dv ? ts_sim(0) : ts_cpu(), TS_F64);
            set_grads(p, 1, false);
            double n = ts_clip_grad_norm(p, 2, 1.0, want[i].norm_type);
            CHECK_NEAR(n, want[i].total, 1e-12 * want[i].total);
            double g[10];
            ts_scope_begin();
            ts_copy_to_host(ts_to(ts_grad(p[0]), ts_cpu()), g, 6 * sizeof(double));
            ts_copy_to_host(ts_to(ts_grad(p[1]), ts_cpu()), g + 6, 4 * sizeof(double));
            ts_scope_end();
            check_close("clipped grads", g, want[i].g, 10, 1e-9);
        }
    }
    /* other norm types against float64 arithmetic done here: the total is (sum |g|^t)^(1/t) over
     * every element (the norm of the per-gradient norms), min |g| for -inf */
    const double types[] = {0.5, -1, 4, -INFINITY};
    for (int i = 0; i < 4; i++) {
        ts_tensor *q[2];
        make_params(q, ts_cpu(), TS_F64);
        set_grads(q, 1, false);
        double g[10], ref = types[i] < 0 && isinf(types[i]) ? INFINITY : 0;
        ts_copy_to_host(ts_grad(q[0]), g, 6 * sizeof(double));
        ts_copy_to_host(ts_grad(q[1]), g + 6, 4 * sizeof(double));
        for (int j = 0; j < 10; j++)
            ref = isinf(types[i]) ? fmin(ref, fabs(g[j])) : ref + pow(fabs(g[j]), types[i]);
        if (!isinf(types[i])) ref = pow(ref, 1 / types[i]);
        const double max_norm = ref / 2, coef = max_norm / (ref + 1e-6);
        CHECK_NEAR(ts_clip_grad_norm(q, 2, max_norm, types[i]), ref, 1e-12 * ref);
        double c[10];
        ts_copy_to_host(ts_grad(q[0]), c, 6 * sizeof(double));
        ts_copy_to_host(ts_grad(q[1]), c + 6, 4 * sizeof(double));
        for (int j = 0; j < 10; j++) CHECK_NEAR(c[j], g[j] * coef, 1e-12);
    }
    /* below max_norm: unchanged; no grads at all: 0 */
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F64);
    set_grads(p, 1, true);
    double before = ts_item(ts_sum(ts_grad(p[0])));
    CHECK_NEAR(ts_clip_grad_norm(p, 2, 100.0, 0), 3.3075670817082456, 1e-12);
    CHECK_NEAR(ts_item(ts_sum(ts_grad(p[0]))), before, 0);
    ts_set_grad(p[0], NULL);
    CHECK_NEAR(ts_clip_grad_norm(p, 2, 1.0, 2), 0, 0);
    CHECK(isnan(ts_clip_grad_norm(NULL, 2, 1.0, 2)));
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: invalid parameter list (2 tensors at ");
    ts_tensor *with_null[2] = {p[0], NULL};
    CHECK(isnan(ts_clip_grad_norm(with_null, 2, 1.0, 2)));
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: a parameter is NULL");
    ts_scope_end();
    CHECK_OK();
}

/* The tensor form: the total stays on the device (0-d, on the first gradient's device, float32
 * unless a gradient is float64), so it runs inside a captured step; float16 gradients are summed
 * in float32 (their squares would overflow float16: 300^2 > 65504); gradients on two devices send
 * their shares to the first's. Every value against float64 arithmetic done here, with float32's
 * rounding of ten terms as the bound. */
static void test_clip_tensor(void) {
    ts_scope_begin();
    const double gv[4] = {300.0, -400.0, 120.0, 0.5}; /* norm^2 = 250000 + 14400.25 */
    const double norm = sqrt(264400.25), coef = 2.0 / (norm + 1e-6);
    for (int k = 0; k < 2; k++) { /* k 1: the second gradient on cpu, the first on sim:0 */
        ts_tensor *q[2] = {
            ts_zeros(TS_SHAPE(2),
                     (ts_opts){.device = ts_sim(0), .dtype = TS_F16, .requires_grad = true}),
            ts_zeros(TS_SHAPE(2),
                     (ts_opts){.device = k ? ts_cpu() : ts_sim(0), .requires_grad = true})};
        ts_set_grad(
            q[0],
            ts_to_dtype(ts_tensor_f64(TS_SHAPE(2), gv, (ts_opts){.device = ts_sim(0)}), TS_F16));
        ts_set_grad(q[1], ts_to_dtype(ts_tensor_f64(TS_SHAPE(2), gv + 2,
                                                    (ts_opts){.device = ts_device_of(q[1])}),
                                      TS_F32));
        ts_tensor *t = ts_clip_grad_norm_tensor(q, 2, 2.0, 2);
        CHECK(t && ts_ndim(t) == 0 && ts_dtype_of(t) == TS_F32);
        CHECK(t && ts_device_equal(ts_device_of(t), ts_sim(0)));
        CHECK_NEAR(ts_item(t), norm, 1e-6 * norm);
        double c[4];
        ts_copy_to_host(ts_to_dtype(ts_to(ts_grad(q[0]), ts_cpu()), TS_F64), c, 2 * sizeof(double));
        ts_copy_to_host(ts_to_dtype(ts_to(ts_grad(q[1]), ts_cpu()), TS_F64), c + 2,
                        2 * sizeof(double));
        for (int j = 0; j < 2; j++) CHECK_NEAR(c[j], gv[j] * coef, fabs(gv[j] * coef) * 2e-3);
        for (int j = 2; j < 4; j++) CHECK_NEAR(c[j], gv[j] * coef, fabs(gv[j] * coef) * 1e-6);
    }
    /* inside a capture on cpu: recorded, no host read; each replay clips the gradients it finds */
    ts_tensor *p = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_set_grad(p, ts_to_dtype(ts_tensor_f64(TS_SHAPE(2), gv, (ts_opts){0}), TS_F32));
    ts_graph *g = ts_graph_capture_begin(ts_cpu(), (ts_graph_opts){0});
    ts_tensor *t = ts_keep(ts_clip_grad_norm_tensor(&p, 1, 1.0, 2));
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    float got[2];
    for (int r = 0; r < 2; r++) { /* 500 -> 1, then 1 -> 1 (below: unchanged) */
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        CHECK_NEAR(ts_item(t), r ? 1.0 : 500.0, r ? 1e-6 : 500e-6);
        ts_copy_to_host(ts_grad(p), got, sizeof got);
        CHECK_NEAR(got[0], 0.6, 1e-6);
        CHECK_NEAR(got[1], -0.8, 1e-6);
    }
    ts_release(t);
    ts_graph_free(g);
    ts_tensor *q = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_set_grad(q, ts_ones(TS_SHAPE(2), (ts_opts){0}));
    CHECK(ts_clip_grad_norm_tensor(&q, 1, 1.0, NAN) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: norm_type is NaN");
    CHECK(ts_clip_grad_norm_tensor(&q, 1, NAN, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: max_norm is NaN");
    CHECK(ts_clip_grad_norm_tensor(NULL, 1, 1.0, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: invalid parameter list");
    CHECK(ts_clip_grad_norm_module_tensor(NULL, 1.0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "clip_grad_norm: module is NULL");
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    test_clip();
    test_clip_tensor();
    return ts_test_finish();
}
