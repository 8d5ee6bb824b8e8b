/* tensor_index.c — t[key] and t[key] = value with PyTorch's rules, on the plan of the key
 * (tensor_index_plan.c): ints, slices, None, Ellipsis and bools make views; integer and bool
 * tensors or lists ("advanced" indices) read by copy through ts_index_select and write through
 * ts_where / ts_masked_fill_, so both stay differentiable. */
#include "tensor_index.h"

#include <string.h>

/* NULL with the pending C error raised */
static ts_tensor *raised(void) {
    tsp_raise_pending();
    return NULL;
}

/* ------------------------------------------------------------------ the plan's layout */
/* advanced dims first, the others after in order: perm, and whether that is the identity */
static bool adv_first(const ix_plan *p, ts_dims *perm) {
    int nd = ts_ndim(p->view);
    bool is_adv[TS_MAX_DIMS] = {false}, identity = true;
    perm->n = 0;
    for (int j = 0; j < p->nadv; j++) is_adv[p->adv[j].dim] = true;
    for (int j = 0; j < p->nadv; j++) perm->d[perm->n++] = p->adv[j].dim;
    for (int d = 0; d < nd; d++)
        if (!is_adv[d]) perm->d[perm->n++] = d;
    for (int d = 0; d < nd; d++) identity &= perm->d[d] == d;
    return identity;
}

/* Where PyTorch puts the broadcast dims in the result: where the advanced dims were when they
 * are adjacent, else first (0). */
static int result_pos(const ix_plan *p) {
    for (int j = 1; j < p->nadv; j++)
        if (p->adv[j].dim != p->adv[0].dim + j) return 0;
    return p->adv[0].dim;
}

/* The permutation taking [advanced dims..., others] back to the view's order (n = 0: none). */
static ts_dims view_order(const ix_plan *p) {
    ts_dims perm, back = {.n = 0};
    if (adv_first(p, &perm)) return back;
    back.n = perm.n;
    for (int i = 0; i < perm.n; i++) back.d[perm.d[i]] = i;
    return back;
}

/* The view with its advanced dims first (a view of the indexed tensor). */
static ts_tensor *view_adv_first(const ix_plan *p) {
    ts_dims perm;
    if (adv_first(p, &perm)) return ts_retain(p->view);
    return ts_permute(p->view, perm);
}

/* The shape [prefix..., the view's non-advanced dims...] */
static ts_shape rest_shape(const ix_plan *p, const int64_t *prefix, int nprefix) {
    ts_shape s = ts_shape_of(p->view), out = {.ndim = 0};
    bool is_adv[TS_MAX_DIMS] = {false};
    for (int j = 0; j < p->nadv; j++) is_adv[p->adv[j].dim] = true;
    for (int i = 0; i < nprefix && out.ndim < TS_MAX_DIMS; i++) out.dims[out.ndim++] = prefix[i];
    for (int d = 0; d < s.ndim; d++)
        if (!is_adv[d]) {
            if (out.ndim == TS_MAX_DIMS) return (ts_shape){.ndim = TS_MAX_DIMS + 1};
            out.dims[out.ndim++] = s.dims[d];
        }
    return out;
}

/* Moves dims [from, from + n) of a tensor of ndim nd to position to (a permutation). */
static ts_dims move_dims(int nd, int from, int n, int to) {
    ts_dims perm = {.n = 0};
    int rest[TS_MAX_DIMS], nrest = 0;
    for (int d = 0; d < nd; d++)
        if (d < from || d >= from + n) rest[nrest++] = d;
    for (int i = 0; i < to; i++) perm.d[perm.n++] = rest[i];
    for (int i = 0; i < n; i++) perm.d[perm.n++] = from + i;
    for (int i = to; i < nrest; i++) perm.d[perm.n++] = rest[i];
    return perm;
}

/* ------------------------------------------------------------------ reading */
static ts_tensor *lin_tensor(const int64_t *vals, int64_t n, ts_device dev) {
    return ts_from_data(TS_SHAPE(n), TS_I64, vals, (ts_opts){.device = dev});
}

static ts_tensor *too_many_dims(void) {
    PyErr_Format(PyExc_IndexError, "the indexing result would have more than %d dims", TS_MAX_DIMS);
    return NULL;
}

/* t[key] with advanced indices: the advanced dims flattened into one, index_select on it, the
 * broadcast shape put back where PyTorch puts it. */
static ts_tensor *plan_gather(const ix_plan *p) {
    int64_t nflat = 1;
    for (int j = 0; j < p->nadv; j++) nflat *= ts_size(p->view, p->adv[j].dim);
    ts_shape flat = rest_shape(p, &nflat, 1);
    ts_shape out = rest_shape(p, p->bshape.dims, p->bshape.ndim);
    if (out.ndim > TS_MAX_DIMS) return too_many_dims();
    ts_device dev = ts_device_of(p->view);
    ts_tensor *x = view_adv_first(p), *lin = NULL;
    TSP_NOGIL(x = x && p->nadv > 1 ? tspi_then(x, ts_reshape(x, flat)) : x;
              lin = x ? lin_tensor(p->lin, p->nlin, dev) : NULL;
              x = tspi_then(x, lin ? ts_index_select(x, 0, lin) : NULL);
              x = x && p->bshape.ndim != 1 ? tspi_then(x, ts_reshape(x, out)) : x;);
    ts_release(lin);
    int pos = result_pos(p);
    if (x && pos > 0) x = tspi_then(x, ts_permute(x, move_dims(out.ndim, 0, p->bshape.ndim, pos)));
    return x;
}

/* ------------------------------------------------------------------ writing */
/* Python numbers (and NumPy's scalars) are written with fill_ / masked_fill_. */
static bool scalar_value(PyObject *v, double *out) {
    if (tsp_tensor_of(v) || PyList_Check(v) || PyTuple_Check(v)) return false;
    if (PyFloat_Check(v) || PyLong_Check(v)) {
        *out = PyFloat_AsDouble(v);
        return !PyErr_Occurred() || (PyErr_Clear(), false);
    }
    if (PyObject_HasAttrString(v, "__dlpack__") || !PyNumber_Check(v)) return false;
    *out = PyFloat_AsDouble(v);
    return !PyErr_Occurred() || (PyErr_Clear(), false);
}

/* value as a tensor on dev: a Tensor as it is (a 0-dim one moved, as PyTorch lets a cpu scalar
 * into any device), a list or an array through tessera.as_tensor */
static ts_tensor *value_tensor(PyObject *value, ts_device dev) {
    ts_tensor *v = tsp_tensor_of(value);
    if (v) {
        bool move = ts_ndim(v) == 0 && !ts_device_equal(ts_device_of(v), dev);
        return move ? ts_to(v, dev) : ts_retain(v);
    }
    if (!PyList_Check(value) && !PyTuple_Check(value) &&
        !PyObject_HasAttrString(value, "__dlpack__") &&
        !PyObject_HasAttrString(value, "__array__")) {
        PyErr_Format(PyExc_TypeError, "can't assign a %s to a tessera.Tensor",
                     Py_TYPE(value)->tp_name);
        return NULL;
    }
    PyObject *obj = PyObject_CallMethod(tspi_module, "as_tensor", "O", value);
    if (!obj) return NULL;
    v = tsp_tensor_of(obj);
    v = v ? ts_to(v, dev) : NULL;
    Py_DECREF(obj);
    return v ? v : raised();
}

/* PyTorch drops a value's leading size-1 dims beyond the target's ndim (t[0] = x[None]) */
static ts_tensor *strip_leading_ones(ts_tensor *v, int ndim) {
    ts_shape s = ts_shape_of(v);
    int drop = 0;
    while (s.ndim - drop > ndim && s.dims[drop] == 1) drop++;
    if (!drop) return v;
    return tspi_then(v, ts_reshape(v, ts_shape_make((size_t)(s.ndim - drop), s.dims + drop)));
}

static int value_shape_error(ts_tensor *v, ts_shape target) {
    char a[160], b[160];
    tspi_shape_str(ts_shape_of(v), a, sizeof a);
    tspi_shape_str(target, b, sizeof b);
    PyErr_Format(PyExc_RuntimeError,
                 "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result "
                 "of shape %s",
                 a, b);
    return -1;
}

/* v (owned) broadcast to target: the expanded view, or NULL with RuntimeError */
static ts_tensor *value_expand(ts_tensor *v, ts_shape target) {
    v = strip_leading_ones(v, target.ndim);
    if (!v) return raised();
    ts_shape s = ts_shape_of(v);
    bool fits = s.ndim <= target.ndim;
    for (int i = 0; fits && i < s.ndim; i++) {
        int64_t vd = s.dims[s.ndim - 1 - i], td = target.dims[target.ndim - 1 - i];
        fits = vd == td || vd == 1;
    }
    if (!fits) {
        value_shape_error(v, target);
        ts_release(v);
        return NULL;
    }
    v = tspi_then(v, ts_expand(v, target));
    return v ? v : raised();
}

/* t[basic key] = value: into the view */
static int assign_view(ts_tensor *view, PyObject *value) {
    double s;
    ts_tensor *r = NULL;
    if (scalar_value(value, &s)) {
        TSP_NOGIL(r = ts_fill_(view, s););
    } else {
        ts_tensor *v = value_tensor(value, ts_device_of(view));
        if (!v) return -1;
        v = strip_leading_ones(v, ts_ndim(view));
        if (v) TSP_NOGIL(r = ts_copy_(view, v););
        ts_release(v);
    }
    if (!r) return tsp_check() < 0 ? -1 : (tsp_raise_pending(), -1);
    ts_release(r);
    return 0;
}

/* The host mask of the elements (over the flattened advanced dims) the key writes, and for each
 * the position of its value in the flattened broadcast shape (the last one wins, as in NumPy). */
static int write_map(const int64_t *lin, int64_t nlin, int64_t nflat, uint8_t **mask,
                     int64_t **pos) {
    *mask = PyMem_Calloc((size_t)(nflat ? nflat : 1), 1);
    *pos = PyMem_Calloc((size_t)(nflat ? nflat : 1), sizeof(int64_t));
    if (!*mask || !*pos) {
        PyMem_Free(*mask), PyMem_Free(*pos);
        return PyErr_NoMemory(), -1;
    }
    for (int64_t b = 0; b < nlin; b++) (*mask)[lin[b]] = 1, (*pos)[lin[b]] = b;
    return 0;
}

/* value (owned, broadcast to the indexing result) as [nlin, rest...] in the order of lin */
static ts_tensor *value_rows(const ix_plan *p, ts_tensor *v, ts_shape result) {
    int pos = result_pos(p);
    if (pos > 0) v = tspi_then(v, ts_permute(v, move_dims(result.ndim, pos, p->bshape.ndim, 0)));
    ts_shape rows = rest_shape(p, &p->nlin, 1);
    TSP_NOGIL(v = v ? tspi_then(v, ts_reshape(v, rows)) : NULL;);
    return v;
}

/* dst (the view) = where(mask, the values put in place, dst) */
static ts_tensor *write_values(const ix_plan *p, ts_tensor *dst, ts_tensor *mask, PyObject *value,
                               const int64_t *pos, int64_t nflat) {
    double s;
    ts_tensor *r = NULL;
    if (scalar_value(value, &s)) {
        TSP_NOGIL(r = ts_masked_fill_(dst, mask, s););
        return r;
    }
    /* the indexing result's shape: [broadcast dims, other dims] with the broadcast dims moved
     * to result_pos */
    ts_shape canon = rest_shape(p, p->bshape.dims, p->bshape.ndim), target = {.ndim = canon.ndim};
    if (canon.ndim > TS_MAX_DIMS) return too_many_dims();
    ts_dims perm = move_dims(canon.ndim, 0, p->bshape.ndim, result_pos(p));
    for (int i = 0; i < canon.ndim; i++) target.dims[i] = canon.dims[perm.d[i]];
    ts_tensor *v = value_tensor(value, ts_device_of(dst));
    if (!v) return NULL;
    v = tspi_then(v, v ? ts_to_dtype(v, ts_dtype_of(dst)) : NULL);
    v = v ? value_expand(v, target) : NULL;
    v = v ? value_rows(p, v, target) : NULL;
    if (!v) return NULL;
    ts_tensor *at = lin_tensor(pos, nflat, ts_device_of(dst)), *w = NULL;
    int64_t adv_sizes[TS_MAX_DIMS];
    for (int j = 0; j < p->nadv; j++) adv_sizes[j] = ts_size(dst, p->adv[j].dim);
    ts_shape placed = rest_shape(p, adv_sizes, p->nadv); /* [advanced dims..., other dims] */
    ts_dims back = view_order(p);
    TSP_NOGIL(v = tspi_then(v, at ? ts_index_select(v, 0, at) : NULL);
              v = v ? tspi_then(v, ts_reshape(v, placed)) : NULL;
              v = v && back.n ? tspi_then(v, ts_permute(v, back)) : v;
              w = v ? ts_where(mask, v, dst) : NULL; r = w ? ts_copy_(dst, w) : NULL;);
    ts_release(at), ts_release(v), ts_release(w);
    return r;
}

/* t[advanced key] = value */
static int assign_adv(const ix_plan *p, PyObject *value) {
    if (p->nlin == 0) return 0; /* nothing selected: nothing to write */
    ts_shape adv_shape = {.ndim = p->nadv};
    for (int j = 0; j < p->nadv; j++) adv_shape.dims[j] = ts_size(p->view, p->adv[j].dim);
    int64_t nflat = tspi_shape_numel(adv_shape);
    uint8_t *on;
    int64_t *pos;
    if (write_map(p->lin, p->nlin, nflat, &on, &pos) < 0) return -1;
    /* The write goes to the view itself, not a permuted view of it, so that when the view is the
     * tensor (t[idx] = v, t[:, mask] = v) copy_ records the graph on the tensor. The mask: the
     * advanced dims' sizes in place, 1 for the others (same bytes as adv_shape's, the advanced
     * dims being in increasing order). */
    ts_shape mshape = ts_shape_of(p->view);
    for (int d = 0; d < mshape.ndim; d++) mshape.dims[d] = 1;
    for (int j = 0; j < p->nadv; j++) mshape.dims[p->adv[j].dim] = adv_shape.dims[j];
    ts_device dev = ts_device_of(p->view);
    ts_tensor *mask = ts_from_data(mshape, TS_BOOL, on, (ts_opts){.device = dev}), *r = NULL;
    if (mask) r = write_values(p, p->view, mask, value, pos, nflat);
    PyMem_Free(on), PyMem_Free(pos);
    ts_release(mask);
    if (r) return ts_release(r), 0;
    return PyErr_Occurred() ? (ts_error_clear(), -1) : (tsp_raise_pending(), -1);
}

/* ------------------------------------------------------------------ differentiable writes */
/* The C library's in-place ops on a view do not reach the base's graph (it has no CopySlices):
 * a write that autograd must see is made on the whole tensor instead, when the key makes a view
 * of it: t.copy_(where(picked, the values put in place, t)), or masked_fill_ for a number. */
static bool needs_tracked_write(ts_tensor *t, PyObject *value) {
    ts_tensor *v = tsp_tensor_of(value);
    return ts_grad_enabled() && (ts_requires_grad(t) || (v && ts_requires_grad(v)));
}

/* The positions in t (row-major) of the elements t[key] names, in the order of t[key]: the same
 * key applied to an arange of t's shape. */
static ts_tensor *picked_positions(ts_tensor *t, const ix_key *k) {
    ix_plan q = {0};
    ts_tensor *ar =
        ts_arange(0, (double)ts_numel(t), 1, (ts_opts){.dtype = TS_I64, .device = ts_cpu()});
    ar = ar ? tspi_then(ar, ts_reshape(ar, ts_shape_of(t))) : NULL;
    if (!ar) return raised();
    ts_tensor *picked = NULL;
    if (tspi_plan_build(ar, k, &q) == 0) picked = q.nadv ? plan_gather(&q) : ts_retain(q.view);
    if (!picked && !PyErr_Occurred()) tsp_raise_pending();
    tspi_plan_free(&q);
    ts_release(ar);
    return picked;
}

/* t = where(mask, value (broadcast to picked's shape) at the positions pos names, t) */
static ts_tensor *write_tracked(ts_tensor *t, ts_tensor *mask, ts_tensor *picked, PyObject *value,
                                const int64_t *pos) {
    double s;
    ts_tensor *r = NULL, *w = NULL;
    if (scalar_value(value, &s)) {
        TSP_NOGIL(r = ts_masked_fill_(t, mask, s););
        return r;
    }
    ts_tensor *v = value_tensor(value, ts_device_of(t));
    v = tspi_then(v, v ? ts_to_dtype(v, ts_dtype_of(t)) : NULL);
    v = v ? value_expand(v, ts_shape_of(picked)) : NULL;
    if (!v) return NULL;
    ts_tensor *at = lin_tensor(pos, ts_numel(t), ts_device_of(t));
    TSP_NOGIL(v = tspi_then(v, at ? ts_reshape(v, TS_SHAPE(ts_numel(picked))) : NULL);
              v = v ? tspi_then(v, ts_index_select(v, 0, at)) : NULL;
              v = v ? tspi_then(v, ts_reshape(v, ts_shape_of(t))) : NULL;
              w = v ? ts_where(mask, v, t) : NULL; r = w ? ts_copy_(t, w) : NULL;);
    ts_release(at), ts_release(v), ts_release(w);
    return r;
}

static int assign_tracked(ts_tensor *t, const ix_key *k, PyObject *value) {
    ts_tensor *picked = picked_positions(t, k), *mask = NULL, *r = NULL;
    if (!picked) return -1;
    if (ts_numel(picked) == 0) return ts_release(picked), 0; /* nothing to write */
    int64_t *lin = tspi_host_copy(picked, TS_I64), *pos = NULL;
    uint8_t *on = NULL;
    if (lin && write_map(lin, ts_numel(picked), ts_numel(t), &on, &pos) == 0) {
        mask = ts_from_data(ts_shape_of(t), TS_BOOL, on, (ts_opts){.device = ts_device_of(t)});
        r = mask ? write_tracked(t, mask, picked, value, pos) : NULL;
    }
    PyMem_Free(lin), PyMem_Free(on), PyMem_Free(pos);
    ts_release(picked), ts_release(mask);
    if (r) return ts_release(r), 0;
    return PyErr_Occurred() ? (ts_error_clear(), -1) : (tsp_raise_pending(), -1);
}

/* ------------------------------------------------------------------ the slots */
PyObject *tsp_tensor_getitem(PyObject *self, PyObject *key) {
    ts_tensor *t = tsp_tensor_of(self);
    ix_key k = {0};
    ix_plan p = {0};
    if (tsp_enter() < 0) return NULL;
    ts_tensor *out = NULL;
    if (tspi_parse_key(key, &k) == 0 && tspi_plan_build(t, &k, &p) == 0) {
        /* no key changed the view (t[...], t[:]): still a new view, as PyTorch gives */
        if (!p.nadv)
            out = p.view == t ? ts_view(t, ts_shape_of(t)) : ts_retain(p.view);
        else
            out = plan_gather(&p);
        if (!out && !PyErr_Occurred()) tsp_raise_pending();
    }
    tspi_plan_free(&p);
    tspi_key_free(&k);
    return out ? tsp_wrap(out) : NULL;
}

int tsp_tensor_setitem(PyObject *self, PyObject *key, PyObject *value) {
    ts_tensor *t = tsp_tensor_of(self);
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "Tensor does not support item deletion");
        return -1;
    }
    if (tsp_enter() < 0) return -1;
    ix_key k = {0};
    ix_plan p = {0};
    int rc = tspi_parse_key(key, &k);
    if (rc == 0) rc = tspi_plan_build(t, &k, &p);
    if (rc == 0 && p.view != t && needs_tracked_write(t, value))
        rc = assign_tracked(t, &k, value);
    else if (rc == 0)
        rc = p.nadv ? assign_adv(&p, value) : assign_view(p.view, value);
    tspi_plan_free(&p);
    tspi_key_free(&k);
    return rc;
}

int tsp_init_index(PyObject *m) {
    tspi_module = m;
    Py_INCREF(m); /* the module lives as long as the process: a single-phase extension */
    return 0;
}
