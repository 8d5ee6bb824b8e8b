/* model_parallel.c — "assign specific layers to specific GPUs" (seed 001): a two-stage network
 * whose first stage lives on one device and whose second stage lives on another, with ts_to between
 * them. Backward follows the copies back across the devices; each optimizer update happens where
 * its parameter lives. Runs on cuda:0 + cuda:1 when there are two GPUs, else on sim:0 + sim:1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>

/* PyTorch:
 *   class TwoStage(nn.Module):
 *       def __init__(self):
 *           super().__init__()
 *           self.stage1 = nn.Sequential(nn.Linear(8, 32), nn.ReLU()).to('cuda:0')
 *           self.stage2 = nn.Linear(32, 3).to('cuda:1')
 *       def forward(self, x):
 *           x = self.stage1(x.to('cuda:0'))
 *           return self.stage2(x.to('cuda:1'))                                                  */
typedef struct two_stage {
    ts_module base;
    ts_module *stage1, *stage2;
    ts_device dev1, dev2;
} two_stage;

static ts_tensor *two_stage_forward(ts_module *self, ts_tensor *x) {
    two_stage *m = (two_stage *)self;
    ts_tensor *h = ts_forward(m->stage1, ts_to(x, m->dev1));
    return ts_forward(m->stage2, ts_to(h, m->dev2)); /* the activations cross devices here */
}

static ts_module *two_stage_new(ts_device dev1, ts_device dev2) {
    two_stage *m = ts_module_alloc(sizeof *m, "TwoStage", two_stage_forward);
    if (!m) return NULL;
    m->dev1 = dev1;
    m->dev2 = dev2;
    ts_device_push(dev1); /* layers are made where they will run: `with torch.device(...)` */
    m->stage1 =
        ts_module_add(&m->base, "stage1",
                      ts_sequential_new(2, (ts_module *[]){ts_linear_new(8, 32), ts_relu_new()}));
    ts_device_pop();
    ts_device_push(dev2);
    m->stage2 = ts_module_add(&m->base, "stage2", ts_linear_new(32, 3));
    ts_device_pop();
    return &m->base;
}

/* Three classes by the sign pattern of two sums of the features: learnable, not trivial. */
static void make_batch(int step, ts_tensor **x, ts_tensor **y) {
    ts_manual_seed(100 + (uint64_t)step);
    *x = ts_randn(TS_SHAPE(64, 8), (ts_opts){.device = ts_cpu()});
    ts_tensor *a = ts_gt_scalar(ts_sum_dim(ts_narrow(*x, 1, 0, 4), 1, false), 0);
    ts_tensor *b = ts_gt_scalar(ts_sum_dim(ts_narrow(*x, 1, 4, 4), 1, false), 0);
    *y = ts_add(ts_to_dtype(a, TS_I64), ts_to_dtype(ts_logical_and(a, b), TS_I64));
}

int main(void) {
    ts_device dev1, dev2;
    if (ts_device_count(TS_CUDA) >= 2) {
        dev1 = ts_cuda(0);
        dev2 = ts_cuda(1);
    } else {
        if (ts_device_count(TS_SIM) < 2) ts_sim_configure(2, 0);
        dev1 = ts_sim(0);
        dev2 = ts_sim(1);
        printf("(fewer than two GPUs here: the stages run on sim:0 and sim:1, host-simulated "
               "devices)\n");
    }
    ts_manual_seed(0);
    ts_module *net = two_stage_new(dev1, dev2);
    if (!net) {
        fprintf(stderr, "error: %s\n", ts_error_message());
        return 1;
    }
    char *repr = ts_module_repr(net);
    printf("%s\n", repr);
    free(repr);
    printf("stage1 on %s, stage2 on %s\n",
           ts_device_str(ts_device_of(ts_module_get(net, "stage1.0.weight"))),
           ts_device_str(ts_device_of(ts_module_get(net, "stage2.weight"))));

    ts_optim *opt = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    double first = NAN, last = NAN;
    bool grads_home = true;
    for (int step = 0; step < 30; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        make_batch(step, &x, &y);
        ts_tensor *out = ts_forward(net, x); /* on dev2 */
        ts_tensor *loss = ts_cross_entropy(out, ts_to(y, dev2));
        ts_optim_zero_grad(opt);
        ts_backward(loss);
        /* each gradient is on its parameter's device */
        grads_home &=
            ts_device_equal(ts_device_of(ts_grad(ts_module_get(net, "stage1.0.weight"))), dev1) &&
            ts_device_equal(ts_device_of(ts_grad(ts_module_get(net, "stage2.bias"))), dev2);
        ts_optim_step(opt);
        double l = ts_item(loss);
        if (step == 0) first = l;
        last = l;
        if (step % 5 == 0 || step == 29) printf("step %2d  loss %.4f\n", step, l);
        ts_scope_end();
        if (ts_error()) break;
    }
    ts_optim_free(opt);
    ts_module_free(net);
    if (ts_error()) {
        fprintf(stderr, "error: %s\n", ts_error_message());
        return 1;
    }
    bool ok = grads_home && last < first * 0.8;
    printf("loss %.4f -> %.4f; gradients on their parameters' devices: %s\n", first, last,
           grads_home ? "yes" : "no");
    return ok ? 0 : 1;
}
