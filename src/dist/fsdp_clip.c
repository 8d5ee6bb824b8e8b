/* fsdp_clip.c — clipping gradients by their global norm when each rank holds a shard of them
 * (FSDP2's clip_grad_norm_ over DTensors): the shards' partial norms are combined across ranks. */
#include <math.h>

#include "dist/fsdp_internal.h"

static const char *OP = "fsdp_clip_grad_norm";

/* sum |g|^p over this rank's shard gradients (max |g| for p = inf), in float64 */
static double local_part(fsdp_module *f, double p) {
    double acc = 0;
    ts_scope_begin();
    for (int i = 0; i < 2 * f->n_units && !ts_error(); i++) {
        fsdp_unit *u = &f->units[i / 2];
        ts_tensor *g = i % 2 < u->n_leaves ? u->leaf[i % 2]->grad : NULL;
        if (!g || ts_numel(g) == 0) continue;
        ts_tensor *a = ts_abs(ts_to_dtype(g, TS_F64));
        if (isinf(p))
            acc = fmax(acc, ts_item(ts_max(a)));
        else
            acc += ts_item(ts_sum(p == 2 ? ts_mul(a, a) : p == 1 ? a : ts_pow_scalar(a, p)));
    }
    ts_scope_end();
    return acc;
}

double ts_fsdp_clip_grad_norm(ts_module *fsdp, double max_norm, double norm_type) {
    fsdp_module *f = tsi_fsdp_of(OP, fsdp);
    if (!f) return NAN;
    double p = norm_type == 0 ? 2 : norm_type;
    if (max_norm != max_norm || !(p > 0))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: max_norm (%g) must not be NaN and norm_type (%g) must "
                             "be positive (0: 2, INFINITY: the max norm)",
                             OP, max_norm, norm_type),
               NAN;
    if (ts_error()) return NAN;
    ts_scope_begin();
    ts_no_grad_begin();
    double local = local_part(f, p), total = NAN;
    ts_tensor *t =
        ts_error() ? NULL : ts_tensor_f64(TS_SHAPE(1), &local, (ts_opts){.device = ts_cpu()});
    /* every rank holds a disjoint block (padding is zero): the sum (max) over ranks is the whole.
     * A rank whose own part failed joins the all-reduce anyway, with its error pending and no
     * tensor: the all-reduce's cross-rank check then fails it on every rank, naming this one. */
    if (ts_dist_all_reduce(t, isinf(p) ? TS_DIST_MAX : TS_DIST_SUM, f->o.group) == TS_OK) {
        double s = ts_item(t);
        total = isinf(p) ? s : p == 1 ? s : p == 2 ? sqrt(s) : pow(s, 1.0 / p);
    }
    double coef = max_norm / (total + 1e-6);
    if (!ts_error() && coef < 1) /* torch multiplies by the clamped coefficient */
        for (int i = 0; i < f->n_units; i++)
            for (int k = 0; k < f->units[i].n_leaves; k++)
                if (f->units[i].leaf[k]->grad) ts_mul_scalar_(f->units[i].leaf[k]->grad, coef);
    ts_no_grad_end();
    ts_scope_end();
    return ts_error() ? NAN : total;
}
