/* tensor_index.c — t[key] and t[key] = value with PyTorch's rules: ints, slices, None, Ellipsis
 * and bools make views (ts_select / ts_slice / ts_unsqueeze); integer and bool tensors or lists
 * ("advanced" indices) read by copy through ts_index_select and write through ts_where /
 * ts_masked_fill_, so both stay differentiable. The index values are read on the host: that is
 * where out-of-range indices become IndexError naming the dim, as in PyTorch. */
#include "tsp.h"

#include <string.h>

#define IX_MAX 32 /* entries in one key: more could not fit TS_MAX_DIMS dims */

typedef enum ix_kind {
    IX_INT,
    IX_SLICE,
    IX_NONE,
    IX_ELLIPSIS,
    IX_BOOL,
    IX_TENSOR,
    IX_MASK
} ix_kind;

typedef struct ix_item {
    ix_kind kind;
    int64_t i;       /* IX_INT: the index; IX_BOOL: 0 or 1 */
    PyObject *slice; /* IX_SLICE: borrowed from the key */
    ts_tensor *t;    /* IX_TENSOR (int64/int32) / IX_MASK (bool/uint8): owned */
} ix_item;

typedef struct ix_key {
    int n;
    ix_item items[IX_MAX];
} ix_key;

/* One advanced index: the values (normalised to [0, size)) that index one dim of the view. */
typedef struct ix_adv {
    int dim;        /* the view's dim */
    ts_shape shape; /* of the index array */
    int64_t *idx;   /* host, numel(shape) values (PyMem) */
} ix_adv;

/* What a key does to a tensor: the view made by its basic part (advanced dims kept whole), then
 * the advanced indices, broadcast to bshape and flattened into one row-major index (lin) over the
 * advanced dims taken together. */
typedef struct ix_plan {
    ts_tensor *view;
    int nadv;
    ix_adv adv[TS_MAX_DIMS];
    ts_shape bshape;
    int64_t nlin; /* numel(bshape) */
    int64_t *lin;
} ix_plan;

static PyObject *module; /* tessera._C: its as_tensor (dlpack.c) makes tensors of arrays, lists */

/* ------------------------------------------------------------------ small helpers */
/* Releases prev and returns next: `x = then(x, ts_op(x))` chains ops, NULL on failure. */
static ts_tensor *then(ts_tensor *prev, ts_tensor *next) {
    ts_release(prev);
    return next;
}

/* NULL with the pending C error raised */
static ts_tensor *raised(void) {
    tsp_raise_pending();
    return NULL;
}

static int64_t shape_numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

/* "[3, 4]", PyTorch's way of writing a shape in messages */
static void shape_str(ts_shape s, char *buf, size_t size) {
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
static void *host_copy(ts_tensor *t, ts_dtype dt) {
    ts_tensor *c;
    TSP_NOGIL(c = ts_to(t, ts_cpu()); c = then(c, c ? ts_to_dtype(c, dt) : NULL);
              c = then(c, c ? ts_contiguous(c) : NULL););
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
    int64_t n = shape_numel(b.shape);
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
    PyObject *obj = PyObject_CallMethod(module, "as_tensor", "O", o);
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

static void key_free(ix_key *k) {
    for (int i = 0; i < k->n; i++) ts_release(k->items[i].t);
    k->n = 0;
}

static int parse_key(PyObject *key, ix_key *k) {
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
static void plan_free(ix_plan *p) {
    ts_release(p->view);
    for (int j = 0; j < p->nadv; j++) PyMem_Free(p->adv[j].idx);
    PyMem_Free(p->lin);
    memset(p, 0, sizeof *p);
}

/* view = next (releasing the old view); -1 with the C error raised when next is NULL */
static int step(ix_plan *p, ts_tensor *next) {
    p->view = then(p->view, next);
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
    int64_t *idx = host_copy(t, TS_I64);
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
            shape_str(ms, a, sizeof a);
            shape_str(vs, b, sizeof b);
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
    uint8_t *on = host_copy(m, TS_BOOL);
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
        shape_str(p->adv[j].shape, one, sizeof one);
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
    p->nlin = shape_numel(b);
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

static int plan_build(ts_tensor *t, const ix_key *k, ix_plan *p) {
    memset(p, 0, sizeof *p);
    int ndim = ts_ndim(t), consumed = key_consumed(k, ndim);
    if (consumed < 0) return -1;
    p->view = ts_retain(t);
    int d = 0, src = 0;
    for (int i = 0; i < k->n; i++)
        if (apply_item(p, &k->items[i], &d, &src, ndim - consumed) < 0) return -1;
    return p->nadv ? linearize(p) : 0;
}

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
    TSP_NOGIL(x = x && p->nadv > 1 ? then(x, ts_reshape(x, flat)) : x;
              lin = x ? lin_tensor(p->lin, p->nlin, dev) : NULL;
              x = then(x, lin ? ts_index_select(x, 0, lin) : NULL);
              x = x && p->bshape.ndim != 1 ? then(x, ts_reshape(x, out)) : x;);
    ts_release(lin);
    int pos = result_pos(p);
    if (x && pos > 0) x = then(x, ts_permute(x, move_dims(out.ndim, 0, p->bshape.ndim, pos)));
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
    PyObject *obj = PyObject_CallMethod(module, "as_tensor", "O", value);
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
    return then(v, ts_reshape(v, ts_shape_make((size_t)(s.ndim - drop), s.dims + drop)));
}

static int value_shape_error(ts_tensor *v, ts_shape target) {
    char a[160], b[160];
    shape_str(ts_shape_of(v), a, sizeof a);
    shape_str(target, b, sizeof b);
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
    v = then(v, ts_expand(v, target));
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
    if (pos > 0) v = then(v, ts_permute(v, move_dims(result.ndim, pos, p->bshape.ndim, 0)));
    ts_shape rows = rest_shape(p, &p->nlin, 1);
    TSP_NOGIL(v = v ? then(v, ts_reshape(v, rows)) : NULL;);
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
    v = then(v, v ? ts_to_dtype(v, ts_dtype_of(dst)) : NULL);
    v = v ? value_expand(v, target) : NULL;
    v = v ? value_rows(p, v, target) : NULL;
    if (!v) return NULL;
    ts_tensor *at = lin_tensor(pos, nflat, ts_device_of(dst)), *w = NULL;
    int64_t adv_sizes[TS_MAX_DIMS];
    for (int j = 0; j < p->nadv; j++) adv_sizes[j] = ts_size(dst, p->adv[j].dim);
    ts_shape placed = rest_shape(p, adv_sizes, p->nadv); /* [advanced dims..., other dims] */
    ts_dims back = view_order(p);
    TSP_NOGIL(v = then(v, at ? ts_index_select(v, 0, at) : NULL);
              v = v ? then(v, ts_reshape(v, placed)) : NULL;
              v = v && back.n ? then(v, ts_permute(v, back)) : v;
              w = v ? ts_where(mask, v, dst) : NULL; r = w ? ts_copy_(dst, w) : NULL;);
    ts_release(at), ts_release(v), ts_release(w);
    return r;
}

/* t[advanced key] = value */
static int assign_adv(const ix_plan *p, PyObject *value) {
    if (p->nlin == 0) return 0; /* nothing selected: nothing to write */
    ts_shape adv_shape = {.ndim = p->nadv};
    for (int j = 0; j < p->nadv; j++) adv_shape.dims[j] = ts_size(p->view, p->adv[j].dim);
    int64_t nflat = shape_numel(adv_shape);
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
    ar = ar ? then(ar, ts_reshape(ar, ts_shape_of(t))) : NULL;
    if (!ar) return raised();
    ts_tensor *picked = NULL;
    if (plan_build(ar, k, &q) == 0) picked = q.nadv ? plan_gather(&q) : ts_retain(q.view);
    if (!picked && !PyErr_Occurred()) tsp_raise_pending();
    plan_free(&q);
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
    v = then(v, v ? ts_to_dtype(v, ts_dtype_of(t)) : NULL);
    v = v ? value_expand(v, ts_shape_of(picked)) : NULL;
    if (!v) return NULL;
    ts_tensor *at = lin_tensor(pos, ts_numel(t), ts_device_of(t));
    TSP_NOGIL(v = then(v, at ? ts_reshape(v, TS_SHAPE(ts_numel(picked))) : NULL);
              v = v ? then(v, ts_index_select(v, 0, at)) : NULL;
              v = v ? then(v, ts_reshape(v, ts_shape_of(t))) : NULL;
              w = v ? ts_where(mask, v, t) : NULL; r = w ? ts_copy_(t, w) : NULL;);
    ts_release(at), ts_release(v), ts_release(w);
    return r;
}

static int assign_tracked(ts_tensor *t, const ix_key *k, PyObject *value) {
    ts_tensor *picked = picked_positions(t, k), *mask = NULL, *r = NULL;
    if (!picked) return -1;
    if (ts_numel(picked) == 0) return ts_release(picked), 0; /* nothing to write */
    int64_t *lin = host_copy(picked, TS_I64), *pos = NULL;
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
    if (parse_key(key, &k) == 0 && plan_build(t, &k, &p) == 0) {
        /* no key changed the view (t[...], t[:]): still a new view, as PyTorch gives */
        if (!p.nadv)
            out = p.view == t ? ts_view(t, ts_shape_of(t)) : ts_retain(p.view);
        else
            out = plan_gather(&p);
        if (!out && !PyErr_Occurred()) tsp_raise_pending();
    }
    plan_free(&p);
    key_free(&k);
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
    int rc = parse_key(key, &k);
    if (rc == 0) rc = plan_build(t, &k, &p);
    if (rc == 0 && p.view != t && needs_tracked_write(t, value))
        rc = assign_tracked(t, &k, value);
    else if (rc == 0)
        rc = p.nadv ? assign_adv(&p, value) : assign_view(p.view, value);
    plan_free(&p);
    key_free(&k);
    return rc;
}

int tsp_init_index(PyObject *m) {
    module = m;
    Py_INCREF(m); /* the module lives as long as the process: a single-phase extension */
    return 0;
}
