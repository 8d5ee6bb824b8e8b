/* hv_check.c — the double-backward tests' Hessian-vector check (hv_check.h). */
#include "hv_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "host_values.h"
#include "ts_test.h"

#define MAXIN TS_HV_MAXIN
#define MAXN  TS_HV_MAXN

ts_opts ts_hv_f64_on(ts_tensor *like) {
    return (ts_opts){.dtype = TS_F64, .device = ts_device_of(like)};
}

ts_tensor *ts_hv_pattern(ts_shape s, int seed, ts_tensor *like) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *r = malloc(sizeof *r * (size_t)(n ? n : 1));
    if (!r) return NULL;
    ts_test_fill_uniform(r, n, seed);
    ts_tensor *t = ts_tensor_f64(s, r, ts_hv_f64_on(like));
    free(r);
    return t;
}

ts_tensor *ts_hv_head(ts_tensor *y) {
    if (!y) return NULL;
    return ts_sum(ts_tanh(ts_add(y, ts_mul_scalar(ts_hv_pattern(ts_shape_of(y), 99, y), 0.5))));
}

ts_shape ts_hv_shape(ts_hv_dims s) {
    ts_shape r = {.ndim = s.ndim};
    for (int i = 0; i < s.ndim; i++) r.dims[i] = s.d[i];
    return r;
}
#define shape_of ts_hv_shape
typedef ts_hv_case hv_case;

typedef struct point {
    double v[MAXIN][MAXN];
    int64_t n[MAXIN];
} point;

static int64_t numel_of(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

/* the case's inputs at p (requiring grad) */
static void make_inputs(const hv_case *c, const point *p, ts_device d, ts_tensor **ins) {
    for (int k = 0; k < c->n_in; k++)
        ins[k] = ts_tensor_f64(shape_of(c->shape[k]), p->v[k],
                               (ts_opts){.device = d, .requires_grad = true});
}

/* the first-order gradients at p into out (zeros where an input gets none) */
static void gradients(const hv_case *c, const point *p, ts_device d, point *out) {
    ts_scope_begin();
    ts_tensor *ins[MAXIN], *g[MAXIN] = {0};
    make_inputs(c, p, d, ins);
    ts_tensor *y = c->f(ins);
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins, c->n_in, (ts_grad_opts){.allow_unused = true}, g),
             TS_OK);
    for (int k = 0; k < c->n_in; k++) {
        out->n[k] = p->n[k];
        memset(out->v[k], 0, sizeof out->v[k]);
        if (g[k]) CHECK(ts_test_read_f64(g[k], out->v[k], p->n[k]));
    }
    ts_scope_end();
}

/* whether node `name` is in t's history (a walk over grad_fn's inputs, by name) */
bool ts_hv_has_node(ts_tensor *t, const char *name) {
    ts_node *stack[4096];
    int n = 0;
    if (t->grad_fn) stack[n++] = t->grad_fn;
    for (int seen = 0; n && seen < 100000; seen++) {
        ts_node *x = stack[--n];
        if (!strcmp(x->name, name)) return true;
        for (int i = 0; i < x->n_in && n < 4096; i++)
            if (x->next[i].fn) stack[n++] = x->next[i].fn;
    }
    return false;
}

void ts_hv_check(const hv_case *c, ts_device d) {
    static point p, v, first, got, plus, minus;
    for (int k = 0; k < c->n_in; k++) {
        p.n[k] = v.n[k] = got.n[k] = numel_of(shape_of(c->shape[k]));
        CHECK(p.n[k] <= MAXN);
        ts_test_fill_uniform(p.v[k], p.n[k], 1 + k);
        ts_test_fill_uniform(v.v[k], v.n[k], 7 + k);
    }
    gradients(c, &p, d, &first);
    ts_scope_begin();
    ts_tensor *ins[MAXIN], *g[MAXIN] = {0}, *hv[MAXIN] = {0};
    make_inputs(c, &p, d, ins);
    ts_tensor *y = c->f(ins);
    if (c->node && y && !ts_hv_has_node(y, c->node))
        fprintf(stderr, "%s on %s: no %s in the result's history\n", c->name, ts_device_str(d),
                c->node);
    CHECK(!c->node || (y && ts_hv_has_node(y, c->node)));
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins, c->n_in,
                              (ts_grad_opts){.create_graph = true, .allow_unused = true}, g),
             TS_OK);
    ts_tensor *gv = NULL;
    int bad = 0;
    for (int k = 0; k < c->n_in; k++) {
        if (!g[k]) continue;
        double gk[MAXN];
        CHECK(ts_test_read_f64(g[k], gk, p.n[k]));
        for (int64_t i = 0; i < p.n[k]; i++)
            if (fabs(gk[i] - first.v[k][i]) > 1e-12 * (1 + fabs(first.v[k][i])) && bad++ < 3)
                fprintf(stderr,
                        "%s on %s: create_graph's gradient %d[%lld] = %.15g, first order %.15g\n",
                        c->name, ts_device_str(d), k, (long long)i, gk[i], first.v[k][i]);
        ts_tensor *vk = ts_tensor_f64(shape_of(c->shape[k]), v.v[k], (ts_opts){.device = d});
        ts_tensor *t = ts_sum(ts_mul(g[k], vk));
        gv = gv ? ts_add(gv, t) : t;
    }
    CHECK(gv != NULL);
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, ins, c->n_in, (ts_grad_opts){.allow_unused = true}, hv),
             TS_OK);
    CHECK_OK();
    for (int k = 0; k < c->n_in; k++) {
        memset(got.v[k], 0, sizeof got.v[k]);
        if (hv[k]) CHECK(ts_test_read_f64(hv[k], got.v[k], p.n[k]));
    }
    ts_scope_end();
    /* central differences of the first-order gradients along v; step 1e-5: truncation ~1e-10 of
     * the third derivative, rounding ~1e-16 / 1e-5 of the gradient's size */
    const double e = 1e-5;
    static point q;
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int k = 0; k < c->n_in; k++) {
            q.n[k] = p.n[k];
            for (int64_t i = 0; i < p.n[k]; i++) q.v[k][i] = p.v[k][i] + sign * e * v.v[k][i];
        }
        gradients(c, &q, d, sign < 0 ? &minus : &plus);
    }
    for (int k = 0; k < c->n_in; k++)
        for (int64_t i = 0; i < p.n[k]; i++) {
            const double want = (plus.v[k][i] - minus.v[k][i]) / (2 * e);
            if (fabs(got.v[k][i] - want) > 1e-6 * (1 + fabs(want)) && bad++ < 6)
                fprintf(stderr,
                        "%s on %s: (Hv) of input %d [%lld] = %.12g, differences give %.12g\n",
                        c->name, ts_device_str(d), k, (long long)i, got.v[k][i], want);
        }
    if (bad) fprintf(stderr, "%s on %s: %d mismatches\n", c->name, ts_device_str(d), bad);
    CHECK_EQ(bad, 0);
}
