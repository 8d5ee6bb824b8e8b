/* test_checkpoint.c — training checkpoints (model, optimizer, step, RNG) saved on the CPU and
 * resumed on sim:0 with identical continued training; ts_module_save/load; and the errors. */
#define _POSIX_C_SOURCE 200809L
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
    ts_optim *opt = ts_sgd(net, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
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
    ts_optim *opt2 = ts_sgd(net2, (ts_sgd_opts){.lr = 0.5, .momentum = 0.9});
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

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_checkpoint_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_checkpoint_resume();
    test_module_files();
    const char *files[] = {"ckpt.safetensors", "no_opt.safetensors", "model.safetensors"};
    for (int i = 0; i < 3; i++) unlink(tmp_path(files[i]));
    rmdir(tmpdir);
    return ts_test_finish();
}
