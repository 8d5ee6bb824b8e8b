/* checkpoint.c — module weights and training checkpoints (model, optimizer, grad scaler, step,
 * RNG) as safetensors files, loadable into a model on any device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "nn/module_load.h"
#include "optim/optim_load.h"

/* Adds src's tensors to dst as "<prefix><name>". */
static ts_status add_prefixed(const char *op, ts_tensor_list *dst, const char *prefix,
                              const ts_tensor_list *src) {
    for (int i = 0; i < src->n; i++) {
        size_t n = strlen(prefix) + strlen(src->names[i]) + 1;
        char *name = malloc(n);
        if (!name) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        snprintf(name, n, "%s%s", prefix, src->names[i]);
        ts_status st = ts_tensor_list_add(dst, name, src->tensors[i]);
        free(name);
        if (st) return st;
    }
    return TS_OK;
}

/* A state_dict getter reports failure only through the error state; an error already pending
 * before the call must not be mistaken for it, hence the check before. */
static ts_status check_module(const char *op, ts_module *m, const char *path) {
    tsi_init();
    if (!m || !path) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, m ? "path" : "module");
        return ts_error() ? ts_error() : TS_ERR_ARG;
    }
    return TS_OK;
}

ts_status ts_module_save(ts_module *m, const char *path) {
    ts_status st = check_module("module_save", m, path);
    if (st) return st;
    ts_status before = ts_error();
    ts_tensor_list sd = ts_module_state_dict(m);
    if (!before && ts_error()) st = ts_error();
    /* "format": "pt" is what PyTorch tools (transformers) look for in a state_dict file */
    static const char *const meta[] = {"format", "pt"};
    if (!st) st = ts_safetensors_save(path, &sd, meta, 1);
    ts_tensor_list_free(&sd);
    return st;
}

ts_status ts_module_load(ts_module *m, const char *path, bool strict) {
    ts_status st = check_module("module_load", m, path);
    if (st) return st;
    /* staged on the CPU: load_state_dict copies each tensor to its parameter's device */
    ts_tensor_list sd = {0};
    st = ts_safetensors_load(path, ts_cpu(), &sd);
    if (!st) st = ts_module_load_state_dict(m, &sd, strict);
    ts_tensor_list_free(&sd);
    return st;
}

static ts_tensor *i64_scalar(uint64_t bits) {
    int64_t v;
    memcpy(&v, &bits, sizeof v);
    return ts_tensor_i64(TS_SHAPE(), &v, (ts_opts){.device = ts_cpu()});
}

ts_status ts_checkpoint_save_parts(const char *path, const ts_checkpoint_parts *p) {
    const char *op = "checkpoint_save";
    if (!p) {
        tsi_init();
        return tsi_error_set(TS_ERR_ARG, "%s: parts is NULL", op);
    }
    ts_status st = check_module(op, p->model, path);
    if (st) return st;
    ts_status before = ts_error();
    ts_tensor_list all = {0}, sd = ts_module_state_dict(p->model), osd = {0}, ssd = {0};
    if (p->optim) osd = ts_optim_state_dict(p->optim);
    /* a disabled scaler has an empty state (PyTorch's {}), so the file holds no scaler.* */
    if (p->scaler) ssd = ts_grad_scaler_state_dict(p->scaler);
    if (!before && ts_error()) st = ts_error();
    ts_scope_begin();
    ts_rng_state rng = ts_rng_get_state();
    if (!st) st = add_prefixed(op, &all, "model.", &sd);
    if (!st) st = add_prefixed(op, &all, "optim.", &osd);
    if (!st) st = add_prefixed(op, &all, "scaler.", &ssd);
    if (!st) st = ts_tensor_list_add(&all, "step", i64_scalar((uint64_t)p->step));
    if (!st && p->epoch_batches > 0)
        st = ts_tensor_list_add(&all, "epoch_batches", i64_scalar((uint64_t)p->epoch_batches));
    if (!st) st = ts_tensor_list_add(&all, "rng.seed", i64_scalar(rng.seed));
    if (!st) st = ts_tensor_list_add(&all, "rng.offset", i64_scalar(rng.offset));
    ts_scope_end();
    static const char *const meta[] = {"format", "pt", "tessera", "checkpoint"};
    if (!st) st = ts_safetensors_save(path, &all, meta, 2);
    ts_tensor_list_free(&all);
    ts_tensor_list_free(&sd);
    ts_tensor_list_free(&osd);
    ts_tensor_list_free(&ssd);
    return st;
}

ts_status ts_checkpoint_save(const char *path, ts_module *m, ts_optim *opt, int64_t step) {
    ts_checkpoint_parts p = {.model = m, .optim = opt, .step = step};
    return ts_checkpoint_save_parts(path, &p);
}

/* The value of a 0-dim I64 entry that a checkpoint must have. */
static ts_status read_i64(const char *op, const char *path, const ts_tensor_list *l,
                          const char *name, uint64_t *out) {
    ts_tensor *t = ts_tensor_list_get(l, name);
    if (!t || t->dtype != TS_I64 || t->shape.ndim != 0)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: %s: %s; a checkpoint (ts_checkpoint_save) holds '%s' as a 0-dim "
                             "I64 tensor",
                             op, path, t ? "wrong dtype or shape" : "missing", name);
    int64_t v = 0;
    ts_status st = ts_copy_to_host(t, &v, sizeof v);
    memcpy(out, &v, sizeof v);
    return st;
}

/* Checks a scaler state before anything is loaded: into a scratch scaler, which validates it. */
static ts_status check_scaler_state(const ts_tensor_list *ssd) {
    ts_grad_scaler *scratch = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_status st = scratch ? ts_grad_scaler_load_state_dict(scratch, ssd) : ts_error();
    ts_grad_scaler_free(scratch);
    return st;
}

ts_status ts_checkpoint_load_parts(const char *path, ts_checkpoint_parts *p) {
    const char *op = "checkpoint_load";
    if (!p) {
        tsi_init();
        return tsi_error_set(TS_ERR_ARG, "%s: parts is NULL", op);
    }
    ts_status st = check_module(op, p->model, path);
    if (st) return st;
    ts_tensor_list all = {0}, model = {0}, optim = {0}, scaler = {0};
    st = ts_safetensors_load(path, ts_cpu(), &all);
    /* everything of the file is checked before the model or the optimizer changes */
    for (int i = 0; i < all.n && !st; i++) {
        const char *name = all.names[i];
        if (!strncmp(name, "model.", 6))
            st = ts_tensor_list_add(&model, name + 6, all.tensors[i]);
        else if (!strncmp(name, "optim.", 6))
            st = ts_tensor_list_add(&optim, name + 6, all.tensors[i]);
        else if (!strncmp(name, "scaler.", 7))
            st = ts_tensor_list_add(&scaler, name + 7, all.tensors[i]);
        else if (strcmp(name, "step") && strcmp(name, "rng.seed") && strcmp(name, "rng.offset") &&
                 strcmp(name, "epoch_batches"))
            st = tsi_error_set(TS_ERR_FORMAT,
                               "%s: %s: unexpected tensor '%.200s' (a checkpoint holds model.*, "
                               "optim.*, scaler.*, step, epoch_batches, rng.seed and rng.offset)",
                               op, path, name);
    }
    uint64_t stp = 0;
    ts_rng_state rng = {0};
    if (!st) st = read_i64(op, path, &all, "step", &stp);
    if (!st) st = read_i64(op, path, &all, "rng.seed", &rng.seed);
    if (!st) st = read_i64(op, path, &all, "rng.offset", &rng.offset);
    uint64_t eb = 0; /* optional */
    if (!st && ts_tensor_list_get(&all, "epoch_batches"))
        st = read_i64(op, path, &all, "epoch_batches", &eb);
    if (!st && p->optim && optim.n == 0)
        st = tsi_error_set(TS_ERR_FORMAT,
                           "%s: %s holds no optimizer state (it was saved without an optimizer)",
                           op, path);
    /* A file without scaler state leaves the scaler as it is (a float32 run resumed with mixed
     * precision starts from the scaler's defaults); scaler state without a scaler is ignored. */
    bool load_scaler = p->scaler && scaler.n > 0;
    if (!st && load_scaler) st = check_scaler_state(&scaler);
    /* model and optimizer staged (checked, copied onto their devices) before either changes, so
     * a failure, out of memory included, leaves both as they were */
    tsi_module_staged *gm = NULL;
    tsi_optim_staged *go = NULL;
    if (!st && !(gm = tsi_module_load_stage("load_state_dict", p->model, &model, true)))
        st = ts_error();
    if (!st && p->optim && !(go = tsi_optim_load_stage("optim_load_state_dict", p->optim, &optim)))
        st = ts_error();
    /* the scaler's load is all or nothing, and the last thing here that can fail */
    if (!st && load_scaler) st = ts_grad_scaler_load_state_dict(p->scaler, &scaler);
    if (!st) {
        tsi_module_load_commit(gm);
        gm = NULL;
        if (go) tsi_optim_load_commit(go);
        go = NULL;
        ts_rng_set_state(rng);
        p->step = (int64_t)stp;
        p->epoch_batches = (int64_t)eb;
    }
    tsi_module_load_drop(gm);
    tsi_optim_load_drop(go);
    ts_tensor_list_free(&model);
    ts_tensor_list_free(&optim);
    ts_tensor_list_free(&scaler);
    ts_tensor_list_free(&all);
    return st;
}

ts_status ts_checkpoint_load(const char *path, ts_module *m, ts_optim *opt, int64_t *step) {
    ts_checkpoint_parts p = {.model = m, .optim = opt};
    ts_status st = ts_checkpoint_load_parts(path, &p);
    if (!st && step) *step = p.step;
    return st;
}
