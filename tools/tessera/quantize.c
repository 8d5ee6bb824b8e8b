/* quantize.c — `tessera quantize`: an ONNX model (--onnx FILE, or --model exported with
 * --checkpoint's weights) written by ts_onnx_quantize as ONNX Runtime's quantizer writes it:
 * --mode static (QDQ, calibrated on --calib-batches batches of --data's training split) or dynamic
 * (DynamicQuantizeLinear + MatMulInteger). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct calib {
    ts_loader *loader;
    int want, given;
} calib;

/* the next training batch's samples, until --calib-batches */
static int next_batch(void *user, int n_inputs, ts_tensor **inputs) {
    calib *c = user;
    if (c->given == c->want) return 0;
    if (n_inputs != 1) {
        tcli_fail(TCLI_USAGE,
                  "--onnx: the model has %d inputs; calibration feeds one (--data's "
                  "samples)",
                  n_inputs);
        return -1;
    }
    ts_batch b;
    if (!ts_loader_next(c->loader, &b)) return ts_error() ? -1 : 0;
    inputs[0] = ts_retain(b.x);
    c->given++;
    return 1;
}

static void progress(void *user, int done) {
    calib *c = user;
    printf("calibration: batch %d/%d\n", done, c->want);
    fflush(stdout);
}

static void print_size(char *buf, size_t n, size_t bytes) {
    if (bytes >= 1 << 20)
        snprintf(buf, n, "%.2f MiB", (double)bytes / (1 << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)bytes / 1024);
}

int tcli_quantize(const tcli_opts *o) {
    ts_device dev;
    int rc = tcli_resolve_device(o, &dev);
    if (rc >= 0) return rc;
    if (o->threads) ts_set_num_threads(o->threads);
    const bool dynamic = !strcmp(o->quant_mode, "dynamic"),
               calibrated = !strcmp(o->quant_mode, "static");
    const bool need_data = !o->onnx || calibrated; /* the model's export, or the calibration */
    tcli_data d = {0};
    if (need_data && (rc = tcli_data_open(o, true, &d)) >= 0) return rc;
    char *tmp = NULL;
    const char *src = o->onnx;
    ts_loader *l = NULL;
    if (!src) { /* --model: exported first, as tessera export does */
        size_t n = strlen(o->output) + 16;
        if (!(tmp = malloc(n))) {
            rc = tcli_fail(TCLI_FAIL, "out of memory");
            goto done;
        }
        snprintf(tmp, n, "%s.float.onnx", o->output);
        printf("exporting %s (%s) to ONNX\n", tcli_model_title(o->model),
               o->checkpoint ? o->checkpoint : "fresh weights");
        fflush(stdout);
        if ((rc = tcli_export_float(o, &d, dev, tmp)) >= 0) goto done;
        src = tmp;
    }
    calib c = {.want = o->calib_batches};
    ts_onnx_quantize_opts qo = {.mode = dynamic                          ? TS_ONNX_QUANT_DYNAMIC
                                        : !strcmp(o->quant_mode, "int4") ? TS_ONNX_QUANT_INT4
                                                                         : TS_ONNX_QUANT_STATIC,
                                .device = dev,
                                .producer = "tessera quantize"};
    if (calibrated) {
        l = ts_loader_new(d.train, (ts_loader_opts){.batch_size = o->batch_size,
                                                    .device = dev,
                                                    .seed = o->seed,
                                                    .transform = tcli_data_transform(&d)});
        if (!l) {
            rc = tcli_fail_ts(TCLI_FAIL, "loader");
            goto done;
        }
        c.loader = l;
        qo.calib_fn = next_batch, qo.calib_user = &c, qo.progress = progress;
        printf("calibrating on %d batches of %d %s training samples (MinMax)\n", c.want,
               o->batch_size, d.title);
        fflush(stdout);
    }
    ts_onnx_quantize_report rep;
    if (ts_onnx_quantize(src, o->output, qo, &rep)) {
        ts_status e = ts_error();
        rc = tcli_fail_ts(e == TS_ERR_ARG || e == TS_ERR_UNSUPPORTED || e == TS_ERR_FORMAT
                              ? TCLI_USAGE
                              : TCLI_FAIL,
                          "quantize");
        goto done;
    }
    char before[32], after[32];
    print_size(before, sizeof before, rep.bytes_before);
    print_size(after, sizeof after, rep.bytes_after);
    printf("quantized %d nodes (%s int8%s) written to %s: %s -> %s (%.1f%%)\n", rep.nodes_quantized,
           dynamic ? "dynamic" : "static",
           dynamic ? ", DynamicQuantizeLinear + MatMulInteger" : ", QDQ", o->output, before, after,
           rep.bytes_before ? 100.0 * (double)rep.bytes_after / (double)rep.bytes_before : 0.0);
    if (!dynamic)
        printf("%d activations calibrated on %d batches\n", rep.tensors_calibrated,
               rep.calib_batches);
    fflush(stdout);
    rc = TCLI_OK;
done:
    ts_loader_free(l);
    if (tmp) unlink(tmp);
    free(tmp);
    if (need_data) tcli_data_close(&d);
    return rc;
}
