/* test_scheduler.c — learning-rate schedulers against PyTorch 1.13's sequences, two groups each. */
#include <math.h>
#include <stdio.h>

#include "optim/optim_internal.h" /* the groups' momentum / beta1, which one-cycle changes */
#include "ts_test.h"

/* References from /usr/bin/python3 (torch 1.13): the lr of both groups after construction and
 * after each step, and group 1's momentum (beta1 for Adam):
 *
 * import torch, warnings
 * warnings.simplefilter("ignore")
 * S = torch.optim.lr_scheduler
 * def seq(make, n, adam=False):
 *     p = torch.zeros(1, requires_grad=True); q = torch.zeros(1, requires_grad=True)
 *     o = (torch.optim.Adam([p], lr=0.1) if adam else torch.optim.SGD([p], lr=0.1, momentum=0.9))
 *     o.add_param_group({'params': [q], 'lr': 0.05})
 *     ss = make(o)
 *     out = []; mom = []
 *     for e in range(n + 1):
 *         if e:
 *             o.step()
 *             for s in ss: s.step()
 *         out += [g['lr'] for g in o.param_groups]
 *         mom.append(o.param_groups[1]['betas'][0] if adam else o.param_groups[1]['momentum'])
 *     return out, mom
 * def show(name, make, n, adam=False):
 *     out, mom = seq(make, n, adam)
 *     print("// %s" % name)
 *     print("{%s}," % ", ".join(repr(v) for v in out))
 *     print("mom {%s}," % ", ".join(repr(v) for v in mom))
 * show("StepLR(step_size=3, gamma=0.5), 12 steps", lambda o: [S.StepLR(o, 3, 0.5)], 12)
 * ... one show() per row of `rows` below, e.g. for the last one:
 * show("...", lambda o: [S.LinearLR(o, 0.5, 1.0, 3), S.StepLR(o, 2, 0.5)], 8)
 */
typedef enum {
    SC_STEP,
    SC_MULTISTEP,
    SC_COSINE,
    SC_LINEAR,
    SC_ONECYCLE,
    SC_ONECYCLE_ADAM,
    SC_CHAINED,
    SC_WARM_RESTARTS
} sched_case;

typedef struct row {
    const char *name;
    sched_case kind;
    int steps;
    double lr[64];
    double mom[32];
} row;

static const row rows[] = {
    {"StepLR(step_size=3, gamma=0.5), 12 steps", SC_STEP, 12,
     .lr = {0.1,    0.05,    0.1,    0.05,    0.1,    0.05,    0.05,    0.025,   0.05,
            0.025,  0.05,    0.025,  0.025,   0.0125, 0.025,   0.0125,  0.025,   0.0125,
            0.0125, 0.00625, 0.0125, 0.00625, 0.0125, 0.00625, 0.00625, 0.003125},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    {"MultiStepLR([2, 5, 5, 9], gamma=0.3), 12 steps", SC_MULTISTEP, 12,
     .lr = {0.1,
            0.05,
            0.1,
            0.05,
            0.03,
            0.015,
            0.03,
            0.015,
            0.03,
            0.015,
            0.0026999999999999997,
            0.0013499999999999999,
            0.0026999999999999997,
            0.0013499999999999999,
            0.0026999999999999997,
            0.0013499999999999999,
            0.0026999999999999997,
            0.0013499999999999999,
            0.0008099999999999998,
            0.0004049999999999999,
            0.0008099999999999998,
            0.0004049999999999999,
            0.0008099999999999998,
            0.0004049999999999999,
            0.0008099999999999998,
            0.0004049999999999999},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    {"CosineAnnealingLR(T_max=6, eta_min=0.001), 15 steps", SC_COSINE, 15,
     .lr = {0.1,
            0.05,
            0.09336825748732973,
            0.046717622392718754,
            0.07525000000000001,
            0.037750000000000006,
            0.0505,
            0.025500000000000002,
            0.025750000000000012,
            0.013250000000000005,
            0.007631742512670284,
            0.004282377607281252,
            0.001,
            0.001,
            0.007631742512670284,
            0.004282377607281252,
            0.025750000000000002,
            0.013250000000000001,
            0.05050000000000004,
            0.02550000000000002,
            0.07525000000000008,
            0.03775000000000004,
            0.0933682574873298,
            0.04671762239271879,
            0.1000000000000001,
            0.05000000000000005,
            0.09336825748732981,
            0.046717622392718795,
            0.07525000000000011,
            0.037750000000000054,
            0.050500000000000114,
            0.025500000000000054},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    {"LinearLR(start_factor=0.25, end_factor=1.0, total_iters=4), 8 steps", SC_LINEAR, 8,
     .lr = {0.025, 0.0125, 0.043750000000000004, 0.021875000000000002, 0.06250000000000001,
            0.03125000000000001, 0.08125000000000002, 0.04062500000000001, 0.10000000000000002,
            0.05000000000000001, 0.10000000000000002, 0.05000000000000001, 0.10000000000000002,
            0.05000000000000001, 0.10000000000000002, 0.05000000000000001, 0.10000000000000002,
            0.05000000000000001},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    {"OneCycleLR(max_lr=1.0, total_steps=10), 10 steps", SC_ONECYCLE, 10,
     .lr = {0.040000000000000036,
            0.040000000000000036,
            0.52,
            0.52,
            1.0,
            1.0,
            0.9504846320134737,
            0.9504846320134737,
            0.8117456539497631,
            0.8117456539497631,
            0.6112620219362893,
            0.6112620219362893,
            0.38874197806371075,
            0.38874197806371075,
            0.18825834605023697,
            0.18825834605023697,
            0.049519367986526286,
            0.049519367986526286,
            4e-06,
            4e-06,
            0.04951936798652623,
            0.04951936798652623},
     .mom = {0.95, 0.8999999999999999, 0.85, 0.854951556604879, 0.8688255099070633,
             0.8888739533021842, 0.9111260466978157, 0.9311744900929366, 0.945048443395121, 0.95,
             0.945048443395121}},
    {"OneCycleLR(max_lr=0.5, total_steps=7), Adam, 7 steps", SC_ONECYCLE_ADAM, 7,
     .lr = {0.020000000000000018, 0.020000000000000018, 0.4902783136674793, 0.4902783136674793,
            0.4595221881348553, 0.4595221881348553, 0.33634191824027254, 0.33634191824027254,
            0.17886938786982853, 0.17886938786982853, 0.0496483959466328, 0.0496483959466328, 2e-06,
            2e-06, 0.04964839594663269, 0.04964839594663269},
     .mom = {0.95, 0.8520253513192751, 0.858095594755408, 0.8827317472789346, 0.9142263793315516,
             0.9400706810933978, 0.95, 0.9400706810933978}},
    {"LinearLR(0.5, 1.0, 3) and StepLR(2, 0.5) chained, 8 steps", SC_CHAINED, 8,
     .lr = {0.05, 0.025, 0.06666666666666667, 0.03333333333333333, 0.041666666666666664,
            0.020833333333333332, 0.049999999999999996, 0.024999999999999998, 0.024999999999999998,
            0.012499999999999999, 0.024999999999999998, 0.012499999999999999, 0.012499999999999999,
            0.0062499999999999995, 0.012499999999999999, 0.0062499999999999995,
            0.0062499999999999995, 0.0031249999999999997},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
    /* from /opt/torch2/bin/torch-python (torch 2.x): show(..., lambda o:
     * [S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01)], 12) */
    {"CosineAnnealingWarmRestarts(T_0=3, T_mult=2, eta_min=0.01), 12 steps", SC_WARM_RESTARTS, 12,
     .lr = {0.1,
            0.05,
            0.0775,
            0.04,
            0.032500000000000015,
            0.020000000000000004,
            0.1,
            0.05,
            0.09397114317029975,
            0.04732050807568878,
            0.0775,
            0.04,
            0.05500000000000001,
            0.03,
            0.032500000000000015,
            0.020000000000000004,
            0.01602885682970026,
            0.012679491924311226,
            0.1,
            0.05,
            0.09846666218300808,
            0.04931851652578137,
            0.09397114317029975,
            0.04732050807568878,
            0.08681980515339464,
            0.044142135623730955},
     .mom = {0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static int make(const row *r, ts_optim *opt, ts_lr_scheduler **s) {
    static const int milestones[] = {2, 5, 5, 9};
    switch (r->kind) {
    case SC_STEP:
        s[0] = ts_step_lr_new(opt, 3, 0.5);
        return 1;
    case SC_MULTISTEP:
        s[0] = ts_multistep_lr_new(opt, milestones, 4, 0.3);
        return 1;
    case SC_COSINE:
        s[0] = ts_cosine_lr_new(opt, 6, 0.001);
        return 1;
    case SC_LINEAR:
        s[0] = ts_linear_lr_new(opt, 0.25, 1.0, 4);
        return 1;
    case SC_ONECYCLE:
        s[0] = ts_onecycle_lr_new(opt, 1.0, 10);
        return 1;
    case SC_ONECYCLE_ADAM:
        s[0] = ts_onecycle_lr_new(opt, 0.5, 7);
        return 1;
    case SC_WARM_RESTARTS:
        s[0] = ts_cosine_warm_restarts_lr_new(opt, 3, 2, 0.01);
        return 1;
    case SC_CHAINED:
        s[0] = ts_linear_lr_new(opt, 0.5, 1.0, 3);
        s[1] = ts_step_lr_new(opt, 2, 0.5);
        return 2;
    }
    return 0;
}

static double group1_momentum(ts_optim *opt) {
    const ts_optim_hparams *h = &opt->groups[1].h;
    return h->kind == TS_OPTIM_ADAM ? h->beta1 : h->momentum;
}

static void test_rows(void) {
    for (int i = 0; i < N_ROWS; i++) {
        const row *r = &rows[i];
        ts_tensor *p = ts_zeros(TS_SHAPE(1), (ts_opts){.requires_grad = true});
        ts_tensor *q = ts_zeros(TS_SHAPE(1), (ts_opts){.requires_grad = true});
        ts_optim *opt = r->kind == SC_ONECYCLE_ADAM
                            ? ts_adam_new_params(&p, 1, (ts_adam_opts){.lr = 0.1})
                            : ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
        CHECK_EQ(ts_optim_add_param_group(opt, &q, 1, 0.05), TS_OK);
        ts_lr_scheduler *s[2] = {NULL, NULL};
        int ns = make(r, opt, s);
        int bad = 0;
        for (int e = 0; e <= r->steps; e++) {
            if (e > 0)
                for (int k = 0; k < ns; k++) ts_scheduler_step(s[k]);
            for (int g = 0; g < 2; g++) {
                double got = ts_optim_get_lr(opt, g), want = r->lr[2 * e + g];
                if (!ts_test_near(got, want, 4e-16 * fmax(1, fabs(want))) && bad++ == 0)
                    printf("  %s: epoch %d group %d: lr %.17g, want %.17g\n", r->name, e, g, got,
                           want);
            }
            double m = group1_momentum(opt);
            if (!ts_test_near(m, r->mom[e], 4e-16) && bad++ == 0)
                printf("  %s: epoch %d: momentum %.17g, want %.17g\n", r->name, e, m, r->mom[e]);
        }
        CHECK_EQ(bad, 0);
        CHECK_EQ(ts_scheduler_last_epoch(s[0]), r->steps);
        if (r->kind == SC_ONECYCLE) { /* torch: "Tried to step 12 times ... total steps is 10" */
            ts_scheduler_step(s[0]);
            CHECK_ERR(TS_ERR_STATE);
            CHECK_EQ(ts_scheduler_last_epoch(s[0]), 10);
        }
        for (int k = 0; k < ns; k++) ts_scheduler_free(s[k]);
        ts_optim_free(opt);
        ts_release(p), ts_release(q);
        CHECK_OK();
    }
}

/* ts_warm_restarts_step's epoch form (torch's step(epoch), fractional epochs too) and its state,
 * from /opt/torch2/bin/torch-python:
 * for tm in (1, 2):
 *     o = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
 *     s = S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=tm, eta_min=0.01)
 *     for ep in (0.5, 2, 3, 4.25, 9.5, 22, 1):
 *         s.step(ep); print(ep, s.T_i, s.T_cur, s.last_epoch, o.param_groups[0]['lr']) */
static void test_warm_restarts_epochs(void) {
    static const double epochs[7] = {0.5, 2, 3, 4.25, 9.5, 22, 1};
    static const double want[2][7][4] = {{{3, 0.5, 0, 0.09397114317029975},
                                          {3, 2, 2, 0.032500000000000015},
                                          {3, 0, 3, 0.1},
                                          {3, 1.25, 4, 0.06664685702961344},
                                          {3, 0.5, 9, 0.09397114317029975},
                                          {3, 1, 22, 0.0775},
                                          {3, 1, 1, 0.0775}},
                                         {{3, 0.5, 0, 0.09397114317029975},
                                          {3, 2, 2, 0.032500000000000015},
                                          {6, 0, 3, 0.1},
                                          {6, 1.25, 4, 0.09070090031310558},
                                          {12, 0.5, 9, 0.09961501876182148},
                                          {24, 1, 22, 0.09961501876182148},
                                          {3, 1, 1, 0.0775}}};
    for (int m = 0; m < 2; m++) {
        ts_warm_restarts w = {
            .t_0 = 3, .t_mult = m + 1, .eta_min = 0.01, .t_i = 3, .t_cur = -1, .last_epoch = -1};
        const double base = 0.1;
        double lr = 0;
        CHECK_EQ(ts_warm_restarts_step(&w, NULL, &base, &lr, 1), TS_OK); /* the initial step */
        CHECK(w.t_cur == 0 && w.last_epoch == 0 && lr == base);
        int bad = 0;
        for (int k = 0; k < 7; k++) {
            CHECK_EQ(ts_warm_restarts_step(&w, &epochs[k], &base, &lr, 1), TS_OK);
            const double *r = want[m][k];
            if ((w.t_i != r[0] || w.t_cur != r[1] || (double)w.last_epoch != r[2] ||
                 !ts_test_near(lr, r[3], 4e-16)) &&
                bad++ == 0)
                printf("  warm restarts T_mult=%d epoch %g: T_i %g T_cur %g last %lld lr %.17g\n",
                       m + 1, epochs[k], w.t_i, w.t_cur, (long long)w.last_epoch, lr);
        }
        CHECK_EQ(bad, 0);
        double again = 0;
        CHECK_EQ(ts_warm_restarts_lrs(&w, &base, &again, 1), TS_OK);
        CHECK(again == lr);
        const double neg = -1;
        CHECK_EQ(ts_warm_restarts_step(&w, &neg, &base, &lr, 1), TS_ERR_ARG);
        CHECK_ERR_HAS(TS_ERR_ARG, "non-negative epoch");
    }
    ts_warm_restarts bad_t0 = {.t_0 = 0, .t_mult = 1};
    CHECK_EQ(ts_warm_restarts_step(&bad_t0, NULL, NULL, NULL, 0), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "T_0");
    ts_tensor *p = ts_zeros(TS_SHAPE(1), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.1});
    CHECK(ts_cosine_warm_restarts_lr_new(opt, 3, 0, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "T_mult");
    ts_optim_free(opt);
    ts_release(p);
}

static void test_errors(void) {
    ts_tensor *p = ts_zeros(TS_SHAPE(1), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.1});
    CHECK(ts_step_lr_new(opt, 0, 0.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_step_lr_new(NULL, 2, 0.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_multistep_lr_new(opt, NULL, 2, 0.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_cosine_lr_new(opt, 0, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_linear_lr_new(opt, 0, 1, 5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_linear_lr_new(opt, 0.5, 1.5, 5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_onecycle_lr_new(opt, 0.1, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scheduler_step(NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scheduler_free(NULL);
    CHECK_NEAR(ts_optim_get_lr(opt, 0), 0.1, 0); /* failed constructors changed nothing */
    ts_lr_scheduler *s = ts_multistep_lr_new(opt, NULL, 0, 0.5); /* no milestones: constant */
    for (int e = 0; e < 3; e++) ts_scheduler_step(s);
    CHECK_NEAR(ts_optim_get_lr(opt, 0), 0.1, 0);
    ts_scheduler_free(s);
    ts_optim_free(opt);
    ts_release(p);
    CHECK_OK();
}

/* One-cycle over every optimizer of the Adam family (PyTorch cycles betas[0] for any group with
 * betas): beta1 follows the Adam row's sequence (the same for all: PyTorch's values do not depend
 * on the optimizer), momentum is left alone, and each step uses the cycled beta1 — the same bits
 * as a twin optimizer whose beta1 is set by hand to the same values. Planted bugs this catches:
 * a kind left out of the scheduler's list (its momentum cycled instead of beta1), a beta1 changed
 * in the group but not written to the step's device scalars. */
static ts_optim *adam_family(int k, ts_tensor *p) {
    switch (k) {
    case 0:
        return ts_adam_new_params(&p, 1, (ts_adam_opts){.lr = 0.1});
    case 1:
        return ts_adamw_new_params(&p, 1, (ts_adam_opts){.lr = 0.1});
    case 2:
        return ts_adamax_new_params(&p, 1, (ts_adamax_opts){.lr = 0.1});
    case 3:
        return ts_nadam_new_params(&p, 1, (ts_nadam_opts){.lr = 0.1});
    default:
        return ts_radam_new_params(&p, 1, (ts_radam_opts){.lr = 0.1});
    }
}

static void test_onecycle_adam_family(void) {
    static const char *const names[] = {"Adam", "AdamW", "Adamax", "NAdam", "RAdam"};
    const row *r = NULL;
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].kind == SC_ONECYCLE_ADAM) r = &rows[i];
    if (!r) return;
    static const double g0[3] = {0.5, -1.25, 2.0};
    for (int k = 0; k < 5; k++) {
        ts_tensor *p = ts_tensor_f64(TS_SHAPE(3), g0, (ts_opts){.requires_grad = true});
        ts_tensor *q = ts_tensor_f64(TS_SHAPE(3), g0, (ts_opts){.requires_grad = true});
        ts_optim *opt = adam_family(k, p), *twin = adam_family(k, q);
        const double mom0 = opt->groups[0].h.momentum; /* not a beta: must stay as it is */
        ts_lr_scheduler *s = ts_onecycle_lr_new(opt, 0.5, 7);
        CHECK(s != NULL);
        int bad = 0;
        for (int e = 0; e <= r->steps && s; e++) {
            ts_scope_begin(); /* the step's tensors die with it */
            if (e > 0) {
                /* the same gradient on both, a step of each, then the schedule's next values */
                for (int t = 0; t < 2; t++) {
                    ts_tensor *x = t ? q : p;
                    ts_backward(ts_sum(ts_mul_scalar(ts_mul(x, x), 0.5 + 0.25 * e)));
                }
                ts_optim_step(opt), ts_optim_step(twin);
                ts_optim_zero_grad(opt), ts_optim_zero_grad(twin);
                ts_scheduler_step(s);
            }
            const double b1 = ts_optim_get_momentum(opt, 0);
            if (!ts_test_near(b1, r->mom[e], 4e-16) && bad++ == 0)
                printf("  one-cycle %s: epoch %d: beta1 %.17g, want %.17g\n", names[k], e, b1,
                       r->mom[e]);
            if (opt->groups[0].h.beta1 != b1 || opt->groups[0].h.momentum != mom0) bad++;
            ts_optim_set_lr(twin, 0, ts_optim_get_lr(opt, 0));
            ts_optim_set_momentum(twin, 0, b1);
            if (ts_item(ts_sum(ts_ne(p, q))) != 0 && bad++ == 0)
                printf("  one-cycle %s: epoch %d: the step did not use the cycled beta1\n",
                       names[k], e);
            ts_scope_end();
        }
        CHECK_EQ(bad, 0);
        ts_scheduler_free(s);
        ts_optim_free(opt), ts_optim_free(twin);
        ts_release(p), ts_release(q);
        CHECK_OK();
    }
}

int main(void) {
    test_rows();
    test_errors();
    test_warm_restarts_epochs();
    test_onecycle_adam_family();
    return ts_test_finish();
}
