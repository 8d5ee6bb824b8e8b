/* test_checkpoint.c — training checkpoints (model, optimizer, grad scaler, step, RNG) saved on the
 * CPU and resumed on sim:0 with identical continued training; ts_module_save/load; the errors. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

static char tmpdir[256];
static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* Linear(4, 3) -> BatchNorm1d(3) -> ReLU -> Linear(3, 2): parameters and buffers of each kind. */
static ts_module *make_net(uint64_t seed) {
    ts_manual_seed(seed);
    ts_module *mods[4] = {ts_linear_new(4, 3), ts_batch_norm1d_new(3, (ts_norm_opts){0}),
                          ts_relu_new(), ts_linear_new(3, 2)};
    return ts_sequential_new(4, mods);
}

/* One SGD step on a fixed batch, on the model's device. */
static void train_step(ts_module *net, ts_optim *opt, ts_device dev) {
    static const float x[5 * 4] = {0.5f, -1, 2, 0.25f, 1, 1,     -0.5f, 3,  -2, 0.5f,
                                   1,    -1, 0, 2,     1, 0.75f, 1.5f,  -1, 0,  0.5f};
    static const float y[5 * 2] = {1, 0, 0, 1, 0.5f, 0.5f, -1, 2, 0, 0};
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(5, 4), x, (ts_opts){.device = dev});
    ts_tensor *yt = ts_tensor_f32(TS_SHAPE(5, 2), y, (ts_opts){.device = dev});
    ts_optim_zero_grad(opt);
    ts_backward(ts_mse_loss(ts_forward(net, xt), yt));
    ts_optim_step(opt);
    ts_scope_end();
}

/* Every state_dict entry of a and b holds the same bytes (a and b on any devices). */
static bool same_state_(ts_module *a, ts_module *b, bool verbose) {
    ts_tensor_list la = ts_module_state_dict(a), lb = ts_module_state_dict(b);
    bool same = la.n == lb.n && la.n > 0;
    for (int i = 0; same && i < la.n; i++) {
        ts_tensor *ta = la.tensors[i], *tb = ts_tensor_list_get(&lb, la.names[i]);
        size_t n = ts_nbytes(ta);
        char *ha = malloc(n + 1), *hb = malloc(n + 1);
        same = tb && ts_nbytes(tb) == n && ts_copy_to_host(ta, ha, n) == TS_OK &&
               ts_copy_to_host(tb, hb, n) == TS_OK && memcmp(ha, hb, n) == 0;
        if (!same && verbose) printf("  state differs at %s\n", la.names[i]);
        free(ha);
        free(hb);
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return same;
}

#define same_state(a, b) same_state_(a, b, true)
#define differ(a, b)     (!same_state_(a, b, false))

static int64_t i64_of(const ts_tensor_list *l, const char *name) {
    int64_t v = -12345;
    ts_tensor *t = ts_tensor_list_get(l, name);
    CHECK(t && ts_dtype_of(t) == TS_I64 && ts_ndim(t) == 0);
    if (t) ts_copy_to_host(t, &v, sizeof v);
    return v;
}

static void test_checkpoint_resume(void) {
    ts_module *net = make_net(1);
    ts_optim *opt = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    train_step(net, opt, ts_cpu());
    train_step(net, opt, ts_cpu());
    ts_manual_seed(777);
    ts_release(ts_rand(TS_SHAPE(10), (ts_opts){0})); /* moves the offset away from 0 */
    ts_rng_state saved = ts_rng_get_state();
    const char *path = tmp_path("ckpt.safetensors");
    CHECK(ts_checkpoint_save(path, net, opt, 2) == TS_OK);
    CHECK_OK();

    /* the file: PyTorch's names under model., the optimizer's under optim., step and RNG */
    ts_tensor_list f = {0};
    CHECK(ts_safetensors_load(path, ts_cpu(), &f) == TS_OK);
    CHECK(ts_tensor_list_get(&f, "model.0.weight") != NULL);
    CHECK(ts_tensor_list_get(&f, "model.1.running_var") != NULL);
    CHECK(ts_tensor_list_get(&f, "model.1.num_batches_tracked") != NULL);
    CHECK(ts_tensor_list_get(&f, "model.3.bias") != NULL);
    CHECK(ts_tensor_list_get(&f, "optim.state.0.momentum_buffer") != NULL);
    CHECK(ts_tensor_list_get(&f, "optim.param_groups.0.lr") != NULL);
    CHECK_EQ(i64_of(&f, "model.1.num_batches_tracked"), 2);
    CHECK_EQ(i64_of(&f, "step"), 2);
    CHECK_EQ((uint64_t)i64_of(&f, "rng.seed"), 777);
    CHECK_EQ((uint64_t)i64_of(&f, "rng.offset"), saved.offset);
    CHECK(saved.offset > 0);
    ts_tensor_list_free(&f);
    char *meta = ts_safetensors_metadata(path, "tessera");
    CHECK_STREQ(meta, "checkpoint");
    free(meta);

    /* resumed on sim:0 from a differently initialised model: same weights, step, RNG; and the
     * next step (which needs the momentum buffers) matches the original's bit for bit */
    ts_module *net2 = ts_module_to(make_net(2), ts_sim(0));
    ts_optim *opt2 = ts_sgd_new(net2, (ts_sgd_opts){.lr = 0.5, .momentum = 0.9});
    CHECK(differ(net, net2));
    ts_manual_seed(5);
    int64_t step = -1;
    CHECK(ts_checkpoint_load(path, net2, opt2, &step) == TS_OK);
    CHECK_OK();
    CHECK_EQ(step, 2);
    ts_rng_state now = ts_rng_get_state();
    CHECK_EQ(now.seed, saved.seed);
    CHECK_EQ(now.offset, saved.offset);
    CHECK(same_state(net, net2));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(net2, "0.weight")), ts_sim(0)));
    CHECK_NEAR(ts_optim_get_lr(opt2, 0), 0.1, 0);
    train_step(net, opt, ts_cpu());
    train_step(net2, opt2, ts_sim(0));
    CHECK_OK();
    CHECK(same_state(net, net2));

    /* a checkpoint without optimizer state cannot restore an optimizer */
    CHECK(ts_checkpoint_save(tmp_path("no_opt.safetensors"), net, NULL, 7) == TS_OK);
    CHECK(ts_checkpoint_load(tmp_path("no_opt.safetensors"), net2, opt2, &step) == TS_ERR_FORMAT);
    CHECK(strstr(ts_error_message(), "holds no optimizer state") != NULL);
    CHECK_ERR(TS_ERR_FORMAT);
    CHECK(ts_checkpoint_load(tmp_path("no_opt.safetensors"), net2, NULL, &step) == TS_OK);
    CHECK_EQ(step, 7);
    ts_optim_free(opt);
    ts_optim_free(opt2);
    ts_module_free(net);
    ts_module_free(net2);
    CHECK_OK();
}

static void test_module_files(void) {
    ts_module *a = make_net(3), *b = ts_module_to(make_net(4), ts_sim(1));
    const char *path = tmp_path("model.safetensors");
    CHECK(ts_module_save(a, path) == TS_OK);
    char *fmt = ts_safetensors_metadata(path, "format");
    CHECK_STREQ(fmt, "pt");
    free(fmt);
    CHECK(differ(a, b));
    CHECK(ts_module_load(b, path, true) == TS_OK);
    CHECK(same_state(a, b));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(b, "3.weight")), ts_sim(1)));

    /* a module file is not a checkpoint */
    int64_t step = 0;
    CHECK(ts_checkpoint_load(path, b, NULL, &step) == TS_ERR_FORMAT);
    CHECK(strstr(ts_error_message(), "unexpected tensor '1.num_batches_tracked'") != NULL);
    CHECK_ERR(TS_ERR_FORMAT);
    /* a different architecture: strict loading names the keys and leaves the model as it was */
    ts_module *c = ts_linear_new(4, 3);
    ts_tensor_list before = ts_module_state_dict(c);
    ts_tensor *w0 = ts_clone(ts_tensor_list_get(&before, "weight"));
    CHECK(ts_module_load(c, path, true) == TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "Missing key(s) in state_dict") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    float x[12], y[12];
    ts_copy_to_host(w0, x, sizeof x);
    ts_copy_to_host(ts_module_get(c, "weight"), y, sizeof y);
    CHECK(memcmp(x, y, sizeof x) == 0);
    /* IO errors name the file */
    CHECK(ts_module_load(c, tmp_path("absent.safetensors"), true) == TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "absent.safetensors") != NULL);
    CHECK_ERR(TS_ERR_IO);
    CHECK(ts_checkpoint_save(NULL, c, NULL, 0) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_save(NULL, path) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(w0);
    ts_tensor_list_free(&before);
    ts_module_free(a);
    ts_module_free(b);
    ts_module_free(c);
    CHECK_OK();
}

/* One scaled (mixed-precision style) SGD step through a grad scaler. */
static void amp_step(ts_module *net, ts_optim *opt, ts_grad_scaler *sc) {
    static const float x[2 * 4] = {0.5f, -1, 2, 0.25f, 1, 1, -0.5f, 3};
    static const float y[2 * 2] = {1, 0, 0, 1};
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(2, 4), x, (ts_opts){0});
    ts_tensor *yt = ts_tensor_f32(TS_SHAPE(2, 2), y, (ts_opts){0});
    ts_optim_zero_grad(opt);
    ts_backward(ts_grad_scaler_scale(sc, ts_mse_loss(ts_forward(net, xt), yt)));
    ts_grad_scaler_step(sc, opt, NULL);
    ts_grad_scaler_update(sc);
    ts_scope_end();
}

static void test_checkpoint_scaler(void) {
    ts_module *net = make_net(5);
    ts_optim *opt = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.01});
    ts_grad_scaler *sc = ts_grad_scaler_new((ts_grad_scaler_opts){
        .init_scale = 512, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 3});
    for (int i = 0; i < 4; i++) amp_step(net, opt, sc); /* grew once (2048), tracker 1 */
    CHECK_OK();
    CHECK_NEAR(ts_grad_scaler_get_scale(sc), 2048, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(sc), 1);
    const char *path = tmp_path("amp.safetensors");
    ts_checkpoint_parts parts = {net, opt, sc, 4, 0};
    CHECK(ts_checkpoint_save_parts(path, &parts) == TS_OK);

    /* the file: the scaler under scaler. with PyTorch's keys, as 0-dim f64 */
    ts_tensor_list f = {0};
    CHECK(ts_safetensors_load(path, ts_cpu(), &f) == TS_OK);
    static const char *const keys[] = {"scaler.scale", "scaler.growth_factor",
                                       "scaler.backoff_factor", "scaler.growth_interval",
                                       "scaler._growth_tracker"};
    static const double want[] = {2048, 4, 0.25, 3, 1};
    for (int k = 0; k < 5; k++) {
        ts_tensor *t = ts_tensor_list_get(&f, keys[k]);
        CHECK(t && ts_dtype_of(t) == TS_F64 && ts_ndim(t) == 0);
        CHECK_NEAR(t ? ts_item(t) : NAN, want[k], 0);
    }
    CHECK_EQ(i64_of(&f, "step"), 4);

    /* resumed on sim:0 into a default scaler: same scaler state, and training continues alike */
    ts_module *net2 = ts_module_to(make_net(6), ts_sim(0));
    ts_optim *opt2 = ts_sgd_new(net2, (ts_sgd_opts){.lr = 0.01});
    ts_grad_scaler *sc2 = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_checkpoint_parts in = {net2, opt2, sc2, -1, 0};
    CHECK(ts_checkpoint_load_parts(path, &in) == TS_OK);
    CHECK_EQ(in.step, 4);
    CHECK(same_state(net, net2));
    CHECK_NEAR(ts_grad_scaler_get_scale(sc2), 2048, 0);
    CHECK_EQ(ts_grad_scaler_growth_tracker(sc2), 1);
    ts_module_to(net2, ts_cpu());
    for (int i = 0; i < 2; i++) amp_step(net, opt, sc), amp_step(net2, opt2, sc2);
    CHECK_NEAR(ts_grad_scaler_get_scale(sc2), 8192, 0); /* grew with the saved factor 4 */
    CHECK_NEAR(ts_grad_scaler_get_scale(sc), ts_grad_scaler_get_scale(sc2), 0);
    CHECK(same_state(net, net2));

    /* a file without scaler state (a float32 run) leaves the scaler as it is */
    CHECK(ts_checkpoint_save(tmp_path("f32.safetensors"), net, opt, 9) == TS_OK);
    ts_grad_scaler *fresh = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_checkpoint_parts in2 = {net2, opt2, fresh, 0, 0};
    CHECK(ts_checkpoint_load_parts(tmp_path("f32.safetensors"), &in2) == TS_OK);
    CHECK_EQ(in2.step, 9);
    CHECK_NEAR(ts_grad_scaler_get_scale(fresh), 65536, 0);
    /* scaler state without a scaler is ignored; the old entry point still reads the file */
    int64_t step = 0;
    CHECK(ts_checkpoint_load(path, net2, opt2, &step) == TS_OK);
    CHECK_EQ(step, 4);

    /* a bad scaler value is refused before the model changes */
    ts_module *net3 = make_net(7);
    ts_optim *opt3 = ts_sgd_new(net3, (ts_sgd_opts){.lr = 0.01});
    ts_tensor_list bad = {0};
    ts_scope_begin();
    for (int i = 0; i < f.n; i++)
        ts_tensor_list_add(&bad, f.names[i],
                           strcmp(f.names[i], "scaler.growth_factor")
                               ? f.tensors[i]
                               : ts_scalar(0.5, (ts_opts){.dtype = TS_F64}));
    ts_scope_end();
    CHECK(ts_safetensors_save(tmp_path("bad.safetensors"), &bad, NULL, 0) == TS_OK);
    ts_checkpoint_parts in3 = {net3, opt3, fresh, 0, 0};
    CHECK(ts_checkpoint_load_parts(tmp_path("bad.safetensors"), &in3) == TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "growth_factor must be > 1.0") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(differ(net, net3));
    CHECK_NEAR(ts_grad_scaler_get_scale(fresh), 65536, 0);
    CHECK(ts_checkpoint_load_parts(path, NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_checkpoint_save_parts(path, NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);

    ts_tensor_list_free(&bad);
    ts_tensor_list_free(&f);
    ts_grad_scaler_free(sc), ts_grad_scaler_free(sc2), ts_grad_scaler_free(fresh);
    ts_optim_free(opt), ts_optim_free(opt2), ts_optim_free(opt3);
    ts_module_free(net), ts_module_free(net2), ts_module_free(net3);
    CHECK_OK();
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_checkpoint_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_checkpoint_resume();
    test_module_files();
    test_checkpoint_scaler();
    const char *files[] = {"ckpt.safetensors", "no_opt.safetensors", "model.safetensors",
                           "amp.safetensors",  "f32.safetensors",    "bad.safetensors"};
    for (int i = 0; i < 6; i++) unlink(tmp_path(files[i]));
    rmdir(tmpdir);
    return ts_test_finish();
}
