/* tensor_index_plan.c — what a key of t[key] (t[key] = value) selects: the key parsed (ints,
 * slices, None, Ellipsis, bools, integer and bool tensors, lists and arrays) and planned as the
 * view its basic part makes (ts_select / ts_slice / ts_unsqueeze) and the advanced indices, read on
 * the host (where out-of-range indices become IndexError naming the dim, as in PyTorch), broadcast
 * and flattened into one index over the advanced dims. tensor_index.c reads and writes through
 * the plan. */
#include "tensor_index.h"

#include <string.h>

PyObject *tspi_module;

/* ------------------------------------------------------------------ small helpers */
/* Releases prev and returns next: `x = tspi_then(x, ts_op(x))` chains ops, NULL on failure. */
ts_tensor *tspi_then(ts_tensor *prev, ts_tensor *next) {
    ts_release(prev);
    return next;
}

int64_t tspi_shape_numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

/* "[3, 4]", PyTorch's way of writing a shape in messages */
void tspi_shape_str(ts_shape s, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s.ndim && len < size; i++)
        len +=
            (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)s.dims[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

static int index_error_range(int64_t i, int dim, int64_t size) {
    PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld",
                 (long long)i, dim, (long long)size);
    return -1;
}

/* A contiguous host copy of t's values in dtype dt (PyMem; the caller frees it). */
void *tspi_host_copy(ts_tensor *t, ts_dtype dt) {
    ts_tensor *c;
    TSP_NOGIL(c = ts_to(t, ts_cpu()); c = tspi_then(c, c ? ts_to_dtype(c, dt) : NULL);
              c = tspi_then(c, c ? ts_contiguous(c) : NULL););
    if (!c) return tsp_raise_pending();
    size_t bytes = (size_t)ts_numel(c) * ts_dtype_size(dt);
    void *buf = PyMem_Malloc(bytes ? bytes : 1);
    if (!buf)
        PyErr_NoMemory();
    else if (ts_copy_to_host(c, buf, bytes) != TS_OK) {
        PyMem_Free(buf);
        buf = NULL;
        tsp_check();
    }
    ts_release(c);
    return buf;
}

/* ------------------------------------------------------------------ parsing the key */
/* A (nested) list of ints or bools -> an int64 or bool tensor on the cpu, as NumPy reads it. */
typedef struct list_buf {
    ts_shape shape;
    int64_t *vals;
    int64_t n;
    bool all_bool;
} list_buf;

static int list_shape(PyObject *o, list_buf *b) {
    b->shape.ndim = 0;
    while (PyList_Check(o) || PyTuple_Check(o)) {
        if (b->shape.ndim == TS_MAX_DIMS) {
            PyErr_SetString(PyExc_IndexError, "index list has too many dimensions");
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        b->shape.dims[b->shape.ndim++] = n;
        if (n == 0) break;
        o = PySequence_Fast_GET_ITEM(o, 0);
    }
    return 0;
}

static int list_fill(PyObject *o, int d, list_buf *b) {
    if (d == b->shape.ndim) {
        if (PyList_Check(o) || PyTuple_Check(o) || !PyIndex_Check(o) || tsp_tensor_of(o)) {
            PyErr_Format(PyExc_IndexError,
                         "an index list must hold ints or bools of one nesting depth (got %s)",
                         Py_TYPE(o)->tp_name);
            return -1;
        }
        b->all_bool &= PyBool_Check(o);
        int64_t v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        b->vals[b->n++] = v;
        return 0;
    }
    if (!(PyList_Check(o) || PyTuple_Check(o)) || PySequence_Fast_GET_SIZE(o) != b->shape.dims[d]) {
        PyErr_SetString(PyExc_IndexError, "an index list must not be ragged");
        return -1;
    }
    for (Py_ssize_t i = 0; i < b->shape.dims[d]; i++)
        if (list_fill(PySequence_Fast_GET_ITEM(o, i), d + 1, b) < 0) return -1;
    return 0;
}

static ts_tensor *list_tensor(PyObject *list) {
    list_buf b = {.all_bool = true};
    if (list_shape(list, &b) < 0) return NULL;
    int64_t n = tspi_shape_numel(b.shape);
    b.vals = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!b.vals) return PyErr_NoMemory(), NULL;
    ts_tensor *t = NULL;
    if (list_fill(list, 0, &b) == 0) {
        bool mask = b.all_bool && n > 0;
        if (mask) /* bool bytes in place, the int64 values read in order */
            for (int64_t i = 0; i < n; i++) ((uint8_t *)b.vals)[i] = (uint8_t)b.vals[i];
        t = ts_from_data(b.shape, mask ? TS_BOOL : TS_I64, b.vals, (ts_opts){.device = ts_cpu()});
        if (!t) tsp_raise_pending();
    }
    PyMem_Free(b.vals);
    return t;
}

/* An index tensor: integer -> IX_TENSOR, bool / uint8 -> IX_MASK (0-dim bool -> IX_BOOL, as a
 * Python bool); it takes the reference to t. */
static int tensor_item(ts_tensor *t, ix_item *it) {
    ts_dtype dt = ts_dtype_of(t);
    it->t = t;
    if (dt == TS_I64 || dt == TS_I32) {
        it->kind = IX_TENSOR;
        return 0;
    }
    if (dt != TS_BOOL && dt != TS_U8) {
        PyErr_SetString(PyExc_IndexError,
                        "tensors used as indices must be long, int, byte or bool tensors");
        return -1;
    }
    it->kind = IX_MASK;
    if (ts_ndim(t) > 0) return 0;
    it->kind = IX_BOOL;
    it->i = ts_item(t) != 0;
    return tsp_check();
}

/* An array (an object with __dlpack__) as an index tensor, through tessera.as_tensor. */
static int array_item(PyObject *o, ix_item *it) {
    PyObject *obj = PyObject_CallMethod(tspi_module, "as_tensor", "O", o);
    ts_tensor *t = obj ? tsp_tensor_of(obj) : NULL;
    int rc = t ? tensor_item(ts_retain(t), it) : -1;
    Py_XDECREF(obj);
    return rc;
}

static int parse_item(PyObject *o, ix_item *it) {
    ts_tensor *t = tsp_tensor_of(o);
    memset(it, 0, sizeof *it);
    if (t) return tensor_item(ts_retain(t), it);
    if (PyBool_Check(o)) {
        it->kind = IX_BOOL;
        it->i = o == Py_True;
        return 0;
    }
    if (PySlice_Check(o)) {
        it->kind = IX_SLICE;
        it->slice = o;
        return 0;
    }
    if (o == Py_None || o == Py_Ellipsis) {
        it->kind = o == Py_None ? IX_NONE : IX_ELLIPSIS;
        return 0;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) { /* a tuple inside the key's tuple: a sequence */
        t = list_tensor(o);
        return t ? tensor_item(t, it) : -1;
    }
    if (PyRange_Check(o)) { /* x[range(n), y], as PyTorch: the range as an index list */
        PyObject *list = PySequence_List(o);
        t = list ? list_tensor(list) : NULL;
        Py_XDECREF(list);
        return t ? tensor_item(t, it) : -1;
    }
    if (PyObject_HasAttrString(o, "__dlpack__")) /* NumPy arrays, PyTorch tensors: shared */
        return array_item(o, it);
    if (PyIndex_Check(o)) {
        it->kind = IX_INT;
        it->i = PyNumber_AsSsize_t(o, PyExc_IndexError);
        return it->i == -1 && PyErr_Occurred() ? -1 : 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "Tensor indices must be integers, slices (`:`), ellipsis (`...`), None, bools, "
                 "or long, int, byte or bool tensors or lists (got %s)",
                 Py_TYPE(o)->tp_name);
    return -1;
}

void tspi_key_free(ix_key *k) {
    for (int i = 0; i < k->n; i++) ts_release(k->items[i].t);
    k->n = 0;
}

int tspi_parse_key(PyObject *key, ix_key *k) {
    k->n = 0;
    if (!PyTuple_Check(key)) {
        k->n = 1;
        return parse_item(key, &k->items[0]);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(key);
    if (n > IX_MAX) {
        PyErr_Format(PyExc_IndexError, "too many indices (%zd) in one key", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = parse_item(PyTuple_GET_ITEM(key, i), &k->items[i]);
        k->n++; /* a failed item may hold a tensor too: key_free releases it */
        if (rc < 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the plan: basic part */
void tspi_plan_free(ix_plan *p) {
    ts_release(p->view);
    for (int j = 0; j < p->nadv; j++) PyMem_Free(p->adv[j].idx);
    PyMem_Free(p->lin);
    memset(p, 0, sizeof *p);
}

/* view = next (releasing the old view); -1 with the C error raised when next is NULL */
static int step(ix_plan *p, ts_tensor *next) {
    p->view = tspi_then(p->view, next);
    if (next) return 0;
    tsp_raise_pending();
    return -1;
}

static int apply_int(ix_plan *p, int d, int src, int64_t i) {
    int64_t size = ts_size(p->view, d);
    if (i < -size || i >= size) return index_error_range(i, src, size);
    return step(p, ts_select(p->view, d, i < 0 ? i + size : i));
}

static int apply_slice(ix_plan *p, int d, PyObject *slice) {
    Py_ssize_t start, stop, stride;
    if (PySlice_Unpack(slice, &start, &stop, &stride) < 0) return -1;
    if (stride <= 0) {
        PyErr_SetString(PyExc_ValueError, "step must be greater than zero");
        return -1;
    }
    int64_t size = ts_size(p->view, d);
    Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)size, &start, &stop, stride);
    if (start == 0 && stride == 1 && len == size) return 0; /* `:` keeps the dim as it is */
    int64_t end = len ? start + (len - 1) * stride + 1 : start;
    return step(p, ts_slice(p->view, d, start, end, stride));
}

/* True adds a dim of size 1, False one of size 0 (PyTorch: unsqueeze, then narrow to 0) */
static int apply_bool(ix_plan *p, int d, bool on) {
    if (step(p, ts_unsqueeze(p->view, d)) < 0) return -1;
    return on ? 0 : step(p, ts_narrow(p->view, d, 0, 0));
}

static int add_adv(ix_plan *p, int d, ts_shape shape, int64_t *idx) {
    if (p->nadv == TS_MAX_DIMS) {
        PyMem_Free(idx);
        PyErr_SetString(PyExc_IndexError, "too many advanced indices");
        return -1;
    }
    p->adv[p->nadv++] = (ix_adv){.dim = d, .shape = shape, .idx = idx};
    return 0;
}

/* An integer tensor on view dim d (the tensor's dim src): its values, range-checked. */
static int apply_tensor(ix_plan *p, int d, int src, ts_tensor *t) {
    int64_t *idx = tspi_host_copy(t, TS_I64);
    if (!idx) return -1;
    int64_t size = ts_size(p->view, d), n = ts_numel(t);
    for (int64_t e = 0; e < n; e++) {
        if (idx[e] < -size || idx[e] >= size) {
            PyMem_Free(idx);
            return index_error_range(idx[e], src, size);
        }
        idx[e] += idx[e] < 0 ? size : 0;
    }
    return add_adv(p, d, ts_shape_of(t), idx);
}

static int mask_check(ix_plan *p, int d, ts_tensor *m) {
    ts_shape ms = ts_shape_of(m), vs = ts_shape_of(p->view);
    for (int j = 0; j < ms.ndim; j++)
        if (ms.dims[j] != vs.dims[d + j]) {
            char a[160], b[160];
            tspi_shape_str(ms, a, sizeof a);
            tspi_shape_str(vs, b, sizeof b);
            PyErr_Format(PyExc_IndexError,
                         "The shape of the mask %s at index %d does not match the shape of the "
                         "indexed tensor %s at index %d",
                         a, j, b, d + j);
            return -1;
        }
    return 0;
}

/* A k-dim mask on view dims d..d+k-1: k index arrays, the coordinates of its true elements. */
static int apply_mask(ix_plan *p, int d, ts_tensor *m) {
    if (mask_check(p, d, m) < 0) return -1;
    uint8_t *on = tspi_host_copy(m, TS_BOOL);
    if (!on) return -1;
    ts_shape ms = ts_shape_of(m);
    int64_t n = ts_numel(m), count = 0;
    for (int64_t e = 0; e < n; e++) count += on[e] != 0;
    int rc = 0;
    for (int j = 0; j < ms.ndim && rc == 0; j++) {
        int64_t *idx = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(int64_t));
        if (!idx) {
            rc = (PyErr_NoMemory(), -1);
            break;
        }
        int64_t inner = 1, c = 0; /* coordinate j of element e: (e / inner) % dims[j] */
        for (int i = j + 1; i < ms.ndim; i++) inner *= ms.dims[i];
        for (int64_t e = 0; e < n; e++)
            if (on[e]) idx[c++] = (e / inner) % ms.dims[j];
        rc = add_adv(p, d + j, TS_SHAPE(count), idx);
    }
    PyMem_Free(on);
    return rc;
}

/* dims the key consumes (the Ellipsis stands for the rest); -1 with IndexError when too many */
static int key_consumed(const ix_key *k, int ndim) {
    int consumed = 0, ellipses = 0;
    for (int i = 0; i < k->n; i++) {
        ix_kind kind = k->items[i].kind;
        consumed += kind == IX_INT || kind == IX_SLICE || kind == IX_TENSOR;
        consumed += kind == IX_MASK ? ts_ndim(k->items[i].t) : 0;
        ellipses += kind == IX_ELLIPSIS;
    }
    if (ellipses > 1) {
        PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
        return -1;
    }
    if (consumed > ndim) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d", ndim);
        return -1;
    }
    return consumed;
}

static int apply_item(ix_plan *p, const ix_item *it, int *d, int *src, int skip) {
    switch (it->kind) {
    case IX_INT:
        return apply_int(p, *d, (*src)++, it->i);
    case IX_SLICE:
        (*src)++;
        return apply_slice(p, (*d)++, it->slice);
    case IX_NONE:
        return step(p, ts_unsqueeze(p->view, (*d)++));
    case IX_BOOL:
        return apply_bool(p, (*d)++, it->i);
    case IX_ELLIPSIS:
        *d += skip, *src += skip;
        return 0;
    case IX_TENSOR:
        return apply_tensor(p, (*d)++, (*src)++, it->t);
    case IX_MASK: {
        int k = ts_ndim(it->t), rc = apply_mask(p, *d, it->t);
        *d += k, *src += k;
        return rc;
    }
    }
    return 0;
}

/* ------------------------------------------------------------------ the plan: advanced part */
static int broadcast_error(const ix_plan *p) {
    char msg[512] = "", one[160];
    for (int j = 0; j < p->nadv; j++) {
        tspi_shape_str(p->adv[j].shape, one, sizeof one);
        if (strlen(msg) + strlen(one) + 3 < sizeof msg) {
            if (j) strcat(msg, ", ");
            strcat(msg, one);
        }
    }
    PyErr_Format(PyExc_IndexError,
                 "shape mismatch: indexing tensors could not be broadcast together with shapes %s",
                 msg);
    return -1;
}

static int broadcast_shapes(ix_plan *p) {
    ts_shape b = {0};
    for (int j = 0; j < p->nadv; j++)
        if (p->adv[j].shape.ndim > b.ndim) b.ndim = p->adv[j].shape.ndim;
    for (int d = 0; d < b.ndim; d++) b.dims[d] = 1;
    for (int j = 0; j < p->nadv; j++) {
        ts_shape s = p->adv[j].shape;
        for (int i = 0; i < s.ndim; i++) {
            int64_t *bd = &b.dims[b.ndim - s.ndim + i];
            if (*bd == 1)
                *bd = s.dims[i];
            else if (s.dims[i] != 1 && s.dims[i] != *bd)
                return broadcast_error(p);
        }
    }
    p->bshape = b;
    p->nlin = tspi_shape_numel(b);
    return 0;
}

/* lin[b] = the row-major position, over the advanced dims' sizes, of the element that the
 * broadcast indices pick at b */
static int linearize(ix_plan *p) {
    if (broadcast_shapes(p) < 0) return -1;
    p->lin = PyMem_Malloc((size_t)(p->nlin ? p->nlin : 1) * sizeof(int64_t));
    if (!p->lin) return PyErr_NoMemory(), -1;
    ts_shape b = p->bshape;
    int64_t mult[TS_MAX_DIMS], bstride[TS_MAX_DIMS][TS_MAX_DIMS] = {{0}}, coord[TS_MAX_DIMS] = {0};
    int64_t m = 1;
    for (int j = p->nadv - 1; j >= 0; j--) {
        mult[j] = m;
        m *= ts_size(p->view, p->adv[j].dim);
        ts_shape s = p->adv[j].shape;
        int64_t st = 1;
        for (int i = s.ndim - 1; i >= 0; st *= s.dims[i--])
            bstride[j][b.ndim - s.ndim + i] = s.dims[i] == 1 ? 0 : st;
    }
    for (int64_t e = 0; e < p->nlin; e++) {
        int64_t v = 0;
        for (int j = 0; j < p->nadv; j++) {
            int64_t off = 0;
            for (int d = 0; d < b.ndim; d++) off += coord[d] * bstride[j][d];
            v += p->adv[j].idx[off] * mult[j];
        }
        p->lin[e] = v;
        for (int d = b.ndim - 1; d >= 0 && ++coord[d] == b.dims[d]; d--) coord[d] = 0;
    }
    return 0;
}

int tspi_plan_build(ts_tensor *t, const ix_key *k, ix_plan *p) {
    memset(p, 0, sizeof *p);
    int ndim = ts_ndim(t), consumed = key_consumed(k, ndim);
    if (consumed < 0) return -1;
    p->view = ts_retain(t);
    int d = 0, src = 0;
    for (int i = 0; i < k->n; i++)
        if (apply_item(p, &k->items[i], &d, &src, ndim - consumed) < 0) return -1;
    return p->nadv ? linearize(p) : 0;
}
