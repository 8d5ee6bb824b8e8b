/* export.c — `tessera export`: a zoo model (fresh, or with a checkpoint's weights) written as an
 * ONNX file by ts_onnx_export, with an example input shaped like --data's samples; --save-io also
 * writes that input and Tessera's output as .npy files beside it, for tools/check_onnx_export.py.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* A folder holds latest.safetensors (the trainer's checkpoint); a file is a checkpoint when it
 * carries the trainer's metadata, else a module file (ts_module_save). */
static int load_weights(const tcli_opts *o, ts_module *net) {
    struct stat sb;
    const bool dir = stat(o->checkpoint, &sb) == 0 && S_ISDIR(sb.st_mode);
    char *path = dir ? tcli_checkpoint_path(o->checkpoint) : strdup(o->checkpoint);
    if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
    int rc = -1;
    if (stat(path, &sb) != 0) {
        rc = tcli_fail(TCLI_USAGE, "--checkpoint: no checkpoint at '%s'", path);
    } else {
        char *meta = ts_safetensors_metadata(path, "tessera");
        ts_error_clear();
        ts_status st =
            meta ? ts_checkpoint_load(path, net, NULL, NULL) : ts_module_load(net, path, true);
        free(meta);
        /* a shape mismatch means another model or data set: the user's mistake */
        if (st) rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "--checkpoint");
    }
    free(path);
    return rc;
}

/* A batch like --data's samples: images [B, C, H, W] and tabular rows [B, F] drawn from N(0, 1)
 * (the trainer standardises its inputs), byte windows [B, context] of random bytes. */
static ts_tensor *example_input(const tcli_opts *o, const tcli_data *d, int64_t batch,
                                ts_device dev) {
    ts_opts to = {.device = dev};
    if (d->text) return ts_randint(0, 256, TS_SHAPE(batch, o->context), to);
    if (d->channels) return ts_randn(TS_SHAPE(batch, d->channels, d->height, d->width), to);
    return ts_randn(TS_SHAPE(batch, d->features), to);
}

/* DIR/input.npy and DIR/output.npy: the example and Tessera's output on it (eval mode) */
static int save_io(const tcli_opts *o, ts_module *net, ts_tensor *x) {
    char in_path[4096], out_path[4096];
    snprintf(in_path, sizeof in_path, "%s/input.npy", o->save_io);
    snprintf(out_path, sizeof out_path, "%s/output.npy", o->save_io);
    if (mkdir(o->save_io, 0777) != 0 && errno != EEXIST)
        return tcli_fail(TCLI_FAIL, "--save-io: cannot create '%s'", o->save_io);
    ts_module_eval(net);
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *y = ts_forward(net, x);
    if (y && ts_npy_save(in_path, x) == TS_OK) ts_npy_save(out_path, y);
    ts_scope_end();
    ts_no_grad_end();
    return ts_error() ? tcli_fail_ts(TCLI_FAIL, "--save-io") : -1;
}

int tcli_export_float(const tcli_opts *o, const tcli_data *d, ts_device dev, const char *path) {
    ts_manual_seed(o->seed);
    ts_module *net = tcli_model_new(o, d);
    if (!net) return ts_error() ? tcli_fail_ts(TCLI_FAIL, "model") : TCLI_USAGE;
    int rc = -1;
    net = ts_module_to(net, dev);
    if (ts_error()) rc = tcli_fail_ts(TCLI_FAIL, "model");
    if (rc < 0 && o->checkpoint) rc = load_weights(o, net);
    /* the example in a scope of its own: whether or not the caller has one open, it is freed */
    ts_scope_begin();
    ts_tensor *x = rc < 0 ? example_input(o, d, 2, dev) : NULL;
    const char *in_name[] = {d->text ? "tokens" : "input"}, *out_name[] = {"logits"};
    ts_onnx_export_opts eo = {.dynamic_batch = true,
                              .input_names = in_name,
                              .output_names = out_name,
                              .producer = "tessera quantize"};
    if (rc < 0 && (!x || ts_onnx_export(net, 1, &x, path, eo)))
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "export");
    ts_scope_end();
    ts_module_free(net);
    return rc;
}

int tcli_export(const tcli_opts *o) {
    ts_device dev;
    int rc = tcli_resolve_device(o, &dev);
    if (rc >= 0) return rc;
    if (o->threads) ts_set_num_threads(o->threads);
    tcli_data d;
    /* csv needs its training rows for the feature statistics; the rest only the test split */
    if ((rc = tcli_data_open(o, !strcmp(o->data, "csv"), &d)) >= 0) return rc;
    ts_manual_seed(o->seed);
    ts_module *net = tcli_model_new(o, &d);
    ts_tensor *x = NULL;
    if (!net) {
        rc = ts_error() ? tcli_fail_ts(TCLI_FAIL, "model") : TCLI_USAGE;
        goto done;
    }
    net = ts_module_to(net, dev);
    if (ts_error()) {
        rc = tcli_fail_ts(TCLI_FAIL, "model");
        goto done;
    }
    if (o->checkpoint && (rc = load_weights(o, net)) >= 0) goto done;
    /* ours whether or not a scope is open (outside one, the result is already the caller's) */
    x = example_input(o, &d, o->batch ? o->batch : 1, dev);
    if (ts_scope_depth() > 0) x = ts_retain(x);
    if (!x) {
        rc = tcli_fail_ts(TCLI_FAIL, "input");
        goto done;
    }
    const char *in_name[] = {d.text ? "tokens" : "input"}, *out_name[] = {"logits"};
    ts_onnx_export_opts eo = {.dynamic_batch = o->dynamic_batch,
                              .input_names = in_name,
                              .output_names = out_name,
                              .producer = "tessera export"};
    if (ts_onnx_export(net, 1, &x, o->output, eo)) {
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, "export");
        goto done;
    }
    if (o->save_io && (rc = save_io(o, net, x)) >= 0) goto done;
    char shape[128] = "";
    ts_shape s = ts_shape_of(x);
    for (int i = 0; i < s.ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "",
                 (long long)s.dims[i]);
    printf("%s (%s) written to %s: input '%s' [%s]%s, output '%s'\n", tcli_model_title(o->model),
           o->checkpoint ? o->checkpoint : "fresh weights", o->output, in_name[0], shape,
           o->dynamic_batch ? " (dim 0: batch)" : "", out_name[0]);
    fflush(stdout);
    rc = TCLI_OK;
done:
    ts_release(x);
    ts_module_free(net);
    tcli_data_close(&d);
    return rc;
}
