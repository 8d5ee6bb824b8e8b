/* qat.c — `tessera train --qat [--qat-from CHECKPOINT]` and `tessera eval` of a QAT checkpoint:
 * the model prepared by ts_qat_prepare (PyTorch's x86 QAT qconfig: weights per-channel qint8,
 * outputs quint8 0..127), a float (or QAT) checkpoint loaded to fine-tune from, and the observed
 * ranges printed at the end (docs/QUANTIZATION.md, docs/CLI.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tessera/quant.h"

char *tcli_checkpoint_file(const char *arg) {
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) return tcli_checkpoint_path(arg);
    return strdup(arg);
}

int tcli_checkpoint_is_qat(const char *path, bool *qat) {
    ts_tensor_list sd = {0};
    if (ts_safetensors_load(path, ts_cpu(), &sd) != TS_OK)
        return tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_USAGE : TCLI_FAIL, path);
    *qat = false;
    for (int i = 0; i < sd.n && !*qat; i++) *qat = strstr(sd.names[i], ".weight_fake_quant.") != 0;
    ts_tensor_list_free(&sd);
    return -1;
}

int tcli_qat_prepare(ts_module *model) {
    if (ts_qat_prepare(model, (ts_qat_opts){0}) != TS_OK) return tcli_fail_ts(TCLI_USAGE, "--qat");
    return -1;
}

int tcli_qat_setup(const tcli_opts *o, ts_module *model) {
    char *path = NULL;
    bool qat = false;
    int rc = -1;
    if (o->qat_from) {
        if (!(path = tcli_checkpoint_file(o->qat_from)))
            return tcli_fail(TCLI_FAIL, "out of memory");
        struct stat sb;
        if (stat(path, &sb) != 0) {
            rc = tcli_fail(TCLI_USAGE, "--qat-from: no checkpoint at '%s'", path);
            goto done;
        }
        if ((rc = tcli_checkpoint_is_qat(path, &qat)) >= 0) goto done;
        /* a float checkpoint loads before the model is prepared, a QAT one after */
        if (!qat && ts_checkpoint_load(path, model, NULL, NULL) != TS_OK) {
            rc = tcli_fail_ts(TCLI_USAGE, "--qat-from");
            goto done;
        }
    }
    if ((rc = tcli_qat_prepare(model)) >= 0) goto done;
    if (qat && ts_checkpoint_load(path, model, NULL, NULL) != TS_OK) {
        rc = tcli_fail_ts(TCLI_USAGE, "--qat-from");
        goto done;
    }
    printf("quantization-aware training: weights fake-quantized per channel (qint8, symmetric), "
           "layer outputs per tensor (quint8 0..127), moving-average observers (0.01)");
    if (path) printf("; from %s (%s)", path, qat ? "QAT" : "float");
    printf("\n");
done:
    free(path);
    return rc;
}

/* the float32 values of a small buffer (NULL-safe: 0 values) */
static int64_t values(ts_module *m, const char *name, float *v, int64_t cap) {
    ts_tensor *t = ts_module_get(m, name);
    if (!t) return ts_error_clear(), 0;
    const int64_t n = ts_numel(t);
    if (n > cap || ts_dtype_of(t) != TS_F32 || ts_copy_to_host(t, v, (size_t)n * sizeof *v))
        return ts_error_clear(), 0;
    return n;
}

void tcli_qat_report(ts_module *model) {
    static const char tail[] = ".activation_post_process.activation_post_process.min_val";
    ts_tensor_list bufs = ts_module_named_buffers(model);
    printf("qat: observed ranges (layer output min..max, its scale and zero point; weight scales "
           "over the output channels)\n");
    for (int i = 0; i < bufs.n; i++) {
        const char *name = bufs.names[i];
        const size_t n = strlen(name), k = sizeof tail - 1;
        if (n <= k || strcmp(name + n - k, tail) || strstr(name, "weight_fake_quant")) continue;
        char layer[256], key[320];
        snprintf(layer, sizeof layer, "%.*s", (int)(n - k), name);
        float mn, mx, sc, zp_f = 0, ws[4096];
        snprintf(key, sizeof key, "%s.activation_post_process.activation_post_process.max_val",
                 layer);
        values(model, key, &mx, 1);
        values(model, name, &mn, 1);
        snprintf(key, sizeof key, "%s.activation_post_process.scale", layer);
        values(model, key, &sc, 1);
        snprintf(key, sizeof key, "%s.activation_post_process.zero_point", layer);
        ts_tensor *z = ts_module_get(model, key);
        if (z) zp_f = (float)ts_item(z);
        snprintf(key, sizeof key, "%s.weight_fake_quant.scale", layer);
        const int64_t nw = values(model, key, ws, 4096);
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t c = 0; c < nw; c++) lo = fminf(lo, ws[c]), hi = fmaxf(hi, ws[c]);
        printf("  %-12s out %9.4f..%-9.4f scale %.6g zero point %d  weight scale %.3g..%.3g\n",
               layer, mn, mx, sc, (int)zp_f, lo, hi);
    }
    ts_error_clear();
    ts_tensor_list_free(&bufs);
    fflush(stdout);
}
