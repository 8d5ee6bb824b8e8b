/* test_optim_adaptive.c — Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop against
 * PyTorch 2.x on cpu and sim:0 (f64 to 1e-12, f32 to 1e-5), their state dicts (PyTorch's names, f32
 * scalars, a resumed run continuing bit for bit), ts_optim_set_momentum, and the option errors.
 *
 * The reference values come from /opt/torch2 (PyTorch 2.x), 7 steps (RAdam rectifies from step 6):
 *
 * import torch
 * P0 = [0.5, -1.2, 0.3, 2.0, -0.7, 1.1]; P1 = [0.05, -0.4, 0.9, -1.5]
 * G0 = [0.3, -0.8, 0.5, 0.1, -0.2, 0.9]; G1 = [-0.6, 0.25, 0.4, -0.05]
 * C = [1.0, 2.5, 0.5, 1.5, 0.25]
 * def run(make, dt=torch.float64, steps=7):
 *     p0 = torch.tensor(P0, dtype=dt).reshape(2, 3).requires_grad_()
 *     p1 = torch.tensor(P1, dtype=dt).requires_grad_()
 *     opt = make([p0, p1])
 *     for s in range(steps):
 *         p0.grad = torch.tensor(G0, dtype=dt).reshape(2, 3) * C[s % 5] - 0.2 * s
 *         p1.grad = torch.tensor(G1, dtype=dt) * C[s % 5] - 0.2 * s
 *         opt.step()
 *     return p0.detach().flatten().tolist() + p1.detach().tolist()
 * O = torch.optim
 * print(run(lambda p: O.Adagrad(p, lr=0.1, ...)))   # one line per row of `cases` below
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optim_ref.h"
#include "ts_test.h"

#define STEPS 7

typedef enum { K_ADAGRAD, K_ADADELTA, K_ADAMAX, K_NADAM, K_RADAM, K_ASGD, K_RPROP } kind;
typedef struct more_case {
    const char *name;
    kind k;
    double a, b, c, d, e, f; /* the opts struct's doubles in order */
    bool flag;               /* NAdam/RAdam: decoupled; others: maximize */
    double ref[10];
} more_case;

static const more_case cases[] = {
    {"Adagrad(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)",
     K_ADAGRAD,
     0.1,
     0.01,
     0.1,
     0.1,
     1e-10,
     0,
     false,
     {0.5310441528724675, -0.7879731334289412, 0.19761243900463038, 2.1387567318425673,
      -0.2605733094435522, 0.8583344800753219, 0.4684104021528501, -0.26614335223039326,
      0.8321558209839048, -1.0575095933663454}},
    {"Adadelta(weight_decay=0.1, maximize=True)",
     K_ADADELTA,
     1.0,
     0.9,
     1e-6,
     0.1,
     0,
     0,
     true,
     {0.48785876953488777, -1.225375507544026, 0.300994452481851, 1.9579855275152964,
      -0.7360503426772397, 1.1090301241182128, 0.0227858902246834, -0.4114494310488974,
      0.8937529211731331, -1.537570722095504}},
    {"Adamax(lr=0.01, weight_decay=0.1)",
     K_ADAMAX,
     0.01,
     0.9,
     0.999,
     1e-8,
     0.1,
     0,
     false,
     {0.483111274423045, -1.151692843033046, 0.2729887596378332, 1.9873170605047865,
      -0.6490743188417922, 1.0644370939693086, 0.0986493342796774, -0.4072863700966738,
      0.8743007002589759, -1.449450422033305}},
    {"NAdam(lr=0.01, momentum_decay=0.1, weight_decay=0.1, decoupled_weight_decay=True)",
     K_NADAM,
     0.01,
     0.9,
     0.999,
     1e-8,
     0.1,
     0.1,
     true,
     {0.5062599174302658, -1.1327338433627143, 0.2858386276891186, 2.023158493766898,
      -0.6269106762945744, 1.0607180174759032, 0.11049825682140012, -0.38078505138674335,
      0.8914206064337638, -1.416419060986884}},
    {"NAdam(lr=0.01, weight_decay=0.1)",
     K_NADAM,
     0.01,
     0.9,
     0.999,
     1e-8,
     0.1,
     4e-3,
     false,
     {0.5061845169490756, -1.1405503681924358, 0.2862699790483158, 2.0223835291245824,
      -0.6318794459783063, 1.0656461513593616, 0.11130275163622448, -0.3802494997084164,
      0.8914807339564028, -1.4288886556375553}},
    {"RAdam(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)",
     K_RADAM,
     0.01,
     0.9,
     0.99,
     1e-8,
     0.1,
     0,
     false,
     {0.489516762994991, -1.1288948674872332, 0.2765364765190103, 1.9955592992277043,
      -0.6706963971793021, 1.0453267905535626, 0.10175048116601132, -0.4022528584093536,
      0.8803238838011619, -1.4765449826304882}},
    {"RAdam(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)",
     K_RADAM,
     0.01,
     0.9,
     0.999,
     1e-8,
     0.1,
     0,
     true,
     {0.4880437559184619, -1.1279118421450354, 0.2760678767590348, 1.9908532506830452,
      -0.6706204406180716, 1.0440322816749101, 0.10029327555089974, -0.40233920063530443,
      0.8785626245243419, -1.4748594108251718}},
    {"ASGD(lr=0.05, lambd=0.1, alpha=0.5, t0=2, weight_decay=0.1)",
     K_ASGD,
     0.05,
     0.1,
     0.5,
     2,
     0.1,
     0,
     false,
     {0.5368134167891696, -0.5578136575387445, 0.261082850933826, 2.0248613906773687,
      -0.359198317538513, 0.8286839420226977, 0.5186559624887123, -0.2801782014633119,
      0.8652240600279807, -1.1721549459464484}},
    {"Rprop(lr=0.05, etas=(0.4, 1.3), step_sizes=(0.01, 0.08), maximize=True)",
     K_RPROP,
     0.05,
     0.4,
     1.3,
     0.01,
     0.08,
     0,
     true,
     {0.45413799999999993, -1.7150000000000003, 0.4306, 1.954138, -1.215, 1.3430000000000002,
      -0.4650000000000001, -0.4458620000000001, 0.9112600000000001, -2.015}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static ts_optim *make(const more_case *c, ts_tensor **p, int n) {
    switch (c->k) {
    case K_ADAGRAD:
        return ts_adagrad_new_params(p, n,
                                     (ts_adagrad_opts){c->a, c->b, c->c, c->d, c->e, c->flag});
    case K_ADADELTA:
        return ts_adadelta_new_params(p, n, (ts_adadelta_opts){c->a, c->b, c->c, c->d, c->flag});
    case K_ADAMAX:
        return ts_adamax_new_params(p, n, (ts_adamax_opts){c->a, c->b, c->c, c->d, c->e, c->flag});
    case K_NADAM:
        return ts_nadam_new_params(
            p, n, (ts_nadam_opts){c->a, c->b, c->c, c->d, c->e, c->f, c->flag, false});
    case K_RADAM:
        return ts_radam_new_params(p, n,
                                   (ts_radam_opts){c->a, c->b, c->c, c->d, c->e, c->flag, false});
    case K_ASGD:
        return ts_asgd_new_params(p, n, (ts_asgd_opts){c->a, c->b, c->c, c->d, c->e, c->flag});
    case K_RPROP:
        return ts_rprop_new_params(p, n, (ts_rprop_opts){c->a, c->b, c->c, c->d, c->e, c->flag});
    }
    return NULL;
}

/* step s's gradients: G * C[s % 5] - 0.2 s */
static void grads_at(ts_tensor **p, int s) {
    double g0[6], g1[4];
    for (int j = 0; j < 6; j++) g0[j] = G0[j] * C[s % 5] - 0.2 * s;
    for (int j = 0; j < 4; j++) g1[j] = G1[j] * C[s % 5] - 0.2 * s;
    ts_opts o = {.dtype = ts_dtype_of(p[0]), .device = ts_device_of(p[0])};
    ts_scope_begin();
    CHECK_EQ(ts_set_grad(p[0], ts_tensor_f64(TS_SHAPE(2, 3), g0, o)), TS_OK);
    CHECK_EQ(ts_set_grad(p[1], ts_tensor_f64(TS_SHAPE(4), g1, o)), TS_OK);
    ts_scope_end();
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

static void run_case(const more_case *c, ts_device dev, ts_dtype dt, double *out) {
    ts_tensor *p[2];
    make_params(p, dev, dt);
    ts_optim *opt = make(c, p, 2);
    CHECK(opt != NULL);
    for (int s = 0; opt && s < STEPS; s++) {
        grads_at(p, s);
        CHECK_EQ(ts_optim_step(opt), TS_OK);
    }
    read_params(p, out);
    ts_optim_free(opt);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

static void test_cases(void) {
    for (int i = 0; i < N_CASES; i++) {
        double cpu[10], sim[10], f32[10];
        run_case(&cases[i], ts_cpu(), TS_F64, cpu);
        run_case(&cases[i], ts_sim(0), TS_F64, sim);
        if (check_close(cases[i].name, cpu, cases[i].ref, 10, 1e-12))
            printf("  (case %s, f64)\n", cases[i].name);
        CHECK(memcmp(cpu, sim, sizeof cpu) == 0); /* one kernel: identical bits */
        /* f32: ~20 rounded operations a step on values ~1, 7 steps: ~1e-5 */
        run_case(&cases[i], ts_cpu(), TS_F32, f32);
        if (check_close(cases[i].name, f32, cases[i].ref, 10, 1e-5))
            printf("  (case %s, f32)\n", cases[i].name);
    }
}

static bool has_name(const ts_tensor_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return true;
    return false;
}

static ts_tensor *find(const ts_tensor_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return l->tensors[i];
    return NULL;
}

/* PyTorch's names and f32 0-dim scalars; a run resumed from the state dict after 3 steps
 * continues bit for bit like the original */
static void test_state_dict(void) {
    static const char *names[][4] = {{"sum"},
                                     {"square_avg", "acc_delta"},
                                     {"exp_avg", "exp_inf"},
                                     {"exp_avg", "exp_avg_sq", "mu_product"},
                                     {"exp_avg", "exp_avg_sq"},
                                     {"ax", "eta", "mu"},
                                     {"prev", "step_size"}};
    static const int case_of_kind[] = {0, 1, 2, 3, 5, 7, 8};
    for (int k = 0; k < 7; k++) {
        const more_case *c = &cases[case_of_kind[k]];
        ts_tensor *p[2], *q[2];
        make_params(p, ts_cpu(), TS_F64);
        make_params(q, ts_cpu(), TS_F64);
        ts_optim *a = make(c, p, 2), *b = make(c, q, 2);
        for (int s = 0; s < 3; s++) {
            grads_at(p, s);
            grads_at(q, s);
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_optim_step(b), TS_OK);
        }
        ts_tensor_list sd = ts_optim_state_dict(a);
        CHECK(has_name(&sd, "state.1.step") && has_name(&sd, "param_groups.0.lr"));
        ts_tensor *st = find(&sd, "state.0.step");
        CHECK(st && ts_dtype_of(st) == TS_F32 && ts_ndim(st) == 0 && ts_item(st) == 3.0);
        for (int j = 0; j < 4 && names[k][j]; j++) {
            char key[64];
            snprintf(key, sizeof key, "state.1.%s", names[k][j]);
            if (!has_name(&sd, key)) printf("  %s: no %s\n", c->name, key);
            CHECK(has_name(&sd, key));
        }
        /* b loses its state, then takes a's: both continue identically */
        ts_tensor *fresh[2];
        make_params(fresh, ts_cpu(), TS_F64);
        ts_optim *other = make(c, fresh, 2);
        CHECK_EQ(ts_optim_load_state_dict(other, &sd), TS_OK);
        CHECK_EQ(ts_optim_load_state_dict(b, &sd), TS_OK);
        ts_tensor_list_free(&sd);
        for (int s = 3; s < STEPS; s++) {
            grads_at(p, s);
            grads_at(q, s);
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_optim_step(b), TS_OK);
        }
        double va[10], vb[10];
        read_params(p, va);
        read_params(q, vb);
        CHECK(memcmp(va, vb, sizeof va) == 0);
        check_close(c->name, va, c->ref, 10, 1e-12);
        ts_optim_free(a), ts_optim_free(b), ts_optim_free(other);
        for (int i = 0; i < 2; i++) ts_release(p[i]), ts_release(q[i]), ts_release(fresh[i]);
        CHECK_OK();
    }
}

/* a state dict missing NAdam's mu_product, or with another kind's names, changes nothing */
static void test_state_dict_errors(void) {
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F32);
    ts_optim *o = ts_nadam_new_params(p, 2, ts_nadam_defaults());
    grads_at(p, 0);
    CHECK_EQ(ts_optim_step(o), TS_OK);
    ts_tensor_list sd = ts_optim_state_dict(o), bad = {0};
    for (int i = 0; i < sd.n; i++)
        if (strcmp(sd.names[i], "state.0.mu_product") != 0)
            CHECK_EQ(ts_tensor_list_add(&bad, sd.names[i], sd.tensors[i]), TS_OK);
    CHECK_EQ(ts_optim_load_state_dict(o, &bad), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "state.0.mu_product is missing") != NULL);
    ts_error_clear();
    ts_optim *r = ts_rprop_new_params(p, 2, ts_rprop_defaults());
    CHECK_EQ(ts_optim_load_state_dict(r, &sd), TS_ERR_ARG); /* exp_avg: not Rprop's */
    CHECK(strstr(ts_error_message(), "Rprop keeps no state") != NULL);
    ts_error_clear();
    ts_tensor_list_free(&bad);
    ts_tensor_list_free(&sd);
    ts_optim_free(o);
    ts_optim_free(r);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

/* the momentum a schedule sets is the one SGD steps with (and Adamax's beta1); none for Rprop */
static void test_set_momentum(void) {
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F64);
    ts_optim *o = ts_sgd_new_params(p, 2, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    double want[10], buf[10] = {0}, got[10];
    memcpy(want, P0, sizeof P0);
    memcpy(want + 6, P1, sizeof P1);
    const double moms[3] = {0.9, 0.5, 0.0};
    for (int s = 0; s < 3; s++) {
        CHECK_EQ(ts_optim_set_momentum(o, 0, moms[s]), TS_OK);
        CHECK(ts_optim_get_momentum(o, 0) == moms[s]);
        grads_at(p, s);
        CHECK_EQ(ts_optim_step(o), TS_OK);
        for (int j = 0; j < 10; j++) {
            double g = (j < 6 ? G0[j] : G1[j - 6]) * C[s] - 0.2 * s;
            buf[j] = s == 0 ? g : moms[s] * buf[j] + g;
            want[j] -= 0.1 * buf[j];
        }
    }
    read_params(p, got);
    check_close("SGD with a momentum schedule", got, want, 10, 1e-12);
    CHECK_EQ(ts_optim_set_momentum(o, 0, -0.5), TS_ERR_ARG);
    ts_error_clear();
    ts_optim *a = ts_adamax_new_params(p, 2, ts_adamax_defaults());
    CHECK_EQ(ts_optim_set_momentum(a, 0, 0.8), TS_OK);
    CHECK(ts_optim_get_momentum(a, 0) == 0.8);
    CHECK_EQ(ts_optim_set_momentum(a, 0, 1.0), TS_ERR_ARG); /* beta1 < 1 */
    ts_error_clear();
    ts_optim *r = ts_rprop_new_params(p, 2, ts_rprop_defaults());
    CHECK_EQ(ts_optim_set_momentum(r, 0, 0.5), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "Rprop has no momentum") != NULL);
    ts_error_clear();
    ts_optim_free(o), ts_optim_free(a), ts_optim_free(r);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

static void expect_arg_error(ts_optim *o, const char *msg) {
    CHECK(o == NULL);
    CHECK_EQ(ts_error(), TS_ERR_ARG);
    if (!strstr(ts_error_message(), msg))
        printf("  got \"%s\", want \"%s\"\n", ts_error_message(), msg);
    CHECK(strstr(ts_error_message(), msg) != NULL);
    ts_error_clear();
}

static void test_errors(void) {
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F32);
    ts_adadelta_opts ad = ts_adadelta_defaults();
    ad.rho = 1.5;
    expect_arg_error(ts_adadelta_new_params(p, 2, ad), "invalid rho value 1.5");
    ts_nadam_opts na = ts_nadam_defaults();
    na.beta2 = 1.0;
    expect_arg_error(ts_nadam_new_params(p, 2, na), "invalid beta parameter at index 1");
    na = ts_nadam_defaults();
    na.momentum_decay = -1;
    expect_arg_error(ts_nadam_new_params(p, 2, na), "invalid momentum_decay value");
    ts_rprop_opts rp = ts_rprop_defaults();
    rp.etaplus = 0.9;
    expect_arg_error(ts_rprop_new_params(p, 2, rp), "invalid eta values");
    ts_adagrad_opts ag = ts_adagrad_defaults();
    ag.lr_decay = NAN;
    expect_arg_error(ts_adagrad_new_params(p, 2, ag), "invalid lr_decay value");
    ts_asgd_opts as = ts_asgd_defaults();
    as.lambd = INFINITY;
    expect_arg_error(ts_asgd_new_params(p, 2, as), "lambd");
    expect_arg_error(ts_radam_new(NULL, ts_radam_defaults()), "module is NULL");
    expect_arg_error(ts_adamax_new_params(p, 0, ts_adamax_defaults()), "empty parameter list");
    /* one-cycle cycles NAdam's beta1 (PyTorch's OneCycleLR), and refuses Adagrad (no momentum) */
    ts_optim *na_opt = ts_nadam_new_params(p, 2, ts_nadam_defaults());
    ts_lr_scheduler *oc = ts_onecycle_lr_new(na_opt, 0.1, 10);
    CHECK(oc != NULL);
    CHECK(fabs(ts_optim_get_momentum(na_opt, 0) - 0.95) < 1e-15);
    ts_scheduler_step(oc);
    CHECK(ts_optim_get_momentum(na_opt, 0) < 0.95);
    ts_scheduler_free(oc);
    ts_optim_free(na_opt);
    ts_optim *ag_opt = ts_adagrad_new_params(p, 2, ts_adagrad_defaults());
    CHECK(ts_onecycle_lr_new(ag_opt, 0.1, 10) == NULL);
    CHECK_EQ(ts_error(), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "Adagrad has no momentum or beta1") != NULL);
    ts_error_clear();
    ts_optim_free(ag_opt);
    /* zero is literal: lr 0 leaves the parameters unchanged */
    ts_adagrad_opts z = ts_adagrad_defaults();
    z.lr = 0;
    ts_optim *o = ts_adagrad_new_params(p, 2, z);
    CHECK(o != NULL);
    grads_at(p, 1);
    CHECK_EQ(ts_optim_step(o), TS_OK);
    double v[10];
    read_params(p, v);
    for (int j = 0; j < 6; j++) CHECK(v[j] == (double)(float)P0[j]);
    ts_optim_free(o);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

/* ASGD's average ax (not seen in the parameters), eta and mu after the 7 steps of its case
 * (PyTorch: opt.state_dict()["state"][i]["ax"], ["eta"], ["mu"]) */
static void test_asgd_average(void) {
    static const double ax_ref[10] = {0.5013240713925726, -0.7444381589573933,  0.24592698693889223,
                                      1.9872854605958143, -0.46938269291495993, 0.8710383301080493,
                                      0.3727172503480521, -0.3340851878879172,  0.8469194925309482,
                                      -1.2762126586300009};
    const more_case *c = &cases[7];
    CHECK(c->k == K_ASGD);
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_F64);
    ts_optim *o = make(c, p, 2);
    for (int s = 0; s < STEPS; s++) {
        grads_at(p, s);
        CHECK_EQ(ts_optim_step(o), TS_OK);
    }
    ts_tensor_list sd = ts_optim_state_dict(o);
    double ax[10];
    CHECK_EQ(ts_copy_to_host(find(&sd, "state.0.ax"), ax, 6 * sizeof(double)), TS_OK);
    CHECK_EQ(ts_copy_to_host(find(&sd, "state.1.ax"), ax + 6, 4 * sizeof(double)), TS_OK);
    check_close("ASGD ax", ax, ax_ref, 10, 1e-12);
    CHECK(ts_item(find(&sd, "state.1.eta")) == 0.04914731904864311); /* f32 values: exact */
    CHECK(ts_item(find(&sd, "state.1.mu")) == 0.20000000298023224);
    ts_tensor_list_free(&sd);
    ts_optim_free(o);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

/* the seven take per-step scalars from the host: a captured step is refused, naming the kind,
 * and nothing changed */
static void test_capture_refused(void) {
    ts_tensor *p[2];
    make_params(p, ts_sim(0), TS_F32);
    ts_optim *o = ts_radam_new_params(p, 2, ts_radam_defaults());
    grads_at(p, 0);
    CHECK_EQ(ts_optim_step(o), TS_OK); /* warm-up, eagerly */
    double before[10], after[10];
    read_params(p, before);
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    CHECK(g != NULL);
    CHECK_EQ(ts_optim_step(o), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "a step of RAdam") != NULL);
    CHECK_EQ(ts_graph_capture_end(), TS_ERR_STATE);
    ts_error_clear();
    ts_graph_free(g);
    read_params(p, after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    ts_tensor_list sd = ts_optim_state_dict(o);
    CHECK(ts_item(find(&sd, "state.0.step")) == 1.0);
    ts_tensor_list_free(&sd);
    ts_optim_free(o);
    ts_release(p[0]);
    ts_release(p[1]);
    CHECK_OK();
}

int main(void) {
    test_cases();
    test_capture_refused();
    test_asgd_average();
    test_state_dict();
    test_state_dict_errors();
    test_set_momentum();
    test_errors();
    return ts_test_finish();
}
