/* test_optim_offload_overlap.c — the overlapped copies of an offloaded optimizer (src/optim/
 * offload.c, issue 55 item 5) on a sim device, with the simulated host link (16 GB/s, 5 us) on and
 * off: each gradient's copy is queued on the link's device-to-host engine by the grad-ready hook
 * and each updated weight's on the host-to-device engine by the step (the link's counters show
 * it); training equals plain training (float32) or the link-off run (bfloat16) bit for bit; a
 * parameter read right after a step, before any forward (copied to the cpu, reduced by an op, in a
 * state dict, after zero_grad), is the updated value, the master's; and an allocation-failure sweep
 * of an overlapped step. */
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "tessera/optim_offload.h"
#include "tessera/sim_link.h"
#include "ts_test.h"

static void set_link(bool on) {
    CHECK_EQ(on ? ts_sim_set_link(16e9, 5e-6) : ts_sim_set_link(0, 0), TS_OK);
    ts_sim_link_reset_stats(-1);
}

/* A tensor's bytes on the host (malloc'ed; *n set). */
static char *bytes_of(ts_tensor *t, size_t *n) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(t, ts_cpu()));
    *n = (size_t)ts_numel(c) * ts_dtype_size(ts_dtype_of(c));
    char *b = malloc(*n);
    if (ts_copy_to_host(c, b, *n) != TS_OK) free(b), b = NULL;
    ts_scope_end();
    return b;
}

static bool same_bytes(ts_tensor *a, ts_tensor *b) {
    size_t na, nb;
    char *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
    bool ok = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return ok;
}

static bool same_params(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    bool ok = la.n == lb.n && la.n > 0;
    for (int i = 0; ok && i < la.n; i++) ok = same_bytes(la.tensors[i], lb.tensors[i]);
    ts_tensor_list_free(&la), ts_tensor_list_free(&lb);
    return ok;
}

/* ------------------------------------------------------------------ the model */
typedef struct model {
    ts_module *m;
    ts_tensor *x, *y;
    ts_optim *o;
    int n;              /* parameters */
    size_t param_bytes; /* their bytes in the model's dtype */
} model;

/* A tiny GPT on sim:0 in dtype dt with AdamW (offloaded when asked). */
static model model_new(ts_dtype dt, bool offload) {
    const ts_device d = ts_sim(0);
    model r = {0};
    ts_manual_seed(9);
    r.m =
        ts_module_to(ts_gpt_new((ts_gpt_config){
                         .vocab_size = 16, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 16}),
                     d);
    if (dt != TS_F32) ts_module_to_dtype(r.m, dt);
    const double tok[17] = {1, 5, 3, 9, 2, 2, 15, 0, 4, 4, 7, 11, 13, 6, 8, 1, 3};
    ts_scope_begin();
    ts_tensor *all = ts_to_dtype(ts_tensor_f64(TS_SHAPE(17), tok, (ts_opts){0}), TS_I64);
    r.x = ts_keep(ts_to(ts_reshape(ts_slice(all, 0, 0, 16, 1), TS_SHAPE(2, 8)), d));
    r.y = ts_keep(ts_to(ts_slice(all, 0, 1, 17, 1), d));
    ts_scope_end();
    /* one group: the optimizer's parameter i is the module's (ts_optim_offload_master's index) */
    r.o = ts_adamw_new(r.m, (ts_adam_opts){.lr = 3e-2, .weight_decay = 0.1});
    if (offload) CHECK_EQ(ts_optim_offload(r.o), TS_OK);
    ts_tensor_list l = ts_module_named_parameters(r.m);
    r.n = l.n;
    for (int i = 0; i < l.n; i++) r.param_bytes += ts_nbytes(l.tensors[i]);
    ts_tensor_list_free(&l);
    return r;
}

static void model_free(model *r) {
    ts_optim_free(r->o);
    ts_module_free(r->m);
    ts_release(r->x), ts_release(r->y);
}

/* zero_grad, forward, backward, step (no clipping: every gradient stays the one backward made) */
static void train(model *r, int steps) {
    for (int i = 0; i < steps; i++) {
        ts_scope_begin();
        ts_optim_zero_grad(r->o);
        ts_tensor *out = ts_reshape(ts_forward(r->m, r->x), TS_SHAPE(16, 16));
        ts_backward(ts_cross_entropy(ts_to_dtype(out, TS_F32), r->y));
        ts_optim_step(r->o);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ checks */
/* The link's counters over `steps` steps of r (the model's own copies, if any, included). */
static ts_sim_link_stats train_counted(model *r, bool link, int steps) {
    set_link(link);
    train(r, steps);
    ts_sim_link_stats st = {0};
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    set_link(false);
    return st;
}

/* What the offload added to the link's counters (off: plain's, on: offloaded's): with the link on,
 * every gradient and every weight of every step over it asynchronously, nothing synchronously;
 * with it off, nothing counted. */
static void check_counts(const model *r, int steps, bool link, ts_sim_link_stats off,
                         ts_sim_link_stats on) {
    const uint64_t n = (uint64_t)r->n * (uint64_t)steps;
    const uint64_t bytes = (uint64_t)r->param_bytes * (uint64_t)steps;
    if (!link) {
        CHECK_EQ(on.async_copies + on.copies_d2h + on.copies_h2d, 0);
        return;
    }
    CHECK_EQ(on.async_copies - off.async_copies, 2 * n);
    CHECK_EQ(on.copies_d2h - off.copies_d2h, n);
    CHECK_EQ(on.copies_h2d - off.copies_h2d, n);
    CHECK_EQ(on.bytes_d2h - off.bytes_d2h, bytes);
    CHECK_EQ(on.bytes_h2d - off.bytes_h2d, bytes);
}

/* Offloaded float32 training equals plain training bit for bit, link on or off, and took the
 * overlapped path exactly when the link is on. */
static void check_equal(bool link) {
    enum { STEPS = 6 };
    model a = model_new(TS_F32, false), b = model_new(TS_F32, true);
    CHECK(same_params(a.m, b.m));
    const ts_sim_link_stats sa = train_counted(&a, link, STEPS);
    const ts_sim_link_stats sb = train_counted(&b, link, STEPS);
    CHECK_OK();
    CHECK(same_params(a.m, b.m));
    check_counts(&b, STEPS, link, sa, sb);
    model_free(&a), model_free(&b);
    CHECK_OK();
}

/* bfloat16 parameters (their gradients land in the stage buffer and are cast at the step): the
 * link-on run equals the link-off run bit for bit (test_optim_offload checks that one against a
 * float32 reference), every copy asynchronous. */
static void check_bf16(void) {
    enum { STEPS = 5 };
    model a = model_new(TS_BF16, true), b = model_new(TS_BF16, true);
    model c = model_new(TS_BF16, false); /* plain: the model's own copies on the link */
    train_counted(&a, false, STEPS);
    const ts_sim_link_stats sb = train_counted(&b, true, STEPS);
    const ts_sim_link_stats sc = train_counted(&c, true, STEPS);
    CHECK_OK();
    CHECK(same_params(a.m, b.m));
    check_counts(&b, STEPS, true, sc, sb);
    for (int i = 0; i < b.n; i++)
        CHECK(same_bytes(ts_optim_offload_master(a.o, i), ts_optim_offload_master(b.o, i)));
    model_free(&a), model_free(&b), model_free(&c);
    CHECK_OK();
}

/* Right after a step, before any forward, every way of reading a parameter sees the updated
 * weight: the master itself (float32), through an op (a sum), in the module's state dict, and
 * after zero_grad. */
static void check_read_after_step(bool link) {
    model r = model_new(TS_F32, true);
    train(&r, 2);
    ts_tensor_list l = ts_module_named_parameters(r.m);
    size_t *nb = calloc((size_t)l.n, sizeof *nb);
    char **before = calloc((size_t)l.n, sizeof *before);
    for (int i = 0; i < l.n; i++) before[i] = bytes_of(l.tensors[i], &nb[i]);
    set_link(link);
    ts_scope_begin();
    ts_optim_zero_grad(r.o);
    ts_tensor *out = ts_reshape(ts_forward(r.m, r.x), TS_SHAPE(16, 16));
    ts_backward(ts_cross_entropy(out, r.y));
    CHECK_EQ(ts_optim_step(r.o), TS_OK);
    ts_scope_end();
    /* a sum by an op on the device first (the op waits for the copy), then the bytes; the two
     * float64 sums of the same <= 1024 float32 values |x| < 2 differ by at most their rounding,
     * 1024 * 2^-53 * 2048 < 1e-9 (a step moves a weight by about lr = 3e-2) */
    for (int i = 0; i < l.n; i++) {
        ts_scope_begin();
        ts_tensor *m = ts_optim_offload_master(r.o, i);
        CHECK(ts_numel(m) <= 1024);
        CHECK_NEAR(ts_item(ts_sum(ts_to_dtype(l.tensors[i], TS_F64))),
                   ts_item(ts_sum(ts_to_dtype(m, TS_F64))), 1e-9);
        ts_scope_end();
    }
    ts_optim_step(r.o); /* the same gradients again: the weights move again */
    int changed = 0;
    for (int i = 0; i < l.n; i++) {
        size_t n;
        char *now = bytes_of(l.tensors[i], &n);
        changed += now && n == nb[i] && memcmp(now, before[i], n) != 0;
        CHECK(same_bytes(l.tensors[i], ts_optim_offload_master(r.o, i)));
        free(now);
    }
    CHECK_EQ(changed, l.n);
    ts_tensor_list sd = ts_module_state_dict(r.m);
    CHECK(sd.n >= l.n);
    for (int i = 0; i < l.n; i++) {
        bool found = false;
        for (int k = 0; k < sd.n && !found; k++)
            if (ts_numel(sd.tensors[k]) == ts_numel(l.tensors[i]) &&
                same_bytes(sd.tensors[k], ts_optim_offload_master(r.o, i)))
                found = true;
        CHECK(found);
    }
    ts_tensor_list_free(&sd);
    ts_optim_step(r.o);
    ts_optim_zero_grad(r.o);
    for (int i = 0; i < l.n; i++) CHECK(same_bytes(l.tensors[i], ts_optim_offload_master(r.o, i)));
    set_link(false);
    for (int i = 0; i < l.n; i++) free(before[i]);
    free(before), free(nb);
    ts_tensor_list_free(&l);
    model_free(&r);
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
static void *offload_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = sweep_mlp_new(ts_sim(0));
    t->o = ts_adamw_new(t->m, (ts_adam_opts){.lr = 3e-2, .weight_decay = 0.1});
    ts_optim_offload(t->o);
    sweep_batch_new(ts_sim(0), &t->x, &t->y);
    sweep_trainee_step(t);
    return t;
}

static void check_faults(void) {
    set_link(true);
    ts_sweep_case step = {.name = "overlapped offloaded step",
                          .setup = offload_setup,
                          .run = sweep_trainee_step,
                          .teardown = sweep_trainee_free,
                          .snap = sweep_trainee_snap};
    ts_fault_sweep(&step, 20000);
    ts_sim_link_stats st;
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    CHECK(st.async_copies > 0); /* the sweep did run the overlapped path */
    set_link(false);
}

int main(void) {
    ts_sim_configure(2, 0);
    ts_sim_set_link(0, 0); /* TS_SIM_LINK in the environment or not: each check sets its own */
    for (int link = 0; link < 2; link++) {
        check_equal(link);
        check_read_after_step(link);
    }
    check_bf16();
    check_faults();
    return ts_test_finish();
}
