/* test_grad_scaler.c — PyTorch's GradScaler semantics on cpu and sim:0..3: skipped steps and
 * back-off on Inf/NaN, growth after growth_interval clean steps, gradients spread over devices,
 * unscale_ before clipping, several optimizers, the errors, disabled mode and the state dict.
 *
 * The model is linear in its parameters: loss = sum(w * xw) + sum(v * xv), so the gradients are
 * xw and xv, and every expected value below is computed here from the data in plain C. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "amp/grad_scaler_internal.h"
#include "backend/backend.h"
#include "ts_test.h"

#define NW 4
#define NV 6
static const float XW[NW] = {0.5f, -1.25f, 3.0f, 0.1f};
static const float XV[NV] = {-2.0f, 0.75f, 1.0f / 3.0f, 4.0f, -0.3f, 1.5f};
static const float W0[NW] = {1.0f, 2.0f, -1.0f, 0.25f};
static const float V0[NV] = {0.5f, -0.5f, 1.5f, 2.0f, -3.0f, 0.125f};

typedef struct model {
    ts_tensor *w, *v;   /* parameters (caller-owned) */
    ts_tensor *xw, *xv; /* data, on the parameters' devices */
    ts_device dw, dv;
} model;

static ts_tensor *param(const float *init, int n, ts_dtype dt, ts_device d) {
    ts_scope_begin();
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f32(TS_SHAPE(n), init, (ts_opts){0}), dt), d);
    ts_tensor *p = ts_retain(ts_clone(t));
    ts_scope_end();
    ts_set_requires_grad(p, true);
    return p;
}

static model model_new(ts_device dw, ts_device dv, ts_dtype dt) {
    model m = {.dw = dw, .dv = dv};
    m.w = param(W0, NW, dt, dw);
    m.v = param(V0, NV, dt, dv);
    ts_scope_begin();
    m.xw = ts_retain(ts_to(ts_to_dtype(ts_tensor_f32(TS_SHAPE(NW), XW, (ts_opts){0}), dt), dw));
    m.xv = ts_retain(ts_to(ts_to_dtype(ts_tensor_f32(TS_SHAPE(NV), XV, (ts_opts){0}), dt), dv));
    ts_scope_end();
    return m;
}

static void model_free(model *m) {
    ts_release(m->w), ts_release(m->v), ts_release(m->xw), ts_release(m->xv);
}

/* Sets element i of the data of w to v (Inf/NaN injection: the gradient of w[i] becomes v). */
static void poison(model *m, int i, double v) {
    ts_scope_begin();
    ts_fill_(ts_select(m->xw, 0, i), v);
    ts_scope_end();
}
static void unpoison(model *m, int i) {
    ts_scope_begin();
    ts_fill_(ts_select(m->xw, 0, i), XW[i]);
    ts_scope_end();
}

/* zero_grad, forward on w's device, backward of the scaled loss; returns the scaled loss. */
static double scaled_backward(model *m, ts_grad_scaler *s, ts_optim *opt) {
    ts_scope_begin();
    ts_optim_zero_grad(opt);
    ts_tensor *lv = ts_to(ts_sum(ts_mul(m->v, m->xv)), m->dw);
    ts_tensor *loss = ts_add(ts_sum(ts_mul(m->w, m->xw)), lv);
    ts_tensor *scaled = ts_grad_scaler_scale(s, loss);
    ts_backward(scaled);
    double r = ts_item(scaled);
    ts_scope_end();
    return r;
}

static void host(ts_tensor *t, double *out, int n) {
    ts_scope_begin();
    ts_tensor *c = t ? ts_to_dtype(t, TS_F64) : NULL;
    if (!c || ts_copy_to_host(c, out, (size_t)n * sizeof *out) != TS_OK)
        for (int i = 0; i < n; i++) out[i] = -12345;
    ts_scope_end();
}

/* max |a - b| over n values */
static double maxdiff(const double *a, const double *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, a[i] == b[i] ? 0 : fabs(a[i] - b[i]));
    return d;
}

/* Every tensor of two state lists holds the same bytes. */
static bool same_lists(const ts_tensor_list *a, const ts_tensor_list *b) {
    bool same = a->n == b->n;
    for (int i = 0; same && i < a->n; i++) {
        ts_tensor *tb = ts_tensor_list_get(b, a->names[i]);
        double x[NV], y[NV];
        int n = (int)ts_numel(a->tensors[i]);
        same = tb && n <= NV && ts_numel(tb) == n;
        if (!same) break;
        host(a->tensors[i], x, n);
        host(tb, y, n);
        same = memcmp(x, y, (size_t)n * sizeof *x) == 0;
    }
    return same;
}

/* ------------------------------------------------------------------ kernel call counting */
static void (*real_unscale[4])(const ts_backend *, int, const ts_kview *, int, const ts_kview *,
                               const ts_kview *);
static int unscale_calls[4][4], unscale_tensors[4][4]; /* [device type][index] */

#define COUNTING(TYPE)                                                                             \
    static void count_##TYPE(const ts_backend *be, int index, const ts_kview *grads, int n,        \
                             const ts_kview *found, const ts_kview *inv) {                         \
        if (index < 4) unscale_calls[TYPE][index]++, unscale_tensors[TYPE][index] += n;            \
        real_unscale[TYPE](be, index, grads, n, found, inv);                                       \
    }
COUNTING(TS_CPU)
COUNTING(TS_SIM)

/* Wraps the cpu and sim kernels with counters (the backend tables are static, writable data). */
static void install_counters(void) {
    ts_backend *cpu = (ts_backend *)tsi_backend_for(TS_CPU),
               *sim = (ts_backend *)tsi_backend_for(TS_SIM);
    real_unscale[TS_CPU] = cpu->amp_unscale, cpu->amp_unscale = count_TS_CPU;
    real_unscale[TS_SIM] = sim->amp_unscale, sim->amp_unscale = count_TS_SIM;
}
static void reset_counters(void) {
    memset(unscale_calls, 0, sizeof unscale_calls);
    memset(unscale_tensors, 0, sizeof unscale_tensors);
}

/* ------------------------------------------------------------------ tests */

/* A clean iteration: the scaled loss, the gradients (scaled, then unscaled exactly as f32
 * arithmetic does it), the SGD step from the unscaled gradients, the tracker counting. */
static void test_clean_step(ts_device dev, double init_scale) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = init_scale});
    const float S = (float)(init_scale ? init_scale : 65536.0);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), S, 0); /* before the first scale: init_scale */
    double loss = 0;
    for (int i = 0; i < NW; i++) loss += (double)W0[i] * XW[i];
    for (int i = 0; i < NV; i++) loss += (double)V0[i] * XV[i];
    double scaled = scaled_backward(&m, s, opt);
    CHECK_NEAR(scaled, loss * S, fabs(loss * S) * 1e-6);
    CHECK(ts_device_equal(ts_device_of(s->scale), dev)); /* lazily, on the loss's device */
    double g[NW], want[NW];
    host(ts_grad(m.w), g, NW);
    for (int i = 0; i < NW; i++) want[i] = (float)(XW[i] * S);
    CHECK(maxdiff(g, want, NW) == 0);

    reset_counters();
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    CHECK_EQ(unscale_calls[dev.type][dev.index], 1); /* both gradients in one kernel call */
    CHECK_EQ(unscale_tensors[dev.type][dev.index], 2);
    const float inv = (float)(1.0 / (double)S); /* PyTorch: reciprocal in f64, then f32 */
    double gv[NV], wantv[NV];
    host(ts_grad(m.w), g, NW);
    host(ts_grad(m.v), gv, NV);
    for (int i = 0; i < NW; i++) want[i] = (float)((float)(XW[i] * S) * inv);
    for (int i = 0; i < NV; i++) wantv[i] = (float)((float)(XV[i] * S) * inv);
    CHECK(maxdiff(g, want, NW) == 0);
    CHECK(maxdiff(gv, wantv, NV) == 0);

    bool stepped = false;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK);
    CHECK(stepped);
    CHECK_EQ(unscale_calls[dev.type][dev.index], 1); /* step did not unscale a second time */
    double w[NW], wexp[NW];
    host(m.w, w, NW);
    for (int i = 0; i < NW; i++) wexp[i] = (float)(W0[i] + (float)(-0.1) * (float)want[i]);
    CHECK(maxdiff(w, wexp, NW) <= 1e-7);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), S, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* An Inf (or NaN) gradient: the step is skipped (parameters and momentum buffers unchanged), the
 * scale halves, the tracker resets; the next clean iteration steps again. */
static void test_skip(ts_device dev, double bad) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    bool stepped = false;
    for (int it = 0; it < 2; it++) { /* clean: momentum buffers exist, tracker 2 */
        scaled_backward(&m, s, opt);
        CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && stepped);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
    }
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 2);
    double w[NW], w_before[NW], v[NV], v_before[NV];
    host(m.w, w_before, NW);
    host(m.v, v_before, NV);
    ts_tensor_list st_before = ts_optim_state_dict(opt);
    CHECK(st_before.n > 0);

    poison(&m, 2, bad);
    scaled_backward(&m, s, opt);
    stepped = true;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK);
    CHECK(!stepped);
    host(m.w, w, NW);
    host(m.v, v, NV);
    CHECK(memcmp(w, w_before, sizeof w) == 0);
    CHECK(memcmp(v, v_before, sizeof v) == 0);
    ts_tensor_list st_after = ts_optim_state_dict(opt);
    CHECK(same_lists(&st_before, &st_after));
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 32768, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0);

    /* a second bad step halves again; then clean steps resume */
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && !stepped);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 16384, 0);
    unpoison(&m, 2);
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && stepped);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1);
    host(m.w, w, NW);
    CHECK(memcmp(w, w_before, sizeof w) != 0);
    CHECK_OK();
    ts_tensor_list_free(&st_before);
    ts_tensor_list_free(&st_after);
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* growth_interval (2000) clean steps double the scale and reset the tracker; an Inf in between
 * restarts the count. */
static void test_growth(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 1e-6});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    bool ok = true, stepped = false;
    for (int it = 0; it < 2000 && ok; it++) {
        scaled_backward(&m, s, opt);
        ok = ts_grad_scaler_step(s, opt, &stepped) == TS_OK && stepped &&
             ts_grad_scaler_update(s) == TS_OK;
        if (it == 1998) {
            CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1999);
            CHECK_NEAR(ts_grad_scaler_get_scale(s), 65536, 0);
        }
    }
    CHECK(ok);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 131072, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0);
    /* 1000 clean, one Inf (back to 65536, tracker 0), then 1999 clean do not grow yet */
    for (int it = 0; it < 1000 && ok; it++) {
        scaled_backward(&m, s, opt);
        ok = ts_grad_scaler_step(s, opt, NULL) == TS_OK && ts_grad_scaler_update(s) == TS_OK;
    }
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1000);
    poison(&m, 0, INFINITY);
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && !stepped);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    unpoison(&m, 0);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 65536, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0);
    for (int it = 0; it < 1999 && ok; it++) {
        scaled_backward(&m, s, opt);
        ok = ts_grad_scaler_step(s, opt, NULL) == TS_OK && ts_grad_scaler_update(s) == TS_OK;
    }
    CHECK(ok);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 65536, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1999);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* The scale never grows past the f32 range: at FLT_MAX-ish scales growth is skipped. */
static void test_growth_bound(void) {
    model m = model_new(ts_cpu(), ts_cpu(), TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 1e-6});
    ts_grad_scaler *s =
        ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 0x1p126, .growth_interval = 1});
    for (int it = 0; it < 3; it++) {
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        /* a tiny loss keeps the scaled gradients finite */
        ts_backward(ts_grad_scaler_scale(s, ts_mul_scalar(ts_sum(m.w), 0x1p-100)));
        ts_scope_end();
        CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
    }
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 0x1p127, 0); /* grew once, then stopped */
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* One optimizer over parameters on two devices: one kernel call and one found_inf per device, and
 * an Inf on either device skips the whole step. */
static void test_multi_device(ts_device d0, ts_device d1) {
    for (int where = 0; where < 3; where++) { /* no Inf, Inf in w (d0), Inf in v (d1) */
        model m = model_new(d0, d1, TS_F32);
        ts_tensor *params[2] = {m.w, m.v};
        ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
        ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
        if (where == 1) poison(&m, 1, INFINITY);
        if (where == 2) {
            ts_scope_begin();
            ts_fill_(ts_select(m.xv, 0, 4), NAN);
            ts_scope_end();
        }
        double w0[NW], v0[NV], w[NW], v[NV], gv[NV];
        host(m.w, w0, NW);
        host(m.v, v0, NV);
        scaled_backward(&m, s, opt);
        CHECK(ts_device_equal(ts_device_of(ts_grad(m.v)), d1));
        reset_counters();
        CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
        CHECK_EQ(unscale_calls[d0.type][d0.index], 1);
        CHECK_EQ(unscale_calls[d1.type][d1.index], 1);
        tsi_gs_optim_state *st = tsi_gs_state_for("test", s, opt);
        CHECK(st && st->n_found == 2 && st->stage == TSI_GS_UNSCALED);
        if (st && st->n_found == 2) {
            CHECK(ts_device_equal(ts_device_of(st->found_inf[0]), d0));
            CHECK(ts_device_equal(ts_device_of(st->found_inf[1]), d1));
            CHECK_EQ(ts_item(st->found_inf[0]), where == 1);
            CHECK_EQ(ts_item(st->found_inf[1]), where == 2);
        }
        host(ts_grad(m.v), gv, NV); /* v's gradient was unscaled on its own device */
        if (where != 2)
            for (int i = 0; i < NV; i++) CHECK_NEAR(gv[i], XV[i], 1e-6);
        bool stepped = true;
        CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK);
        CHECK_EQ(stepped, where == 0);
        host(m.w, w, NW);
        host(m.v, v, NV);
        if (where == 0) {
            for (int i = 0; i < NW; i++) CHECK_NEAR(w[i], W0[i] - 0.1 * XW[i], 1e-6);
            for (int i = 0; i < NV; i++) CHECK_NEAR(v[i], V0[i] - 0.1 * XV[i], 1e-6);
        } else {
            CHECK(memcmp(w, w0, sizeof w) == 0 && memcmp(v, v0, sizeof v) == 0);
        }
        CHECK(ts_grad_scaler_update(s) == TS_OK);
        CHECK_NEAR(ts_grad_scaler_get_scale(s), where ? 32768 : 65536, 0);
        CHECK_OK();
        ts_grad_scaler_free(s);
        ts_optim_free(opt);
        model_free(&m);
    }
}

/* unscale_, then clipping: clip_grad_norm sees the true gradients (its norm is that of the data),
 * and step uses the clipped ones without unscaling again. */
static void test_clip(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    double sq = 0;
    for (int i = 0; i < NW; i++) sq += (double)XW[i] * XW[i];
    for (int i = 0; i < NV; i++) sq += (double)XV[i] * XV[i];
    double norm = sqrt(sq), max_norm = 1.0;
    CHECK_NEAR(ts_clip_grad_norm(params, 2, max_norm, 2), norm, norm * 1e-6);
    bool stepped = false;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && stepped);
    double w[NW], coef = max_norm / (norm + 1e-6);
    host(m.w, w, NW);
    for (int i = 0; i < NW; i++) CHECK_NEAR(w[i], W0[i] - 0.1 * XW[i] * coef, 1e-6);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* bfloat16 and float64 parameters: their gradients are unscaled in their own dtype. */
static void test_dtypes(ts_device dev) {
    static const ts_dtype dts[] = {TS_BF16, TS_F64};
    for (int k = 0; k < 2; k++) {
        model m = model_new(dev, dev, dts[k]);
        ts_tensor *params[2] = {m.w, m.v};
        ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
        ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
        scaled_backward(&m, s, opt);
        CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
        double g[NV], x[NV];
        host(ts_grad(m.v), g, NV);
        host(m.xv, x, NV); /* the data as stored in the dtype */
        CHECK_EQ(ts_dtype_of(ts_grad(m.v)), dts[k]);
        CHECK(maxdiff(g, x, NV) == 0); /* x * 1024 / 1024 is exact in both */
        poison(&m, 3, NAN);
        CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
        scaled_backward(&m, s, opt);
        bool stepped = true;
        CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && !stepped);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
        CHECK_NEAR(ts_grad_scaler_get_scale(s), 512, 0);
        CHECK_OK();
        ts_grad_scaler_free(s);
        ts_optim_free(opt);
        model_free(&m);
    }
}

/* Two optimizers: an Inf in one skips only that one's step; update backs off for both. */
static void test_two_optimizers(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_optim *o1 = ts_sgd_new_params(&m.w, 1, (ts_sgd_opts){.lr = 0.1});
    ts_optim *o2 = ts_sgd_new_params(&m.v, 1, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_scope_begin();
    ts_fill_(ts_select(m.xv, 0, 0), -INFINITY);
    ts_scope_end();
    ts_optim_zero_grad(o2);
    scaled_backward(&m, s, o1);
    bool s1 = false, s2 = true;
    CHECK(ts_grad_scaler_step(s, o1, &s1) == TS_OK);
    CHECK(ts_grad_scaler_step(s, o2, &s2) == TS_OK);
    CHECK(s1 && !s2);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 32768, 0);
    CHECK_EQ(s->n_states, 0); /* update forgot the iteration's states */
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(o1);
    ts_optim_free(o2);
    model_free(&m);
}

static bool msg_has(const char *what) { return strstr(ts_error_message(), what) != NULL; }

static void test_errors(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){0});

    /* before any scaled loss: nothing to unscale with */
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_ERR_STATE);
    CHECK(msg_has("grad_scaler_unscale_: ") && msg_has("ts_grad_scaler_scale"));
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_grad_scaler_update(s) == TS_ERR_STATE);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_grad_scaler_set_scale(s, 8) == TS_ERR_STATE);
    CHECK_ERR(TS_ERR_STATE);

    scaled_backward(&m, s, opt);
    /* update before any inf check */
    CHECK(ts_grad_scaler_update(s) == TS_ERR_STATE);
    CHECK(msg_has("grad_scaler_update: no inf checks were recorded"));
    CHECK_ERR(TS_ERR_STATE);
    /* unscale_ twice */
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    double g[NW];
    host(ts_grad(m.w), g, NW);
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_ERR_STATE);
    CHECK(msg_has("grad_scaler_unscale_: unscale_() has already been called on this optimizer "
                  "since the last update()"));
    CHECK_ERR(TS_ERR_STATE);
    double g2[NW];
    host(ts_grad(m.w), g2, NW);
    CHECK(memcmp(g, g2, sizeof g) == 0); /* the refused call divided nothing */
    CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
    /* unscale_ after step, step twice */
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_ERR_STATE);
    CHECK(msg_has("unscale_() is being called after step()"));
    CHECK_ERR(TS_ERR_STATE);
    bool stepped = true;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_ERR_STATE);
    CHECK(!stepped);
    CHECK(msg_has("grad_scaler_step: step() has already been called since the last update()"));
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_grad_scaler_update(s) == TS_OK);

    /* an optimizer without gradients has nothing to check */
    ts_optim_zero_grad(opt);
    CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_ERR_STATE);
    CHECK(msg_has("grad_scaler_step: no inf checks were recorded for this optimizer"));
    CHECK_ERR(TS_ERR_STATE);
    tsi_gs_states_reset(s);

    /* NULL arguments */
    CHECK(ts_grad_scaler_step(NULL, opt, NULL) == TS_ERR_ARG);
    CHECK(msg_has("grad_scaler_step: scaler is NULL"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_unscale_(s, NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_scale(s, NULL) == NULL);
    CHECK(msg_has("grad_scaler_scale: loss is NULL"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_update(NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(isnan(ts_grad_scaler_get_scale(NULL)));
    CHECK_ERR(TS_ERR_ARG);
    ts_grad_scaler_free(NULL);

    /* an expanded gradient cannot be divided in place */
    ts_scope_begin();
    scaled_backward(&m, s, opt);
    ts_set_grad(m.w, ts_expand(ts_ones(TS_SHAPE(1), (ts_opts){.device = dev}), TS_SHAPE(NW)));
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_ERR_ARG);
    CHECK(msg_has("grad_scaler_unscale_: the gradient of parameter 0") && msg_has("share"));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    tsi_gs_states_reset(s);

    /* bad options */
    CHECK(ts_grad_scaler_new((ts_grad_scaler_opts){.growth_factor = 0.5}) == NULL);
    CHECK(msg_has("grad_scaler_new: the growth factor must be > 1.0"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_new((ts_grad_scaler_opts){.backoff_factor = 1.5}) == NULL);
    CHECK(msg_has("backoff factor"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = -1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_new((ts_grad_scaler_opts){.growth_interval = -5}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_set_scale(s, NAN) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_grad_scaler_set_scale(s, 1e39) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);

    /* float16 gradients are refused (PyTorch's allow_fp16=False) and nothing changes, not even the
     * float32 gradient of the same optimizer */
    model h = model_new(dev, dev, TS_F32);
    ts_tensor *hv = param(V0, NV, TS_F16, dev), *hx = NULL;
    ts_scope_begin();
    hx = ts_retain(ts_to_dtype(h.xv, TS_F16));
    ts_scope_end();
    ts_tensor *hp[2] = {h.w, hv};
    ts_optim *ho = ts_sgd_new_params(hp, 2, (ts_sgd_opts){.lr = 0.1});
    s = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_scope_begin();
    ts_tensor *loss =
        ts_add(ts_sum(ts_mul(h.w, h.xw)), ts_to_dtype(ts_sum(ts_mul(hv, hx)), TS_F32));
    ts_backward(ts_grad_scaler_scale(s, loss));
    ts_scope_end();
    host(ts_grad(h.w), g, NW);
    CHECK(ts_grad_scaler_step(s, ho, NULL) == TS_ERR_DTYPE);
    CHECK(msg_has("grad_scaler_step: Attempting to unscale FP16 gradients"));
    CHECK_ERR(TS_ERR_DTYPE);
    host(ts_grad(h.w), g2, NW);
    CHECK(memcmp(g, g2, sizeof g) == 0);
    CHECK(ts_grad_scaler_unscale_(s, ho) == TS_ERR_DTYPE); /* still READY: the same refusal */
    CHECK_ERR(TS_ERR_DTYPE);
    ts_grad_scaler_free(s);
    ts_optim_free(ho);
    ts_release(hv), ts_release(hx);
    model_free(&h);
    CHECK_OK();
}

/* enabled=False: scale returns the loss, step just steps, the rest does nothing. */
static void test_disabled(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.disabled = true});
    ts_scope_begin();
    ts_tensor *loss = ts_sum(ts_mul(m.w, m.xw));
    CHECK(ts_grad_scaler_scale(s, loss) == loss);
    ts_backward(loss);
    ts_scope_end();
    double g[NW];
    host(ts_grad(m.w), g, NW);
    for (int i = 0; i < NW; i++) CHECK_NEAR(g[i], XW[i], 0);
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    bool stepped = false;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK && stepped);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK(ts_grad_scaler_set_scale(s, 4) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 1.0, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0);
    double w[NW];
    host(m.w, w, NW);
    for (int i = 0; i < NW; i++) CHECK_NEAR(w[i], W0[i] - 0.1 * XW[i], 1e-6);
    ts_tensor_list sd = ts_grad_scaler_state_dict(s);
    CHECK_EQ(sd.n, 0);
    CHECK(ts_grad_scaler_load_state_dict(s, &sd) == TS_OK);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

static double sd_value(const ts_tensor_list *l, const char *name) {
    ts_tensor *t = ts_tensor_list_get(l, name);
    CHECK(t && ts_dtype_of(t) == TS_F64 && ts_ndim(t) == 0 &&
          ts_device_equal(ts_device_of(t), ts_cpu()));
    return t ? ts_item(t) : NAN;
}

/* state_dict: PyTorch's keys and values; a round trip into another scaler continues identically;
 * set_scale; bad dicts change nothing. */
static void test_state_dict(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 1e-3});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){
        .init_scale = 256, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 3});
    ts_tensor_list sd = ts_grad_scaler_state_dict(s); /* before the first scale */
    CHECK_NEAR(sd_value(&sd, "scale"), 256, 0);
    CHECK_NEAR(sd_value(&sd, "_growth_tracker"), 0, 0);
    ts_tensor_list_free(&sd);
    for (int it = 0; it < 5; it++) { /* grows once at 3, tracker 2 */
        scaled_backward(&m, s, opt);
        CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
    }
    sd = ts_grad_scaler_state_dict(s);
    CHECK_EQ(sd.n, 5);
    static const char *const keys[] = {"scale", "growth_factor", "backoff_factor",
                                       "growth_interval", "_growth_tracker"};
    static const double want[] = {1024, 4, 0.25, 3, 2};
    for (int k = 0; k < 5; k++) CHECK_NEAR(sd_value(&sd, keys[k]), want[k], 0);

    /* into a default scaler, before and after its scale exists */
    for (int created = 0; created < 2; created++) {
        ts_grad_scaler *t = ts_grad_scaler_new((ts_grad_scaler_opts){0});
        if (created) scaled_backward(&m, t, opt);
        CHECK(ts_grad_scaler_load_state_dict(t, &sd) == TS_OK);
        CHECK_NEAR(ts_grad_scaler_get_scale(t), 1024, 0);
        CHECK_EQ(ts_grad_scaler_growth_tracker(t), 2);
        tsi_gs_states_reset(t);
        scaled_backward(&m, t, opt); /* one more clean step grows by 4 */
        CHECK(ts_grad_scaler_step(t, opt, NULL) == TS_OK);
        CHECK(ts_grad_scaler_update(t) == TS_OK);
        CHECK_NEAR(ts_grad_scaler_get_scale(t), 4096, 0);
        CHECK_EQ(ts_grad_scaler_growth_tracker(t), 0);
        poison(&m, 1, INFINITY); /* and backs off by 0.25 */
        scaled_backward(&m, t, opt);
        CHECK(ts_grad_scaler_step(t, opt, NULL) == TS_OK);
        CHECK(ts_grad_scaler_update(t) == TS_OK);
        unpoison(&m, 1);
        CHECK_NEAR(ts_grad_scaler_get_scale(t), 1024, 0);
        ts_grad_scaler_free(t);
    }

    /* bad dicts: each refused with the key named, the scaler unchanged */
    ts_grad_scaler *t = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_tensor_list empty = {0};
    CHECK(ts_grad_scaler_load_state_dict(t, &empty) == TS_ERR_ARG);
    CHECK(msg_has("the source state dict is empty"));
    CHECK_ERR(TS_ERR_ARG);
    struct {
        const char *key;
        double v;
        const char *msg;
    } bad[] = {{"scale", -1, "scale must be positive"},
               {"scale", INFINITY, "scale must be positive"},
               {"growth_factor", 1.0, "growth_factor must be > 1.0"},
               {"backoff_factor", 0, "backoff_factor"},
               {"growth_interval", 2.5, "growth_interval must be a positive integer"},
               {"_growth_tracker", 3, "_growth_tracker must be an integer in [0, growth_interval)"},
               {"bogus", 1, "unexpected key \"bogus\""}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ts_tensor_list l = {0};
        ts_scope_begin();
        for (int i = 0; i < sd.n; i++)
            ts_tensor_list_add(&l, sd.names[i],
                               strcmp(sd.names[i], bad[k].key) ? sd.tensors[i]
                                                               : ts_scalar(bad[k].v, (ts_opts){0}));
        if (!ts_tensor_list_get(&l, bad[k].key))
            ts_tensor_list_add(&l, bad[k].key, ts_scalar(bad[k].v, (ts_opts){0}));
        ts_scope_end();
        CHECK(ts_grad_scaler_load_state_dict(t, &l) == TS_ERR_ARG);
        CHECK(msg_has("grad_scaler_load_state_dict: ") && msg_has(bad[k].msg));
        CHECK_ERR(TS_ERR_ARG);
        ts_tensor_list_free(&l);
    }
    ts_tensor_list missing = {0};
    for (int i = 0; i < 4; i++) ts_tensor_list_add(&missing, sd.names[i], sd.tensors[i]);
    CHECK(ts_grad_scaler_load_state_dict(t, &missing) == TS_ERR_ARG);
    CHECK(msg_has("missing key \"_growth_tracker\""));
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor_list_free(&missing);
    CHECK_NEAR(ts_grad_scaler_get_scale(t), 65536, 0);
    ts_tensor_list d2 = ts_grad_scaler_state_dict(t);
    CHECK_NEAR(sd_value(&d2, "growth_interval"), 2000, 0);
    ts_tensor_list_free(&d2);

    /* set_scale: update(new_scale) takes the value and starts a new iteration */
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
    CHECK(ts_grad_scaler_set_scale(s, 3.0) == TS_OK);
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 3.0, 0);
    CHECK_EQ(s->n_states, 0);
    CHECK_OK();
    ts_tensor_list_free(&sd);
    ts_grad_scaler_free(t);
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

/* An iteration that fails after the step (an error pending, e.g. out of memory, or a capture that
 * broke): update keeps the scale but ends the iteration, so once the error is cleared the next one
 * unscales and steps as a fresh one does (before, it was refused: "unscale_() is being
 * called after step()"). */
static void test_failed_iteration(ts_device dev) {
    model m = model_new(dev, dev, TS_F32);
    ts_tensor *params[2] = {m.w, m.v};
    ts_optim *opt = ts_sgd_new_params(params, 2, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_step(s, opt, NULL) == TS_OK);
    tsi_error_set(TS_ERR_OOM, "a failure later in the iteration");
    CHECK(ts_grad_scaler_update(s) == TS_ERR_OOM);
    ts_error_clear();
    CHECK_NEAR(ts_grad_scaler_get_scale(s), 1024, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 0); /* no clean step counted */
    ts_optim_zero_grad(opt);
    scaled_backward(&m, s, opt);
    CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
    bool stepped = false;
    CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK);
    CHECK(stepped);
    CHECK(ts_grad_scaler_update(s) == TS_OK);
    CHECK_EQ(ts_grad_scaler_growth_tracker(s), 1);
    CHECK_OK();
    ts_grad_scaler_free(s);
    ts_optim_free(opt);
    model_free(&m);
}

int main(void) {
    int nsim = ts_device_count(TS_SIM);
    if (nsim < 2 && ts_sim_configure(4, 0) == TS_OK) nsim = 4;
    install_counters();
    ts_device devs[5] = {ts_cpu()};
    int ndev = 1;
    for (int i = 0; i < nsim && i < 4; i++) devs[ndev++] = ts_sim(i);
    for (int d = 0; d < ndev; d++) {
        printf("-- %s\n", ts_device_str(devs[d]));
        test_clean_step(devs[d], 0);
        test_clean_step(devs[d], 3.0); /* unscaling that rounds */
        test_skip(devs[d], INFINITY);
        test_skip(devs[d], NAN);
        test_clip(devs[d]);
        test_dtypes(devs[d]);
        test_two_optimizers(devs[d]);
        test_errors(devs[d]);
        test_disabled(devs[d]);
        test_state_dict(devs[d]);
        test_failed_iteration(devs[d]);
    }
    /* the long growth run on the cpu and one simulated device */
    test_growth(ts_cpu());
    test_growth(ts_sim(nsim > 3 ? 3 : 0));
    test_growth_bound();
    test_multi_device(ts_sim(0), ts_sim(1));
    test_multi_device(ts_cpu(), ts_sim(2));
    return ts_test_finish();
}
