/* test_trainer_gpt.c — the `tessera` command's language model: --model gpt on --data text,
 * generate (greedy and sampled), eval, --grad-accum against the whole batch, --time-limit, and the
 * mistakes. The harness: support/trainer_run.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_run.h"
#include "ts_test.h"

/* --model gpt on --data text: a corpus whose next byte follows from the last one ("abcdefgh"
 * repeated) is learnt well below the unigram model's 3 bits per byte, generate continues a prompt,
 * --grad-accum of two half batches equals the whole batch, --checkpoint-activations trains
 * identically, --time-limit stops, and the mistakes. */
static void test_text_gpt(void) {
    FILE *f = fopen(path_in("abc.txt", NULL), "w");
    for (int i = 0; i < 1500; i++) fputs("abcdefgh", f);
    fclose(f);
#define GPT                                                                                        \
    "train", "--data", "text", "--data-dir", path_in("abc.txt", NULL), "--context", "16",          \
        "--layers", "1", "--heads", "2", "--dim", "32", "--batch-size", "16", "--progress", "none"
    result r = RUN(GPT, "--max-steps", "60", "--warmup", "5", "--lr", "0.01", "--checkpoint",
                   path_in("gpt", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "GPT (") && strstr(r.out, "AdamW lr 0.01 weight decay 0.1"));
    /* every training window holds two whole cycles of the 8 letters: exactly 3 bits */
    CHECK(r.out && strstr(r.out, "a unigram model of the training bytes has 3.000 bits per byte"));
    const char *p = NULL; /* the last epoch's */
    for (const char *s = r.out; s && (s = strstr(s, "val loss ")); s++) p = s;
    double val_loss = p ? strtod(p + 9, NULL) : 99;
    const char *q = p ? strstr(p, "(") : NULL;
    double bpb = q ? strtod(q + 1, NULL) : 99;
    CHECK(bpb < 1.0); /* a third of the unigram model's bits, at most */
    CHECK(fabs(bpb - val_loss / log(2.0)) < 2e-3);
    if (bpb >= 1.0) fprintf(stderr, "  gpt output: %s", r.out ? r.out : "");
    result_free(&r);
    /* greedy continuation of "abc" follows the cycle */
    r = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "abc", "--tokens", "13",
            "--greedy");
    check_clean_exit(&r);
    CHECK(r.out && !strcmp(r.out, "abcdefghabcdefgh\n"));
    if (r.out && strcmp(r.out, "abcdefghabcdefgh\n")) fprintf(stderr, "  generated: %s", r.out);
    result_free(&r);
    /* --quantize: the linears weight-only int8 / int4 at load (16 + 16 + 32 + 32 + 64 KiB of float
     * weights: in_proj [96, 32], out_proj [32, 32], linear1 [128, 32], linear2 [32, 128], the
     * head [256, 32]); the same greedy text, the logits' margins on this cycle being wide */
    for (int bits = 8; bits >= 4; bits -= 4) {
        r = bits == 8
                ? RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "abc",
                      "--tokens", "13", "--greedy", "--quantize", "int8")
                : RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "abc",
                      "--tokens", "13", "--greedy", "--quantize", "int4", "--group-size", "32");
        CHECK(exit_code(&r) == 0 && r.out && !strcmp(r.out, "abcdefghabcdefgh\n"));
        if (r.out && strcmp(r.out, "abcdefghabcdefgh\n"))
            fprintf(stderr, "  int%d generated: %s", bits, r.out);
        char want[160];
        snprintf(want, sizeof want, "quantized blocks.0.linear1.weight: 16384 -> %d bytes\n",
                 bits == 8 ? 4096 : 2048);
        CHECK(r.err && strstr(r.err, want));
        CHECK(r.err && strstr(r.err, "quantized head (tied to tok_emb.weight): 32768 -> "));
        snprintf(want, sizeof want,
                 "--quantize int%d%s: 5 linears; weight bytes read per token 81920 -> %d (%s "
                 "smaller, %d saved;",
                 bits, bits == 4 ? " (group size 32)" : "", bits == 8 ? 20480 : 10240,
                 bits == 8 ? "4.00x" : "8.00x", bits == 8 ? 61440 : 71680);
        CHECK(r.err && strstr(r.err, want));
        if (r.err && !strstr(r.err, want)) fprintf(stderr, "  stderr: %s", r.err);
        result_free(&r);
    }
    /* the group must divide every linear's in_features (32 here), and --group-size go with int4 */
    check_usage_prefix(RUN("generate", "--checkpoint", path_in("gpt", NULL), "--quantize", "int4"),
                       "tessera: --quantize: quantize_int4_weight_only: group_size 128 does not "
                       "divide in_features");
    check_usage_error(RUN("generate", "--checkpoint", path_in("gpt", NULL), "--group-size", "32"),
                      "tessera: --group-size: only with --quantize int4\n");
    check_usage_error(RUN("generate", "--checkpoint", path_in("gpt", NULL), "--quantize", "int4",
                          "--group-size", "48"),
                      "tessera: --group-size 48: must be 32, 64, 128 or 256\n");
    /* sampled with a seed: the same text twice, 20 bytes after the prompt */
    r = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "h", "--tokens", "20",
            "--top-k", "3", "--temperature", "0.8", "--seed", "4");
    result r2 = RUN("generate", "--checkpoint", path_in("gpt", NULL), "--prompt", "h", "--tokens",
                    "20", "--top-k", "3", "--temperature", "0.8", "--seed", "4");
    check_clean_exit(&r);
    CHECK(r.out && r2.out && strlen(r.out) == 22 && !strcmp(r.out, r2.out));
    result_free(&r);
    result_free(&r2);
    r = RUN("eval", "--data", "text", "--data-dir", path_in("abc.txt", NULL), "--context", "16",
            "--layers", "1", "--heads", "2", "--dim", "32", "--checkpoint", path_in("gpt", NULL));
    check_clean_exit(&r);
    p = r.out ? strstr(r.out, "val loss ") : NULL;
    CHECK(p && fabs(strtod(p + 9, NULL) - val_loss) < 1e-4);
    result_free(&r);

    /* two accumulated half batches make the whole batch's step (constant lr, SGD, an MLP) */
    r = RUN("train", "--model", "mlp", DATA, "--schedule", "constant", "--progress", "none",
            "--batch-size", "16", "--max-steps", "4", "--checkpoint", path_in("acc16", NULL));
    check_clean_exit(&r);
    result_free(&r);
    r = RUN("train", "--model", "mlp", DATA, "--schedule", "constant", "--progress", "none",
            "--batch-size", "8", "--grad-accum", "2", "--max-steps", "8", "--checkpoint",
            path_in("acc8", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "batch 8 x 2 accumulated"));
    result_free(&r);
    double d = weights_rel_diff(path_in("acc16", "model.safetensors"),
                                path_in("acc8", "model.safetensors"));
    CHECK(d < 1e-5); /* float32 sums in another order */
    if (!(d < 1e-5)) fprintf(stderr, "  accumulated vs whole batch: %g\n", d);

    /* --checkpoint-activations: the same training, weight for weight (blocks recomputed in
     * backward with the same dropout masks) */
    r = RUN(GPT, "--layers", "2", "--dropout", "0.1", "--max-steps", "3", "--checkpoint",
            path_in("ck0", NULL));
    check_clean_exit(&r);
    result_free(&r);
    r = RUN(GPT, "--layers", "2", "--dropout", "0.1", "--max-steps", "3",
            "--checkpoint-activations", "1", "--checkpoint", path_in("ck1", NULL));
    check_clean_exit(&r);
    result_free(&r);
    d = weights_rel_diff(path_in("ck0", "model.safetensors"), path_in("ck1", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  checkpointed activations vs kept: %g\n", d);
    /* --checkpoint-sublayers: the blocks' attention and feed-forward each recomputed alone */
    r = RUN(GPT, "--layers", "2", "--dropout", "0.1", "--max-steps", "3",
            "--checkpoint-activations", "1", "--checkpoint-sublayers", "--checkpoint",
            path_in("ck2", NULL));
    check_clean_exit(&r);
    result_free(&r);
    d = weights_rel_diff(path_in("ck0", "model.safetensors"), path_in("ck2", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  activations checkpointed by sublayer vs kept: %g\n", d);
    /* --offload-optimizer: AdamW's masters and state on the host, the same weights on sim:0 */
    r = RUN(GPT, "--device", "sim:0", "--max-steps", "3", "--checkpoint", path_in("off0", NULL));
    check_clean_exit(&r);
    result_free(&r);
    r = RUN(GPT, "--device", "sim:0", "--max-steps", "3", "--offload-optimizer", "--checkpoint",
            path_in("off1", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(offloaded: masters and state on the host)"));
    result_free(&r);
    d = weights_rel_diff(path_in("off0", "model.safetensors"),
                         path_in("off1", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  offloaded optimizer vs on the device: %g\n", d);
    /* --max-memory: the model placed over sim:0, sim:1 and the cpu, the same weights */
    r = RUN(GPT, "--device", "sim:0", "--max-steps", "3", "--max-memory",
            "sim:0=100KiB,sim:1=100KiB,cpu=1GiB", "--checkpoint", path_in("place", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "blocks.0                 -> sim:1") &&
          strstr(r.out, "ln_f                     -> sim:1"));
    result_free(&r);
    d = weights_rel_diff(path_in("off0", "model.safetensors"),
                         path_in("place", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  placed vs on one device: %g\n", d);
    /* --override-tensor: the token embedding (tied to the head) and the blocks' first Linears
     * stored on the cpu, copied to their block's device per forward: the same weights */
    r = RUN(GPT, "--device", "sim:0", "--max-steps", "3", "--max-memory",
            "sim:0=100KiB,sim:1=100KiB,cpu=1GiB", "--override-tensor",
            "^tok_emb\\.=cpu,linear1\\.weight$=cpu", "--checkpoint", path_in("ovr", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "tok_emb.weight           -> cpu") &&
          strstr(r.out, "blocks.0.linear1.weight  -> cpu") && strstr(r.out, "(override, used on "));
    result_free(&r);
    d = weights_rel_diff(path_in("off0", "model.safetensors"), path_in("ovr", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  placed with overrides vs on one device: %g\n", d);
    check_usage_error(RUN(GPT, "--override-tensor", "tok_emb=cpu"),
                      "tessera: --override-tensor: only with --max-memory (the overridden tensors "
                      "are charged to their device's budget)\n");
    /* --stream-weights: the weights on the host, each block copied to sim:0 two units ahead and
     * the optimizer stepping on the host: the same weights */
    r = RUN(GPT, "--device", "sim:0", "--max-steps", "3", "--stream-weights", "2", "--checkpoint",
            path_in("stream", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "weights streamed to sim:0, 2 units ahead (--stream-weights)"));
    result_free(&r);
    d = weights_rel_diff(path_in("off0", "model.safetensors"),
                         path_in("stream", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  streamed vs on the device: %g\n", d);
    /* streamed with its blocks checkpointed (recomputed in backward from the kept copies): the
     * weights of the run with checkpointing alone */
    r = RUN(GPT, "--layers", "2", "--dropout", "0.1", "--max-steps", "3", "--device", "sim:0",
            "--stream-weights", "1", "--checkpoint-activations", "1", "--checkpoint",
            path_in("ck2", NULL));
    check_clean_exit(&r);
    result_free(&r);
    d = weights_rel_diff(path_in("ck1", "model.safetensors"), path_in("ck2", "model.safetensors"));
    CHECK(d == 0);
    if (d != 0) fprintf(stderr, "  streamed and checkpointed vs checkpointed: %g\n", d);
    r = RUN(GPT, "--max-steps", "1", "--stream-weights", "1"); /* --device cpu */
    CHECK_EQ(exit_code(&r), 1);
    CHECK(r.err && strstr(r.err, "--stream-weights") && strstr(r.err, "a sim or cuda device"));
    result_free(&r);
    check_usage_error(RUN(GPT, "--stream-weights", "1", "--max-memory", "cpu=1GiB"),
                      "tessera: --stream-weights: not with --max-memory (placement and streaming "
                      "do not combine: stream the whole model)\n");
    check_usage_error(RUN(GPT, "--stream-weights", "0", "--offload-optimizer"),
                      "tessera: --offload-optimizer: not with --stream-weights (streamed weights "
                      "live on the host, where the optimizer steps already)\n");
    check_usage_prefix(RUN(GPT, "--stream-weights", "-1"), "tessera: --stream-weights");
    check_usage_error(RUN(GPT, "--max-memory", "cpu=1GiB", "--devices", "sim:0,sim:1"),
                      "tessera: --max-memory: not with --devices (data parallel replicates the "
                      "whole model)\n");
    check_usage_error(RUN(GPT, "--offload-optimizer", "--graph"),
                      "tessera: --offload-optimizer: not with --graph (the offloaded step copies "
                      "to and from the host, which a capture cannot record)\n");
    check_usage_error(RUN("train", "--model", "mlp", DATA, "--checkpoint-activations", "1"),
                      "tessera: --checkpoint-activations: for --model gpt and the resnets, not "
                      "mlp\n");
    check_usage_error(RUN(GPT, "--checkpoint-sublayers"),
                      "tessera: --checkpoint-sublayers: for --model gpt with "
                      "--checkpoint-activations N\n");

    r = RUN(GPT, "--time-limit", "0.001", "--label-smoothing", "0.1", "--clip-grad", "1");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "stopped after step 1 (--time-limit 0.001 s)"));
    result_free(&r);
#undef GPT
    check_usage_error(RUN("train", "--model", "gpt"),
                      "tessera: --model gpt: trains on --data text\n");
    check_usage_error(RUN("train", "--data", "text", "--model", "mlp"),
                      "tessera: --data text: needs --model gpt (a language model)\n");
    check_usage_error(RUN("train", "--data", "text", "--dim", "30"),
                      "tessera: --dim 30: must be a multiple of --heads (4)\n");
    check_usage_error(RUN("generate"),
                      "tessera: generate: needs --checkpoint DIR (a gpt trained by tessera) or "
                      "--hf DIR (a Hugging Face GPT-2)\n");
    check_usage_error(RUN("generate", "--hf", "x", "--greedy"),
                      "tessera: --hf: needs --greedy and --prompt-ids ID,ID,... (no tokenizer is "
                      "read)\n");
    check_usage_error(RUN("generate", "--checkpoint", "x", "--prompt-ids", "1"),
                      "tessera: --prompt-ids: only with --hf\n");
    check_usage_error(RUN("generate", "--checkpoint", path_in("nothing", NULL)),
                      "tessera: --checkpoint: no model at '%s' (train with --model gpt "
                      "--checkpoint DIR first)\n",
                      path_in("nothing", NULL));
    check_usage_error(RUN("generate", "--checkpoint", path_in("acc16", NULL)),
                      "tessera: --checkpoint: not a gpt (no tok_emb.weight and pos_emb.weight)\n");
    check_usage_error(RUN("train", "--data", "text", "--data-dir", path_in("nothing", NULL)),
                      "tessera: --data-dir: '%s': No such file or directory\n",
                      path_in("nothing", NULL));
    check_usage_error(RUN("train", "--model", "mlp", DATA, "--grad-accum", "2", "--checkpoint",
                          path_in("acc", NULL), "--checkpoint-every", "3"),
                      "tessera: --checkpoint-every 3: must be a multiple of --grad-accum 2\n");
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_text_gpt();
    trainer_cleanup();
    return ts_test_finish();
}
