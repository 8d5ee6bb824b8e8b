/* fsdp_full.c — consolidation of an FSDP module: its full-precision state dict (every unit's shards
 * gathered in their own dtype) and one safetensors file of the model's ordinary names, written by
 * the group's first rank. */
#define _POSIX_C_SOURCE 200809L
#include "dist/fsdp_internal.h"
#include "nn/module_internal.h"

/* Unit u's parameters in full precision: its shards gathered in their own dtype (not
 * param_dtype), each parameter of the state dict replaced by a view of that. */
static bool full_unit(fsdp_module *f, fsdp_unit *u, ts_tensor_list *sd) {
    /* on the parameters' device (a cpu_offload shard is copied there for the gather) */
    const ts_device dev = tsi_device(u->flat);
    ts_tensor *full = tsi_new("fsdp_full_state_dict", TS_SHAPE(u->padded), u->shard->dtype, dev);
    bool ok = full != NULL;
    if (ok && f->world > 1) {
        ts_scope_begin();
        ts_tensor *src = tsi_device(u->shard).type == dev.type ? u->shard : ts_to(u->shard, dev);
        ok = src && ts_dist_wait(tsi_dist_all_gather_unchecked(full, src, f->o.group)) == TS_OK;
        ts_scope_end();
    } else if (ok) {
        ok = ts_copy_(full, u->shard) != NULL;
    }
    for (int k = 0; ok && k < u->n_params; k++) {
        fsdp_param *pp = &u->params[k];
        for (int e = 0; e < sd->n; e++) {
            if (sd->tensors[e] != pp->p) continue;
            int64_t strides[TS_MAX_DIMS];
            tsi_contiguous_strides(&pp->p->shape, strides);
            ts_tensor *v = tsi_view_of(full, pp->p->shape, strides, pp->offset);
            if (!v) {
                ok = false;
                break;
            }
            ts_release(sd->tensors[e]);
            sd->tensors[e] = v;
        }
    }
    ts_release(full);
    return ok;
}

ts_tensor_list ts_fsdp_full_state_dict(ts_module *fsdp) {
    static const char op[] = "fsdp_full_state_dict";
    tsi_init();
    ts_tensor_list sd = {0};
    fsdp_module *f = tsi_fsdp_of(op, fsdp);
    if (!f) return sd;
    /* every rank gathers, or none (a rank with an error pending would not join the gathers) */
    if (!tsi_fsdp_agree(f, op, !ts_error())) return sd;
    sd = ts_module_state_dict(f->module);
    bool ok = !ts_error();
    ts_scope_begin();
    ts_no_grad_begin();
    for (int i = 0; i < f->n_units; i++) /* every rank joins every gather */
        ok = full_unit(f, &f->units[i], &sd) && ok;
    ts_no_grad_end();
    ts_scope_end();
    if (!ok) ts_tensor_list_free(&sd);
    return sd;
}

ts_status ts_fsdp_save_full(ts_module *fsdp, const char *path) {
    static const char op[] = "fsdp_save_full";
    tsi_init();
    fsdp_module *f = tsi_fsdp_of(op, fsdp);
    if (!f) return ts_error();
    if (!path || !*path)
        return tsi_error_set(TS_ERR_ARG, "%s: path is %s", op, path ? "empty" : "NULL");
    /* the wrapped model's state dict in the shards' precision: the names ts_module_save of the
     * unwrapped model writes */
    ts_tensor_list sd = ts_fsdp_full_state_dict(fsdp);
    bool ok = !ts_error();
    static const char *const meta[] = {"format", "pt"};
    if (ok && f->rank == 0) ok = ts_safetensors_save(path, &sd, meta, 1) == TS_OK;
    ts_tensor_list_free(&sd);
    return tsi_fsdp_agree(f, op, ok) ? TS_OK : ts_error();
}
