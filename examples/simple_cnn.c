/* simple_cnn.c — seed 000: the SimpleCNN of the CIFAR-10 loop, moved to the device and trained with
 * SGD (lr 0.001, momentum 0.9). The CIFAR-10 reader arrives with the data-pipeline issue; until
 * then the batches are synthetic images of CIFAR's shape, made on the cpu and copied over. */
#include "common_device.h"

typedef struct {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} simple_cnn;

static ts_tensor *simple_cnn_forward(ts_module *self, ts_tensor *x) {
    simple_cnn *m = (simple_cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_view(x, TS_SHAPE(-1, 16 * 5 * 5));
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}

static ts_module *simple_cnn_new(void) {
    simple_cnn *m = ts_module_alloc(sizeof *m, "SimpleCNN", simple_cnn_forward);
    m->conv1 = ts_module_add(&m->base, "conv1", ts_conv2d_new(3, 6, 5, (ts_conv2d_opts){0}));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(16 * 5 * 5, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, 10));
    return &m->base;
}

int main(void) {
    ts_device dev = example_device();
    ts_manual_seed(0);
    ts_module *net = ts_module_to(simple_cnn_new(), dev);
    ts_module_summary(net);
    ts_optim *opt = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.001, .momentum = 0.9});
    /* four fixed "mini-batches" of 16 images, normalised to [-1, 1] like the seed's transform */
    ts_scope_begin(); /* keep only the final images, not the intermediate tensors */
    ts_tensor *images = ts_keep(
        ts_sub_scalar(ts_mul_scalar(ts_rand(TS_SHAPE(4, 16, 3, 32, 32), (ts_opts){0}), 2), 1));
    ts_scope_end();
    ts_tensor *labels = ts_randint(0, 10, TS_SHAPE(4, 16), (ts_opts){0});
    double first = 0, last = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        double running_loss = 0;
        for (int i = 0; i < 4; i++) {
            ts_scope_begin();
            ts_tensor *inputs = ts_to(ts_select(images, 0, i), dev);
            ts_tensor *targets = ts_to(ts_select(labels, 0, i), dev);
            ts_optim_zero_grad(opt);
            ts_tensor *loss = ts_cross_entropy(ts_forward(net, inputs), targets);
            ts_backward(loss);
            ts_optim_step(opt);
            double l = ts_item(loss);
            ts_scope_end();
            EXAMPLE_CHECK();
            running_loss += l;
            if (epoch == 0 && i == 0) first = l;
            last = l;
        }
        printf("[Epoch: %d] mean loss: %.4f\n", epoch + 1, running_loss / 4);
    }
    printf("Finished Training (first loss %.4f, last %.4f)\n", first, last);
    ts_release(images);
    ts_release(labels);
    ts_optim_free(opt);
    ts_module_free(net);
    return ts_error() ? 1 : 0;
}
