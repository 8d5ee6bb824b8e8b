/* text.c — the trainer's language modelling: --data text (byte windows of ts_text_dataset),
 * --model gpt, and `tessera generate`, which continues a prompt with a trained gpt. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* ------------------------------------------------------------------ data */
/* Entropy of the training bytes (each window once, epoch 0): what a model that ignores the
 * context at best achieves, printed beside the model's bits per byte. */
static int unigram_bits(tcli_data *d, int64_t context) {
    double count[256] = {0}, total = 0;
    int64_t n = ts_dataset_len(d->train);
    int64_t *x = malloc((size_t)context * sizeof *x);
    if (!x) return tcli_fail(TCLI_FAIL, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        ts_sample s = {0};
        ts_status st = ts_dataset_get(d->train, i, &s);
        if (!st) st = ts_copy_to_host(s.x, x, (size_t)context * sizeof *x);
        ts_release(s.x);
        ts_release(s.y);
        if (st) {
            free(x);
            return tcli_fail_ts(TCLI_FAIL, "--data text");
        }
        for (int64_t t = 0; t < context; t++) count[x[t] & 255]++;
        total += (double)context;
    }
    free(x);
    double h = 0;
    for (int b = 0; b < 256; b++)
        if (count[b] > 0) h -= count[b] / total * log2(count[b] / total);
    d->unigram_bits = h;
    return -1;
}

int tcli_text_open(const tcli_opts *o, bool need_train, tcli_data *d) {
    const char *path = o->data_dir ? o->data_dir : TCLI_TEXT_DIR;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (!o->data_dir)
            return tcli_fail(TCLI_USAGE,
                             "no text in %s: install Debian's fortunes (sudo apt-get install "
                             "fortunes, or make deps) or pass --data-dir FILE_OR_FOLDER",
                             path);
        return tcli_fail(TCLI_USAGE, "--data-dir: '%s': %s", path, strerror(errno));
    }
    ts_text_opts to = {.context = o->context, .seed = o->seed};
    if (need_train && !(d->train = ts_text_dataset_new(path, TS_SPLIT_TRAIN, to)))
        return tcli_fail_ts(TCLI_USAGE, "--data text");
    if (!(d->test = ts_text_dataset_new(path, TS_SPLIT_TEST, to)))
        return tcli_fail_ts(TCLI_USAGE, "--data text");
    d->text = true;
    d->features = o->context;
    d->classes = 256;
    d->title = path;
    return need_train ? unigram_bits(d, o->context) : -1;
}

/* ------------------------------------------------------------------ model */
ts_module *tcli_gpt_new(const tcli_opts *o) {
    return ts_gpt_new((ts_gpt_config){.vocab_size = 256,
                                      .context = o->context,
                                      .n_layer = o->layers,
                                      .n_head = o->heads,
                                      .n_embd = o->dim,
                                      .dropout = o->dropout});
}

void tcli_flatten_tokens(ts_tensor **logits, ts_tensor **y) {
    if (ts_ndim(*logits) != 3) return;
    int64_t v = ts_size(*logits, 2);
    *logits = ts_reshape(*logits, TS_SHAPE(-1, v));
    *y = ts_reshape(*y, TS_SHAPE(-1));
}

/* ------------------------------------------------------------------ generate */
/* The folder's model.safetensors (written at the end of training), else its latest checkpoint
 * (a run stopped early); a file as it is. *prefixed: a checkpoint, whose keys start "model.". */
static char *model_path(const char *ck, bool *prefixed) {
    struct stat sb;
    *prefixed = false;
    if (stat(ck, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        char *p = strdup(ck);
        if (p) {
            char *meta = ts_safetensors_metadata(p, "tessera"); /* "checkpoint" */
            ts_error_clear();
            *prefixed = meta != NULL;
            free(meta);
        }
        return p;
    }
    size_t n = strlen(ck) + 32;
    char *p = malloc(n);
    if (!p) return NULL;
    snprintf(p, n, "%s/model.safetensors", ck);
    if (stat(p, &sb) == 0) return p;
    snprintf(p, n, "%s/latest.safetensors", ck);
    *prefixed = true;
    return p;
}

/* The model's size from its weights: tok_emb [vocab, dim], pos_emb [context, dim], blocks.N. */
static int config_from_weights(const tcli_opts *o, const ts_tensor_list *l, bool prefixed,
                               ts_gpt_config *c) {
    const char *pre = prefixed ? "model." : "";
    char key[64];
    snprintf(key, sizeof key, "%stok_emb.weight", pre);
    ts_tensor *tok = ts_tensor_list_get(l, key);
    snprintf(key, sizeof key, "%spos_emb.weight", pre);
    ts_tensor *pos = ts_tensor_list_get(l, key);
    if (!tok || !pos || ts_ndim(tok) != 2 || ts_ndim(pos) != 2)
        return tcli_fail(TCLI_USAGE,
                         "--checkpoint: not a gpt (no tok_emb.weight and pos_emb.weight)");
    int64_t layers = 0;
    size_t np = strlen(pre);
    for (int i = 0; i < l->n; i++) {
        const char *k = l->names[i];
        if (strncmp(k, pre, np) || strncmp(k + np, "blocks.", 7)) continue;
        int64_t b = strtoll(k + np + 7, NULL, 10);
        if (b + 1 > layers) layers = b + 1;
    }
    *c = (ts_gpt_config){.vocab_size = ts_size(tok, 0),
                         .context = ts_size(pos, 0),
                         .n_layer = layers,
                         .n_head = o->heads,
                         .n_embd = ts_size(tok, 1)};
    if (c->n_embd % c->n_head)
        return tcli_fail(TCLI_USAGE, "--heads %d: does not divide the model's width %lld", o->heads,
                         (long long)c->n_embd);
    return -1;
}

static int load_gpt(const tcli_opts *o, ts_device dev, ts_module **out) {
    bool prefixed;
    char *path = model_path(o->checkpoint, &prefixed);
    if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int rc = tcli_fail(TCLI_USAGE,
                           "--checkpoint: no model at '%s' (train with --model gpt "
                           "--checkpoint DIR first)",
                           path);
        free(path);
        return rc;
    }
    ts_tensor_list l = {0};
    int rc = -1;
    ts_gpt_config c;
    /* heads: from the file when the trainer recorded them, else --heads */
    char *heads = ts_safetensors_metadata(path, "n_head");
    ts_error_clear();
    tcli_opts oh = *o;
    if (heads) oh.heads = atoi(heads);
    free(heads);
    if (ts_safetensors_load(path, ts_cpu(), &l))
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "--checkpoint");
    else
        rc = config_from_weights(&oh, &l, prefixed, &c);
    ts_tensor_list_free(&l);
    ts_module *m = rc < 0 ? ts_gpt_new(c) : NULL;
    if (rc < 0 && m) m = ts_module_to(m, dev);
    if (rc < 0 &&
        (!m || ts_error() ||
         (prefixed ? ts_checkpoint_load(path, m, NULL, NULL) : ts_module_load(m, path, true))))
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "--checkpoint");
    free(path);
    if (rc >= 0) {
        ts_module_free(m);
        return rc;
    }
    *out = m;
    return -1;
}

/* --quantize: each quantized linear on stderr, then the totals */
typedef struct wo_tally {
    int64_t layers, float_bytes, quant_bytes;
} wo_tally;

static void wo_layer(void *ctx, const char *name, int64_t float_bytes, int64_t quant_bytes) {
    wo_tally *t = ctx;
    t->layers++, t->float_bytes += float_bytes, t->quant_bytes += quant_bytes;
    fprintf(stderr, "quantized %s: %lld -> %lld bytes\n", name, (long long)float_bytes,
            (long long)quant_bytes);
}

static int quantize_gpt(const tcli_opts *o, ts_module *m) {
    wo_tally t = {0};
    const int bits = strcmp(o->wo_quantize, "int8") ? 4 : 8;
    ts_gpt_quant_opts qo = {
        .bits = bits, .group_size = o->group_size, .on_layer = wo_layer, .ctx = &t};
    if (ts_gpt_quantize_weight_only(m, qo)) return tcli_fail_ts(TCLI_USAGE, "--quantize");
    char how[48] = "";
    if (bits == 4)
        snprintf(how, sizeof how, " (group size %d)", o->group_size ? o->group_size : 128);
    fprintf(
        stderr,
        "--quantize %s%s: %lld linears; weight bytes read per token %lld -> %lld (%.2fx smaller, "
        "%lld saved; plus a float32 scale and an int32 zero point per %s); the float weights "
        "stay loaded\n",
        o->wo_quantize, how, (long long)t.layers, (long long)t.float_bytes,
        (long long)t.quant_bytes,
        t.quant_bytes ? (double)t.float_bytes / (double)t.quant_bytes : 0.0,
        (long long)(t.float_bytes - t.quant_bytes), bits == 4 ? "group" : "row");
    return -1;
}

int tcli_generate(const tcli_opts *o) {
    if (o->hf) return tcli_generate_hf(o);
    ts_device dev;
    int rc = tcli_resolve_device(o, &dev);
    if (rc >= 0) return rc;
    if (o->threads) ts_set_num_threads(o->threads);
    ts_module *m = NULL;
    if ((rc = load_gpt(o, dev, &m)) >= 0) return rc;
    ts_module_eval(m);
    if (o->wo_quantize && (rc = quantize_gpt(o, m)) >= 0) {
        ts_module_free(m);
        return rc;
    }
    ts_manual_seed(o->seed);
    const char *prompt = o->prompt ? o->prompt : "\n";
    int64_t n = (int64_t)strlen(prompt);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        ts_module_free(m);
        return tcli_fail(TCLI_FAIL, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) ids[i] = (unsigned char)prompt[i];
    ts_sample_opts so = {.temperature = o->temperature, .top_k = o->top_k, .greedy = o->greedy};
    fputs(o->prompt ? prompt : "", stdout);
    fflush(stdout);
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *idx = ts_retain(ts_to(ts_tensor_i64(TS_SHAPE(1, n), ids, (ts_opts){0}), dev));
    ts_scope_end();
    free(ids);
    /* one byte at a time, written as it comes */
    for (int k = 0; k < o->tokens && !ts_error(); k++) {
        ts_scope_begin();
        ts_tensor *next = ts_gpt_generate(m, idx, 1, so);
        if (next) {
            int64_t len = ts_size(next, 1), b = 0;
            ts_tensor *last = ts_narrow(next, 1, len - 1, 1);
            if (!ts_copy_to_host(ts_to(ts_contiguous(last), ts_cpu()), &b, sizeof b)) {
                putchar((int)b);
                fflush(stdout);
            }
            /* keep at most the model's context: generate crops it anyway */
            ts_gpt_config c = ts_gpt_get_config(m);
            int64_t keep = len > c.context ? c.context : len;
            ts_release(idx);
            idx = ts_retain(ts_contiguous(ts_narrow(next, 1, len - keep, keep)));
        }
        ts_scope_end();
    }
    ts_no_grad_end();
    putchar('\n');
    fflush(stdout);
    ts_release(idx);
    ts_module_free(m);
    return ts_error() ? tcli_fail_ts(TCLI_FAIL, "generate") : TCLI_OK;
}
