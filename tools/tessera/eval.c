/* eval.c — test loss and accuracy of a model over a loader, and `tessera eval`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

ts_loader *tcli_test_loader(const tcli_opts *o, const tcli_data *d, ts_device dev) {
    /* no gradients are kept while testing, so larger batches cost little memory (a language
     * model's batch is already batch x context tokens) */
    int bs = o->batch_size < 500 && !d->text ? 500 : o->batch_size;
    return ts_loader_new(d->test, (ts_loader_opts){.batch_size = bs,
                                                   .workers = tcli_workers(o, dev),
                                                   .pin_memory = dev.type == TS_CUDA,
                                                   .device = dev,
                                                   .seed = o->seed,
                                                   .transform = tcli_data_transform(d)});
}

ts_status tcli_evaluate(ts_module *net, ts_loader *l, double *loss, double *acc, int64_t *count) {
    bool was_training = net->training;
    ts_module_eval(net);
    ts_no_grad_begin();
    double loss_sum = 0;
    int64_t correct = 0, n = 0;
    ts_batch b;
    /* per-batch sums come back to the host; a test batch is large, so the syncs are few */
    while (ts_loader_next(l, &b)) {
        ts_scope_begin();
        ts_tensor *logits = ts_forward(net, b.x), *y = b.y;
        tcli_flatten_tokens(&logits, &y); /* a language model: every position predicts */
        ts_tensor *ls =
            ts_cross_entropy_ex(logits, y, (ts_loss_opts){.reduction = TS_REDUCTION_SUM});
        ts_tensor *c = ts_sum(ts_eq(ts_argmax_dim(logits, 1, false), y));
        loss_sum += ts_item(ls);
        correct += (int64_t)ts_item(c);
        n += ts_size(y, 0);
        ts_scope_end();
        if (ts_error()) break;
    }
    ts_no_grad_end();
    ts_module_train(net, was_training);
    if (ts_error()) return ts_error();
    *loss = n ? loss_sum / (double)n : 0;
    *acc = n ? (double)correct / (double)n : 0;
    if (count) *count = n;
    return TS_OK;
}

/* eval --onnx FILE: an ONNX model of one input (logits out) on --data's test split */
static int eval_onnx(const tcli_opts *o, ts_device dev) {
    tcli_data d;
    int rc = tcli_data_open(o, !strcmp(o->data, "csv"), &d);
    if (rc >= 0) return rc;
    ts_loader *tl = NULL;
    ts_module *net = ts_onnx_load(o->onnx, (ts_onnx_opts){.device = dev, .optimize = true});
    if (!net) {
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_USAGE : TCLI_FAIL, "--onnx");
        goto done;
    }
    if (ts_onnx_num_inputs(net) != 1) {
        rc = tcli_fail(TCLI_USAGE, "--onnx: '%s' has %d inputs; eval feeds one (the samples)",
                       o->onnx, ts_onnx_num_inputs(net));
        goto done;
    }
    if (!(tl = tcli_test_loader(o, &d, dev))) {
        rc = tcli_fail_ts(TCLI_FAIL, "loader");
        goto done;
    }
    double loss, acc;
    int64_t n;
    if (tcli_evaluate(net, tl, &loss, &acc, &n)) {
        rc = tcli_fail_ts(TCLI_FAIL, "eval");
        goto done;
    }
    printf("%s on %s (%lld test samples) on %s\n", o->onnx, d.title, (long long)n,
           ts_device_str(dev));
    printf("test loss %.4f  test accuracy %.4f\n", loss, acc);
    fflush(stdout);
    rc = TCLI_OK;
done:
    ts_loader_free(tl);
    ts_module_free(net);
    tcli_data_close(&d);
    return rc;
}

int tcli_eval(const tcli_opts *o) {
    ts_device dev;
    int rc = tcli_resolve_device(o, &dev);
    if (rc >= 0) return rc;
    if (o->threads) ts_set_num_threads(o->threads);
    if (o->onnx) return eval_onnx(o, dev);
    /* a folder holds latest.safetensors; a file is taken as it is */
    struct stat sb;
    char *path = NULL;
    if (stat(o->checkpoint, &sb) == 0 && S_ISDIR(sb.st_mode))
        path = tcli_checkpoint_path(o->checkpoint);
    else
        path = strdup(o->checkpoint);
    if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
    if (stat(path, &sb) != 0) {
        rc = tcli_fail(TCLI_USAGE,
                       "--checkpoint: no checkpoint at '%s' (train with --checkpoint first)", path);
        free(path);
        return rc;
    }
    tcli_data d;
    /* csv needs its training rows for the feature statistics; images only the test split */
    rc = tcli_data_open(o, !strcmp(o->data, "csv"), &d);
    if (rc >= 0) {
        free(path);
        return rc;
    }
    ts_module *net = NULL;
    ts_loader *tl = NULL;
    ts_manual_seed(o->seed);
    net = tcli_model_new(o, &d);
    if (!net) {
        rc = ts_error() ? tcli_fail_ts(TCLI_FAIL, "model") : TCLI_USAGE;
        goto done;
    }
    net = ts_module_to(net, dev);
    /* a QAT checkpoint (tessera train --qat): the model prepared as it was trained, so the
     * figures are the fake-quantized model's */
    bool qat = false;
    if ((rc = tcli_checkpoint_is_qat(path, &qat)) >= 0 ||
        (qat && (rc = tcli_qat_prepare(net)) >= 0))
        goto done;
    int64_t step = 0;
    if (ts_error() || ts_checkpoint_load(path, net, NULL, &step)) {
        /* a shape mismatch means another model or data set: the user's mistake */
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO ? TCLI_FAIL : TCLI_USAGE, NULL);
        goto done;
    }
    if (!(tl = tcli_test_loader(o, &d, dev))) {
        rc = tcli_fail_ts(TCLI_FAIL, "loader");
        goto done;
    }
    double loss, acc;
    int64_t n;
    if (tcli_evaluate(net, tl, &loss, &acc, &n)) {
        rc = tcli_fail_ts(TCLI_FAIL, "eval");
        goto done;
    }
    printf("%s on %s (%lld test samples) on %s, checkpoint %s (step %lld)%s\n",
           tcli_model_title(o->model), d.title, (long long)n, ts_device_str(dev), path,
           (long long)step, qat ? ", fake-quantized (QAT)" : "");
    if (d.text) /* bits per byte: the loss in nats / ln 2 */
        printf("val loss %.4f (%.3f bpb)  val accuracy %.4f\n", loss, loss / log(2.0), acc);
    else
        printf("test loss %.4f  test accuracy %.4f\n", loss, acc);
    fflush(stdout);
    rc = TCLI_OK;
done:
    ts_loader_free(tl);
    ts_module_free(net);
    tcli_data_close(&d);
    free(path);
    return rc;
}
