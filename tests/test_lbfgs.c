/* test_lbfgs.c — ts_lbfgs_* (torch.optim.LBFGS) against PyTorch's iterates in float64 on cpu and
 * sim:0: the plain two-loop recursion on a quadratic and on Rosenbrock's function, the strong-Wolfe
 * line search (bracketing and zoom), max_eval, state read / load, maximize, and the errors. */
#include <math.h>
#include <stdio.h>

#include "ts_test.h"

/* References from /opt/torch2/bin/torch-python (torch 2.x), float64, x0 = X0:
 *
 * import torch
 * QA = [[3.0, 0.5, -0.2, 0.1], [0.5, 2.0, 0.3, 0.0], [-0.2, 0.3, 1.0, 0.2], [0.1, 0.0, 0.2, 1.5]]
 * QB = [1.0, -2.0, 0.5, 0.3]; X0 = [0.3, -0.7, 1.2, 0.4]
 * def rosen(x): return ((1 - x[0::2]) ** 2 + 10 * (x[1::2] - x[0::2] ** 2) ** 2).sum()
 * def quad(x):
 *     A = torch.tensor(QA, dtype=torch.float64); b = torch.tensor(QB, dtype=torch.float64)
 *     return 0.5 * x @ A @ x - b @ x
 * def run(fn, steps, **kw):
 *     x = torch.tensor(X0, dtype=torch.float64, requires_grad=True)
 *     opt = torch.optim.LBFGS([x], **kw); losses = []
 *     def closure():
 *         opt.zero_grad(); l = fn(x); l.backward(); return l
 *     for _ in range(steps): losses.append(float(opt.step(closure)))
 *     st = opt.state[x]
 *     return x.detach().tolist(), losses, st["func_evals"], st["n_iter"]
 * print(run(quad, 2, lr=0.5, max_iter=4, history_size=2))   # one line per row of `cases`
 * (the last two rows: torch's _cubic_interpolate patched to count calls with and without bounds)
 */
static const double QA[16] = {3.0,  0.5, -0.2, 0.1, 0.5, 2.0, 0.3, 0.0,
                              -0.2, 0.3, 1.0,  0.2, 0.1, 0.0, 0.2, 1.5};
static const double QB[4] = {1.0, -2.0, 0.5, 0.3};
static const double X0[4] = {0.3, -0.7, 1.2, 0.4};

typedef enum { F_QUAD, F_ROSEN } fn_kind;

typedef struct lbfgs_case {
    const char *name;
    fn_kind fn;
    int steps;
    ts_lbfgs_opts o;
    double x[4];
    double losses[3];
    int func_evals, n_iter;
} lbfgs_case;

static const lbfgs_case cases[] = {
    {"quad lr=0.5 max_iter=4 history_size=2",
     F_QUAD,
     2,
     {.lr = 0.5,
      .max_iter = 4,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 2},
     {0.615561499094118, -1.3029111674963278, 1.00795695660587, 0.02641986664545778},
     {-1.2759999999999998, -1.8666235988780566},
     8,
     8},
    {"rosen lr=0.2 max_iter=5 history_size=3",
     F_ROSEN,
     3,
     {.lr = 0.2,
      .max_iter = 5,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 3},
     {0.37161270255715845, 0.08873719929553527, 0.880395659819381, 0.7390356797735519},
     {17.587, 4.067404107294188, 1.0081198298269753},
     15,
     15},
    {"rosen strong_wolfe max_iter=6 history_size=4",
     F_ROSEN,
     2,
     {.lr = 1,
      .max_iter = 6,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 4,
      .strong_wolfe = true},
     {0.9898438553855519, 0.9785746115538673, 0.9118950046747264, 0.8248454927491827},
     {17.587, 0.24801129781569342},
     15,
     12},
    {"rosen strong_wolfe max_iter=30 max_eval=12",
     F_ROSEN,
     1,
     {.lr = 1,
      .max_iter = 30,
      .max_eval = 12,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 100,
      .strong_wolfe = true},
     {0.9695974894523138, 0.949976071788746, 0.9020228672114015, 0.7961478488398137},
     {17.587},
     12,
     10},
    /* the line search extrapolating (8 interpolations with bounds) */
    {"rosen strong_wolfe lr=1e-3 max_iter=5 (extrapolation)",
     F_ROSEN,
     2,
     {.lr = 1e-3,
      .max_iter = 5,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 100,
      .strong_wolfe = true},
     {0.1816340808478434, -0.38779041695730965, 0.8501299966476459, 0.6069386340733978},
     {17.587, 12.459869973405695},
     14,
     4},
    /* the line search zooming (6 interpolations inside a bracket) */
    {"rosen strong_wolfe lr=5 max_iter=5 (zoom)",
     F_ROSEN,
     2,
     {.lr = 5,
      .max_iter = 5,
      .tolerance_grad = 1e-7,
      .tolerance_change = 1e-9,
      .history_size = 100,
      .strong_wolfe = true},
     {0.11138798136713153, 0.020183852402746172, 1.258615117034053, 1.7044083658527094},
     {17.587, 2.92803831919237},
     13,
     5},
};

typedef struct problem {
    fn_kind fn;
    ts_tensor *x, *a, *b;
    double sign; /* -1: the objective negated (for maximize) */
    int calls;
} problem;

/* the closure: zero_grad, the loss, backward */
static ts_status closure(void *ctx, double *loss) {
    problem *p = ctx;
    p->calls++;
    ts_set_grad(p->x, NULL);
    ts_tensor *l;
    if (p->fn == F_QUAD) {
        l = ts_sub(ts_mul_scalar(ts_dot(p->x, ts_matmul(p->a, p->x)), 0.5), ts_dot(p->b, p->x));
    } else {
        l = NULL;
        for (int i = 0; i < 2; i++) {
            ts_tensor *u = ts_narrow(p->x, 0, 2 * i, 1), *v = ts_narrow(p->x, 0, 2 * i + 1, 1);
            ts_tensor *t = ts_add(ts_square(ts_rsub_scalar(u, 1)),
                                  ts_mul_scalar(ts_square(ts_sub(v, ts_square(u))), 10));
            l = l ? ts_add(l, t) : t;
        }
        l = ts_sum(l);
    }
    if (p->sign < 0) l = ts_neg(l);
    ts_backward(l);
    *loss = ts_item(l);
    return ts_error();
}

static void problem_init(problem *p, fn_kind fn, ts_device dev) {
    ts_opts o = {.dtype = TS_F64, .device = dev};
    *p = (problem){.fn = fn, .sign = 1};
    p->x = ts_tensor_f64(TS_SHAPE(4), X0, o);
    ts_set_requires_grad(p->x, true);
    p->a = ts_tensor_f64(TS_SHAPE(4, 4), QA, o);
    p->b = ts_tensor_f64(TS_SHAPE(4), QB, o);
}

static void problem_free(problem *p) { ts_release(p->x), ts_release(p->a), ts_release(p->b); }

/* |got - want| within float64 rounding amplified over a few dozen dependent evaluations: the sums
 * differ from PyTorch's only in their order (1e-16 relative), the iterates depend on them smoothly;
 * 1e-10 leaves a margin of ~1e5 over that rounding and is far below any one-step difference */
#define TOL 1e-10

static void test_cases(ts_device dev) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const lbfgs_case *c = &cases[k];
        problem p;
        problem_init(&p, c->fn, dev);
        ts_lbfgs *o = ts_lbfgs_new(&p.x, 1, c->o);
        CHECK_OK();
        int bad = 0;
        for (int s = 0; s < c->steps; s++) {
            double loss = NAN;
            CHECK_EQ(ts_lbfgs_step(o, closure, &p, &loss), TS_OK);
            if (!(fabs(loss - c->losses[s]) <= TOL * fmax(1, fabs(c->losses[s]))) && bad++ < 3)
                printf("  %s: step %d: loss %.17g, torch %.17g\n", c->name, s, loss, c->losses[s]);
        }
        double x[4];
        ts_copy_to_host(p.x, x, sizeof x);
        for (int i = 0; i < 4; i++)
            if (!(fabs(x[i] - c->x[i]) <= TOL) && bad++ < 6)
                printf("  %s: x[%d] %.17g, torch %.17g\n", c->name, i, x[i], c->x[i]);
        ts_lbfgs_state st;
        CHECK_EQ(ts_lbfgs_get_state(o, &st), TS_OK);
        if ((st.func_evals != c->func_evals || st.n_iter != c->n_iter) && bad++ < 8)
            printf("  %s: func_evals %lld n_iter %lld, torch %d %d\n", c->name,
                   (long long)st.func_evals, (long long)st.n_iter, c->func_evals, c->n_iter);
        CHECK_EQ(p.calls, c->func_evals);
        CHECK_EQ(bad, 0);
        ts_lbfgs_free(o);
        problem_free(&p);
        CHECK_OK();
    }
}

/* a state read after one step and loaded into a fresh optimizer continues as the original */
static void test_state_round_trip(ts_device dev) {
    const lbfgs_case *c = &cases[1];
    problem p, q;
    problem_init(&p, c->fn, dev);
    problem_init(&q, c->fn, dev);
    ts_lbfgs *o = ts_lbfgs_new(&p.x, 1, c->o), *o2 = ts_lbfgs_new(&q.x, 1, c->o);
    ts_lbfgs_step(o, closure, &p, NULL);
    ts_lbfgs_state st;
    ts_lbfgs_get_state(o, &st);
    CHECK(st.n_history > 0 && st.d && st.prev_flat_grad);
    CHECK_EQ(ts_lbfgs_set_state(o2, &st), TS_OK);
    ts_no_grad_begin();
    ts_release(ts_copy_(q.x, p.x)); /* outside a scope the caller owns what it returns */
    ts_no_grad_end();
    for (int s = 1; s < c->steps; s++) {
        ts_lbfgs_step(o, closure, &p, NULL);
        ts_lbfgs_step(o2, closure, &q, NULL);
    }
    double x[4], y[4];
    ts_copy_to_host(p.x, x, sizeof x);
    ts_copy_to_host(q.x, y, sizeof y);
    int same = 0;
    for (int i = 0; i < 4; i++) same += x[i] == y[i] && fabs(x[i] - c->x[i]) <= TOL;
    CHECK_EQ(same, 4);
    /* a vector of the wrong size is refused, the state unchanged */
    ts_tensor *short_d = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_F64, .device = dev});
    ts_lbfgs_state bad = st;
    bad.d = short_d;
    CHECK_EQ(ts_lbfgs_set_state(o2, &bad), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "flat vector");
    ts_release(short_d);
    ts_lbfgs_free(o), ts_lbfgs_free(o2);
    problem_free(&p), problem_free(&q);
    CHECK_OK();
}

/* maximize on the negated objective takes the minimizer's steps */
static void test_maximize(ts_device dev) {
    const lbfgs_case *c = &cases[2];
    problem p;
    problem_init(&p, c->fn, dev);
    p.sign = -1;
    ts_lbfgs_opts opts = c->o;
    opts.maximize = true;
    ts_lbfgs *o = ts_lbfgs_new(&p.x, 1, opts);
    double loss = 0;
    for (int s = 0; s < c->steps; s++) ts_lbfgs_step(o, closure, &p, &loss);
    double x[4];
    ts_copy_to_host(p.x, x, sizeof x);
    int ok = 0;
    for (int i = 0; i < 4; i++) ok += fabs(x[i] - c->x[i]) <= TOL;
    CHECK_EQ(ok, 4);
    CHECK_NEAR(loss, -c->losses[c->steps - 1], TOL);
    ts_lbfgs_free(o);
    problem_free(&p);
    CHECK_OK();
}

static ts_status failing_closure(void *ctx, double *loss) {
    (void)ctx, (void)loss;
    return ts_error_set(TS_ERR_STATE, "the model diverged");
}

/* a closure failing inside the line search: the error comes back, the parameters as they were */
typedef struct {
    problem *p;
    int ok_calls;
} fail_later;
static ts_status closure_fails_later(void *ctx, double *loss) {
    fail_later *f = ctx;
    if (f->ok_calls-- <= 0) return ts_error_set(TS_ERR_STATE, "the model diverged");
    return closure(f->p, loss);
}

static void test_errors(void) {
    problem p;
    problem_init(&p, F_QUAD, ts_cpu());
    ts_lbfgs_opts opts = {.lr = 1, .max_iter = 20, .history_size = 10, .strong_wolfe = true};
    CHECK(ts_lbfgs_new(&p.x, 0, opts) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "empty parameter list");
    ts_lbfgs_opts neg = opts;
    neg.lr = -1;
    CHECK(ts_lbfgs_new(&p.x, 1, neg) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "learning rate");
    ts_tensor *ints = ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_I64});
    CHECK(ts_lbfgs_new(&ints, 1, opts) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *mixed[2] = {p.x, ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_F32})};
    CHECK(ts_lbfgs_new(mixed, 2, opts) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "differs in dtype or device");
    ts_release(ints), ts_release(mixed[1]);
    ts_lbfgs *o = ts_lbfgs_new(&p.x, 1, opts);
    ts_lbfgs_step(o, NULL, NULL, NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "closure");
    ts_lbfgs_step(o, failing_closure, NULL, NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "diverged");
    fail_later f = {&p, 1}; /* the first line-search evaluation fails */
    ts_lbfgs_step(o, closure_fails_later, &f, NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "diverged");
    double x[4];
    ts_copy_to_host(p.x, x, sizeof x);
    int back = 0; /* the failed evaluation was at x0 + t d: x0 is restored */
    for (int i = 0; i < 4; i++) back += x[i] == X0[i];
    CHECK_EQ(back, 4);
    ts_lbfgs_free(o);
    problem_free(&p);
    CHECK_OK();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_mem_stats before[TS_TEST_MAX_DEVICES], after;
    for (int i = 0; i < nd; i++) ts_memory_stats(devs[i], &before[i]);
    for (int i = 0; i < nd; i++) {
        test_cases(devs[i]);
        test_state_round_trip(devs[i]);
        test_maximize(devs[i]);
    }
    test_errors();
    /* every step released what it held (the iterate copies, the flat gradient) */
    for (int i = 0; i < nd; i++) {
        CHECK_EQ(ts_memory_stats(devs[i], &after), TS_OK);
        CHECK_EQ(after.live_tensors, before[i].live_tensors);
    }
    return ts_test_finish();
}
