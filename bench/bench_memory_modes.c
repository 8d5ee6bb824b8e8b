/* bench_memory_modes.c — device memory of each way of training a model bigger than the device
 * (issue 55): a GPT-mini (4 layers, width 256, vocabulary 256: 3.3 M parameters) trained with
 * AdamW on batch 4 x 256 tokens on sim:0 (every byte counted, no cap), plainly and with activation
 * checkpointing (every block, and every block by sublayer), activation offload (save_on_cpu,
 * pinned, prefetch 2), weight streaming (prefetch 1), optimizer offload, and streaming +
 * checkpointing. Per mode: the peak of sim:0's allocated memory over steps 2 and 3 (after the
 * first step made AdamW's state), what stays allocated between steps, the peak against plain
 * training's and, where the weights, gradients and moments all stay on the device, the
 * activations (the peak less those four) and how many times fewer they are than plain training's.
 * Usage: bench_memory_modes [threads]. */
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"
#include "tessera/optim_offload.h"
#include "tessera/saved_hooks.h"
#include "tessera/weight_stream.h"

enum { B = 4, T = 256, V = 256, STEPS = 3 };

typedef enum { PLAIN, CKPT, CKPT_SUB, ACT_OFFLOAD, STREAM, OPT_OFFLOAD, STREAM_CKPT, N_MODES } mode;
static const char *const names[N_MODES] = {"plain",
                                           "checkpointing (every block)",
                                           "checkpointing (by sublayer)",
                                           "activation offload",
                                           "weight streaming (prefetch 1)",
                                           "optimizer offload",
                                           "streaming + checkpointing"};

static int run(mode md, ts_tensor *tok, size_t *peak, size_t *between, size_t *params) {
    const ts_device dev = ts_sim(0);
    ts_manual_seed(3);
    ts_module *m = ts_gpt_new(
        (ts_gpt_config){.vocab_size = V, .context = T, .n_layer = 4, .n_head = 4, .n_embd = 256});
    if (!m) return -1;
    *params = 0;
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n; i++) *params += ts_nbytes(l.tensors[i]);
    ts_tensor_list_free(&l);
    if (md == STREAM || md == STREAM_CKPT)
        ts_module_stream(m, dev, (ts_stream_opts){.prefetch = 1});
    else
        ts_module_to(m, dev);
    if (md == CKPT || md == STREAM_CKPT) ts_gpt_checkpoint_blocks(m, 1);
    if (md == CKPT_SUB) ts_gpt_checkpoint_sublayers(m, 1);
    ts_optim *o = ts_adamw_new(m, (ts_adam_opts){.lr = 1e-3, .weight_decay = 0.1});
    if (o && md == OPT_OFFLOAD) ts_optim_offload(o);
    for (int s = 0; s < STEPS && o && ts_error() == TS_OK; s++) {
        if (s == 1) ts_memory_reset_peak(dev);
        ts_scope_begin();
        ts_optim_zero_grad(o);
        ts_tensor *row = ts_select(tok, 0, s);
        ts_tensor *x = ts_to(ts_contiguous(ts_slice(row, 1, 0, T, 1)), dev);
        ts_tensor *y =
            ts_to(ts_reshape(ts_contiguous(ts_slice(row, 1, 1, T + 1, 1)), TS_SHAPE(-1)), dev);
        if (md == ACT_OFFLOAD)
            ts_save_on_cpu_begin((ts_save_on_cpu_opts){.pin_memory = true, .prefetch = 2});
        ts_tensor *out = ts_forward(m, x);
        if (md == ACT_OFFLOAD) ts_save_on_cpu_end();
        ts_backward(ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, V)), y));
        ts_optim_step(o);
        ts_scope_end();
    }
    ts_optim_zero_grad(o);
    ts_mem_stats ms;
    ts_memory_stats(dev, &ms);
    *peak = ms.peak_allocated;
    *between = ms.allocated;
    ts_optim_free(o);
    ts_module_free(m);
    if (ts_error()) {
        fprintf(stderr, "%s: %s\n", names[md], ts_error_message());
        return -1;
    }
    ts_empty_cache(dev);
    return 0;
}

int main(int argc, char **argv) {
    if (ts_sim_configure(1, 0) != TS_OK) return fprintf(stderr, "%s\n", ts_error_message()), 1;
    ts_set_num_threads(argc > 1 ? atoi(argv[1]) : 1);
    ts_manual_seed(17);
    ts_tensor *tok = ts_randint(0, V, TS_SHAPE(STEPS, B, T + 1), (ts_opts){.dtype = TS_I64});
    size_t plain = 0;
    double plain_act = 0;
    printf("GPT-mini (4 layers, width 256, vocabulary 256), AdamW, batch %d x %d tokens, sim:0\n",
           B, T);
    printf("%-30s %12s %12s %8s %10s %8s\n", "mode", "peak MiB", "between MiB", "peak/plain",
           "activ. MiB", "fewer");
    for (int md = 0; md < N_MODES; md++) {
        size_t peak, between, params;
        if (run((mode)md, tok, &peak, &between, &params) != 0) return 1;
        if (md == PLAIN) {
            plain = peak;
            printf("(parameters %.2f MiB)\n", params / 1048576.0);
        }
        printf("%-30s %12.2f %12.2f %8.2f", names[md], peak / 1048576.0, between / 1048576.0,
               (double)peak / (double)plain);
        /* activations: the peak less the weights, gradients and AdamW's two moments, where all
         * four stay on the device */
        const double act = ((double)peak - 4.0 * (double)params) / 1048576.0;
        if (md == PLAIN) plain_act = act;
        if (md == PLAIN || md == CKPT || md == CKPT_SUB || md == ACT_OFFLOAD)
            printf(" %10.2f %7.2fx", act, plain_act / act);
        printf("\n");
    }
    ts_release(tok);
    return 0;
}
