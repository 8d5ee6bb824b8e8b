/* bench_offload_overlap.c — optimizer offload's step time against plain training (issue 55 item
 * 5): the GPT-mini of bench_memory_modes (4 layers, width 256, vocabulary 256: 3.3 M parameters)
 * trained with AdamW on batch 4 x 256 tokens on sim:0, plainly and with ts_optim_offload, under a
 * simulated host link (TS_SIM_LINK, default 16GB/s,5us when unset). Per mode: the mean step time
 * (zero_grad, forward, backward, step) over the timed steps after one warm-up step, the link's
 * counters over them, and beside the offloaded line the link-bound floor: the bytes the offload
 * moves per step (every gradient to the host, every weight back) over the bandwidth, the time the
 * copies add if nothing overlaps them.
 * Usage: bench_offload_overlap [threads] [timed steps]. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tessera.h"
#include "tessera/optim_offload.h"
#include "tessera/sim_link.h"

enum { B = 4, T = 256, V = 256 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void step(ts_module *m, ts_optim *o, ts_tensor *tok, int s) {
    const ts_device dev = ts_sim(0);
    ts_scope_begin();
    ts_optim_zero_grad(o);
    ts_tensor *row = ts_select(tok, 0, s);
    ts_tensor *x = ts_to(ts_contiguous(ts_slice(row, 1, 0, T, 1)), dev);
    ts_tensor *y =
        ts_to(ts_reshape(ts_contiguous(ts_slice(row, 1, 1, T + 1, 1)), TS_SHAPE(-1)), dev);
    ts_tensor *out = ts_forward(m, x);
    ts_backward(ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, V)), y));
    ts_optim_step(o);
    ts_scope_end();
}

/* Mean seconds per step; *param_bytes the parameters' bytes; *st the link's counters. */
static double run(bool offload, ts_tensor *tok, int steps, size_t *param_bytes,
                  ts_sim_link_stats *st) {
    const ts_device dev = ts_sim(0);
    ts_manual_seed(3);
    ts_module *m = ts_gpt_new(
        (ts_gpt_config){.vocab_size = V, .context = T, .n_layer = 4, .n_head = 4, .n_embd = 256});
    *param_bytes = 0;
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n; i++) *param_bytes += ts_nbytes(l.tensors[i]);
    ts_tensor_list_free(&l);
    ts_module_to(m, dev);
    ts_optim *o = ts_adamw_new(m, (ts_adam_opts){.lr = 1e-3, .weight_decay = 0.1});
    if (o && offload) ts_optim_offload(o);
    step(m, o, tok, 0); /* warm-up: AdamW's state made */
    ts_sim_link_wait(-1);
    ts_sim_link_reset_stats(-1);
    const double t0 = now_s();
    for (int s = 1; s <= steps && ts_error() == TS_OK; s++) step(m, o, tok, s);
    ts_sim_link_wait(-1); /* the last step's copies in flight count */
    const double t = (now_s() - t0) / steps;
    ts_sim_link_stats_get(0, st);
    ts_optim_free(o);
    ts_module_free(m);
    ts_empty_cache(dev);
    if (ts_error()) {
        fprintf(stderr, "%s\n", ts_error_message());
        return -1;
    }
    return t;
}

int main(int argc, char **argv) {
    if (ts_sim_configure(1, 0) != TS_OK) return fprintf(stderr, "%s\n", ts_error_message()), 1;
    if (!ts_sim_link_get(NULL, NULL) && ts_sim_set_link_str("16GB/s,5us", "default") != TS_OK)
        return fprintf(stderr, "%s\n", ts_error_message()), 1;
    double bw, lat;
    ts_sim_link_get(&bw, &lat);
    ts_set_num_threads(argc > 1 ? atoi(argv[1]) : 1);
    const int steps = argc > 2 ? atoi(argv[2]) : 4;
    ts_manual_seed(17);
    ts_tensor *tok = ts_randint(0, V, TS_SHAPE(steps + 1, B, T + 1), (ts_opts){.dtype = TS_I64});
    printf("GPT-mini (4 layers, width 256, vocabulary 256), AdamW, batch %d x %d tokens, sim:0, "
           "link %.3g GB/s + %.3g us, %d timed steps\n",
           B, T, bw / 1e9, lat * 1e6, steps);
    printf("%-18s %10s %8s %10s %10s %8s %10s %10s\n", "mode", "step ms", "x plain", "MB d2h",
           "MB h2d", "async", "link ms", "wait ms");
    double plain = 0;
    for (int md = 0; md < 2; md++) {
        size_t pb;
        ts_sim_link_stats st = {0};
        const double t = run(md == 1, tok, steps, &pb, &st);
        if (t < 0) return 1;
        if (md == 0) plain = t;
        printf("%-18s %10.1f %8.3f %10.2f %10.2f %8llu %10.2f %10.2f\n",
               md ? "optimizer offload" : "plain", t * 1e3, t / plain, st.bytes_d2h / 1e6 / steps,
               st.bytes_h2d / 1e6 / steps,
               (unsigned long long)st.async_copies / (unsigned long long)steps,
               st.busy_ns / 1e6 / steps, st.wait_ns / 1e6 / steps);
        if (md == 1) {
            const double floor_s = 2.0 * (double)pb / bw;
            printf("link-bound floor: 2 x %.2f MB / %.3g GB/s = %.2f ms per step (plain + floor "
                   "= %.3f x plain)\n",
                   pb / 1e6, bw / 1e9, floor_s * 1e3, (plain + floor_s) / plain);
        }
    }
    ts_release(tok);
    return 0;
}
