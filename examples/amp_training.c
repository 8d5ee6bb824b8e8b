/* amp_training.c — seed 001's mixed-precision program: SimpleNN (784-128-10), SGD lr 0.01, autocast
 * around the forward pass and the loss, and a GradScaler:
 *
 *     with autocast():
 *         output = model(input_tensor)
 *         loss = criterion(output, target_tensor)
 *     scaler.scale(loss).backward()
 *     scaler.step(optimizer)
 *     scaler.update()
 *
 * on cuda:0 when there is one, else on sim:0, else on the cpu. A few iterations show the loss, the
 * scale and whether each step ran: float16 gradients that overflow make the scaler skip the step
 * and halve the scale, as PyTorch's does. */
#include "common_device.h"

typedef struct {
    ts_module base;
    ts_module *fc1, *fc2;
} simple_nn;

static ts_tensor *simple_nn_forward(ts_module *self, ts_tensor *x) {
    simple_nn *m = (simple_nn *)self;
    x = ts_relu(ts_forward(m->fc1, x));
    return ts_forward(m->fc2, x);
}

static ts_module *simple_nn_new(void) {
    simple_nn *m = ts_module_alloc(sizeof *m, "SimpleNN", simple_nn_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(784, 128));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(128, 10));
    return &m->base;
}

/* The seed says "cuda"; without a GPU a simulated device stands in, and without one the cpu. */
static ts_device pick_device(void) {
    if (ts_cuda_is_available()) return ts_cuda(0);
    if (ts_device_count(TS_SIM) > 0 || ts_sim_configure(1, 0) == TS_OK) {
        printf("(no GPU here: running the 'cuda' parts on sim:0, a host-simulated device)\n");
        return ts_sim(0);
    }
    ts_error_clear();
    printf("(no GPU and no simulated device: running on the cpu)\n");
    return ts_cpu();
}

#define STEPS 8

int main(void) {
    ts_device dev = pick_device();
    ts_manual_seed(0);
    ts_module *model = ts_module_to(simple_nn_new(), dev);
    ts_optim *optimizer = ts_sgd_new(model, (ts_sgd_opts){.lr = 0.01});
    ts_grad_scaler *scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0}); /* PyTorch's defaults */
    EXAMPLE_CHECK();

    /* dummy input and target, made on the cpu and moved to the device (kept past the scope) */
    ts_scope_begin();
    ts_tensor *input = ts_retain(ts_to(ts_randn(TS_SHAPE(64, 784), (ts_opts){0}), dev));
    ts_tensor *target = ts_retain(ts_to(ts_randint(0, 10, TS_SHAPE(64), (ts_opts){0}), dev));
    ts_scope_end();
    /* torch.cuda.amp.autocast() computes in float16 */
    printf("SimpleNN on %s, autocast float16, GradScaler(init_scale=%.0f)\n", ts_device_str(dev),
           ts_grad_scaler_get_scale(scaler));

    double first = 0, last = 0;
    int steps_taken = 0;
    for (int it = 0; it < STEPS; it++) {
        ts_scope_begin();
        ts_optim_zero_grad(optimizer);
        ts_autocast_begin(dev.type, TS_F16);
        ts_tensor *output = ts_forward(model, input);
        ts_tensor *loss = ts_cross_entropy(output, target);
        ts_autocast_end();

        ts_backward(ts_grad_scaler_scale(scaler, loss));
        double scale = ts_grad_scaler_get_scale(scaler); /* the scale this step used */
        bool stepped = false;
        ts_grad_scaler_step(scaler, optimizer, &stepped);
        ts_grad_scaler_update(scaler);

        double l = ts_item(loss);
        ts_scope_end();
        EXAMPLE_CHECK();
        printf("iteration %d: loss %.4f  scale %-7.0f %s\n", it + 1, l, scale,
               stepped ? "step" : "skipped (Inf/NaN gradients: the scale backs off)");
        if (it == 0) first = l;
        last = l;
        steps_taken += stepped;
    }
    printf("scale after %d iterations: %.0f (growth tracker %d)\n", STEPS,
           ts_grad_scaler_get_scale(scaler), ts_grad_scaler_growth_tracker(scaler));

    ts_release(input);
    ts_release(target);
    ts_grad_scaler_free(scaler);
    ts_optim_free(optimizer);
    ts_module_free(model);
    EXAMPLE_CHECK();
    /* training must have happened: some steps ran and the loss went down */
    if (steps_taken == 0 || !(last < first)) {
        fprintf(stderr, "error: %d of %d steps ran, loss %.4f -> %.4f\n", steps_taken, STEPS, first,
                last);
        return 1;
    }
    return 0;
}
