/* gradcheck.c — ts_gradcheck: analytical vector-Jacobian products against f64 central differences.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd.h"

/* The tensor's values as host doubles (malloc'ed), through an f64 contiguous copy. */
static double *to_host(ts_tensor *t, int64_t *n) {
    *n = tsi_numel(t->shape);
    double *h = malloc((size_t)(*n ? *n : 1) * sizeof *h);
    if (!h) return NULL;
    ts_scope_begin();
    ts_status st = ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)*n * sizeof *h);
    ts_scope_end();
    if (st != TS_OK) {
        free(h);
        return NULL;
    }
    return h;
}

/* Writes host doubles into t in place (t may be a leaf that requires grad: no graph here). */
static bool from_host(ts_tensor *t, const double *h) {
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *src = ts_tensor_f64(t->shape, h, (ts_opts){.device = ts_cpu()});
    bool ok = ts_copy_(t, src) != NULL;
    ts_no_grad_end();
    ts_scope_end();
    return ok;
}

/* sum(f(x) * v) computed on the host in double */
static bool eval_dot(ts_gradcheck_fn f, void *ctx, ts_tensor *const *inputs, int n, const double *v,
                     int64_t nv, double *out) {
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *y = f(inputs, n, ctx);
    ts_no_grad_end();
    int64_t ny = 0;
    double *h = y ? to_host(y, &ny) : NULL;
    ts_scope_end();
    if (!h) return false;
    if (ny != nv) {
        free(h);
        tsi_error_set(TS_ERR_STATE, "gradcheck: the function's output changed size");
        return false;
    }
    double s = 0;
    for (int64_t i = 0; i < ny; i++) s += h[i] * v[i];
    free(h);
    *out = s;
    return true;
}

bool ts_gradcheck(ts_gradcheck_fn f, void *ctx, ts_tensor *const *inputs, int n,
                  ts_gradcheck_opts o) {
    double eps = o.eps > 0 ? o.eps : 1e-6, atol = o.atol > 0 ? o.atol : 1e-5,
           rtol = o.rtol > 0 ? o.rtol : 1e-3;
    if (!f || n <= 0 || !inputs)
        return tsi_error_set(TS_ERR_ARG, "gradcheck: needs a function and inputs"), false;
    for (int i = 0; i < n; i++)
        if (!tsi_check_input("gradcheck", inputs[i], "input")) return false;

    /* analytical: v^T J through one backward pass with a fixed pseudo-random v */
    ts_scope_begin();
    for (int i = 0; i < n; i++) ts_set_grad(inputs[i], NULL);
    ts_tensor *y = f(inputs, n, ctx);
    bool ok = y != NULL;
    int64_t ny = ok ? tsi_numel(y->shape) : 0;
    double *v = malloc((size_t)(ny ? ny : 1) * sizeof *v);
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    for (int64_t i = 0; ok && v && i < ny; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (double)(state >> 11) / 9007199254740992.0 * 2 - 1;
    }
    if (ok && v && y->requires_grad) {
        ts_tensor *vt =
            ts_to(ts_to_dtype(ts_tensor_f64(y->shape, v, (ts_opts){.device = ts_cpu()}), y->dtype),
                  tsi_device(y));
        ts_backward_with(y, vt);
        ok = ts_error() == TS_OK;
    }
    ts_scope_end();
    if (!v) return tsi_error_set(TS_ERR_OOM, "gradcheck: out of host memory"), false;

    bool pass = ok;
    for (int i = 0; ok && i < n; i++) {
        ts_tensor *x = inputs[i];
        if (!x->requires_grad) continue;
        int64_t nx = 0, ng = 0;
        double *xh = to_host(x, &nx);
        double *gh = x->grad ? to_host(x->grad, &ng) : calloc((size_t)(nx ? nx : 1), sizeof *gh);
        if (!xh || !gh) {
            free(xh);
            free(gh);
            ok = pass = false;
            break;
        }
        for (int64_t k = 0; ok && k < nx; k++) {
            double orig = xh[k], plus = 0, minus = 0;
            xh[k] = orig + eps;
            ok = from_host(x, xh) && eval_dot(f, ctx, inputs, n, v, ny, &plus);
            xh[k] = orig - eps;
            ok = ok && from_host(x, xh) && eval_dot(f, ctx, inputs, n, v, ny, &minus);
            xh[k] = orig;
            ok = from_host(x, xh) && ok;
            double num = (plus - minus) / (2 * eps), ana = gh[k];
            if (ok && !(fabs(ana - num) <= atol + rtol * fabs(num))) {
                if (o.verbose || pass)
                    fprintf(stderr,
                            "gradcheck: input %d element %lld: analytical %.10g, numerical %.10g\n",
                            i, (long long)k, ana, num);
                pass = false;
            }
        }
        free(xh);
        free(gh);
    }
    free(v);
    for (int i = 0; i < n; i++) ts_set_grad(inputs[i], NULL);
    return ok && pass;
}
