/* generate_hf.c — `tessera generate --hf DIR --greedy --prompt-ids 1,2,3 [--quantize int8|int4]`:
 * greedy decoding of a Hugging Face GPT-2 over a key/value cache (tessera/gpt2.h). Token ids in,
 * token ids out (no tokenizer is read); the tokens/s of the prompt and of the decode after it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* "1,2,3" into a malloc'ed array; -1 with a message on failure */
static int parse_ids(const char *s, int64_t **ids, int64_t *n) {
    int64_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int64_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) return tcli_fail(TCLI_FAIL, "out of memory");
    int64_t k = 0;
    const char *p = s;
    for (;;) {
        char *end = NULL;
        errno = 0;
        const long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || (*end && *end != ',')) {
            free(v);
            return tcli_fail(TCLI_USAGE,
                             "--prompt-ids '%s': expected token ids >= 0 separated by commas", s);
        }
        v[k++] = x;
        if (!*end) break;
        p = end + 1;
    }
    *ids = v, *n = k;
    return -1;
}

static void wo_layer(void *ctx, const char *name, int64_t float_bytes, int64_t quant_bytes) {
    int64_t *t = ctx;
    t[0] += float_bytes, t[1] += quant_bytes;
    fprintf(stderr, "quantized %s: %lld -> %lld bytes\n", name, (long long)float_bytes,
            (long long)quant_bytes);
}

int tcli_generate_hf(const tcli_opts *o) {
    if (o->device && strcmp(o->device, "cpu"))
        return tcli_fail(TCLI_USAGE, "--hf: runs on the cpu only (got --device %s)", o->device);
    if (o->threads) ts_set_num_threads(o->threads);
    int64_t *ids = NULL, n = 0;
    int rc = parse_ids(o->prompt_ids, &ids, &n);
    if (rc >= 0) return rc;
    ts_gpt2 *m = ts_gpt2_load(o->hf);
    if (!m) {
        free(ids);
        return tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "--hf");
    }
    if (o->wo_quantize) {
        int64_t t[2] = {0, 0};
        const int bits = strcmp(o->wo_quantize, "int8") ? 4 : 8;
        ts_gpt_quant_opts qo = {.bits = bits,
                                .group_size = o->group_size,
                                .on_layer = wo_layer,
                                .ctx = t,
                                .act_bits = o->act_quant ? 8 : 0};
        if (ts_gpt2_quantize(m, qo)) {
            free(ids);
            ts_gpt2_free(m);
            return tcli_fail_ts(TCLI_USAGE, "--quantize");
        }
        fprintf(stderr, "--quantize %s%s: weight bytes read per token %lld -> %lld\n",
                o->wo_quantize, o->act_quant ? " --act-quant int8" : "", (long long)t[0],
                (long long)t[1]);
    }
    const int64_t want = o->tokens;
    int64_t *out = malloc((size_t)(want ? want : 1) * sizeof *out);
    double ps = 0, ds = 0;
    if (!out || ts_gpt2_generate_greedy(m, ids, n, want, out, &ps, &ds)) {
        free(ids), free(out);
        ts_gpt2_free(m);
        return out ? tcli_fail_ts(TCLI_USAGE, "generate --hf")
                   : tcli_fail(TCLI_FAIL, "out of memory");
    }
    for (int64_t k = 0; k < want; k++) printf("%s%lld", k ? "," : "", (long long)out[k]);
    printf("\nprompt: %lld tokens in %.4f s (%.2f tokens/s); decode: %lld tokens in %.4f s "
           "(%.2f tokens/s)\n",
           (long long)n, ps, ps > 0 ? (double)n / ps : 0.0, (long long)(want - 1), ds,
           ds > 0 ? (double)(want - 1) / ds : 0.0);
    free(ids), free(out);
    ts_gpt2_free(m);
    return TCLI_OK;
}
