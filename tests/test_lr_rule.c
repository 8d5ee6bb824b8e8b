/* test_lr_rule.c — the schedulers' arithmetic (lr_rule.c): each epoch rule's recursive form
 * chained from its base against its closed form written here from PyTorch's documented formula
 * (float64), the closed forms against the same, one-cycle, cyclic and plateau against hand
 * formulas and a few PyTorch values, and the errors. */
#include <math.h>
#include <stdio.h>

#include "tessera.h"
#include "ts_test.h"

static const double PI = 3.14159265358979323846;
static const double BASE[2] = {0.1, 0.05};

/* PyTorch's closed form of each rule at epoch e, written out here independently */
static double want_closed(const ts_lr_rule *r, int64_t e, double b) {
    switch (r->kind) {
    case TS_LR_STEP:
        return b * pow(r->gamma, (double)(e / r->step_size));
    case TS_LR_MULTISTEP: {
        int k = 0;
        for (int i = 0; i < r->n_milestones; i++) k += r->milestones[i] <= e;
        return b * pow(r->gamma, k);
    }
    case TS_LR_CONSTANT:
        return e < r->total_iters ? b * r->factor : b;
    case TS_LR_LINEAR: {
        double t = e < r->total_iters ? (double)e / (double)r->total_iters : 1;
        return b * (r->factor + (r->end_factor - r->factor) * t);
    }
    case TS_LR_EXPONENTIAL:
        return b * pow(r->gamma, (double)e);
    case TS_LR_POLYNOMIAL: {
        double t = e < r->total_iters ? (double)e / (double)r->total_iters : 1;
        return b * pow(1 - t, r->power);
    }
    case TS_LR_COSINE:
        return r->eta_min + (b - r->eta_min) * (1 + cos(PI * (double)e / (double)r->t_max)) / 2;
    default:
        return NAN;
    }
}

static void test_rules(void) {
    static const int64_t ms[] = {5, 2, 5, 9};
    const ts_lr_rule rules[] = {
        {.kind = TS_LR_STEP, .step_size = 3, .gamma = 0.3},
        {.kind = TS_LR_MULTISTEP, .milestones = ms, .n_milestones = 4, .gamma = 0.7},
        {.kind = TS_LR_CONSTANT, .factor = 0.3, .total_iters = 4},
        {.kind = TS_LR_LINEAR, .factor = 0.2, .end_factor = 0.9, .total_iters = 6},
        {.kind = TS_LR_EXPONENTIAL, .gamma = 0.9},
        {.kind = TS_LR_POLYNOMIAL, .total_iters = 7, .power = 1.7},
        {.kind = TS_LR_COSINE, .t_max = 5, .eta_min = 0.001},
        {.kind = TS_LR_COSINE, .t_max = 1, .eta_min = 0.002}, /* the shortest period */
    };
    for (size_t k = 0; k < sizeof rules / sizeof *rules; k++) {
        const ts_lr_rule *r = &rules[k];
        double lrs[2] = {BASE[0], BASE[1]}, out[2];
        int bad = 0;
        for (int64_t e = 0; e <= 23; e++) {
            /* the recursive form, chained as a scheduler steps (e 0: the constructor's step) */
            CHECK_EQ(ts_lr_rule_step(r, e, e + 1, e == 0, BASE, lrs, lrs, 2), TS_OK);
            CHECK_EQ(ts_lr_rule_closed_form(r, e, BASE, out, 2), TS_OK);
            for (int g = 0; g < 2; g++) {
                const double w = want_closed(r, e, BASE[g]);
                /* a few roundings per step, 24 steps of lrs <= 0.1 */
                if ((!ts_test_near(lrs[g], w, 1e-14) || !ts_test_near(out[g], w, 1e-16)) &&
                    bad++ < 3)
                    printf("  rule %zu epoch %lld group %d: step %.17g closed %.17g want %.17g\n",
                           k, (long long)e, g, lrs[g], out[g], w);
            }
        }
        CHECK_EQ(bad, 0);
    }
    CHECK_OK();
}

static void test_lambda_and_cosine_first_step(void) {
    const double f[2] = {0.5, 0.25}, lrs[2] = {0.03, 0.02};
    double out[2];
    ts_lr_rule r = {.kind = TS_LR_LAMBDA, .factors = f};
    CHECK_EQ(ts_lr_rule_step(&r, 3, 4, false, BASE, lrs, out, 2), TS_OK);
    CHECK_NEAR(out[0], 0.05, 0);
    CHECK_NEAR(out[1], 0.0125, 0);
    r.kind = TS_LR_MULTIPLICATIVE;
    CHECK_EQ(ts_lr_rule_step(&r, 3, 4, false, BASE, lrs, out, 2), TS_OK);
    CHECK_NEAR(out[0], 0.015, 1e-18);
    CHECK_NEAR(out[1], 0.005, 1e-18);
    CHECK_EQ(ts_lr_rule_step(&r, 3, 1, true, BASE, lrs, out, 2), TS_OK); /* initial: kept */
    CHECK_NEAR(out[0], 0.03, 0);
    /* cosine resumed at epoch 3 (first step): torch's closed form from the base, whatever lr */
    r = (ts_lr_rule){.kind = TS_LR_COSINE, .t_max = 8, .eta_min = 0.0};
    CHECK_EQ(ts_lr_rule_step(&r, 3, 1, false, BASE, lrs, out, 2), TS_OK);
    CHECK_NEAR(out[0], 0.1 * (1 + cos(3 * PI / 8)) / 2, 1e-17);
    CHECK_OK();
}

static void test_rule_errors(void) {
    double lrs[2] = {0.1, 0.1}, out[2];
    ts_lr_rule r = {.kind = TS_LR_STEP, .step_size = 0, .gamma = 0.5};
    CHECK_EQ(ts_lr_rule_step(&r, 1, 2, false, BASE, lrs, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "step_size");
    r = (ts_lr_rule){.kind = TS_LR_COSINE, .t_max = 0};
    CHECK_EQ(ts_lr_rule_closed_form(&r, 1, BASE, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "T_max");
    r = (ts_lr_rule){.kind = TS_LR_LAMBDA};
    CHECK_EQ(ts_lr_rule_step(&r, 1, 2, false, BASE, lrs, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "factors");
    CHECK_EQ(ts_lr_rule_closed_form(&r, 1, BASE, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "closed form");
    r = (ts_lr_rule){.kind = TS_LR_LINEAR, .factor = 0.5, .end_factor = 1, .total_iters = 0};
    CHECK_EQ(ts_lr_rule_closed_form(&r, 1, BASE, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "total_iters");
    r = (ts_lr_rule){.kind = (ts_lr_kind)99};
    CHECK_EQ(ts_lr_rule_step(&r, 1, 2, false, BASE, lrs, out, 2), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "kind");
    CHECK_EQ(ts_lr_rule_step(NULL, 1, 2, false, BASE, lrs, out, 2), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
}

/* one-cycle: the hand formula of each phase, and PyTorch's values (torch 2.x, OneCycleLR(o, 0.4,
 * 20) on SGD momentum 0.9: the lr and momentum after steps 3 and 12) */
static void test_onecycle(void) {
    const ts_onecycle c = {.total_steps = 20, .pct_start = 0.3};
    const double init = 0.4 / 25, mx = 0.4, mn = init / 1e4;
    double lr, mom;
    for (int64_t s = 0; s <= 20; s++) {
        CHECK_EQ(ts_onecycle_at(&c, s, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_OK);
        const double end1 = 0.3 * 20 - 1, end2 = 19;
        double pct, a, b, ma, mb;
        if ((double)s <= end1)
            pct = (double)s / end1, a = init, b = mx, ma = 0.95, mb = 0.85;
        else
            pct = ((double)s - end1) / (end2 - end1), a = mx, b = mn, ma = 0.85, mb = 0.95;
        CHECK_NEAR(lr, b + (a - b) * (1 + cos(PI * pct)) / 2, 1e-16);
        CHECK_NEAR(mom, mb + (ma - mb) * (1 + cos(PI * pct)) / 2, 1e-15);
    }
    CHECK_EQ(ts_onecycle_at(&c, 3, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_OK);
    CHECK_NEAR(lr, 0.2673312629199899, 1e-16);
    CHECK_NEAR(mom, 0.8845491502812526, 1e-16);
    /* three phases, linear: initial -> max -> initial -> min */
    const ts_onecycle c3 = {
        .total_steps = 25, .pct_start = 0.25, .three_phase = true, .linear = true};
    const double e1 = 0.25 * 25 - 1, e2 = 2 * 0.25 * 25 - 2;
    CHECK_EQ(ts_onecycle_at(&c3, 3, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_OK);
    CHECK_NEAR(lr, init + (mx - init) * 3 / e1, 1e-16);
    CHECK_EQ(ts_onecycle_at(&c3, 8, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_OK);
    CHECK_NEAR(lr, mx + (init - mx) * (8 - e1) / (e2 - e1), 1e-16);
    CHECK_NEAR(mom, 0.85 + (0.95 - 0.85) * (8 - e1) / (e2 - e1), 1e-15);
    CHECK_EQ(ts_onecycle_at(&c3, 20, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_OK);
    CHECK_NEAR(lr, init + (mn - init) * (20 - e2) / (24 - e2), 1e-16);
    CHECK_NEAR(mom, 0.95, 1e-16);
    CHECK_EQ(ts_onecycle_at(&c, 21, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "Tried to step 21 times");
    const ts_onecycle c0 = {.total_steps = 0, .pct_start = 0.3};
    CHECK_EQ(ts_onecycle_at(&c0, 0, init, mx, mn, 0.95, 0.85, &lr, &mom), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected a positive total_steps, got 0");
    CHECK_OK();
}

static void test_cyclic(void) {
    /* up 3 steps, down 5: the triangle from base to max and back */
    ts_cyclic c = {.total_size = 8, .step_ratio = 3.0 / 8, .mode = TS_CYCLIC_TRIANGULAR};
    const double b[2] = {0.01, 0.02}, m[2] = {0.1, 0.2}, bm[2] = {0.8, 0.8}, mm[2] = {0.9, 0.9};
    double lrs[2], ms[2];
    for (int64_t e = 0; e < 20; e++) {
        CHECK_EQ(ts_cyclic_at(&c, e, 0, b, m, bm, mm, lrs, ms, 2), TS_OK);
        const int64_t p = e % 8;
        const double s = p <= 3 ? p / 3.0 : (8 - p) / 5.0;
        CHECK_NEAR(lrs[1], 0.02 + 0.18 * s, 1e-16);
        CHECK_NEAR(ms[0], 0.9 - 0.1 * s, 1e-16);
    }
    CHECK_NEAR(ts_cyclic_cycle(&c, 15), 2, 0);
    CHECK_NEAR(ts_cyclic_cycle(&c, 16), 3, 0);
    c.mode = TS_CYCLIC_TRIANGULAR2; /* the third cycle's height is a quarter */
    CHECK_EQ(ts_cyclic_at(&c, 19, 0, b, m, NULL, NULL, lrs, NULL, 2), TS_OK);
    CHECK_NEAR(lrs[0], 0.01 + 0.09 * 1.0 * 0.25, 1e-16);
    CHECK_NEAR(ts_cyclic_scale(&c, 3), 0.25, 0);
    c.mode = TS_CYCLIC_EXP_RANGE, c.gamma = 0.97;
    CHECK_EQ(ts_cyclic_at(&c, 10, 0, b, m, NULL, NULL, lrs, NULL, 2), TS_OK);
    CHECK_NEAR(lrs[0], 0.01 + 0.09 * (2 / 3.0) * pow(0.97, 10), 1e-16);
    c.mode = TS_CYCLIC_CUSTOM;
    CHECK_EQ(ts_cyclic_at(&c, 2, 0.5, b, m, NULL, NULL, lrs, NULL, 2), TS_OK);
    CHECK_NEAR(lrs[0], 0.01 + 0.09 * (2 / 3.0) * 0.5, 1e-16);
    CHECK(isnan(ts_cyclic_scale(&c, 1)));
    CHECK_ERR_HAS(TS_ERR_ARG, "custom");
    c.total_size = 0;
    CHECK(isnan(ts_cyclic_cycle(&c, 1)));
    CHECK_ERR_HAS(TS_ERR_ARG, "step_size_up");
}

static void test_plateau(void) {
    /* patience 1, cooldown 1, factor 0.5, min_lrs {0, 0.02}: PyTorch's lrs after each metric */
    static const double metric[8] = {1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.8, 0.85};
    static const double want0[8] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05};
    static const double want1[8] = {0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.025};
    ts_plateau p = {.factor = 0.5,
                    .threshold = 1e-4,
                    .eps = 1e-8,
                    .patience = 1,
                    .cooldown = 1,
                    .best = INFINITY};
    const double mins[2] = {0, 0.02};
    double lrs[2] = {0.1, 0.05};
    for (int i = 0; i < 8; i++) {
        bool reduced;
        CHECK_EQ(ts_plateau_step(&p, metric[i], mins, lrs, 2, &reduced), TS_OK);
        CHECK_NEAR(lrs[0], want0[i], 0);
        CHECK_NEAR(lrs[1], want1[i], 0);
        CHECK_EQ(reduced, i == 3);
    }
    /* the floor: 0.025 -> max(0.0125, 0.02) */
    p.num_bad_epochs = 5, p.cooldown_counter = 0;
    CHECK_EQ(ts_plateau_step(&p, 5.0, mins, lrs, 2, NULL), TS_OK);
    CHECK_NEAR(lrs[1], 0.02, 0);
    /* max mode, absolute threshold: 1.04 is not better than 1.0 + 0.05 */
    ts_plateau q = {.mode_max = true,
                    .threshold_abs = true,
                    .factor = 0.3,
                    .threshold = 0.05,
                    .eps = 1e-8,
                    .best = 1.0};
    double l1[1] = {0.1};
    CHECK_EQ(ts_plateau_step(&q, 1.04, mins, l1, 1, NULL), TS_OK);
    CHECK_NEAR(l1[0], 0.1 * 0.3, 1e-18);
    CHECK_NEAR(q.best, 1.0, 0);
    CHECK_EQ(ts_plateau_step(&q, 1.06, mins, l1, 1, NULL), TS_OK);
    CHECK_NEAR(q.best, 1.06, 0);
    q.factor = 1.0;
    CHECK_EQ(ts_plateau_step(&q, 1.0, mins, l1, 1, NULL), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "factor");
}

int main(void) {
    test_rules();
    test_lambda_and_cosine_first_step();
    test_rule_errors();
    test_onecycle();
    test_cyclic();
    test_plateau();
    return ts_test_finish();
}
