/* test_resnet.c — the ResNet builders and blocks: torchvision's parameter counts and names, output
 * shapes, torchvision's init (kaiming_normal_ fan_out, zero_init_residual), the option A shortcut's
 * values and gradients (gradcheck), blocks by hand, data parallel replicas, the mistakes, and
 * allocation failures while a block is built. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

static bool has_key(ts_module *m, const char *name) {
    ts_tensor_list sd = ts_module_state_dict(m);
    bool found = ts_tensor_list_get(&sd, name) != NULL;
    ts_tensor_list_free(&sd);
    return found;
}

static int state_dict_len(ts_module *m) {
    ts_tensor_list sd = ts_module_state_dict(m);
    int n = sd.n;
    ts_tensor_list_free(&sd);
    return n;
}

static void check_shape(ts_tensor *t, ts_shape want) {
    ts_shape s = ts_shape_of(t);
    bool same = t && s.ndim == want.ndim;
    for (int i = 0; same && i < s.ndim; i++) same = s.dims[i] == want.dims[i];
    CHECK(same);
}

/* torchvision's numbers: sum(p.numel() for p in resnetNN().parameters()), len(state_dict()) */
static void test_sizes_and_names(void) {
    ts_module *m = ts_resnet18_new((ts_resnet_config){0});
    CHECK_EQ(ts_module_num_parameters(m), 11689512);
    CHECK_EQ(state_dict_len(m), 122);
    const char *keys[] = {"conv1.weight",
                          "bn1.running_var",
                          "layer1.0.conv1.weight",
                          "layer1.1.bn2.num_batches_tracked",
                          "layer2.0.downsample.0.weight",
                          "layer2.0.downsample.1.running_mean",
                          "layer4.1.conv2.weight",
                          "fc.weight",
                          "fc.bias"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) CHECK(has_key(m, keys[i]));
    CHECK(!has_key(m, "layer1.0.downsample.0.weight")); /* 64 -> 64, stride 1: identity */
    CHECK(!has_key(m, "conv1.bias"));
    check_shape(ts_module_get(m, "conv1.weight"), TS_SHAPE(64, 3, 7, 7));
    check_shape(ts_module_get(m, "layer3.0.conv1.weight"), TS_SHAPE(256, 128, 3, 3));
    check_shape(ts_module_get(m, "layer3.0.downsample.0.weight"), TS_SHAPE(256, 128, 1, 1));
    check_shape(ts_module_get(m, "fc.weight"), TS_SHAPE(1000, 512));
    ts_module_free(m);

    m = ts_resnet34_new((ts_resnet_config){0});
    CHECK_EQ(ts_module_num_parameters(m), 21797672);
    CHECK_EQ(state_dict_len(m), 218);
    CHECK(has_key(m, "layer3.5.bn2.weight") && !has_key(m, "layer3.6.bn2.weight"));
    ts_module_free(m);

    m = ts_resnet50_new((ts_resnet_config){0});
    CHECK_EQ(ts_module_num_parameters(m), 25557032);
    CHECK_EQ(state_dict_len(m), 320);
    /* stride on the 3x3 (v1.5); the first block of layer1 already needs a downsample (64 -> 256) */
    check_shape(ts_module_get(m, "layer1.0.downsample.0.weight"), TS_SHAPE(256, 64, 1, 1));
    check_shape(ts_module_get(m, "layer2.0.conv2.weight"), TS_SHAPE(128, 128, 3, 3));
    check_shape(ts_module_get(m, "layer4.2.conv3.weight"), TS_SHAPE(2048, 512, 1, 1));
    ts_module_free(m);

    /* the bottleneck width: planes * width_per_group / 64 * groups (wide ResNets, ResNeXt) */
    m = ts_resnet50_new((ts_resnet_config){.width = 8, .width_per_group = 128});
    check_shape(ts_module_get(m, "layer1.0.conv2.weight"), TS_SHAPE(16, 16, 3, 3));
    check_shape(ts_module_get(m, "layer1.0.conv3.weight"), TS_SHAPE(32, 16, 1, 1));
    ts_module_free(m);
    m = ts_resnet50_new((ts_resnet_config){.width = 8, .groups = 4, .width_per_group = 4});
    /* width = 8 * 4 / 64 * 4 = 0 with integer division: refused */
    CHECK(m == NULL);
    CHECK_ERR(TS_ERR_ARG);
    m = ts_resnet50_new((ts_resnet_config){.width = 16, .groups = 4, .width_per_group = 32});
    check_shape(ts_module_get(m, "layer1.0.conv2.weight"), TS_SHAPE(32, 8, 3, 3)); /* grouped */
    ts_module_free(m);

    /* He et al.'s resnet20: 0.27M parameters with option A (no shortcut parameters) */
    m = ts_resnet20_new((ts_resnet_config){0});
    CHECK_EQ(ts_module_num_parameters(m), 269722);
    CHECK(!has_key(m, "layer4.0.conv1.weight"));
    char *r = ts_module_repr(m);
    CHECK(r && !strstr(r, "maxpool") && strstr(r, "(layer3): Sequential"));
    free(r);
    CHECK(ts_module_child(m, "layer2.0.downsample") != NULL); /* ShortcutA, parameter-free */
    CHECK(!has_key(m, "layer2.0.downsample.0.weight"));
    check_shape(ts_module_get(m, "conv1.weight"), TS_SHAPE(16, 3, 3, 3));
    check_shape(ts_module_get(m, "fc.weight"), TS_SHAPE(10, 64));
    ts_module_free(m);
    m = ts_resnet20_new((ts_resnet_config){.shortcut_conv = true});
    CHECK_EQ(ts_module_num_parameters(m), 269722 + 16 * 32 + 64 + 32 * 64 + 128);
    check_shape(ts_module_get(m, "layer3.0.downsample.0.weight"), TS_SHAPE(64, 32, 1, 1));
    ts_module_free(m);
    m = ts_resnet_cifar_new(56, (ts_resnet_config){0});
    CHECK(has_key(m, "layer1.8.conv2.weight") && !has_key(m, "layer1.9.conv2.weight"));
    ts_module_free(m);
    CHECK_OK();
}

static void test_forward_shapes_and_repr(void) {
    ts_manual_seed(1);
    ts_scope_begin();
    ts_module *m = ts_resnet18_new((ts_resnet_config){.num_classes = 7, .width = 8});
    check_shape(ts_forward(m, ts_randn(TS_SHAPE(2, 3, 64, 64), (ts_opts){0})), TS_SHAPE(2, 7));
    ts_module_free(m);
    m = ts_resnet18_new(
        (ts_resnet_config){.num_classes = 10, .in_channels = 1, .width = 4, .cifar_stem = true});
    check_shape(ts_module_get(m, "conv1.weight"), TS_SHAPE(4, 1, 3, 3));
    check_shape(ts_forward(m, ts_randn(TS_SHAPE(2, 1, 28, 28), (ts_opts){0})), TS_SHAPE(2, 10));
    char *r = ts_module_repr(m);
    CHECK(r && strstr(r, "(maxpool): Identity()"));
    CHECK(r && strstr(r, "(conv1): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), "
                         "bias=False)"));
    CHECK(r && strstr(r, "(avgpool): AdaptiveAvgPool2d(output_size=(1, 1))"));
    free(r);
    ts_module_free(m);
    m = ts_resnet50_new((ts_resnet_config){.width = 4, .num_classes = 3});
    check_shape(ts_forward(m, ts_randn(TS_SHAPE(2, 3, 32, 32), (ts_opts){0})), TS_SHAPE(2, 3));
    r = ts_module_repr(m);
    CHECK(r && strstr(r, "(layer1): Sequential(\n    (0): Bottleneck(\n"));
    free(r);
    ts_module_free(m);
    m = ts_resnet20_new((ts_resnet_config){.width = 4});
    check_shape(ts_forward(m, ts_randn(TS_SHAPE(3, 3, 32, 32), (ts_opts){0})), TS_SHAPE(3, 10));
    r = ts_module_repr(m);
    CHECK(r && strstr(r, "(downsample): ShortcutA(4, 8, stride=2)"));
    free(r);
    /* a wrong number of input channels: conv1's error, naming the shapes */
    CHECK(ts_forward(m, ts_randn(TS_SHAPE(1, 1, 32, 32), (ts_opts){0})) == NULL);
    CHECK(strstr(ts_error_message(), "conv2d") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_module_free(m);
    ts_scope_end();
    CHECK_OK();
}

/* sample standard deviation of a tensor */
static double std_of(ts_tensor *t) {
    ts_scope_begin();
    double mean = ts_item(ts_mean(t));
    double var = ts_item(ts_mean(ts_square(ts_sub_scalar(t, mean))));
    ts_scope_end();
    return sqrt(var);
}

static double max_abs(ts_tensor *t) {
    ts_scope_begin();
    double v = ts_item(ts_max(ts_abs(t)));
    ts_scope_end();
    return v;
}

static void test_init(void) {
    ts_manual_seed(3);
    ts_module *m = ts_resnet18_new((ts_resnet_config){0});
    /* kaiming_normal_ fan_out relu: std sqrt(2 / (out * kh * kw)); 2.4M draws give ~0.05% */
    ts_tensor *w = ts_module_get(m, "layer4.0.conv2.weight");
    CHECK_NEAR(std_of(w), sqrt(2.0 / (512 * 9)), 0.01 * sqrt(2.0 / (512 * 9)));
    w = ts_module_get(m, "layer3.0.downsample.0.weight");
    CHECK_NEAR(std_of(w), sqrt(2.0 / 256), 0.01 * sqrt(2.0 / 256));
    /* BatchNorm 1 and 0; fc keeps Linear's default U(-1/sqrt(512), 1/sqrt(512)) */
    CHECK_EQ(max_abs(ts_module_get(m, "layer2.1.bn2.bias")), 0);
    ts_scope_begin();
    CHECK_EQ(ts_item(ts_min(ts_module_get(m, "layer2.1.bn2.weight"))), 1);
    ts_scope_end();
    CHECK(max_abs(ts_module_get(m, "fc.weight")) <= 1 / sqrt(512.0));
    CHECK(max_abs(ts_module_get(m, "fc.weight")) > 0.9 / sqrt(512.0));
    ts_module_free(m);

    m = ts_resnet18_new((ts_resnet_config){.width = 4, .zero_init_residual = true});
    CHECK_EQ(max_abs(ts_module_get(m, "layer1.0.bn2.weight")), 0);
    CHECK_EQ(max_abs(ts_module_get(m, "layer4.1.bn2.weight")), 0);
    CHECK_EQ(max_abs(ts_module_get(m, "layer1.0.bn1.weight")), 1);
    CHECK_EQ(max_abs(ts_module_get(m, "layer2.0.downsample.1.weight")), 1);
    ts_module_free(m);
    m = ts_resnet50_new((ts_resnet_config){.width = 4, .zero_init_residual = true});
    CHECK_EQ(max_abs(ts_module_get(m, "layer3.2.bn3.weight")), 0);
    CHECK_EQ(max_abs(ts_module_get(m, "layer3.2.bn2.weight")), 1);
    ts_module_free(m);

    /* the init function itself */
    ts_tensor *t = ts_empty(TS_SHAPE(300, 200), (ts_opts){0});
    CHECK(ts_init_kaiming_normal_(t, 0, TS_FAN_IN) == t);
    CHECK_NEAR(std_of(t), sqrt(2.0 / 200), 0.02 * sqrt(2.0 / 200));
    ts_init_kaiming_normal_(t, 1.0, TS_FAN_OUT); /* leaky_relu gain sqrt(2 / (1 + 1)) = 1 */
    CHECK_NEAR(std_of(t), sqrt(1.0 / 300), 0.02 * sqrt(1.0 / 300));
    CHECK(ts_init_kaiming_normal_(t, 0, (ts_fan_mode)7) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(t);
    t = ts_empty(TS_SHAPE(5), (ts_opts){0});
    CHECK(ts_init_kaiming_normal_(t, 0, TS_FAN_IN) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_release(t);
    CHECK_OK();
}

/* Option A: channels [front zeros | x[:, :, ::2, ::2] | back zeros], its gradient the transpose. */
static ts_module *shortcut;
static ts_tensor *shortcut_fn(ts_tensor *const *in, int n, void *ctx) {
    return ts_forward(shortcut, in[0]);
}

static void test_option_a(void) {
    ts_module *m = ts_resnet20_new((ts_resnet_config){.width = 4});
    shortcut = ts_module_child(m, "layer2.0.downsample"); /* 4 -> 8 channels, stride 2 */
    ts_scope_begin();
    ts_tensor *x = ts_arange(0, 2 * 4 * 5 * 5, 1, (ts_opts){.dtype = TS_F32});
    x = ts_reshape(x, TS_SHAPE(2, 4, 5, 5));
    ts_tensor *y = ts_forward(shortcut, x);
    check_shape(y, TS_SHAPE(2, 8, 3, 3));
    float out[2 * 8 * 3 * 3];
    ts_copy_to_host(y, out, sizeof out);
    bool ok = true;
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    float want =
                        c < 2 || c >= 6 ? 0 : (float)(((b * 4 + c - 2) * 5 + 2 * i) * 5 + 2 * j);
                    ok &= out[((b * 8 + c) * 3 + i) * 3 + j] == want;
                }
    CHECK(ok);
    /* gradients by central differences in float64 */
    ts_tensor *xd =
        ts_randn(TS_SHAPE(2, 4, 6, 6), (ts_opts){.dtype = TS_F64, .requires_grad = true});
    CHECK(ts_gradcheck(shortcut_fn, NULL, &xd, 1, (ts_gradcheck_opts){0}));
    /* 8 -> 16 channels in layer3 */
    shortcut = ts_module_child(m, "layer3.0.downsample");
    ts_tensor *x8 =
        ts_randn(TS_SHAPE(1, 8, 4, 4), (ts_opts){.dtype = TS_F64, .requires_grad = true});
    CHECK(ts_gradcheck(shortcut_fn, NULL, &x8, 1, (ts_gradcheck_opts){0}));
    /* a wrong input: named */
    CHECK(ts_forward(shortcut, xd) == NULL);
    CHECK(strstr(ts_error_message(), "ShortcutA: expected an input [N, 8, H, W]") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* A block by hand: with zero_init_residual-style bn2 weight 0 in eval mode the residual branch is
 * bn2's bias, so a BasicBlock is relu(x + bias); a Bottleneck with a downsample adds the branch. */
static void test_blocks(void) {
    ts_manual_seed(5);
    ts_scope_begin();
    ts_module *b = ts_basic_block_new(4, 4, 1, NULL);
    ts_init_zeros_(ts_module_get(b, "bn2.weight"));
    ts_init_uniform_(ts_module_get(b, "bn2.bias"), -1, 1);
    ts_module_eval(b);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 4, 5, 5), (ts_opts){0});
    ts_tensor *want =
        ts_relu(ts_add(x, ts_reshape(ts_module_get(b, "bn2.bias"), TS_SHAPE(1, 4, 1, 1))));
    CHECK(max_abs(ts_sub(ts_forward(b, x), want)) == 0);
    ts_module_free(b);

    /* the downsample branch: with conv weights zero, the output is relu(downsample(x) + bn3 bias)
     */
    b = ts_bottleneck_new(4, 2, 2, ts_resnet_downsample_new(4, 8, 2), 0, 0);
    ts_init_zeros_(ts_module_get(b, "conv3.weight"));
    ts_module_eval(b);
    ts_tensor *y = ts_forward(b, x);
    check_shape(y, TS_SHAPE(2, 8, 3, 3));
    ts_tensor *d = ts_forward(ts_module_child(b, "downsample"), x);
    CHECK(max_abs(ts_sub(y, ts_relu(d))) < 1e-6);
    /* and training runs backward through both branches */
    ts_module_train(b, true);
    ts_tensor *xg = ts_randn(TS_SHAPE(2, 4, 5, 5), (ts_opts){.requires_grad = true});
    ts_backward(ts_sum(ts_forward(b, xg)));
    CHECK(ts_grad(xg) != NULL && ts_grad(ts_module_get(b, "downsample.0.weight")) != NULL);
    CHECK(ts_grad(ts_module_get(b, "conv1.weight")) != NULL);
    ts_module_free(b);
    ts_scope_end();
    CHECK_OK();
}

/* nn.DataParallel of a ResNet: the replicas' block structs point at their own children, so eval
 * over sim:0 and sim:1 gives the single-device output. */
static void test_data_parallel(void) {
    if (ts_sim_configure(2, 0) != TS_OK) {
        ts_error_clear();
        return;
    }
    ts_manual_seed(9);
    ts_module *m = ts_module_to(ts_resnet20_new((ts_resnet_config){.width = 4}), ts_sim(0));
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(4, 3, 16, 16), (ts_opts){0}), ts_sim(0));
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_tensor *one = ts_forward(m, x);
    ts_no_grad_end();
    ts_keep(one);
    ts_keep(x);
    ts_scope_end();
    ts_device devs[2] = {ts_sim(0), ts_sim(1)};
    ts_module *dp = ts_data_parallel_new(m, devs, 2, ts_sim(0));
    ts_scope_begin();
    ts_module_eval(dp);
    ts_no_grad_begin();
    ts_tensor *two = ts_forward(dp, x);
    ts_no_grad_end();
    CHECK(two && max_abs(ts_sub(one, two)) <= 1e-6 * max_abs(one));
    ts_scope_end();
    ts_release(one);
    ts_release(x);
    ts_module_free(dp);
    CHECK_OK();
}

static void test_mistakes(void) {
    CHECK(ts_resnet_cifar_new(21, (ts_resnet_config){0}) == NULL);
    CHECK(strstr(ts_error_message(), "resnet_cifar: depth must be 6n + 2") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet_cifar_new(2, (ts_resnet_config){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet18_new((ts_resnet_config){.groups = 2}) == NULL);
    CHECK(strstr(ts_error_message(), "BasicBlock only supports groups=1") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet18_new((ts_resnet_config){.width = -4}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet_new(TS_BASIC_BLOCK, (const int[]){2, 0, 2, 2}, (ts_resnet_config){0}) == NULL);
    CHECK(strstr(ts_error_message(), "layers[1] must be at least 1") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet_new((ts_resnet_block)5, (const int[]){1, 1, 1, 1}, (ts_resnet_config){0}) ==
          NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_resnet_new(TS_BASIC_BLOCK, NULL, (ts_resnet_config){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* a refused block frees the downsample it was given (LSan would see a leak) */
    CHECK(ts_basic_block_new(0, 4, 1, ts_resnet_downsample_new(4, 4, 1)) == NULL);
    CHECK(strstr(ts_error_message(), "BasicBlock: inplanes, planes and stride must be positive") !=
          NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_bottleneck_new(4, 1, 1, ts_resnet_downsample_new(4, 4, 1), 1, 16) == NULL);
    CHECK(strstr(ts_error_message(), "width of at least 1") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_bottleneck_new(4, 4, 0, NULL, 0, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* a downsample that already belongs to a module stays with it */
    ts_module *owner = ts_basic_block_new(4, 8, 2, ts_resnet_downsample_new(4, 8, 2));
    CHECK(ts_basic_block_new(-1, 8, 2, ts_module_child(owner, "downsample")) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_get(owner, "downsample.0.weight") != NULL);
    ts_module_free(owner);
    CHECK_OK();
}

/* Allocation failures while a block is built (fault_sweep.h): every failing allocation, a child's
 * included, makes the builder return NULL with the error set (never a block with a child missing)
 * and leaks nothing, the downsample it was given included. */
typedef struct {
    bool bottleneck, returned;
    ts_status err;
} block_sweep;

static void *block_sweep_setup_basic(void) { return calloc(1, sizeof(block_sweep)); }
static void *block_sweep_setup_bottleneck(void) {
    block_sweep *s = calloc(1, sizeof *s);
    if (s) s->bottleneck = true;
    return s;
}

static bool block_sweep_run(void *p) {
    block_sweep *s = p;
    ts_module *ds = ts_resnet_downsample_new(4, 8, 2);
    if (!ds) { /* the downsample's own failure, before the block's */
        s->returned = false;
        s->err = ts_error();
        return false;
    }
    ts_module *m =
        s->bottleneck ? ts_bottleneck_new(4, 2, 2, ds, 0, 0) : ts_basic_block_new(4, 8, 2, ds);
    s->returned = m != NULL;
    s->err = ts_error();
    ts_module_free(m);
    return s->returned && s->err == TS_OK;
}

static void block_sweep_check(void *p, bool ok) {
    block_sweep *s = p;
    (void)ok;
    CHECK(s->returned == (s->err == TS_OK));
}

static void test_block_faults(void) {
    ts_sweep_case c = {.name = "BasicBlock with downsample",
                       .setup = block_sweep_setup_basic,
                       .run = block_sweep_run,
                       .teardown = free,
                       .check = block_sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 2000);
    CHECK(st.errors > 0 && st.oom == st.errors);
    c.name = "Bottleneck with downsample";
    c.setup = block_sweep_setup_bottleneck;
    st = ts_fault_sweep(&c, 2000);
    CHECK(st.errors > 0 && st.oom == st.errors);
}

int main(void) {
    test_sizes_and_names();
    test_forward_shapes_and_repr();
    test_init();
    test_option_a();
    test_blocks();
    test_data_parallel();
    test_mistakes();
    test_block_faults();
    return ts_test_finish();
}
