/* data_parallel.c — seed 003's program: nn.DataParallel(model), then the usual loop over a data
 * loader with a criterion and SGD. Each batch is split over the devices, the replicas run in
 * threads, the outputs come back to the first device and backward sums the gradients there. Runs
 * over cuda:0..N-1 when there are GPUs, else over sim:0 and sim:1 (host-simulated devices). */
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>

#define FEATURES 20
#define CLASSES  4
#define SAMPLES  1024

/* class MyModel(nn.Module): fc1 -> ReLU -> fc2 */
typedef struct my_model {
    ts_module base;
    ts_module *fc1, *fc2;
} my_model;

static ts_tensor *my_model_forward(ts_module *self, ts_tensor *x) {
    my_model *m = (my_model *)self;
    return ts_forward(m->fc2, ts_relu(ts_forward(m->fc1, x)));
}

static ts_module *my_model_new(void) {
    my_model *m = ts_module_alloc(sizeof *m, "MyModel", my_model_forward);
    if (!m) return NULL;
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(FEATURES, 64));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(64, CLASSES));
    return &m->base;
}

/* Four Gaussian clusters in 20 dimensions: x = centre[label] + noise. */
static ts_dataset *make_dataset(void) {
    ts_scope_begin();
    ts_manual_seed(1);
    ts_tensor *centres = ts_mul_scalar(ts_randn(TS_SHAPE(CLASSES, FEATURES), (ts_opts){0}), 0.45);
    ts_tensor *labels = ts_randint(0, CLASSES, TS_SHAPE(SAMPLES), (ts_opts){0});
    ts_tensor *x = ts_add(ts_index_select(centres, 0, labels),
                          ts_randn(TS_SHAPE(SAMPLES, FEATURES), (ts_opts){0}));
    ts_dataset *d = ts_tensor_dataset_new(x, labels);
    ts_scope_end();
    return d;
}

int main(void) {
    ts_device devices[16];
    int n = ts_device_count(TS_CUDA);
    if (n > 16) n = 16;
    for (int i = 0; i < n; i++) devices[i] = ts_cuda(i);
    if (n == 0) {
        if (ts_device_count(TS_SIM) < 2) ts_sim_configure(2, 0);
        n = 2;
        devices[0] = ts_sim(0);
        devices[1] = ts_sim(1);
        printf("(no GPU here: data parallel over sim:0 and sim:1, host-simulated devices)\n");
    }

    ts_manual_seed(0);
    ts_module *model = ts_module_to(my_model_new(), devices[0]); /* MyModel().to('cuda:0') */
    model = ts_data_parallel_new(model, devices, n, devices[0]); /* nn.DataParallel(model) */
    ts_dataset *data = make_dataset();
    ts_loader *loader = ts_loader_new(
        data, (ts_loader_opts){.batch_size = 64, .shuffle = true, .workers = 2, .seed = 42});
    ts_optim *opt = ts_sgd_new(model, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9});
    if (!model || !loader || !opt) {
        fprintf(stderr, "error: %s\n", ts_error_message());
        return 1;
    }
    char *repr = ts_module_repr(model);
    printf("%s\nover %d devices:", repr, n);
    for (int i = 0; i < n; i++) printf(" %s", ts_device_str(devices[i]));
    printf("\n");
    free(repr);

    double first = 0, last = 0;
    for (int epoch = 0; epoch < 4 && !ts_error(); epoch++) {
        double sum = 0;
        int64_t batches = 0, correct = 0, seen = 0;
        ts_batch b;
        while (ts_loader_next(loader, &b)) {
            ts_scope_begin();
            ts_tensor *inputs = ts_to(b.x, devices[0]), *labels = ts_to(b.y, devices[0]);
            ts_tensor *outputs = ts_forward(model, inputs); /* scattered, run, gathered */
            ts_tensor *loss = ts_cross_entropy(outputs, labels);
            ts_optim_zero_grad(opt);
            ts_backward(loss);
            ts_optim_step(opt);
            sum += ts_item(loss);
            correct += (int64_t)ts_item(ts_sum(ts_eq(ts_argmax_dim(outputs, 1, false), labels)));
            seen += ts_size(labels, 0);
            batches++;
            ts_scope_end();
            if (ts_error()) break;
        }
        if (ts_error() || batches == 0) break;
        double avg = sum / (double)batches;
        if (epoch == 0) first = avg;
        last = avg;
        printf("epoch %d  loss %.4f  accuracy %.1f%%\n", epoch, avg,
               100.0 * (double)correct / (double)seen);
    }
    ts_optim_free(opt);
    ts_loader_free(loader);
    ts_dataset_free(data);
    ts_module_free(model);
    if (ts_error()) {
        fprintf(stderr, "error: %s\n", ts_error_message());
        return 1;
    }
    return last < first * 0.75 ? 0 : 1;
}
