/* lr_schedule.c — the learning-rate arithmetic of tessera.optim.lr_scheduler: each binding calls
 * one C function of the library's (ts_lr_rule_step / _closed_form, ts_onecycle_at, ts_cyclic_at,
 * ts_plateau_step); the Python schedulers keep only their state. */
#include "tsp.h"

#include <math.h>
#include <string.h>

/* a sequence of floats into a PyMem array of *n (+1) doubles; NULL with an exception */
double *tsp_doubles(PyObject *seq, Py_ssize_t *n, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    double *b = PyMem_Calloc((size_t)*n + 1, sizeof *b);
    if (!b) PyErr_NoMemory();
    for (Py_ssize_t i = 0; b && i < *n; i++)
        if ((b[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i))) == -1 && PyErr_Occurred())
            PyMem_Free(b), b = NULL;
    Py_DECREF(fast);
    return b;
}

PyObject *tsp_doubles_list(const double *v, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *x = PyFloat_FromDouble(v[i]);
        if (!x)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, x);
    }
    return list;
}

static const struct {
    const char *name;
    ts_lr_kind kind;
} kinds[] = {{"lambda", TS_LR_LAMBDA},
             {"multiplicative", TS_LR_MULTIPLICATIVE},
             {"step", TS_LR_STEP},
             {"multistep", TS_LR_MULTISTEP},
             {"constant", TS_LR_CONSTANT},
             {"linear", TS_LR_LINEAR},
             {"exponential", TS_LR_EXPONENTIAL},
             {"polynomial", TS_LR_POLYNOMIAL},
             {"cosine", TS_LR_COSINE}};

/* _lr_rule(kind, epoch, step_count, initial, closed, base_lrs, lrs, step_size=0, gamma=0,
 * milestones=(), factor=0, end_factor=0, total_iters=0, power=0, eta_min=0, t_max=0,
 * factors=None) -> the groups' rates: torch's get_lr (closed false) or _get_closed_form_lr */
static PyObject *lr_rule(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"kind",     "epoch",      "step_count",  "initial", "closed",
                            "base_lrs", "lrs",        "step_size",   "gamma",   "milestones",
                            "factor",   "end_factor", "total_iters", "power",   "eta_min",
                            "t_max",    "factors",    NULL};
    const char *kind;
    long long epoch, step_count, step_size = 0, total_iters = 0, t_max = 0;
    int initial, closed;
    PyObject *bases, *lrs_in, *milestones = NULL, *factors = Py_None;
    ts_lr_rule r = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sLLppOO|LdOddLddLO:lr_rule", names, &kind, &epoch,
                                     &step_count, &initial, &closed, &bases, &lrs_in, &step_size,
                                     &r.gamma, &milestones, &r.factor, &r.end_factor, &total_iters,
                                     &r.power, &r.eta_min, &t_max, &factors))
        return NULL;
    size_t k = 0;
    while (k < sizeof kinds / sizeof *kinds && strcmp(kinds[k].name, kind) != 0) k++;
    if (k == sizeof kinds / sizeof *kinds)
        return PyErr_Format(PyExc_ValueError, "lr_rule: unknown schedule kind '%s'", kind);
    r.kind = kinds[k].kind;
    r.step_size = step_size, r.total_iters = total_iters, r.t_max = t_max;
    Py_ssize_t n = 0, nl = 0, nm = 0, nf = 0;
    double *b = tsp_doubles(bases, &n, "base_lrs: a sequence of floats");
    double *l = b ? tsp_doubles(lrs_in, &nl, "lrs: a sequence of floats") : NULL;
    double *m =
        l ? tsp_doubles(milestones ? milestones : bases, &nm, "milestones: a sequence of ints")
          : NULL;
    if (!milestones) nm = 0;
    double *f =
        m && factors != Py_None ? tsp_doubles(factors, &nf, "factors: a sequence of floats") : NULL;
    const bool ok = m && (factors == Py_None || f);
    int64_t *mi = ok ? PyMem_Calloc((size_t)nm + 1, sizeof *mi) : NULL;
    double *out = mi ? PyMem_Calloc((size_t)n + 1, sizeof *out) : NULL;
    PyObject *res = NULL;
    if (!out) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
    } else if (nl != n || (f && nf != n)) {
        PyErr_Format(PyExc_ValueError, "lr_rule: %zd base_lrs but %zd lrs and %zd factors", n, nl,
                     nf);
    } else {
        for (Py_ssize_t i = 0; i < nm; i++) mi[i] = (int64_t)m[i];
        r.milestones = mi, r.n_milestones = (int)nm, r.factors = f;
        ts_status st = closed ? ts_lr_rule_closed_form(&r, epoch, b, out, (int)n)
                              : ts_lr_rule_step(&r, epoch, step_count, initial, b, l, out, (int)n);
        res = st ? tsp_raise_pending() : tsp_doubles_list(out, n);
    }
    PyMem_Free(b), PyMem_Free(l), PyMem_Free(m), PyMem_Free(f), PyMem_Free(mi), PyMem_Free(out);
    return res;
}

/* _lr_onecycle(total_steps, pct_start, three_phase, linear, step, initial_lr, max_lr, min_lr,
 * max_momentum, base_momentum) -> (lr, momentum) */
static PyObject *lr_onecycle(PyObject *self, PyObject *args) {
    (void)self;
    ts_onecycle c = {0};
    long long total, step;
    int three, linear;
    double init, mx, mn, mmax, mbase, lr = 0, mom = 0;
    if (!PyArg_ParseTuple(args, "LdppLddddd:OneCycleLR", &total, &c.pct_start, &three, &linear,
                          &step, &init, &mx, &mn, &mmax, &mbase))
        return NULL;
    c.total_steps = total, c.three_phase = three, c.linear = linear;
    if (ts_onecycle_at(&c, step, init, mx, mn, mmax, mbase, &lr, &mom)) return tsp_raise_pending();
    return Py_BuildValue("dd", lr, mom);
}

/* _lr_cyclic_cycle(total_size, step_ratio, gamma, mode, epoch) -> CyclicLR's cycle */
static PyObject *lr_cyclic_cycle(PyObject *self, PyObject *args) {
    (void)self;
    ts_cyclic c = {0};
    long long epoch;
    int mode;
    if (!PyArg_ParseTuple(args, "dddiL:CyclicLR", &c.total_size, &c.step_ratio, &c.gamma, &mode,
                          &epoch))
        return NULL;
    c.mode = (ts_cyclic_mode)mode;
    double v = ts_cyclic_cycle(&c, epoch);
    if (isnan(v) && tsp_check()) return NULL;
    return PyFloat_FromDouble(v);
}

/* _lr_cyclic_scale(total_size, step_ratio, gamma, mode, x) -> the mode's scale_fn at x */
static PyObject *lr_cyclic_scale(PyObject *self, PyObject *args) {
    (void)self;
    ts_cyclic c = {0};
    double x;
    int mode;
    if (!PyArg_ParseTuple(args, "dddid:CyclicLR", &c.total_size, &c.step_ratio, &c.gamma, &mode,
                          &x))
        return NULL;
    c.mode = (ts_cyclic_mode)mode;
    double v = ts_cyclic_scale(&c, x);
    if (isnan(v) && tsp_check()) return NULL;
    return PyFloat_FromDouble(v);
}

/* _lr_cyclic(total_size, step_ratio, gamma, mode, epoch, scale, base_lrs, max_lrs, base_moms,
 * max_moms) -> (lrs, momentums or None); base_moms None: no momentum cycling */
static PyObject *lr_cyclic(PyObject *self, PyObject *args) {
    (void)self;
    ts_cyclic c = {0};
    long long epoch;
    int mode;
    double scale;
    PyObject *bl, *ml, *bm, *mm;
    if (!PyArg_ParseTuple(args, "dddiLdOOOO:CyclicLR", &c.total_size, &c.step_ratio, &c.gamma,
                          &mode, &epoch, &scale, &bl, &ml, &bm, &mm))
        return NULL;
    c.mode = (ts_cyclic_mode)mode;
    Py_ssize_t n = 0, n2 = 0, n3 = 0, n4 = 0;
    const bool moms = bm != Py_None;
    double *b = tsp_doubles(bl, &n, "base_lrs: a sequence of floats");
    double *m = b ? tsp_doubles(ml, &n2, "max_lrs: a sequence of floats") : NULL;
    double *b2 = m && moms ? tsp_doubles(bm, &n3, "base_momentum: a sequence of floats") : NULL;
    double *m2 = b2 ? tsp_doubles(mm, &n4, "max_momentum: a sequence of floats") : NULL;
    double *lrs = m ? PyMem_Calloc((size_t)n + 1, sizeof *lrs) : NULL;
    double *ms = lrs ? PyMem_Calloc((size_t)n + 1, sizeof *ms) : NULL;
    PyObject *res = NULL;
    if (!ms || (moms && !m2)) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
    } else if (n2 != n || (moms && (n3 != n || n4 != n))) {
        PyErr_Format(PyExc_ValueError, "CyclicLR: %zd base_lrs but %zd max_lrs", n, n2);
    } else if (ts_cyclic_at(&c, epoch, scale, b, m, moms ? b2 : NULL, m2, lrs, ms, (int)n)) {
        tsp_raise_pending();
    } else {
        res = moms ? Py_BuildValue("NN", tsp_doubles_list(lrs, n), tsp_doubles_list(ms, n))
                   : Py_BuildValue("NO", tsp_doubles_list(lrs, n), Py_None);
    }
    PyMem_Free(b), PyMem_Free(m), PyMem_Free(b2), PyMem_Free(m2), PyMem_Free(lrs), PyMem_Free(ms);
    return res;
}

/* _lr_plateau(mode_max, threshold_abs, factor, threshold, eps, patience, cooldown, best,
 * num_bad_epochs, cooldown_counter, metric, min_lrs, lrs) -> (best, num_bad_epochs,
 * cooldown_counter, lrs, reduced) */
static PyObject *lr_plateau(PyObject *self, PyObject *args) {
    (void)self;
    ts_plateau p = {0};
    int mode_max, thr_abs;
    long long patience, cooldown, bad, cc;
    double metric;
    PyObject *minl, *lrl;
    if (!PyArg_ParseTuple(args, "ppdddLLdLLdOO:ReduceLROnPlateau", &mode_max, &thr_abs, &p.factor,
                          &p.threshold, &p.eps, &patience, &cooldown, &p.best, &bad, &cc, &metric,
                          &minl, &lrl))
        return NULL;
    p.mode_max = mode_max, p.threshold_abs = thr_abs, p.patience = patience;
    p.cooldown = cooldown, p.num_bad_epochs = bad, p.cooldown_counter = cc;
    Py_ssize_t n = 0, n2 = 0;
    double *mn = tsp_doubles(minl, &n, "min_lrs: a sequence of floats");
    double *l = mn ? tsp_doubles(lrl, &n2, "lrs: a sequence of floats") : NULL;
    PyObject *res = NULL;
    bool reduced = false;
    if (!l) {
    } else if (n != n2) {
        PyErr_Format(PyExc_ValueError, "ReduceLROnPlateau: %zd min_lrs but %zd param groups", n,
                     n2);
    } else if (ts_plateau_step(&p, metric, mn, l, (int)n, &reduced)) {
        tsp_raise_pending();
    } else {
        res = Py_BuildValue("dLLNO", p.best, (long long)p.num_bad_epochs,
                            (long long)p.cooldown_counter, tsp_doubles_list(l, n),
                            reduced ? Py_True : Py_False);
    }
    PyMem_Free(mn), PyMem_Free(l);
    return res;
}

static PyMethodDef lr_functions[] = {
    {"_lr_rule", (PyCFunction)(void (*)(void))lr_rule, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_lr_onecycle", lr_onecycle, METH_VARARGS, NULL},
    {"_lr_cyclic_cycle", lr_cyclic_cycle, METH_VARARGS, NULL},
    {"_lr_cyclic_scale", lr_cyclic_scale, METH_VARARGS, NULL},
    {"_lr_cyclic", lr_cyclic, METH_VARARGS, NULL},
    {"_lr_plateau", lr_plateau, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_lr_schedule(PyObject *m) { return PyModule_AddFunctions(m, lr_functions); }
