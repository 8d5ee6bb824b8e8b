/* optim_capture.c — the capturable optimizer (PyTorch's capturable=True, docs/CAPTURE.md): from
 * the first step of an optimizer that a thread captures, each of its parameters keeps its lr,
 * momentum, beta1 and step count on its device (f64 [TS_OPTIM_SCALARS]); the step kernel reads them
 * there and advances the count, so a replayed step follows a schedule changed between replays and
 * counts Adam's bias corrections as the eager steps would. Eager steps use the same scalars from
 * then on, so the two never drift apart. */
#include "core/capture.h"
#include "optim/optim_internal.h"

/* The scalars live in device memory: read and written through the real backend (never recorded:
 * these are the values the replays start from). */
static void *scalars_data(const tsi_optim_param *pp) { return tsi_kview(pp->scalars).data; }

static void write_scalars(const tsi_optim_param *pp, int first, const double *v, int n) {
    const ts_device dev = tsi_device(pp->scalars);
    const ts_backend *be = tsi_backend_for(dev.type);
    be->copy_h2d(be, dev.index, (double *)scalars_data(pp) + first, v, (size_t)n * sizeof *v);
}

static void read_scalars(const tsi_optim_param *pp, double v[TS_OPTIM_SCALARS]) {
    const ts_device dev = tsi_device(pp->scalars);
    const ts_backend *be = tsi_backend_for(dev.type);
    be->copy_d2h(be, dev.index, v, scalars_data(pp), TS_OPTIM_SCALARS * sizeof *v);
}

bool tsi_optim_wants_scalars(const ts_optim *o, ts_device dev) {
    return o->capturable || tsi_capturing_on(dev);
}

bool tsi_optim_scalars_prepare(const char *op, ts_optim *o, const ts_optim_hparams *h,
                               tsi_optim_param *pp) {
    const ts_device dev = tsi_device(pp->p);
    /* (an optimizer stays capturable once a step was captured, so no scalars are ever dropped) */
    if (!tsi_optim_wants_scalars(o, dev)) return true;
    if (pp->scalars && tsi_device_eq(tsi_device(pp->scalars), dev)) return true;
    double v[TS_OPTIM_SCALARS] = {[TS_OPTIM_SC_STEPS] = pp->step};
    if (pp->scalars) read_scalars(pp, v); /* the parameter moved: its count goes with it */
    v[TS_OPTIM_SC_LR] = h->lr;
    v[TS_OPTIM_SC_MOMENTUM] = h->momentum;
    v[TS_OPTIM_SC_BETA1] = h->beta1;
    /* made now, outside the graph's memory, and filled now rather than at each replay */
    ts_graph *g = tsi_capture_pause();
    ts_tensor *t = tsi_new(op, TS_SHAPE(TS_OPTIM_SCALARS), TS_F64, dev);
    if (t) {
        ts_release(pp->scalars);
        pp->scalars = t;
        write_scalars(pp, 0, v, TS_OPTIM_SCALARS);
    }
    tsi_capture_resume(g);
    if (t && tsi_capturing_on(dev)) o->capturable = true;
    return t != NULL;
}

bool tsi_optim_capturing(const ts_optim *o, int first, int n) {
    for (int i = first; i < first + n; i++)
        if (tsi_capturing_on(tsi_device(o->params[i].p))) return true;
    return false;
}

bool tsi_optim_refuse_capturing(const char *op, const ts_optim *o, int first, int n,
                                const char *what) {
    if (!tsi_optim_capturing(o, first, n)) return false;
    tsi_capture_refuse(op, what);
    return true;
}

ts_status tsi_optim_group_changed(const char *op, ts_optim *o, int group) {
    const tsi_optim_group *g = &o->groups[group];
    if (tsi_optim_refuse_capturing(op, o, g->first, g->n,
                                   "a change of the learning rate or momentum (make it between "
                                   "replays: the replays read it from the device)"))
        return ts_error();
    const double v[] = {g->h.lr, g->h.momentum, g->h.beta1};
    for (int i = g->first; i < g->first + g->n; i++)
        if (o->params[i].scalars) write_scalars(&o->params[i], TS_OPTIM_SC_LR, v, 3);
    return TS_OK;
}

double tsi_optim_param_steps(const tsi_optim_param *pp) {
    if (!pp->scalars) return pp->step;
    double v[TS_OPTIM_SCALARS];
    read_scalars(pp, v);
    return v[TS_OPTIM_SC_STEPS];
}

void tsi_optim_param_set_steps(tsi_optim_param *pp, double steps) {
    pp->step = steps;
    if (pp->scalars) write_scalars(pp, TS_OPTIM_SC_STEPS, &steps, 1);
}
