/* bench_rnn.c — nn.LSTM and nn.GRU training steps on the cpu (issue 52's "Modules" goal: >= 1.2x
 * PyTorch's): seq 64, batch 32, input 256, hidden 256, 2 layers, float32, SGD, loss = mean of the
 * output squared. Threads from TS_NUM_THREADS (bench/run_rnn.sh runs 1 and 2). Prints
 * "name ms_per_step" lines; bench_rnn_torch.py is the PyTorch twin.
 * Usage: bench_rnn [quick] [lstm|gru] */
#define BENCH_NAME "bench_rnn"
#include <string.h>

#include "bench_util.h"

enum { T = 64, B = 32, I = 256, H = 256, LAYERS = 2 };

static double bench(bool lstm, int steps, int repeats) {
    ts_manual_seed(0);
    ts_module *m = (lstm ? ts_lstm_new : ts_gru_new)(I, H, (ts_rnn_opts){.num_layers = LAYERS});
    ts_optim *opt = ts_sgd_new(m, (ts_sgd_opts){.lr = 0.01});
    ts_tensor *x = ts_randn(TS_SHAPE(T, B, I), (ts_opts){0});
    die_on_error("setup");
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) { /* round 0 warms up */
        double t0 = now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            ts_optim_zero_grad(opt);
            ts_tensor *y = ts_forward(m, x);
            ts_backward(ts_mean(ts_mul(y, y)));
            ts_optim_step(opt);
            ts_scope_end();
        }
        double ms = (now_s() - t0) / steps * 1e3;
        if (r > 0 && ms < best) best = ms;
    }
    die_on_error(lstm ? "lstm" : "gru");
    ts_release(x);
    ts_optim_free(opt);
    ts_module_free(m);
    return best;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && !strcmp(argv[1], "quick");
    const char *only = argc > 2 ? argv[2] : argc > 1 && !quick ? argv[1] : NULL;
    int steps = quick ? 2 : 5, repeats = quick ? 2 : 3;
    if (!only || !strcmp(only, "lstm")) printf("lstm %.2f\n", bench(true, steps, repeats));
    if (!only || !strcmp(only, "gru")) printf("gru %.2f\n", bench(false, steps, repeats));
    return 0;
}
