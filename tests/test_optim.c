/* test_optim.c — SGD, Adam, AdamW and RMSprop against PyTorch 1.13 on cpu and sim:0; parameter
 * groups, skipped parameters, state dicts, the module forms (a module's gradient clipping too;
 * clipping itself is test_clip_grad.c), ts_initial_seed, ts_error_set and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_ref.h"
#include "ts_test.h"

/* The reference values come from /usr/bin/python3 (torch 1.13):
 *
 * import torch
 * P0 = [0.5, -1.2, 0.3, 2.0, -0.7, 1.1]; P1 = [0.05, -0.4, 0.9, -1.5]
 * G0 = [0.3, -0.8, 0.5, 0.1, -0.2, 0.9]; G1 = [-0.6, 0.25, 0.4, -0.05]
 * C = [1.0, 2.5, 0.5, 1.5, 0.25]
 * def run(make, dt=torch.float64, skip=()):
 *     p0 = torch.tensor(P0, dtype=dt).reshape(2, 3).requires_grad_()
 *     p1 = torch.tensor(P1, dtype=dt).requires_grad_()
 *     opt = make([p0, p1])
 *     for s in range(5):
 *         p0.grad = torch.tensor(G0, dtype=dt).reshape(2, 3) * C[s] - 0.2 * s
 *         p1.grad = None if s in skip else torch.tensor(G1, dtype=dt) * C[s] - 0.2 * s
 *         opt.step()
 *     return p0.detach().flatten().tolist() + p1.detach().tolist()
 * O = torch.optim
 * print(run(lambda p: O.SGD(p, lr=0.1)))   # and so on, one line per row of `cases` below
 * def groups(p):
 *     o = O.SGD([p[0]], lr=0.1, momentum=0.9); o.add_param_group({'params': [p[1]], 'lr': 0.01})
 *     return o
 * print(run(groups))
 * print(run(lambda p: O.Adam(p, lr=0.01), skip=(1, 3)))
 * print(run(lambda p: O.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.1), dt=torch.float32))
 * print(run(lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True), dt=torch.float32))
 */

typedef enum { K_SGD, K_ADAM, K_ADAMW, K_RMSPROP } kind;
typedef struct optim_case {
    const char *name;
    kind k;
    ts_sgd_opts sgd;
    ts_adam_opts adam;
    ts_rmsprop_opts rms;
    double ref[10];
} optim_case;

static const optim_case cases[] = {
    {"SGD lr=0.1", K_SGD, .sgd = {.lr = 0.1},
     .ref = {0.5275000000000001, -0.5399999999999998, 0.21250000000000002, 2.1425,
             -0.3849999999999999, 0.7825000000000001, 0.595, -0.34375, 0.8700000000000001,
             -1.27125}},
    {"SGD lr=0.1 momentum=0.9", K_SGD, .sgd = {.lr = 0.1, .momentum = 0.9},
     .ref = {0.35675199999999996, 0.5429880000000005, -0.1862000000000001, 2.1997039999999997,
             0.014132000000000125, -0.07210399999999993, 1.450036, -0.45751, 0.5852759999999999,
             -1.043082}},
    {"SGD lr=0.1 momentum=0.9 dampening=0.1 weight_decay=0.01", K_SGD,
     .sgd = {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
     .ref = {0.35346148788992576, 0.41286941394932397, -0.16021355926633357, 2.15126020764977,
             -0.04158954300872883, -0.002218725021696883, 1.3314861554662933, -0.45651781876209047,
             0.5905176845439438, -1.0689076646777158}},
    {"SGD lr=0.05 momentum=0.9 nesterov weight_decay=0.1", K_SGD,
     .sgd = {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.1},
     .ref = {0.4126087417573392, -0.008300552154041413, 0.02202123028836358, 1.996011535043447,
             -0.1707578481003179, 0.3419064674893038, 0.9315597507114766, -0.3614170863187059,
             0.6760900944140561, -1.0601061226106159}},
    {"SGD lr=0.1 momentum=0.5 maximize", K_SGD,
     .sgd = {.lr = 0.1, .momentum = 0.5, .maximize = true},
     .ref = {0.5225000000000001, -2.2775000000000003, 0.5225000000000001, 1.8224999999999996,
             -1.1775, 1.7225000000000001, -0.8275, -0.42750000000000005, 1.0225, -1.8275}},
    {"Adam lr=0.01", K_ADAM, .adam = {.lr = 0.01},
     .ref = {0.4757334764474695, -1.1534200161022807, 0.2660739986377527, 1.9987621442316148,
             -0.6524305768516798, 1.0603385125423828, 0.09695289631320554, -0.41990254192395404,
             0.8697180643275043, -1.4541039976296086}},
    {"Adam lr=0.01 betas=(0.8,0.99) eps=1e-6 weight_decay=0.1", K_ADAM,
     .adam = {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1},
     .ref = {0.4752773311732407, -1.1526769097350522, 0.26714835531483855, 1.9824051571913845,
             -0.6506460843756335, 1.0602385833396222, 0.09737674490479578, -0.41351648734975466,
             0.8680946959088669, -1.4499742167999916}},
    {"Adam lr=0.01 amsgrad", K_ADAM, .adam = {.lr = 0.01, .amsgrad = true},
     .ref = {0.4757334764474695, -1.1534200161022807, 0.2660739986377527, 1.9987621442316148,
             -0.6524305768516798, 1.060340389528222, 0.09695289631320554, -0.41990254192395404,
             0.8697204756844883, -1.4541039976296086}},
    {"Adam lr=0.02 maximize weight_decay=0.05", K_ADAM,
     .adam = {.lr = 0.02, .maximize = true, .weight_decay = 0.05},
     .ref = {0.544785487795313, -1.292567810224578, 0.36665061769275104, 1.9377713539808292,
             -0.7943303196152948, 1.1776710629549147, -0.04392071078464568, -0.35720369727845624,
             0.955785797983119, -1.5453100692061077}},
    {"AdamW lr=0.01 weight_decay=0.01", K_ADAMW, .adam = {.lr = 0.01, .weight_decay = 0.01},
     .ref = {0.47549161600913264, -1.1528296197269383, 0.2659328208424101, 1.9977677089829098,
             -0.6520901652623807, 1.0597977378724106, 0.09691839597018582, -0.4196948860561193,
             0.8692767082803233, -1.4533633756462458}},
    {"AdamW lr=0.01 amsgrad weight_decay=0.1", K_ADAMW,
     .adam = {.lr = 0.01, .amsgrad = true, .weight_decay = 0.1},
     .ref = {0.4733192827039454, -1.1475267534897997, 0.2646648319611636, 1.9888356963398999,
             -0.6490326673797019, 1.0549424418324123, 0.09660842938370298, -0.41782966288598494,
             0.8653149185875885, -1.4467111782818345}},
    {"RMSprop lr=0.01", K_RMSPROP, .rms = {.lr = 0.01},
     .ref = {0.44418946844302226, -0.8828491534007937, 0.15984673884119555, 2.108302607284254,
             -0.3190594816665517, 0.8980355534299392, 0.37892683427937146, -0.4224336941836428,
             0.7937174787218535, -1.0746247224140173}},
    {"RMSprop lr=0.01 alpha=0.9 eps=1e-6 weight_decay=0.1", K_RMSPROP,
     .rms = {.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1},
     .ref = {0.478761678558509, -1.096268778955181, 0.25502890253541555, 2.0036172815438227,
             -0.5780085921814062, 1.032248556846978, 0.15667599320189482, -0.3988611951855225,
             0.8596148157327312, -1.3695091286451309}},
    {"RMSprop lr=0.01 centered", K_RMSPROP, .rms = {.lr = 0.01, .centered = true},
     .ref = {0.4430899628360424, -0.8795090743060326, 0.1586099835679087, 2.1089100916422865,
             -0.3146625610103054, 0.8965035563725681, 0.3824984206454741, -0.4234779221362965,
             0.7925462650848244, -1.0701292846446264}},
    {"RMSprop lr=0.01 momentum=0.9", K_RMSPROP, .rms = {.lr = 0.01, .momentum = 0.9},
     .ref = {0.003759832413588232, -0.23511415168148517, -0.3596145152881742, 1.9221816014287545,
             0.38673005148863315, 0.3323176013131085, 1.0362547957071864, -0.8251441071494046,
             0.3033682789634903, -0.31791635849547994}},
    {"RMSprop lr=0.01 centered momentum=0.5 maximize weight_decay=0.01", K_RMSPROP,
     .rms = {.lr = 0.01, .centered = true, .momentum = 0.5, .maximize = true, .weight_decay = 0.01},
     .ref = {0.6852933310174487, -1.7517761024510465, 0.6101032766820892, 1.8899559995010478,
             -1.3439972951246255, 1.4943652551028648, -0.518559184751215, -0.2601461773401752,
             1.1587978478886232, -2.213775737580305}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ------------------------------------------------------------------ helpers */
static ts_optim *make(const optim_case *c, ts_tensor **p, int n) {
    switch (c->k) {
    case K_SGD:
        return ts_sgd_new_params(p, n, c->sgd);
    case K_ADAM:
        return ts_adam_new_params(p, n, c->adam);
    case K_ADAMW:
        return ts_adamw_new_params(p, n, c->adam);
    case K_RMSPROP:
        return ts_rmsprop_new_params(p, n, c->rms);
    }
    return NULL;
}

static void read_params(ts_tensor **p, double *out) {
    ts_scope_begin();
    CHECK_EQ(ts_copy_to_host(ts_to_dtype(ts_to(p[0], ts_cpu()), TS_F64), out, 6 * sizeof(double)),
             TS_OK);
    CHECK_EQ(
        ts_copy_to_host(ts_to_dtype(ts_to(p[1], ts_cpu()), TS_F64), out + 6, 4 * sizeof(double)),
        TS_OK);
    ts_scope_end();
}

/* Runs a case for 5 steps; out gets the 10 parameter values. */
static void run_case(const optim_case *c, ts_device dev, ts_dtype dt, int skip_mask, double *out) {
    ts_tensor *p[2];
    make_params(p, dev, dt);
    ts_optim *opt = make(c, p, 2);
    CHECK(opt != NULL);
    for (int s = 0; opt && s < 5; s++) {
        set_grads(p, s, (skip_mask >> s) & 1);
        CHECK_EQ(ts_optim_step(opt), TS_OK);
    }
    read_params(p, out);
    ts_optim_free(opt);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

/* ------------------------------------------------------------------ tests */
static void test_cases(void) {
    for (int i = 0; i < N_CASES; i++) {
        double cpu[10], sim[10];
        run_case(&cases[i], ts_cpu(), TS_F64, 0, cpu);
        run_case(&cases[i], ts_sim(0), TS_F64, 0, sim);
        if (check_close(cases[i].name, cpu, cases[i].ref, 10, 1e-12))
            printf("  (case %s)\n", cases[i].name);
        CHECK(memcmp(cpu, sim, sizeof cpu) == 0); /* one kernel: identical bits */
    }
}

static void test_groups_and_skip(void) {
    /* SGD momentum 0.9: group 0 lr 0.1, group 1 (p1) lr 0.01 */
    static const double want_groups[10] = {
        0.35675199999999996, 0.5429880000000005,   -0.1862000000000001,
        2.1997039999999997,  0.014132000000000125, -0.07210399999999993,
        0.1900036,           -0.40575100000000003, 0.8685276,
        -1.4543082000000003};
    ts_tensor *p[2];
    double got[10];
    make_params(p, ts_sim(0), TS_F64);
    ts_optim *opt = ts_sgd_new_params(p, 1, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    CHECK_EQ(ts_optim_add_param_group(opt, p + 1, 1, 0.01), TS_OK);
    CHECK_EQ(ts_optim_num_groups(opt), 2);
    CHECK_NEAR(ts_optim_get_lr(opt, 0), 0.1, 0);
    CHECK_NEAR(ts_optim_get_lr(opt, 1), 0.01, 0);
    for (int s = 0; s < 5; s++) {
        set_grads(p, s, false);
        CHECK_EQ(ts_optim_step(opt), TS_OK);
    }
    read_params(p, got);
    check_close("param groups", got, want_groups, 10, 1e-12);
    /* zero_grad sets grads to NULL; a step then changes nothing */
    ts_optim_zero_grad(opt);
    CHECK(ts_grad(p[0]) == NULL && ts_grad(p[1]) == NULL);
    CHECK_EQ(ts_optim_step(opt), TS_OK);
    double again[10];
    read_params(p, again);
    CHECK(memcmp(got, again, sizeof got) == 0);
    ts_optim_free(opt);
    ts_release(p[0]), ts_release(p[1]);

    /* Adam with p1's grad NULL at steps 1 and 3: p1 is skipped and takes 3 steps, not 5 */
    static const double want_skip[10] = {
        0.4757334764474695,  -1.1534200161022807, 0.2660739986377527, 1.9987621442316148,
        -0.6524305768516798, 1.0603385125423828,  0.0799835182294343, -0.4029449613048858,
        0.8916136143121332,  -1.4732313891432118};
    const optim_case adam = {"Adam", K_ADAM, .adam = {.lr = 0.01}};
    run_case(&adam, ts_cpu(), TS_F64, (1 << 1) | (1 << 3), got);
    check_close("skipped grads", got, want_skip, 10, 1e-12);
    CHECK_OK();
}

static void test_f32(void) {
    static const double want_adam[10] = {
        0.4725359082221985,  -1.1529337167739868, 0.26511844992637634, 1.97887122631073,
        -0.6518071293830872, 1.0589772462844849,  0.09692037850618362, -0.4164835810661316,
        0.8658455014228821,  -1.451524257659912};
    static const double want_sgd[10] = {
        0.3985767960548401, 1.0286891460418701,  -0.22507993876934052, 2.3222334384918213,
        0.2577188313007355, -0.2723934054374695, 1.8550324440002441,   -0.3955090045928955,
        0.5867484211921692, -0.8600237369537354};
    const optim_case adam = {"Adam f32", K_ADAM,
                             .adam = {.lr = 0.01, .amsgrad = true, .weight_decay = 0.1}};
    const optim_case sgd = {"SGD f32", K_SGD,
                            .sgd = {.lr = 0.1, .momentum = 0.9, .nesterov = true}};
    double got[10];
    run_case(&adam, ts_cpu(), TS_F32, 0, got);
    check_close("Adam f32", got, want_adam, 10, 2e-6);
    run_case(&sgd, ts_sim(0), TS_F32, 0, got);
    check_close("SGD f32", got, want_sgd, 10, 2e-6);
}

/* A parameter that is a transposed (non-contiguous) leaf steps like its contiguous twin. */
static void test_strided(void) {
    const optim_case *c = &cases[2]; /* SGD momentum, dampening, weight decay */
    ts_opts o = {.dtype = TS_F64};
    double pt[6] = {P0[0], P0[3], P0[1], P0[4], P0[2], P0[5]}; /* P0 [2,3] stored as [3,2] */
    ts_tensor *base = ts_tensor_f64(TS_SHAPE(3, 2), pt, o);
    ts_tensor *tv = ts_t(base);
    ts_tensor *p[2] = {ts_detach(tv), ts_tensor_f64(TS_SHAPE(4), P1, o)};
    ts_set_requires_grad(p[0], true);
    ts_set_requires_grad(p[1], true);
    CHECK(!ts_is_contiguous(p[0]));
    ts_optim *opt = make(c, p, 2);
    for (int s = 0; s < 5; s++) {
        set_grads(p, s, false);
        CHECK_EQ(ts_optim_step(opt), TS_OK);
    }
    double got[10];
    read_params(p, got);
    check_close("strided parameter", got, c->ref, 10, 1e-12);
    ts_optim_free(opt);
    ts_release(p[0]), ts_release(p[1]), ts_release(tv), ts_release(base);
    CHECK_OK();
}

/* save after 2 steps, continue 3; a fresh optimizer (here on sim:0) restored from the save and
 * stepped 3 times ends identical */
static void test_state_dict(void) {
    for (int ci = 0; ci < N_CASES; ci++) {
        const optim_case *c = &cases[ci];
        ts_tensor *p[2], *q[2];
        make_params(p, ts_cpu(), TS_F64);
        ts_optim *opt = make(c, p, 2);
        for (int s = 0; s < 2; s++) {
            set_grads(p, s, false);
            ts_optim_step(opt);
        }
        ts_tensor_list sd = ts_optim_state_dict(opt);
        CHECK(sd.n > 0);
        double saved[10], a[10], b[10];
        read_params(p, saved);
        for (int s = 2; s < 5; s++) {
            set_grads(p, s, false);
            ts_optim_step(opt);
        }
        read_params(p, a);

        ts_opts o = {.dtype = TS_F64, .device = ts_sim(0), .requires_grad = true};
        q[0] = ts_tensor_f64(TS_SHAPE(2, 3), saved, o);
        q[1] = ts_tensor_f64(TS_SHAPE(4), saved + 6, o);
        ts_optim *fresh = make(c, q, 2);
        CHECK_EQ(ts_optim_load_state_dict(fresh, &sd), TS_OK);
        for (int s = 2; s < 5; s++) {
            set_grads(q, s, false);
            CHECK_EQ(ts_optim_step(fresh), TS_OK);
        }
        read_params(q, b);
        if (memcmp(a, b, sizeof a) != 0) printf("  state dict round trip: %s\n", c->name);
        CHECK(memcmp(a, b, sizeof a) == 0);
        /* the state lives on the parameters' device */
        ts_tensor_list sd2 = ts_optim_state_dict(fresh);
        for (int i = 0; i < sd2.n; i++)
            if (strncmp(sd2.names[i], "state.", 6) == 0 && !strstr(sd2.names[i], ".step"))
                CHECK(ts_device_equal(ts_device_of(sd2.tensors[i]), ts_sim(0)));
        ts_tensor_list_free(&sd2);
        ts_tensor_list_free(&sd);
        ts_optim_free(opt), ts_optim_free(fresh);
        ts_release(p[0]), ts_release(p[1]), ts_release(q[0]), ts_release(q[1]);
    }
    CHECK_OK();
}

/* names and values of Adam's state dict (torch: state[i]['step'], 'exp_avg', 'exp_avg_sq') */
static void test_state_dict_names(void) {
    ts_scope_begin(); /* the tensors made here belong to it */
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F64);
    ts_optim *opt = ts_adam_new_params(p, 2, (ts_adam_opts){.lr = 0.01});
    set_grads(p, 0, true); /* p1 has no grad: no state for it */
    ts_optim_step(opt);
    ts_tensor_list sd = ts_optim_state_dict(opt);
    CHECK_EQ(sd.n, 4);
    ts_tensor *step = ts_tensor_list_get(&sd, "state.0.step");
    CHECK(step && ts_ndim(step) == 0 && ts_dtype_of(step) == TS_F64);
    CHECK_NEAR(ts_item(step), 1, 0);
    ts_tensor *m = ts_tensor_list_get(&sd, "state.0.exp_avg");
    ts_tensor *v = ts_tensor_list_get(&sd, "state.0.exp_avg_sq");
    CHECK(m && v && ts_tensor_list_get(&sd, "state.1.exp_avg") == NULL);
    double mh[6], vh[6];
    ts_copy_to_host(m, mh, sizeof mh);
    ts_copy_to_host(v, vh, sizeof vh);
    for (int j = 0; j < 6; j++) { /* first step: m = 0.1 g, v = 0.001 g^2 */
        CHECK_NEAR(mh[j], (1 - 0.9) * G0[j], 1e-15);
        CHECK_NEAR(vh[j], (1 - 0.999) * G0[j] * G0[j], 1e-15);
    }
    ts_tensor *lr = ts_tensor_list_get(&sd, "param_groups.0.lr");
    CHECK(lr && ts_ndim(lr) == 0 && ts_item(lr) == 0.01);
    ts_tensor_list_free(&sd);

    /* a bad dict changes nothing and names the key */
    ts_tensor_list bad = {0};
    ts_tensor *wrong = ts_zeros(TS_SHAPE(5), (ts_opts){.dtype = TS_F64});
    ts_tensor_list_add(&bad, "param_groups.0.lr", ts_scalar(0.5, (ts_opts){.dtype = TS_F64}));
    ts_tensor_list_add(&bad, "state.1.exp_avg", wrong);
    CHECK_EQ(ts_optim_load_state_dict(opt, &bad), TS_ERR_SHAPE);
    CHECK(strstr(ts_error_message(), "state.1.exp_avg") != NULL);
    ts_error_clear();
    CHECK_NEAR(ts_optim_get_lr(opt, 0), 0.01, 0);
    ts_tensor_list_free(&bad);
    ts_tensor_list_add(&bad, "state.0.exp_avg",
                       ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64}));
    CHECK_EQ(ts_optim_load_state_dict(opt, &bad), TS_ERR_ARG); /* step, exp_avg_sq missing */
    CHECK(strstr(ts_error_message(), "state.0.step") != NULL);
    ts_error_clear();
    ts_tensor_list_free(&bad);
    ts_tensor_list_add(&bad, "state.7.exp_avg", wrong);
    CHECK_EQ(ts_optim_load_state_dict(opt, &bad), TS_ERR_ARG);
    ts_error_clear();
    ts_tensor_list_free(&bad);
    ts_tensor_list_add(&bad, "state.0.momentum_buffer", wrong);
    CHECK_EQ(ts_optim_load_state_dict(opt, &bad), TS_ERR_ARG);
    ts_error_clear();
    ts_tensor_list_free(&bad);
    ts_tensor_list_add(&bad, "nonsense", wrong);
    CHECK_EQ(ts_optim_load_state_dict(opt, &bad), TS_ERR_ARG);
    ts_error_clear();
    ts_tensor_list_free(&bad);
    sd = ts_optim_state_dict(opt); /* unchanged by the failed loads */
    CHECK_EQ(sd.n, 4);
    ts_tensor_list_free(&sd);
    ts_optim_free(opt);
    ts_scope_end();
    CHECK_OK();
}

static void test_module(void) {
    ts_scope_begin(); /* the tensors made here belong to it */
    ts_module *m = ts_linear_new_ex(3, 2, (ts_linear_opts){.dtype = TS_F64});
    ts_optim *opt = ts_sgd_new(m, (ts_sgd_opts){.lr = 0.5});
    CHECK(opt != NULL);
    ts_tensor *w = ts_module_get(m, "weight"), *b = ts_module_get(m, "bias");
    double w0[6], w1[6];
    ts_copy_to_host(w, w0, sizeof w0);
    ts_set_grad(w, ts_ones_like(w));
    ts_set_grad(b, ts_ones_like(b));
    CHECK_EQ(ts_optim_step(opt), TS_OK);
    ts_copy_to_host(w, w1, sizeof w1);
    for (int j = 0; j < 6; j++) CHECK_NEAR(w1[j], w0[j] - 0.5, 1e-15);
    /* the module moves to sim:0 after the optimizer was made: same handles, state follows */
    ts_optim_free(opt);
    opt = ts_adam_new(m, (ts_adam_opts){0});
    ts_set_grad(w, ts_ones_like(w)), ts_set_grad(b, ts_ones_like(b));
    ts_optim_step(opt);
    ts_optim_zero_grad(opt);
    ts_module_to(m, ts_sim(0));
    ts_set_grad(w, ts_ones_like(w)), ts_set_grad(b, ts_ones_like(b));
    CHECK_EQ(ts_optim_step(opt), TS_OK);
    ts_tensor_list sd = ts_optim_state_dict(opt);
    ts_tensor *ea = ts_tensor_list_get(&sd, "state.0.exp_avg");
    CHECK(ea && ts_device_equal(ts_device_of(ea), ts_sim(0)));
    ts_tensor_list_free(&sd);
    /* clipping the module's gradients (on sim:0 now): the norm and every clipped value against
     * float64 arithmetic done here */
    const double gw[6] = {0.5, -1.25, 2.0, 0.75, -3.0, 1.5}, gb[2] = {-0.5, 2.25};
    ts_set_grad(w, ts_tensor_f64(TS_SHAPE(2, 3), gw, (ts_opts){.device = ts_sim(0)}));
    ts_set_grad(b, ts_tensor_f64(TS_SHAPE(2), gb, (ts_opts){.device = ts_sim(0)}));
    double ss = 0;
    for (int j = 0; j < 6; j++) ss += gw[j] * gw[j];
    for (int j = 0; j < 2; j++) ss += gb[j] * gb[j];
    const double norm = sqrt(ss), coef = 1.5 / (norm + 1e-6); /* PyTorch's clip_coef */
    CHECK_NEAR(ts_clip_grad_norm_module(m, 1.5), norm, 1e-15 * norm);
    double cw[6], cb[2];
    CHECK_EQ(ts_copy_to_host(ts_grad(w), cw, sizeof cw), TS_OK);
    CHECK_EQ(ts_copy_to_host(ts_grad(b), cb, sizeof cb), TS_OK);
    for (int j = 0; j < 6; j++) CHECK_NEAR(cw[j], gw[j] * coef, 1e-15);
    for (int j = 0; j < 2; j++) CHECK_NEAR(cb[j], gb[j] * coef, 1e-15);
    /* below max_norm: the norm of the clipped gradients (1.5), nothing changes */
    CHECK_NEAR(ts_clip_grad_norm_module(m, 10.0), 1.5, 1e-6);
    CHECK_EQ(ts_copy_to_host(ts_grad(b), cb, sizeof cb), TS_OK);
    for (int j = 0; j < 2; j++) CHECK_NEAR(cb[j], gb[j] * coef, 1e-15);
    CHECK(isnan(ts_clip_grad_norm_module(NULL, 1.0)));
    CHECK_ERR(TS_ERR_ARG);
    ts_optim_free(opt);
    ts_module_free(m);
    ts_scope_end();
    CHECK_OK();
}

/* The module forms of AdamW and RMSprop: one step from known gradients against the update rules
 * in float64 (step 1: Adam's bias-corrected moments are g and g^2; RMSprop's square average is
 * (1 - alpha) g^2). */
static void test_module_adamw_rmsprop(void) {
    const double gw[6] = {0.5, -1.25, 2.0, 0.75, -3.0, 1.5}, gb[2] = {-0.5, 2.25};
    for (int k = 0; k < 2; k++) {
        ts_scope_begin();
        ts_module *m = ts_linear_new_ex(3, 2, (ts_linear_opts){.dtype = TS_F64});
        ts_tensor *w = ts_module_get(m, "weight"), *b = ts_module_get(m, "bias");
        double p0[8], p1[8];
        ts_copy_to_host(w, p0, 6 * sizeof(double));
        ts_copy_to_host(b, p0 + 6, 2 * sizeof(double));
        const double lr = k == 0 ? 0.1 : 0.01, wd = 0.25, alpha = 0.9;
        ts_optim *opt = k == 0 ? ts_adamw_new(m, (ts_adam_opts){.lr = lr, .weight_decay = wd})
                               : ts_rmsprop_new(m, (ts_rmsprop_opts){.lr = lr, .alpha = alpha});
        CHECK(opt != NULL);
        ts_set_grad(w, ts_tensor_f64(TS_SHAPE(2, 3), gw, (ts_opts){0}));
        ts_set_grad(b, ts_tensor_f64(TS_SHAPE(2), gb, (ts_opts){0}));
        CHECK_EQ(ts_optim_step(opt), TS_OK);
        ts_copy_to_host(w, p1, 6 * sizeof(double));
        ts_copy_to_host(b, p1 + 6, 2 * sizeof(double));
        for (int j = 0; j < 8; j++) {
            double g = j < 6 ? gw[j] : gb[j - 6], want;
            if (k == 0) /* decoupled decay, then lr * m_hat / (sqrt(v_hat) + eps) */
                want = p0[j] * (1 - lr * wd) - lr * g / (fabs(g) + 1e-8);
            else
                want = p0[j] - lr * g / (sqrt((1 - alpha) * g * g) + 1e-8);
            CHECK_NEAR(p1[j], want, 1e-14);
        }
        ts_optim_free(opt);
        ts_module_free(m);
        ts_scope_end();
    }
    CHECK_OK();
}

/* RMSprop in each of its eight forms (weight decay, centered, momentum: the kernel has a loop for
 * each) over three steps, against torch.optim.RMSprop's update written here in float64. */
static void test_rmsprop_variants(void) {
    enum { N = 5, STEPS = 3 };
    const double lr = 0.01, alpha = 0.9, eps = 1e-8;
    for (int v = 0; v < 8; v++) {
        const double wd = v & 1 ? 0.1 : 0, mom = v & 4 ? 0.5 : 0;
        const bool centered = v & 2;
        double p[N], sq[N] = {0}, ga[N] = {0}, buf[N] = {0}, got[N];
        for (int i = 0; i < N; i++) p[i] = 0.3 * i - 0.5;
        ts_scope_begin();
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(N), p, (ts_opts){.requires_grad = true});
        ts_optim *opt = ts_rmsprop_new_params(&t, 1,
                                              (ts_rmsprop_opts){.lr = lr,
                                                                .alpha = alpha,
                                                                .weight_decay = wd,
                                                                .momentum = mom,
                                                                .centered = centered});
        for (int step = 0; step < STEPS; step++) {
            double g[N];
            for (int i = 0; i < N; i++) g[i] = sin(1.0 + i + 2.0 * step);
            ts_set_grad(t, ts_tensor_f64(TS_SHAPE(N), g, (ts_opts){0}));
            CHECK_EQ(ts_optim_step(opt), TS_OK);
            for (int i = 0; i < N; i++) {
                double gi = g[i] + wd * p[i];
                sq[i] = alpha * sq[i] + (1 - alpha) * gi * gi;
                double avg;
                if (centered) {
                    ga[i] = alpha * ga[i] + (1 - alpha) * gi;
                    avg = sqrt(sq[i] - ga[i] * ga[i]) + eps;
                } else {
                    avg = sqrt(sq[i]) + eps;
                }
                if (mom > 0) {
                    buf[i] = mom * buf[i] + gi / avg;
                    p[i] -= lr * buf[i];
                } else {
                    p[i] -= lr * gi / avg;
                }
            }
        }
        ts_copy_to_host(t, got, sizeof got);
        for (int i = 0; i < N; i++) CHECK_NEAR(got[i], p[i], 1e-12);
        ts_optim_free(opt);
        ts_scope_end();
    }
    CHECK_OK();
}

/* ts_initial_seed reports the seed in use; ts_error_set records a user's error like the
 * library's: first error wins, and the code is returned. */
static void test_seed_and_user_errors(void) {
    ts_manual_seed(12345);
    CHECK_EQ(ts_initial_seed(), 12345);
    ts_manual_seed(7);
    CHECK_EQ(ts_initial_seed(), 7);
    CHECK_EQ(ts_error_set(TS_ERR_ARG, "my_op: bad value %d", 42), TS_ERR_ARG);
    CHECK_EQ(ts_error_set(TS_ERR_SHAPE, "a later error"), TS_ERR_SHAPE);
    CHECK_EQ(ts_error(), TS_ERR_ARG);
    CHECK_STREQ(ts_error_message(), "my_op: bad value 42");
    ts_error_clear();
    CHECK_OK();
}

static void test_errors(void) {
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F64);
    CHECK(ts_sgd_new_params(p, 2, (ts_sgd_opts){0}) == NULL); /* lr is required */
    CHECK_ERR_HAS(TS_ERR_ARG, "sgd: invalid learning rate 0 (lr is required, > 0)");
    CHECK(ts_sgd_new_params(p, 2, (ts_sgd_opts){.lr = 0.1, .nesterov = true}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "sgd: nesterov momentum requires a momentum and zero dampening");
    CHECK(ts_sgd_new_params(p, 2, (ts_sgd_opts){.lr = 0.1, .momentum = -1}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "sgd: invalid momentum value -1");
    CHECK(ts_adam_new_params(p, 2, (ts_adam_opts){.beta1 = 1.0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adam: invalid beta parameter at index 0: 1");
    CHECK(ts_adam_new_params(p, 2, (ts_adam_opts){.beta2 = 1.5}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adam: invalid beta parameter at index 1: 1.5");
    CHECK(ts_adam_new_params(p, 2, (ts_adam_opts){.eps = -1}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adam: invalid epsilon value -1");
    CHECK(ts_adam_new_params(p, 2, (ts_adam_opts){.weight_decay = -1}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adam: invalid weight_decay value -1");
    CHECK(ts_adam_new_params(p, 2, (ts_adam_opts){.lr = -1}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adam: invalid learning rate -1");
    CHECK(ts_adamw_new_params(p, 2, (ts_adam_opts){.lr = -1}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "adamw: invalid learning rate -1");
    CHECK(ts_rmsprop_new_params(p, 2, (ts_rmsprop_opts){.alpha = -0.5}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "rmsprop: invalid alpha value -0.5");
    CHECK(ts_sgd_new_params(p, 0, (ts_sgd_opts){.lr = 0.1}) == NULL); /* empty */
    CHECK_ERR_HAS(TS_ERR_ARG, "sgd: ");
    CHECK(ts_sgd_new_params(NULL, 2, (ts_sgd_opts){.lr = 0.1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *dup[2] = {p[0], p[0]};
    CHECK(ts_sgd_new_params(dup, 2, (ts_sgd_opts){.lr = 0.1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *ints = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I64});
    CHECK(ts_adam_new_params(&ints, 1, (ts_adam_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "adam: ");
    ts_scope_begin();
    ts_tensor *nonleaf = ts_mul_scalar(p[0], 2);
    CHECK(ts_sgd_new_params(&nonleaf, 1, (ts_sgd_opts){.lr = 0.1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    CHECK(ts_sgd_new(NULL, (ts_sgd_opts){.lr = 0.1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);

    ts_optim *opt = ts_sgd_new_params(p, 1, (ts_sgd_opts){.lr = 0.1});
    CHECK_EQ(ts_optim_add_param_group(opt, p, 1, 0.1), TS_ERR_ARG); /* already in group 0 */
    ts_error_clear();
    CHECK_EQ(ts_optim_add_param_group(opt, p + 1, 1, -1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_optim_num_groups(opt), 1);
    CHECK(isnan(ts_optim_get_lr(opt, 3)));
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_optim_set_lr(opt, -1, 0.1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_optim_set_lr(opt, 0, 0.25), TS_OK);
    CHECK_NEAR(ts_optim_get_lr(opt, 0), 0.25, 0);
    CHECK_EQ(ts_optim_step(NULL), TS_ERR_ARG);
    ts_error_clear();
    ts_optim_free(opt);
    ts_optim_free(NULL);
    ts_release(ints);
    ts_release(p[0]), ts_release(p[1]);
    CHECK_OK();
}

/* Tensors large enough to be split over threads: element j of a 70002-element parameter holding
 * P0[j % 6] with gradients G0[j % 6] * C[s] - 0.2 s ends where the reference's element j % 6 does.
 */
static void test_large(void) {
    enum { N = 70002 };
    static const int which[] = {3, 7, 15}; /* SGD nesterov, Adam amsgrad, RMSprop centered */
    double *v = malloc(N * sizeof *v), *g = malloc(N * sizeof *g);
    int old = ts_get_num_threads();
    ts_set_num_threads(2);
    for (int w = 0; w < 3; w++) {
        const optim_case *c = &cases[which[w]];
        ts_scope_begin();
        for (int j = 0; j < N; j++) v[j] = P0[j % 6];
        ts_tensor *p =
            ts_tensor_f64(TS_SHAPE(N), v, (ts_opts){.dtype = TS_F64, .requires_grad = true});
        ts_optim *opt = make(c, &p, 1);
        for (int s = 0; s < 5; s++) {
            for (int j = 0; j < N; j++) g[j] = G0[j % 6] * C[s] - 0.2 * s;
            ts_set_grad(p, ts_tensor_f64(TS_SHAPE(N), g, (ts_opts){.dtype = TS_F64}));
            CHECK_EQ(ts_optim_step(opt), TS_OK);
        }
        ts_copy_to_host(p, v, N * sizeof *v);
        int bad = 0;
        for (int j = 0; j < N; j++) bad += !(fabs(v[j] - c->ref[j % 6]) <= 1e-12);
        if (bad) printf("  large %s: %d elements differ\n", c->name, bad);
        CHECK_EQ(bad, 0);
        ts_optim_free(opt);
        ts_scope_end();
    }
    ts_set_num_threads(old);
    free(v), free(g);
    CHECK_OK();
}

/* Out of memory while creating Adam's state: the step fails with TS_ERR_OOM and changes nothing. */
static void test_oom(void) {
    /* 20 MB: the 8 MB parameter and its 8 MB grad fit, their two 8 MB state buffers do not */
    CHECK_EQ(ts_sim_configure(1, (size_t)20 << 20), TS_OK);
    ts_scope_begin();
    ts_opts o = {.dtype = TS_F64, .device = ts_sim(0), .requires_grad = true};
    ts_tensor *p = ts_ones(TS_SHAPE(1 << 20), o);
    ts_optim *opt = ts_adam_new_params(&p, 1, (ts_adam_opts){.lr = 0.1});
    ts_set_grad(p, ts_ones(TS_SHAPE(1 << 20), (ts_opts){.dtype = TS_F64, .device = ts_sim(0)}));
    CHECK_EQ(ts_optim_step(opt), TS_ERR_OOM);
    CHECK(strstr(ts_error_message(), "optim_step") != NULL);
    ts_error_clear();
    CHECK_NEAR(ts_item(ts_sum(ts_to(p, ts_cpu()))), 1 << 20, 0); /* unchanged */
    ts_tensor_list sd = ts_optim_state_dict(opt);
    CHECK_EQ(sd.n, 1); /* param_groups.0.lr only */
    ts_tensor_list_free(&sd);
    ts_optim_free(opt);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    test_cases();
    test_groups_and_skip();
    test_f32();
    test_strided();
    test_state_dict();
    test_state_dict_names();
    test_module();
    test_module_adamw_rmsprop();
    test_rmsprop_variants();
    test_seed_and_user_errors();
    test_errors();
    test_large();
    test_oom(); /* last: it reconfigures the sim devices */
    return ts_test_finish();
}
