/* test_optim_master.c — float32 master weights for f16/bf16 parameters
 * (ts_optim_set_master_weights): a low-precision parameter stepped with masters equals, bit for
 * bit, a float32 parameter stepped by the same optimizer from the same values and gradients and
 * rounded to the low dtype after each step, and its master equals the float32 parameter exactly;
 * without masters the small updates vanish (lr 1e-4) and the two differ. SGD (momentum,
 * nesterov), Adam, AdamW (amsgrad), RMSprop, Adagrad, NAdam and Adamax, in bf16 and f16, on cpu,
 * sim:0 and cuda:0 when present; the state dict round trip mid-run, a captured step replayed, a
 * parameter written from outside (its master remade), parameters sharing a storage, f32 parameters
 * unaffected, and the errors. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "optim_ref.h"
#include "tessera.h"
#include "tessera/graph.h"
#include "tessera/optim_master.h"
#include "tessera/optim_offload.h"
#include "ts_test.h"

#define STEPS 30

enum {
    C_SGD_MOM,
    C_SGD_NEST,
    C_ADAM,
    C_ADAM_AMS,
    C_ADAMW,
    C_ADAMW_AMS,
    C_RMSPROP,
    C_ADAGRAD,
    C_NADAM,
    C_ADAMAX,
    N_CASES
};
static const char *case_names[N_CASES] = {
    "SGD(lr=1e-4, momentum=0.9)",
    "SGD(lr=1e-4, momentum=0.9, nesterov=True, weight_decay=0.01)",
    "Adam(lr=1e-4)",
    "Adam(lr=1e-4, weight_decay=0.01, amsgrad=True)",
    "AdamW(lr=1e-4, weight_decay=0.1)",
    "AdamW(lr=1e-4, weight_decay=0.1, amsgrad=True)",
    "RMSprop(lr=1e-4, momentum=0.5, centered=True)",
    "Adagrad(lr=1e-3)",
    "NAdam(lr=1e-4)",
    "Adamax(lr=1e-4)",
};

static ts_optim *make_opt(int c, ts_tensor **p, int n) {
    switch (c) {
    case C_SGD_MOM:
        return ts_sgd_new_params(p, n, (ts_sgd_opts){.lr = 1e-4, .momentum = 0.9});
    case C_SGD_NEST:
        return ts_sgd_new_params(
            p, n, (ts_sgd_opts){.lr = 1e-4, .momentum = 0.9, .weight_decay = 0.01, .nesterov = 1});
    case C_ADAM:
        return ts_adam_new_params(p, n, (ts_adam_opts){.lr = 1e-4});
    case C_ADAM_AMS:
        return ts_adam_new_params(p, n,
                                  (ts_adam_opts){.lr = 1e-4, .weight_decay = 0.01, .amsgrad = 1});
    case C_ADAMW:
        return ts_adamw_new_params(p, n, (ts_adam_opts){.lr = 1e-4, .weight_decay = 0.1});
    case C_ADAMW_AMS:
        return ts_adamw_new_params(p, n,
                                   (ts_adam_opts){.lr = 1e-4, .weight_decay = 0.1, .amsgrad = 1});
    case C_RMSPROP:
        return ts_rmsprop_new_params(p, n,
                                     (ts_rmsprop_opts){.lr = 1e-4, .momentum = 0.5, .centered = 1});
    case C_ADAGRAD: {
        ts_adagrad_opts o = ts_adagrad_defaults();
        o.lr = 1e-3;
        return ts_adagrad_new_params(p, n, o);
    }
    case C_NADAM: {
        ts_nadam_opts o = ts_nadam_defaults();
        o.lr = 1e-4;
        return ts_nadam_new_params(p, n, o);
    }
    case C_ADAMAX: {
        ts_adamax_opts o = ts_adamax_defaults();
        o.lr = 1e-4;
        return ts_adamax_new_params(p, n, o);
    }
    }
    return NULL;
}

/* t's values as doubles (exact for every float dtype) */
static void read_f64(ts_tensor *t, double *out, int n) {
    ts_scope_begin();
    CHECK_EQ(ts_copy_to_host(ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)), out,
                             (size_t)n * sizeof(double)),
             TS_OK);
    ts_scope_end();
}

/* t rounded to dtype dt (the library's cast: round to nearest even), its bits */
static void read_bits(ts_tensor *t, ts_dtype dt, void *out, int n) {
    ts_scope_begin();
    const size_t es = dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2;
    CHECK_EQ(
        ts_copy_to_host(ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), dt)), out, (size_t)n * es),
        TS_OK);
    ts_scope_end();
}

/* The low-precision parameters p (P0 [2, 3], P1 [4] rounded to dt) and float32 ones q holding
 * the same values. Caller-owned. */
static void make_pair(ts_tensor **p, ts_tensor **q, ts_device dev, ts_dtype dt) {
    make_params(p, dev, dt);
    double v0[6], v1[4];
    read_f64(p[0], v0, 6);
    read_f64(p[1], v1, 4);
    ts_opts o = {.dtype = TS_F32, .device = dev, .requires_grad = true};
    q[0] = ts_tensor_f64(TS_SHAPE(2, 3), v0, o);
    q[1] = ts_tensor_f64(TS_SHAPE(4), v1, o);
}

static void release4(ts_tensor **p, ts_tensor **q) {
    for (int i = 0; i < 2; i++) ts_release(p[i]), ts_release(q[i]);
}

/* step s's gradients, rounded to p's dtype, on p and (the same values in float32) on q */
static void grads_pair(ts_tensor **p, ts_tensor **q, int s) {
    double g0[6], g1[4];
    for (int j = 0; j < 6; j++) g0[j] = G0[j] * C[s % 5] - 0.02 * s;
    for (int j = 0; j < 4; j++) g1[j] = G1[j] * C[s % 5] - 0.02 * s;
    ts_opts o = {.dtype = ts_dtype_of(p[0]), .device = ts_device_of(p[0])};
    ts_scope_begin();
    ts_tensor *a = ts_tensor_f64(TS_SHAPE(2, 3), g0, o), *b = ts_tensor_f64(TS_SHAPE(4), g1, o);
    CHECK_EQ(ts_set_grad(p[0], a), TS_OK);
    CHECK_EQ(ts_set_grad(p[1], b), TS_OK);
    if (q) {
        CHECK_EQ(ts_set_grad(q[0], ts_to(ts_to_dtype(a, TS_F32), ts_device_of(q[0]))), TS_OK);
        CHECK_EQ(ts_set_grad(q[1], ts_to(ts_to_dtype(b, TS_F32), ts_device_of(q[1]))), TS_OK);
    }
    ts_scope_end();
}

/* how many elements of the low parameters p differ from the float32 q rounded to their dtype */
static int mismatches(ts_tensor **p, ts_tensor **q) {
    const ts_dtype dt = ts_dtype_of(p[0]);
    uint16_t a[10], b[10];
    read_bits(p[0], dt, a, 6), read_bits(p[1], dt, a + 6, 4);
    read_bits(q[0], dt, b, 6), read_bits(q[1], dt, b + 6, 4);
    int bad = 0;
    for (int j = 0; j < 10; j++) bad += a[j] != b[j];
    return bad;
}

static ts_tensor *find(const ts_tensor_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return l->tensors[i];
    return NULL;
}

/* opt's masters (from its state dict) equal q's float32 values bit for bit */
static bool masters_equal(ts_optim *opt, ts_tensor **q) {
    ts_tensor_list sd = ts_optim_state_dict(opt);
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        char key[48];
        snprintf(key, sizeof key, "state.%d.master_weight", i);
        ts_tensor *m = find(&sd, key);
        const int n = i ? 4 : 6;
        float a[6], b[6];
        if (!m || ts_dtype_of(m) != TS_F32) {
            ok = false;
            continue;
        }
        read_bits(m, TS_F32, a, n);
        read_bits(q[i], TS_F32, b, n);
        ok = ok && memcmp(a, b, (size_t)n * sizeof(float)) == 0;
    }
    ts_tensor_list_free(&sd);
    return ok;
}

/* STEPS steps of case c on dev in dt, masters on or off, beside the float32 run: the count of
 * mismatching elements after each step summed (with masters) or after the last (without) */
static int run_case(int c, ts_device dev, ts_dtype dt, bool masters, bool *master_ok) {
    ts_tensor *p[2], *q[2];
    make_pair(p, q, dev, dt);
    ts_optim *a = make_opt(c, p, 2), *b = make_opt(c, q, 2);
    CHECK(a && b);
    if (masters) CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    CHECK(ts_optim_master_weights(a) == masters);
    int bad = 0;
    for (int s = 0; a && b && s < STEPS; s++) {
        grads_pair(p, q, s);
        CHECK_EQ(ts_optim_step(a), TS_OK);
        CHECK_EQ(ts_optim_step(b), TS_OK);
        if (masters || s == STEPS - 1) bad += mismatches(p, q);
    }
    if (master_ok) *master_ok = masters_equal(a, q);
    ts_optim_free(a), ts_optim_free(b);
    release4(p, q);
    CHECK_OK();
    return bad;
}

static void test_matches_f32(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_dtype dts[2] = {TS_BF16, TS_F16};
    for (int c = 0; c < N_CASES; c++)
        for (int d = 0; d < nd; d++)
            for (int k = 0; k < 2; k++) {
                bool mok = false;
                const int with = run_case(c, devs[d], dts[k], true, &mok);
                if (with || !mok)
                    printf("  %s on %s in %s: %d mismatching elements over %d steps, master %s\n",
                           case_names[c], ts_device_str(devs[d]), ts_dtype_name(dts[k]), with,
                           STEPS, mok ? "equal" : "differs");
                CHECK_EQ(with, 0);
                CHECK(mok);
                /* without masters the updates below half an ulp vanish: the runs part */
                const int without = run_case(c, devs[d], dts[k], false, NULL);
                if (!without)
                    printf("  %s on %s in %s: no drift without masters\n", case_names[c],
                           ts_device_str(devs[d]), ts_dtype_name(dts[k]));
                CHECK(without > 0);
            }
}

/* A run saved after 10 steps and loaded into a fresh optimizer over parameters holding the same
 * values continues bit for bit; the state is float32; a dict without masters makes them anew. */
static void test_state_dict(void) {
    const int kinds[3] = {C_SGD_MOM, C_ADAMW_AMS, C_NADAM};
    for (int t = 0; t < 3; t++) {
        const int c = kinds[t];
        ts_tensor *p[2], *q[2], *r[2], *unused[2];
        make_pair(p, q, ts_sim(0), TS_BF16);
        make_pair(r, unused, ts_sim(0), TS_BF16);
        ts_optim *a = make_opt(c, p, 2), *b = make_opt(c, q, 2);
        CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
        for (int s = 0; s < 10; s++) {
            grads_pair(p, q, s);
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_optim_step(b), TS_OK);
        }
        ts_tensor_list sd = ts_optim_state_dict(a);
        ts_tensor *m = find(&sd, "state.1.master_weight");
        CHECK(m && ts_dtype_of(m) == TS_F32 && ts_numel(m) == 4);
        const char *slot = c == C_SGD_MOM ? "state.0.momentum_buffer" : "state.0.exp_avg";
        CHECK(find(&sd, slot) && ts_dtype_of(find(&sd, slot)) == TS_F32);
        /* r: a's parameter values, masters on, a's state */
        ts_no_grad_begin();
        ts_scope_begin();
        CHECK(ts_copy_(r[0], p[0]) && ts_copy_(r[1], p[1]));
        ts_scope_end();
        ts_no_grad_end();
        ts_optim *o = make_opt(c, r, 2);
        CHECK_EQ(ts_optim_set_master_weights(o, true), TS_OK);
        CHECK_EQ(ts_optim_load_state_dict(o, &sd), TS_OK);
        ts_tensor_list_free(&sd);
        int bad = 0;
        for (int s = 10; s < 20; s++) {
            grads_pair(p, q, s);
            grads_pair(r, NULL, s);
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_optim_step(b), TS_OK);
            CHECK_EQ(ts_optim_step(o), TS_OK);
            bad += mismatches(p, q) + mismatches(r, q);
        }
        if (bad) printf("  %s: %d mismatches after the load\n", case_names[c], bad);
        CHECK_EQ(bad, 0);
        CHECK(masters_equal(o, q) && masters_equal(a, q));
        /* a dict without masters: the next step makes them from the parameters */
        ts_tensor_list sd2 = ts_optim_state_dict(a), part = {0};
        for (int i = 0; i < sd2.n; i++)
            if (!strstr(sd2.names[i], "master_weight"))
                CHECK_EQ(ts_tensor_list_add(&part, sd2.names[i], sd2.tensors[i]), TS_OK);
        CHECK_EQ(ts_optim_load_state_dict(o, &part), TS_OK);
        ts_tensor_list sd3 = ts_optim_state_dict(o);
        CHECK(find(&sd3, "state.0.master_weight") == NULL);
        ts_tensor_list_free(&sd3);
        grads_pair(r, NULL, 20);
        CHECK_EQ(ts_optim_step(o), TS_OK);
        sd3 = ts_optim_state_dict(o);
        CHECK(find(&sd3, "state.0.master_weight") != NULL);
        ts_tensor_list_free(&sd3), ts_tensor_list_free(&sd2), ts_tensor_list_free(&part);
        ts_optim_free(a), ts_optim_free(b), ts_optim_free(o);
        release4(p, q), release4(r, unused);
        CHECK_OK();
    }
}

/* A captured step (capturable SGD, Adam, AdamW, RMSprop) replayed with new gradients each time
 * matches the float32 run, and an eager step after the replays keeps the master (the replays
 * bump parameter and master together). */
static void test_capture(void) {
    const int kinds[4] = {C_SGD_NEST, C_ADAM_AMS, C_ADAMW, C_RMSPROP};
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < nd; d++) {
            const int c = kinds[t];
            ts_tensor *p[2], *q[2];
            make_pair(p, q, devs[d], TS_BF16);
            ts_optim *a = make_opt(c, p, 2), *b = make_opt(c, q, 2);
            CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
            grads_pair(p, q, 0); /* a warm-up step eagerly (SGD's first momentum step) */
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_optim_step(b), TS_OK);
            grads_pair(p, q, 1);
            ts_graph *g = ts_graph_capture_begin(devs[d], (ts_graph_opts){0});
            CHECK(g != NULL);
            CHECK_EQ(ts_optim_step(a), TS_OK);
            CHECK_EQ(ts_graph_capture_end(), TS_OK);
            int bad = 0;
            for (int s = 1; s < 12; s++) {
                if (s > 1) { /* new gradients into the captured ones */
                    ts_tensor *g0 = ts_retain(ts_grad(p[0])), *g1 = ts_retain(ts_grad(p[1]));
                    grads_pair(p, q, s);
                    ts_scope_begin();
                    CHECK(ts_copy_(g0, ts_grad(p[0])) && ts_copy_(g1, ts_grad(p[1])));
                    ts_scope_end();
                    CHECK_EQ(ts_set_grad(p[0], g0), TS_OK);
                    CHECK_EQ(ts_set_grad(p[1], g1), TS_OK);
                    ts_release(g0), ts_release(g1);
                }
                CHECK_EQ(ts_graph_replay(g), TS_OK);
                CHECK_EQ(ts_optim_step(b), TS_OK);
                bad += mismatches(p, q);
            }
            for (int s = 12; s < 16; s++) { /* eager again */
                grads_pair(p, q, s);
                CHECK_EQ(ts_optim_step(a), TS_OK);
                CHECK_EQ(ts_optim_step(b), TS_OK);
                bad += mismatches(p, q);
            }
            if (bad)
                printf("  %s captured on %s: %d mismatches\n", case_names[c],
                       ts_device_str(devs[d]), bad);
            CHECK_EQ(bad, 0);
            CHECK(masters_equal(a, q));
            ts_graph_free(g);
            ts_optim_free(a), ts_optim_free(b);
            release4(p, q);
            CHECK_OK();
        }
}

/* A parameter written from outside the optimizer gets its master remade from it; a parameter
 * added later gets one; f32 parameters are unaffected; off drops the masters. */
static void test_outside_writes(void) {
    ts_tensor *p[2], *q[2];
    make_pair(p, q, ts_cpu(), TS_BF16);
    ts_optim *a = ts_sgd_new_params(p, 2, (ts_sgd_opts){.lr = 1e-4});
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    for (int s = 0; s < 5; s++) {
        grads_pair(p, NULL, s);
        CHECK_EQ(ts_optim_step(a), TS_OK);
    }
    /* p = 0.75 everywhere (exact in bf16), then one step: the master is 0.75 - lr g in f32 */
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *v = ts_full(TS_SHAPE(1), 0.75, (ts_opts){.dtype = TS_BF16});
    CHECK(ts_copy_(p[0], v) && ts_copy_(p[1], v));
    CHECK(ts_copy_(q[0], v) && ts_copy_(q[1], v));
    ts_scope_end();
    ts_no_grad_end();
    ts_optim *b = ts_sgd_new_params(q, 2, (ts_sgd_opts){.lr = 1e-4});
    grads_pair(p, q, 5);
    CHECK_EQ(ts_optim_step(a), TS_OK);
    CHECK_EQ(ts_optim_step(b), TS_OK);
    CHECK(masters_equal(a, q));
    CHECK_EQ(mismatches(p, q), 0);
    /* a bf16 parameter joining and an f32 one: a master for the first only */
    ts_opts o16 = {.dtype = TS_BF16, .requires_grad = true},
            o32 = {.dtype = TS_F32, .requires_grad = true};
    ts_tensor *extra[2] = {ts_tensor_f64(TS_SHAPE(4), P1, o16),
                           ts_tensor_f64(TS_SHAPE(4), P1, o32)};
    CHECK_EQ(ts_optim_add_param_group(a, extra, 2, 1e-4), TS_OK);
    ts_scope_begin();
    CHECK_EQ(ts_set_grad(extra[0], ts_ones(TS_SHAPE(4), (ts_opts){.dtype = TS_BF16})), TS_OK);
    CHECK_EQ(ts_set_grad(extra[1], ts_ones(TS_SHAPE(4), (ts_opts){.dtype = TS_F32})), TS_OK);
    ts_scope_end();
    grads_pair(p, q, 6);
    CHECK_EQ(ts_optim_step(a), TS_OK);
    ts_tensor_list sd = ts_optim_state_dict(a);
    CHECK(find(&sd, "state.2.master_weight") != NULL);
    CHECK(find(&sd, "state.3.master_weight") == NULL);
    ts_tensor_list_free(&sd);
    /* the f32 parameter stepped as without masters: P1 - 1e-4 in float32 */
    float got[4];
    read_bits(extra[1], TS_F32, got, 4);
    for (int j = 0; j < 4; j++) CHECK(got[j] == (float)P1[j] + (float)-1e-4 * 1.0f);
    /* off: no masters */
    CHECK_EQ(ts_optim_set_master_weights(a, false), TS_OK);
    CHECK(!ts_optim_master_weights(a));
    sd = ts_optim_state_dict(a);
    CHECK(find(&sd, "state.0.master_weight") == NULL);
    ts_tensor_list_free(&sd);
    grads_pair(p, NULL, 7);
    CHECK_EQ(ts_optim_step(a), TS_OK);
    ts_optim_free(a), ts_optim_free(b);
    release4(p, q);
    ts_release(extra[0]), ts_release(extra[1]);
    CHECK_OK();
}

/* Parameters sharing one storage (views of one flat buffer): each step bumps the storage's
 * version once per parameter, and the masters still stand (their versions are noted after the
 * whole step), so the run still equals the float32 one. */
static void test_shared_storage(void) {
    ts_tensor *base = ts_zeros(TS_SHAPE(10), (ts_opts){.dtype = TS_BF16});
    ts_tensor *p[2], *q[2], *src[2], *unused[2];
    ts_tensor *head = ts_narrow(base, 0, 0, 6);
    p[0] = ts_view(head, TS_SHAPE(2, 3));
    ts_release(head);
    p[1] = ts_narrow(base, 0, 6, 4);
    make_pair(src, q, ts_cpu(), TS_BF16);
    ts_no_grad_begin();
    ts_scope_begin();
    CHECK(ts_copy_(p[0], src[0]) && ts_copy_(p[1], src[1]));
    ts_scope_end();
    ts_no_grad_end();
    CHECK_EQ(ts_set_requires_grad(p[0], true), TS_OK);
    CHECK_EQ(ts_set_requires_grad(p[1], true), TS_OK);
    ts_optim *a = make_opt(C_ADAMW, p, 2), *b = make_opt(C_ADAMW, q, 2);
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    int bad = 0;
    for (int s = 0; s < STEPS; s++) {
        grads_pair(p, q, s);
        CHECK_EQ(ts_optim_step(a), TS_OK);
        CHECK_EQ(ts_optim_step(b), TS_OK);
        bad += mismatches(p, q);
    }
    CHECK_EQ(bad, 0);
    CHECK(masters_equal(a, q));
    ts_optim_free(a), ts_optim_free(b);
    unused[0] = p[0], unused[1] = p[1];
    release4(unused, q);
    ts_release(src[0]), ts_release(src[1]), ts_release(base);
    CHECK_OK();
}

/* p.data = another view of the parameter's own storage (ts_tensor_set_data: the same storage, no
 * version bump): the master stands for the old geometry, so it is remade from the parameter.
 * SGD, lr 0.5, gradient 1: every value exact in bf16 and f32. After each change one step must give
 * the new values - 0.5; a stale master gives the old ones - 0.5 (or reads past its end). The
 * changes: the offset moved with the size kept, a [2, 2] view of the same elements, its transpose
 * (the same shape, other strides), a shorter view, and a longer one at the same offset and
 * strides. */
static void test_set_data_own_storage(void) {
    double v[8];
    for (int j = 0; j < 8; j++) v[j] = j + 1;
    ts_tensor *base = ts_tensor_f64(TS_SHAPE(8), v, (ts_opts){.dtype = TS_BF16});
    ts_tensor *p = ts_narrow(base, 0, 0, 4);
    CHECK_EQ(ts_set_requires_grad(p, true), TS_OK);
    ts_optim *a = ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.5});
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    /* p's values (row-major) after the step that follows change r; base is then
     * [0.5 1.5 2.5 3.5 | p's storage] */
    static const double want[6][4] = {
        {0.5, 1.5, 2.5, 3.5}, {4.5, 5.5, 6.5, 7.5}, {4, 5, 6, 7}, {3.5, 5.5, 4.5, 6.5}, {3, 4},
        {2.5, 3.5, 5, 6}};
    for (int r = 0; r < 6; r++) {
        ts_scope_begin();
        ts_tensor *alias = ts_detach(r == 2 || r == 3 ? p : base), *src = NULL;
        if (r == 1) src = ts_narrow(alias, 0, 4, 4);
        if (r == 2) src = ts_view(alias, TS_SHAPE(2, 2));
        if (r == 3) src = ts_transpose(alias, 0, 1);
        if (r == 4) src = ts_narrow(alias, 0, 4, 2);
        if (r == 5) src = ts_narrow(alias, 0, 4, 4);
        if (src) CHECK_EQ(ts_tensor_set_data(p, src), TS_OK);
        CHECK_EQ(ts_set_grad(p, ts_ones(ts_shape_of(p), (ts_opts){.dtype = TS_BF16})), TS_OK);
        ts_scope_end();
        CHECK_EQ(ts_optim_step(a), TS_OK);
        const int n = r == 4 ? 2 : 4;
        double got[4];
        read_f64(p, got, n);
        for (int j = 0; j < n; j++) CHECK_NEAR(got[j], want[r][j], 0);
    }
    ts_optim_free(a);
    ts_release(p), ts_release(base);
    CHECK_OK();
}

/* p.data = a view that differs from the parameter in its last two strides only (a [1, 1, 2, 2]
 * transposed in its last two dims: the same storage, offset, shape and leading strides): the
 * master is read again from the parameter's new geometry. Storage after the first step
 * [0.5 1.5 2.5 3.5]; the parameter then reads [[0.5 2.5] [1.5 3.5]], and the second step leaves
 * [[0 2] [1 3]], storage [0 1 2 3] (a stale master would give [0 2 1 3]). */
static void test_set_data_last_strides(void) {
    const double v[4] = {1, 2, 3, 4};
    ts_tensor *base = ts_tensor_f64(TS_SHAPE(4), v, (ts_opts){.dtype = TS_BF16});
    ts_tensor *p = ts_view(base, TS_SHAPE(1, 1, 2, 2));
    CHECK_EQ(ts_set_requires_grad(p, true), TS_OK);
    ts_optim *a = ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.5});
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    static const double want[2][4] = {{0.5, 1.5, 2.5, 3.5}, {0, 1, 2, 3}};
    for (int r = 0; r < 2; r++) {
        ts_scope_begin();
        if (r == 1) CHECK_EQ(ts_tensor_set_data(p, ts_transpose(ts_detach(p), 2, 3)), TS_OK);
        CHECK_EQ(ts_set_grad(p, ts_ones(ts_shape_of(p), (ts_opts){.dtype = TS_BF16})), TS_OK);
        ts_scope_end();
        CHECK_EQ(ts_optim_step(a), TS_OK);
        double got[4];
        read_f64(base, got, 4);
        for (int j = 0; j < 4; j++) CHECK_NEAR(got[j], want[r][j], 0);
    }
    ts_optim_free(a);
    ts_release(p), ts_release(base);
    CHECK_OK();
}

static void test_errors(void) {
    CHECK_EQ(ts_optim_set_master_weights(NULL, true), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "optimizer is NULL");
    CHECK(!ts_optim_master_weights(NULL));
    /* offloaded: offload keeps its own float32 masters */
    ts_tensor *p[2];
    make_params(p, ts_sim(0), TS_BF16);
    ts_optim *a = ts_adam_new_params(p, 2, (ts_adam_opts){.lr = 1e-4});
    CHECK_EQ(ts_optim_offload(a), TS_OK);
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "offload");
    CHECK(!ts_optim_master_weights(a));
    ts_optim_free(a);
    /* while capturing on the parameters' device: refused, the capture broken */
    a = ts_adam_new_params(p, 2, (ts_adam_opts){.lr = 1e-4});
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_ERR_STATE);
    CHECK_EQ(ts_graph_capture_end(), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "master weights");
    ts_graph_free(g);
    CHECK(!ts_optim_master_weights(a));
    /* a state dict's master of the wrong size changes nothing */
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    ts_tensor_list bad = {0};
    ts_scope_begin();
    CHECK_EQ(ts_tensor_list_add(&bad, "state.0.master_weight", ts_zeros(TS_SHAPE(5), (ts_opts){0})),
             TS_OK);
    ts_scope_end();
    CHECK_EQ(ts_optim_load_state_dict(a, &bad), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "master_weight");
    ts_tensor_list_free(&bad);
    ts_optim_free(a);
    ts_release(p[0]), ts_release(p[1]);
    CHECK_OK();
}

static int64_t live_cpu_tensors(void) {
    ts_mem_stats s = {0};
    CHECK_EQ(ts_memory_stats(ts_cpu(), &s), TS_OK);
    return s.live_tensors;
}

static int master_entries(ts_optim *opt) {
    ts_tensor_list sd = ts_optim_state_dict(opt);
    int k = 0;
    for (int i = 0; i < sd.n; i++) k += strstr(sd.names[i], "master_weight") != NULL;
    ts_tensor_list_free(&sd);
    return k;
}

/* Turning masters on is all or nothing: with each of its allocations failed in turn (the first
 * parameter's master made, the second's copy failing, too) it reports TS_ERR_OOM, stays off and
 * keeps no master (none in the state dict, no tensor left alive); turned off, the masters are
 * freed. */
static void test_alloc_faults(void) {
    ts_tensor *p[2];
    make_params(p, ts_cpu(), TS_BF16);
    ts_optim *a = ts_adam_new_params(p, 2, (ts_adam_opts){.lr = 1e-4});
    const int64_t live0 = live_cpu_tensors();
    ts_fault_alloc_set(0);
    CHECK_EQ(ts_optim_set_master_weights(a, true), TS_OK);
    const uint64_t count = ts_fault_alloc_count();
    ts_fault_alloc_set(-1);
    CHECK_EQ(master_entries(a), 2);
    CHECK(live_cpu_tensors() > live0);
    CHECK_EQ(ts_optim_set_master_weights(a, false), TS_OK);
    CHECK_EQ(live_cpu_tensors(), live0);
    CHECK_EQ(master_entries(a), 0);
    int failed = 0;
    for (uint64_t n = 1; n <= count; n++) {
        ts_fault_alloc_set((int64_t)n);
        const ts_status st = ts_optim_set_master_weights(a, true);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (st != TS_OK) {
            failed++;
            CHECK(fired);
            CHECK_ERR(TS_ERR_OOM);
            CHECK(!ts_optim_master_weights(a));
            if (live_cpu_tensors() != live0 || master_entries(a) != 0)
                printf("  allocation %llu failed: %lld tensors left alive, %d masters kept\n",
                       (unsigned long long)n, (long long)(live_cpu_tensors() - live0),
                       master_entries(a));
            CHECK_EQ(live_cpu_tensors(), live0);
            CHECK_EQ(master_entries(a), 0);
        } else {
            CHECK(ts_optim_master_weights(a));
            CHECK_EQ(master_entries(a), 2);
        }
        CHECK_EQ(ts_optim_set_master_weights(a, false), TS_OK);
        CHECK_EQ(live_cpu_tensors(), live0);
    }
    /* a failure at every allocation of the two copies, the second parameter's among them */
    CHECK(failed >= 2);
    ts_optim_free(a);
    ts_release(p[0]), ts_release(p[1]);
    CHECK_OK();
}

int main(void) {
    test_matches_f32();
    test_state_dict();
    test_capture();
    test_outside_writes();
    test_shared_storage();
    test_set_data_own_storage();
    test_set_data_last_strides();
    test_errors();
    test_alloc_faults();
    return ts_test_finish();
}
