/* lbfgs.c — torch.optim.LBFGS: the two-loop recursion over a history of update directions and
 * the optional strong-Wolfe line search (PyTorch's _strong_wolfe, after minFunc), step for step.
 * The flat vectors (gradient, direction, history) live on the parameters' device in their dtype,
 * formed by the library's ops; the scalars (dot products, step length) are doubles read back from
 * the device (PyTorch keeps them as 0-dim tensors of the parameters' dtype: the same values to
 * that dtype's rounding). The model is re-evaluated through the caller's closure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

struct ts_lbfgs {
    ts_lbfgs_opts o;
    ts_tensor **params; /* retained */
    int n;
    /* the state (PyTorch's state[0]) */
    int64_t n_iter, func_evals;
    ts_tensor *d, *prev_flat_grad; /* retained; NULL before the first iteration */
    double t, h_diag, prev_loss;
    ts_tensor **old_dirs, **old_stps; /* [history_size], the first n_hist retained */
    double *ro, *al;                  /* [history_size] */
    int n_hist;
};

/* *slot = t with a reference of its own (t may belong to a scope that ends) */
static void hold(ts_tensor **slot, ts_tensor *t) {
    ts_retain(t);
    ts_release(*slot);
    *slot = t;
}

static double dot(ts_tensor *a, ts_tensor *b) { return ts_item(ts_dot(a, b)); }
static double absmax(ts_tensor *a) { return ts_item(ts_max(ts_abs(a))); }

void ts_lbfgs_free(ts_lbfgs *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) ts_release(o->params[i]);
    for (int i = 0; i < o->n_hist; i++) ts_release(o->old_dirs[i]), ts_release(o->old_stps[i]);
    ts_release(o->d);
    ts_release(o->prev_flat_grad);
    free(o->params);
    free(o->old_dirs);
    free(o->old_stps);
    free(o->ro);
    free(o->al);
    free(o);
}

ts_lbfgs *ts_lbfgs_new(ts_tensor *const *params, int n, ts_lbfgs_opts opts) {
    static const char op[] = "lbfgs";
    tsi_init();
    if (n <= 0 || !params)
        return tsi_error_set(TS_ERR_ARG, "%s: got an empty parameter list", op), NULL;
    if (!(opts.lr >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g", op, opts.lr), NULL;
    if (opts.max_iter <= 0 || opts.history_size <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: max_iter and history_size must be positive, got %d and %d", op,
                             opts.max_iter, opts.history_size),
               NULL;
    if (opts.max_eval <= 0) opts.max_eval = opts.max_iter * 5 / 4;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, params[i], "a parameter")) return NULL;
        if (!tsi_is_float(params[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: parameter %d (%s) is not floating point", op, i,
                                 tsi_desc(params[i])),
                   NULL;
        if (params[i]->dtype != params[0]->dtype ||
            !tsi_device_eq(ts_device_of(params[i]), ts_device_of(params[0])))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: parameter %d (%s) differs in dtype or device from parameter "
                                 "0 (%s): the flat vectors need one of each",
                                 op, i, tsi_desc(params[i]), tsi_desc(params[0])),
                   NULL;
    }
    ts_lbfgs *o = calloc(1, sizeof *o);
    size_t h = (size_t)opts.history_size;
    if (o) {
        o->params = calloc((size_t)n, sizeof *o->params);
        o->old_dirs = calloc(h, sizeof *o->old_dirs);
        o->old_stps = calloc(h, sizeof *o->old_stps);
        o->ro = calloc(h, sizeof *o->ro);
        o->al = calloc(h, sizeof *o->al);
    }
    if (!o || !o->params || !o->old_dirs || !o->old_stps || !o->ro || !o->al) {
        ts_lbfgs_free(o);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    o->o = opts;
    for (int i = 0; i < n; i++) o->params[i] = ts_retain(params[i]);
    o->n = n;
    return o;
}

/* the gradients as one flat vector (zeros for a parameter without one), negated to maximize */
static ts_tensor *flat_grad(ts_lbfgs *o) {
    ts_tensor *views[64] = {0}, **v = o->n <= 64 ? views : malloc((size_t)o->n * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "lbfgs: out of host memory"), NULL;
    for (int i = 0; i < o->n; i++) {
        ts_tensor *p = o->params[i], *g = ts_grad(p);
        v[i] = g ? ts_reshape(g, TS_SHAPE(ts_numel(g)))
                 : ts_zeros(TS_SHAPE(ts_numel(p)),
                            (ts_opts){.dtype = p->dtype, .device = ts_device_of(p)});
    }
    ts_tensor *flat = ts_cat(v, o->n, 0);
    if (v != views) free(v);
    return o->o.maximize ? ts_neg(flat) : flat;
}

/* p += step * update[p's range], every parameter, without recording a graph */
static void add_grad(ts_lbfgs *o, double step, ts_tensor *update) {
    ts_no_grad_begin();
    ts_scope_begin();
    int64_t off = 0;
    for (int i = 0; i < o->n && !ts_error(); i++) {
        ts_tensor *p = o->params[i];
        int64_t k = ts_numel(p);
        ts_tensor *u = ts_reshape(ts_narrow(update, 0, off, k), ts_shape_of(p));
        ts_copy_(p, ts_add_alpha(p, u, step));
        off += k;
    }
    ts_scope_end();
    ts_no_grad_end();
}

/* the closure's loss (negated to maximize), its temporaries freed; NAN with the error set */
static double evaluate(ts_lbfgs *o, ts_lbfgs_closure f, void *ctx) {
    double loss = NAN;
    ts_scope_begin();
    ts_status st = f(ctx, &loss);
    ts_scope_end();
    if (st && !ts_error())
        tsi_error_set(st, "lbfgs: the closure failed (status %s)", ts_status_string(st));
    if (ts_error()) return NAN;
    return o->o.maximize ? -loss : loss;
}

/* PyTorch's _cubic_interpolate (bounds NULL: the interval of x1 and x2) */
static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                                const double *bounds) {
    double lo, hi;
    if (bounds)
        lo = bounds[0], hi = bounds[1];
    else if (x1 <= x2)
        lo = x1, hi = x2;
    else
        lo = x2, hi = x1;
    double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        double d2 = sqrt(d2_square), min_pos;
        if (x1 <= x2)
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2));
        else
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return fmin(fmax(min_pos, lo), hi);
    }
    return (lo + hi) / 2.0;
}

/* the loss and flat gradient at x + t d (x: the parameters' values, put back afterwards) */
static double directional_evaluate(ts_lbfgs *o, ts_lbfgs_closure f, void *ctx, ts_tensor **x,
                                   double t, ts_tensor *d, ts_tensor **g_out) {
    add_grad(o, t, d);
    double loss = ts_error() ? NAN : evaluate(o, f, ctx);
    if (!ts_error()) hold(g_out, flat_grad(o));
    /* put the parameters back even after a failed closure, keeping its error */
    ts_status keep = ts_error();
    char msg[512] = "";
    if (keep) snprintf(msg, sizeof msg, "%s", ts_error_message()), ts_error_clear();
    ts_no_grad_begin();
    ts_scope_begin();
    for (int i = 0; i < o->n; i++) ts_copy_(o->params[i], x[i]);
    ts_scope_end();
    ts_no_grad_end();
    if (keep) ts_error_clear(), tsi_error_set(keep, "%s", msg);
    return loss;
}

/* PyTorch's _strong_wolfe with c1 1e-4, c2 0.9: the loss, gradient (*g, replaced) and step t
 * (*t) it ends at, and the closure evaluations it made */
static int strong_wolfe(ts_lbfgs *o, ts_lbfgs_closure f, void *ctx, ts_tensor **x, double *t_io,
                        ts_tensor *d, double *f_io, ts_tensor **g, double gtd, int max_ls) {
    const double c1 = 1e-4, c2 = 0.9, tolerance_change = o->o.tolerance_change;
    double t = *t_io, f0 = *f_io;
    double d_norm = absmax(d);
    /* the brackets' gradients: bg[0], bg[1] held; g_new, g_prev held */
    ts_tensor *g_new = NULL, *g_prev = NULL, *bg[2] = {NULL, NULL};
    hold(&g_prev, *g);
    double f_new = directional_evaluate(o, f, ctx, x, t, d, &g_new);
    int evals = 1;
    double gtd_new = ts_error() ? NAN : dot(g_new, d);
    double t_prev = 0, f_prev = f0, gtd_prev = gtd;
    bool done = false;
    int ls_iter = 0, nb = 0;
    double b[2] = {0, 0}, bf[2] = {0, 0}, bgtd[2] = {0, 0};
    while (ls_iter < max_ls && !ts_error()) {
        if (f_new > (f0 + c1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
            nb = 2, b[0] = t_prev, b[1] = t, bf[0] = f_prev, bf[1] = f_new;
            hold(&bg[0], g_prev), hold(&bg[1], g_new), bgtd[0] = gtd_prev, bgtd[1] = gtd_new;
            break;
        }
        if (fabs(gtd_new) <= -c2 * gtd) {
            nb = 1, b[0] = t, bf[0] = f_new, hold(&bg[0], g_new);
            done = true;
            break;
        }
        if (gtd_new >= 0) {
            nb = 2, b[0] = t_prev, b[1] = t, bf[0] = f_prev, bf[1] = f_new;
            hold(&bg[0], g_prev), hold(&bg[1], g_new), bgtd[0] = gtd_prev, bgtd[1] = gtd_new;
            break;
        }
        double bounds[2] = {t + 0.01 * (t - t_prev), t * 10};
        double tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
        t_prev = tmp, f_prev = f_new, gtd_prev = gtd_new;
        hold(&g_prev, g_new);
        f_new = directional_evaluate(o, f, ctx, x, t, d, &g_new);
        evals++;
        gtd_new = ts_error() ? NAN : dot(g_new, d);
        ls_iter++;
    }
    if (ls_iter == max_ls && !ts_error()) {
        nb = 2, b[0] = 0, b[1] = t, bf[0] = f0, bf[1] = f_new;
        hold(&bg[0], *g), hold(&bg[1], g_new), bgtd[0] = gtd, bgtd[1] = gtd_new;
    }
    /* zoom: the bracket [low, high] shrinks until the Wolfe conditions hold */
    bool insuf_progress = false;
    int low = 0, high = 1;
    if (nb == 2 && bf[0] > bf[1]) low = 1, high = 0;
    while (!done && ls_iter < max_ls && nb == 2 && !ts_error()) {
        if (fabs(b[1] - b[0]) * d_norm < tolerance_change) break;
        t = cubic_interpolate(b[0], bf[0], bgtd[0], b[1], bf[1], bgtd[1], NULL);
        double bmax = fmax(b[0], b[1]), bmin = fmin(b[0], b[1]);
        double eps = 0.1 * (bmax - bmin);
        if (fmin(bmax - t, t - bmin) < eps) {
            if (insuf_progress || t >= bmax || t <= bmin) {
                t = fabs(t - bmax) < fabs(t - bmin) ? bmax - eps : bmin + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        f_new = directional_evaluate(o, f, ctx, x, t, d, &g_new);
        evals++;
        if (ts_error()) break;
        gtd_new = dot(g_new, d);
        ls_iter++;
        if (f_new > (f0 + c1 * t * gtd) || f_new >= bf[low]) {
            b[high] = t, bf[high] = f_new, bgtd[high] = gtd_new;
            hold(&bg[high], g_new);
            if (bf[0] <= bf[1])
                low = 0, high = 1;
            else
                low = 1, high = 0;
        } else {
            if (fabs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (b[high] - b[low]) >= 0) {
                b[high] = b[low], bf[high] = bf[low], bgtd[high] = bgtd[low];
                hold(&bg[high], bg[low]);
            }
            b[low] = t, bf[low] = f_new, bgtd[low] = gtd_new;
            hold(&bg[low], g_new);
        }
    }
    if (!ts_error()) {
        if (nb == 1) low = 0;
        *t_io = b[low], *f_io = bf[low];
        hold(g, bg[low]);
    }
    ts_release(g_new), ts_release(g_prev), ts_release(bg[0]), ts_release(bg[1]);
    return evals;
}

/* One iteration's new direction from the history (the two-loop recursion), into o->d */
static void two_loop(ts_lbfgs *o, ts_tensor *grad) {
    ts_tensor *y = ts_sub(grad, o->prev_flat_grad);
    ts_tensor *s = ts_mul_scalar(o->d, o->t);
    double ys = ts_error() ? 0 : dot(y, s);
    if (ts_error()) return;
    if (ys > 1e-10) {
        if (o->n_hist == o->o.history_size) { /* drop the oldest */
            ts_release(o->old_dirs[0]), ts_release(o->old_stps[0]);
            memmove(o->old_dirs, o->old_dirs + 1, (size_t)(o->n_hist - 1) * sizeof(ts_tensor *));
            memmove(o->old_stps, o->old_stps + 1, (size_t)(o->n_hist - 1) * sizeof(ts_tensor *));
            memmove(o->ro, o->ro + 1, (size_t)(o->n_hist - 1) * sizeof(double));
            o->n_hist--;
        }
        o->old_dirs[o->n_hist] = ts_retain(y);
        o->old_stps[o->n_hist] = ts_retain(s);
        o->ro[o->n_hist] = 1.0 / ys;
        o->n_hist++;
        o->h_diag = ys / dot(y, y);
    }
    ts_tensor *q = NULL;
    hold(&q, ts_neg(grad));
    for (int i = o->n_hist - 1; i >= 0 && !ts_error(); i--) {
        ts_scope_begin();
        o->al[i] = dot(o->old_stps[i], q) * o->ro[i];
        hold(&q, ts_add_alpha(q, o->old_dirs[i], -o->al[i]));
        ts_scope_end();
    }
    ts_tensor *r = NULL;
    hold(&r, ts_mul_scalar(q, o->h_diag));
    for (int i = 0; i < o->n_hist && !ts_error(); i++) {
        ts_scope_begin();
        double be_i = dot(o->old_dirs[i], r) * o->ro[i];
        hold(&r, ts_add_alpha(r, o->old_stps[i], o->al[i] - be_i));
        ts_scope_end();
    }
    if (!ts_error()) hold(&o->d, r);
    ts_release(q), ts_release(r);
}

ts_status ts_lbfgs_step(ts_lbfgs *o, ts_lbfgs_closure f, void *ctx, double *loss_out) {
    static const char op[] = "lbfgs_step";
    if (!o) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (!f)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: requires a closure that reevaluates the model and returns the "
                             "loss",
                             op);
    const ts_lbfgs_opts *g = &o->o;
    double loss = evaluate(o, f, ctx);
    if (ts_error()) return ts_error();
    if (loss_out) *loss_out = g->maximize ? -loss : loss;
    int current_evals = 1;
    o->func_evals++;
    ts_tensor *grad = NULL; /* held */
    ts_scope_begin();
    hold(&grad, flat_grad(o));
    bool converged = !ts_error() && absmax(grad) <= g->tolerance_grad;
    ts_scope_end();
    ts_tensor **x = NULL; /* the line search's starting point */
    if (g->strong_wolfe && !ts_error() && !converged) {
        x = calloc((size_t)o->n, sizeof *x);
        if (!x) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    }
    int n_iter = 0;
    while (!converged && n_iter < g->max_iter && !ts_error()) {
        n_iter++;
        o->n_iter++;
        ts_scope_begin();
        if (o->n_iter == 1) {
            hold(&o->d, ts_neg(grad));
            for (int i = 0; i < o->n_hist; i++)
                ts_release(o->old_dirs[i]), ts_release(o->old_stps[i]);
            o->n_hist = 0;
            o->h_diag = 1;
        } else {
            two_loop(o, grad);
        }
        if (ts_error()) {
            ts_scope_end();
            break;
        }
        hold(&o->prev_flat_grad, ts_clone(grad));
        o->prev_loss = loss;
        if (o->n_iter == 1)
            o->t = fmin(1.0, 1.0 / ts_item(ts_sum(ts_abs(grad)))) * g->lr;
        else
            o->t = g->lr;
        double gtd = dot(grad, o->d);
        if (ts_error() || gtd > -g->tolerance_change) {
            ts_scope_end();
            break;
        }
        int ls_evals = 0;
        bool opt_cond = false;
        if (g->strong_wolfe) {
            ts_no_grad_begin();
            for (int i = 0; i < o->n; i++) {
                ts_release(x[i]);
                x[i] = ts_retain(ts_clone(o->params[i]));
            }
            ts_no_grad_end();
            ls_evals = strong_wolfe(o, f, ctx, x, &o->t, o->d, &loss, &grad, gtd,
                                    g->max_eval - current_evals);
            if (!ts_error()) add_grad(o, o->t, o->d);
            opt_cond = !ts_error() && absmax(grad) <= g->tolerance_grad;
        } else {
            add_grad(o, o->t, o->d);
            if (n_iter != g->max_iter && !ts_error()) {
                loss = evaluate(o, f, ctx);
                if (!ts_error()) hold(&grad, flat_grad(o));
                opt_cond = !ts_error() && absmax(grad) <= g->tolerance_grad;
                ls_evals = 1;
            }
        }
        current_evals += ls_evals;
        o->func_evals += ls_evals;
        bool stop = ts_error() || n_iter == g->max_iter || current_evals >= g->max_eval ||
                    opt_cond || absmax(ts_mul_scalar(o->d, o->t)) <= g->tolerance_change ||
                    fabs(loss - o->prev_loss) < g->tolerance_change;
        ts_scope_end();
        if (stop) break;
    }
    if (x)
        for (int i = 0; i < o->n; i++) ts_release(x[i]);
    free(x);
    ts_release(grad);
    return ts_error();
}

ts_status ts_lbfgs_get_state(ts_lbfgs *o, ts_lbfgs_state *st) {
    if (!o || !st) return tsi_error_set(TS_ERR_ARG, "lbfgs_get_state: NULL argument");
    *st = (ts_lbfgs_state){.n_iter = o->n_iter,
                           .func_evals = o->func_evals,
                           .d = o->d,
                           .prev_flat_grad = o->prev_flat_grad,
                           .t = o->t,
                           .h_diag = o->h_diag,
                           .prev_loss = o->prev_loss,
                           .n_history = o->n_hist,
                           .old_dirs = o->old_dirs,
                           .old_stps = o->old_stps,
                           .ro = o->ro};
    return TS_OK;
}

ts_status ts_lbfgs_set_state(ts_lbfgs *o, const ts_lbfgs_state *st) {
    static const char op[] = "lbfgs_set_state";
    if (!o || !st) return tsi_error_set(TS_ERR_ARG, "%s: NULL argument", op);
    if (st->n_history < 0 || st->n_history > o->o.history_size ||
        (st->n_history > 0 && (!st->old_dirs || !st->old_stps || !st->ro)))
        return tsi_error_set(TS_ERR_ARG, "%s: %d history entries for a history of %d", op,
                             st->n_history, o->o.history_size);
    if (st->n_iter > 0 && (!st->d || !st->prev_flat_grad))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: a state after %lld iterations needs d and "
                             "prev_flat_grad",
                             op, (long long)st->n_iter);
    int64_t numel = 0;
    for (int i = 0; i < o->n; i++) numel += ts_numel(o->params[i]);
    ts_tensor *const vecs[2] = {st->d, st->prev_flat_grad};
    for (int i = 0; i < 2 + 2 * st->n_history; i++) {
        ts_tensor *v = i < 2 ? vecs[i] : (i % 2 ? st->old_stps : st->old_dirs)[(i - 2) / 2];
        if (!v && i < 2) continue;
        if (!v || ts_ndim(v) != 1 || ts_numel(v) != numel || v->dtype != o->params[0]->dtype ||
            !tsi_device_eq(ts_device_of(v), ts_device_of(o->params[0])))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: state vector %d (%s) is not a flat vector of the %lld "
                                 "parameters' elements in their dtype and device",
                                 op, i, v ? tsi_desc(v) : "NULL", (long long)numel);
    }
    for (int i = 0; i < o->n_hist; i++) ts_release(o->old_dirs[i]), ts_release(o->old_stps[i]);
    for (int i = 0; i < st->n_history; i++) {
        o->old_dirs[i] = ts_retain(st->old_dirs[i]);
        o->old_stps[i] = ts_retain(st->old_stps[i]);
        o->ro[i] = st->ro[i];
    }
    o->n_hist = st->n_history;
    hold(&o->d, st->d);
    hold(&o->prev_flat_grad, st->prev_flat_grad);
    o->n_iter = st->n_iter, o->func_evals = st->func_evals;
    o->t = st->t, o->h_diag = st->h_diag, o->prev_loss = st->prev_loss;
    return TS_OK;
}
