/* optim_master.c — float32 master weights for f16/bf16 parameters (ts_optim_set_master_weights):
 * the step updates the master with the float32 math and stores the parameter as the master rounded
 * once (the backend's optim_step, ts_optim_step_args.master). */
#include <stdatomic.h>
#include <string.h>

#include "optim/optim_internal.h"
#include "tessera/optim_master.h"

static bool low_precision(ts_dtype dt) { return dt == TS_F16 || dt == TS_BF16; }

bool tsi_optim_master_wanted(const ts_optim *o, const tsi_optim_param *pp) {
    return o->master_weights && low_precision(pp->p->dtype);
}

ts_dtype tsi_optim_state_dtype(const ts_optim *o, const tsi_optim_param *pp) {
    return tsi_optim_master_wanted(o, pp) ? TS_F32 : pp->p->dtype;
}

static uint64_t version_of(const ts_tensor *t) {
    return (uint64_t)atomic_load(&t->storage->version);
}

void tsi_optim_master_synced(tsi_optim_param *pp) {
    const ts_tensor *p = pp->p;
    pp->master_puid = p->storage->uid;
    pp->master_pver = version_of(p);
    pp->master_mver = version_of(pp->master);
    pp->master_poff = p->offset;
    memcpy(pp->master_pstrides, p->strides, sizeof pp->master_pstrides);
}

void tsi_optim_master_drop(tsi_optim_param *pp) {
    ts_release(pp->master);
    pp->master = NULL;
}

/* The master still stands for the parameter: same memory (a move or a dtype change gives the
 * parameter new memory), the same elements of it (p.data = another view of the same storage,
 * ts_tensor_set_data, changes the geometry and no version), and the parameter written only by the
 * optimizer since they last agreed. Every write of the optimizer bumps both versions once (a
 * captured step's replays too), so any other write shows as a difference; a master is written by
 * its optimizer only. The master has the parameter's shape as made. */
static bool master_current(const tsi_optim_param *pp) {
    const ts_tensor *m = pp->master, *p = pp->p;
    return m && p->storage->uid == pp->master_puid && tsi_device_eq(tsi_device(m), tsi_device(p)) &&
           p->offset == pp->master_poff && m->shape.ndim == p->shape.ndim &&
           !memcmp(m->shape.dims, p->shape.dims, sizeof(int64_t) * (size_t)p->shape.ndim) &&
           !memcmp(pp->master_pstrides, p->strides, sizeof(int64_t) * (size_t)p->shape.ndim) &&
           version_of(p) - pp->master_pver == version_of(m) - pp->master_mver;
}

bool tsi_optim_master_prepare(const char *op, ts_optim *o, tsi_optim_param *pp) {
    if (!tsi_optim_master_wanted(o, pp)) {
        tsi_optim_master_drop(pp);
        return true;
    }
    if (master_current(pp)) return true;
    const int idx = (int)(pp - o->params);
    if (tsi_optim_refuse_capturing(op, o, idx, 1, "making a parameter's float32 master weights"))
        return false;
    ts_tensor *m = tsi_private_copy(op, pp->p, tsi_device(pp->p), TS_F32);
    if (!m) return false;
    tsi_optim_master_drop(pp);
    pp->master = m;
    tsi_optim_master_synced(pp);
    return true;
}

ts_status ts_optim_set_master_weights(ts_optim *opt, bool on) {
    static const char op[] = "optim_set_master_weights";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (opt->offload)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the optimizer is offloaded, and offload already steps float32 "
                             "master weights on the host (ts_optim_offload)",
                             op);
    if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params, "turning master weights on or off"))
        return ts_error();
    const bool was = opt->master_weights;
    opt->master_weights = on;
    for (int i = 0; i < opt->n_params; i++)
        if (!tsi_optim_master_prepare(op, opt, &opt->params[i])) {
            /* all or nothing: the masters made here go again */
            opt->master_weights = was;
            for (int j = 0; j < i; j++)
                if (!was) tsi_optim_master_drop(&opt->params[j]);
            return ts_error();
        }
    return TS_OK;
}

bool ts_optim_master_weights(const ts_optim *opt) { return opt && opt->master_weights; }
