/* data.c — the C library's data sets, transforms and loader for tessera.utils.data: built-in data
 * sets (MNIST, Fashion-MNIST, CIFAR-10, IDX, tensors) as _C._Dataset, transforms built from
 * Python-side specs, and _C._Loader, whose worker threads stack batches with the GIL released.
 * Python callables never run on the loader's threads: the loader calls get and transforms inside
 * C scopes, where a Python-made tensor would be owned twice (tessera/utils/data.py runs Python
 * data sets on Python threads instead). */
#include "tsp.h"

/* ------------------------------------------------------------------ transforms from specs
 * A spec is a tuple whose first item names the transform: ("to_tensor",), ("normalize", means,
 * stds), ("random_crop", size, padding), ("hflip", p), ("pad", padding), ("gray", channels),
 * ("compose", [spec, ...]). The C transforms are owned by whoever gets them (a loader takes its
 * own), so each user builds a fresh one from the same spec. */

static ts_transform *transform_from_spec(PyObject *spec);

/* Transform callbacks own x: they release it or return it. */

/* pad zeros on each side of a [..., H, W] image (a uint8 [H, W, C] one along H and W) */
static ts_tensor *pad_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    (void)c;
    int64_t p = *(int *)user;
    const int64_t pads[6] = {0, 0, p, p, p, p}; /* from the last dim backwards */
    int hwc = ts_dtype_of(x) == TS_U8 && ts_shape_of(x).ndim == 3;
    /* fn runs in a scope of its own: the result outlives it through ts_retain */
    ts_tensor *y = ts_retain(ts_pad(x, hwc ? pads : pads + 2, hwc ? 6 : 4, TS_PAD_CONSTANT, 0.0));
    ts_release(x);
    return y;
}

/* torchvision's Grayscale(num_output_channels) on CHW float images: luminance (ITU-R 601-2, as
 * torchvision) of 3 channels, then that one channel repeated. */
static ts_tensor *gray_fn(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    (void)c;
    int out = *(int *)user;
    ts_shape s = ts_shape_of(x);
    if (s.ndim != 3 || (s.dims[0] != 1 && s.dims[0] != 3)) {
        ts_error_set(TS_ERR_SHAPE,
                     "Grayscale: expected a CHW image of 1 or 3 channels (after "
                     "ToTensor), got %d dims",
                     s.ndim);
        ts_release(x);
        return NULL;
    }
    ts_tensor *g = x;
    if (s.dims[0] == 3) {
        ts_tensor *w = ts_tensor_f32(TS_SHAPE(3, 1, 1), (float[]){0.2989f, 0.587f, 0.114f},
                                     (ts_opts){.device = ts_device_of(x)});
        g = ts_sum_dim(ts_mul(ts_to_dtype(x, TS_F32), w), 0, true);
    }
    ts_tensor *y = ts_retain(ts_contiguous(ts_expand(g, TS_SHAPE(out, s.dims[1], s.dims[2]))));
    ts_release(x);
    return y;
}

static void free_int(void *p) { free(p); }

/* a C transform running fn with one int parameter */
static ts_transform *int_transform(ts_transform_fn fn, long v) {
    int *p = malloc(sizeof *p);
    if (!p) {
        ts_error_set(TS_ERR_OOM, "transform: out of host memory");
        return NULL;
    }
    *p = (int)v;
    return ts_transform_new(fn, p, free_int);
}

/* floats of a sequence into out[0..max); the count, or -1 with ValueError */
static int float_seq(PyObject *o, float *out, int max, const char *what) {
    PyObject *seq = PySequence_Fast(o, "Normalize: mean and std must be sequences of numbers");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > max) {
        PyErr_Format(PyExc_ValueError, "Normalize: %s has %zd values (1 to %d channels)", what, n,
                     max);
        n = -1;
    }
    for (Py_ssize_t i = 0; n > 0 && i < n; i++) {
        out[i] = (float)PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred()) n = -1;
    }
    Py_DECREF(seq);
    return (int)n;
}

static ts_transform *normalize_from_spec(PyObject *spec) {
    float mean[64], std[64];
    int n = float_seq(PyTuple_GET_ITEM(spec, 1), mean, 64, "mean");
    int m = n < 0 ? -1 : float_seq(PyTuple_GET_ITEM(spec, 2), std, 64, "std");
    if (m < 0) return NULL;
    if (n != m) {
        PyErr_Format(PyExc_ValueError, "Normalize: mean has %d values but std %d", n, m);
        return NULL;
    }
    return ts_normalize_new(n, mean, std);
}

static ts_transform *compose_from_spec(PyObject *list) {
    PyObject *seq = PySequence_Fast(list, "Compose: expected a list of transforms");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_transform **parts = calloc(n ? (size_t)n : 1, sizeof *parts);
    Py_ssize_t made = 0;
    while (parts && made < n &&
           (parts[made] = transform_from_spec(PySequence_Fast_GET_ITEM(seq, made))))
        made++;
    ts_transform *t = NULL;
    if (parts && made == n)
        t = ts_compose_new((int)n, parts); /* owns the parts from here, also when it fails */
    else
        for (Py_ssize_t i = 0; parts && i < made; i++) ts_transform_free(parts[i]);
    if (!parts) PyErr_NoMemory();
    free(parts);
    Py_DECREF(seq);
    return t;
}

/* The C transform of a spec, or NULL with a Python exception (or a C error) set. */
static ts_transform *transform_from_spec(PyObject *spec) {
    const char *kind = PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) >= 1 &&
                               PyUnicode_Check(PyTuple_GET_ITEM(spec, 0))
                           ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 0))
                           : NULL;
    Py_ssize_t n = kind ? PyTuple_GET_SIZE(spec) : 0;
    PyObject *a1 = n > 1 ? PyTuple_GET_ITEM(spec, 1) : NULL;
    PyObject *a2 = n > 2 ? PyTuple_GET_ITEM(spec, 2) : NULL;
    ts_transform *t = NULL;
    if (!kind)
        PyErr_SetString(PyExc_TypeError, "transform spec must be a tuple (name, ...)");
    else if (strcmp(kind, "to_tensor") == 0)
        t = ts_to_tensor_new();
    else if (strcmp(kind, "normalize") == 0 && n == 3)
        t = normalize_from_spec(spec);
    else if (strcmp(kind, "random_crop") == 0 && n == 3)
        t = ts_random_crop_new((int)PyLong_AsLong(a1), (int)PyLong_AsLong(a2));
    else if (strcmp(kind, "hflip") == 0 && n == 2)
        t = ts_random_hflip_new(PyFloat_AsDouble(a1));
    else if (strcmp(kind, "pad") == 0 && n == 2)
        t = int_transform(pad_fn, PyLong_AsLong(a1));
    else if (strcmp(kind, "gray") == 0 && n == 2)
        t = int_transform(gray_fn, PyLong_AsLong(a1));
    else if (strcmp(kind, "compose") == 0 && n == 2)
        t = compose_from_spec(a1);
    else
        PyErr_Format(PyExc_ValueError, "unknown transform spec %R", spec);
    if (PyErr_Occurred()) {
        ts_transform_free(t);
        return NULL;
    }
    if (!t) tsp_check();
    return t;
}

/* ------------------------------------------------------------------ _C._Dataset */

typedef struct {
    PyObject_HEAD ts_dataset *d;
    PyObject *spec;    /* the transform spec (None: no transform) */
    ts_transform *own; /* built from spec, for indexing the data set directly */
} ds_object;

static void ds_dealloc(ds_object *self) {
    ts_dataset_free(self->d);
    ts_transform_free(self->own);
    Py_XDECREF(self->spec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ds_type;

/* a _Dataset owning d, with the transform of spec; NULL (d freed) on failure */
static PyObject *ds_new(ts_dataset *d, PyObject *spec) {
    if (!d) return tsp_raise_pending();
    ds_object *o = PyObject_New(ds_object, &ds_type);
    if (!o) {
        ts_dataset_free(d);
        return NULL;
    }
    o->d = d;
    o->own = NULL;
    Py_INCREF(spec);
    o->spec = spec;
    if (spec != Py_None && !(o->own = transform_from_spec(spec))) Py_CLEAR(o);
    return (PyObject *)o;
}

static Py_ssize_t ds_len(ds_object *self) { return (Py_ssize_t)ts_dataset_len(self->d); }

/* d[i] -> (x, y) with the transform applied to x */
static PyObject *ds_getitem(ds_object *self, Py_ssize_t i) {
    int64_t n = ts_dataset_len(self->d);
    if (i < 0) i += (Py_ssize_t)n;
    if (i < 0 || i >= n) {
        PyErr_Format(PyExc_IndexError, "dataset index out of range (%lld samples)", (long long)n);
        return NULL;
    }
    ts_sample s = {0};
    ts_status st;
    TSP_NOGIL(st = ts_dataset_get(self->d, i, &s););
    if (st) return tsp_raise_pending();
    if (self->own) {
        ts_transform_ctx c = {.seed = 0, .epoch = 0, .index = i};
        TSP_NOGIL(s.x = ts_transform_apply(self->own, s.x, &c););
    }
    PyObject *x = tsp_wrap_owned(s.x);
    PyObject *y = x ? tsp_wrap_owned(s.y) : (ts_release(s.y), NULL);
    PyObject *res = y ? PyTuple_Pack(2, x, y) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return res;
}

static PyObject *ds_num_classes(ds_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(ts_dataset_num_classes(self->d));
}

static PySequenceMethods ds_seq = {
    .sq_length = (lenfunc)ds_len,
    .sq_item = (ssizeargfunc)ds_getitem,
};

static PyGetSetDef ds_getset[] = {
    {"num_classes", (getter)ds_num_classes, NULL, "classes the data set knows (0: unknown)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ds_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._Dataset",
    .tp_basicsize = sizeof(ds_object),
    .tp_dealloc = (destructor)ds_dealloc,
    .tp_as_sequence = &ds_seq,
    .tp_getset = ds_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A data set of the C library (samples (x, y) of cpu tensors).",
};

/* the folder argument: None, or a path (str / os.PathLike) into *bytes */
static int opt_path(PyObject *o, PyObject **bytes) {
    *bytes = NULL;
    return o == Py_None ? 0 : PyUnicode_FSConverter(o, bytes) ? 0 : -1;
}

typedef ts_dataset *(*split_loader)(const char *dir, ts_data_split split);

/* mnist / cifar10 (root=None, train=True, transform_spec=None) */
static PyObject *split_dataset(PyObject *args, PyObject *kw, const char *fmt, split_loader fn) {
    static char *kwlist[] = {"root", "train", "transform", NULL};
    PyObject *root = Py_None, *spec = Py_None, *path;
    int train = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &root, &train, &spec)) return NULL;
    if (opt_path(root, &path) < 0) return NULL;
    const char *dir = path ? PyBytes_AS_STRING(path) : NULL;
    ts_dataset *d;
    TSP_NOGIL(d = fn(dir, train ? TS_SPLIT_TRAIN : TS_SPLIT_TEST););
    Py_XDECREF(path);
    return ds_new(d, spec);
}

static PyObject *py_mnist(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return split_dataset(args, kw, "|OpO:_mnist", ts_mnist);
}

static PyObject *py_cifar10(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    return split_dataset(args, kw, "|OpO:_cifar10", ts_cifar10);
}

/* _tensor_dataset(x, y=None, transform=None): rows of x (and y) */
static PyObject *py_tensor_dataset(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"x", "y", "transform", NULL};
    PyObject *xo, *yo = Py_None, *spec = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:_tensor_dataset", kwlist, &xo, &yo, &spec))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "TensorDataset", "x");
    ts_tensor *y = yo == Py_None ? NULL : tsp_tensor_arg(yo, "TensorDataset", "y");
    if (!x || (yo != Py_None && !y)) return NULL;
    return ds_new(ts_tensor_dataset_new(x, y), spec);
}

/* _idx_dataset(images, labels, transform=None): a pair of IDX files */
static PyObject *py_idx_dataset(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"images", "labels", "transform", NULL};
    PyObject *images, *labels, *spec = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|O:_idx_dataset", kwlist, PyUnicode_FSConverter,
                                     &images, PyUnicode_FSConverter, &labels, &spec))
        return NULL;
    ts_dataset *d;
    TSP_NOGIL(d = ts_idx_dataset_new(PyBytes_AS_STRING(images), PyBytes_AS_STRING(labels)););
    Py_DECREF(images);
    Py_DECREF(labels);
    return ds_new(d, spec);
}

/* _apply_transform(spec, x, seed=0, epoch=0, index=0): a transform on one tensor (the transforms'
 * __call__ in Python) */
static PyObject *py_apply_transform(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"spec", "x", "seed", "epoch", "index", NULL};
    PyObject *spec, *xo;
    unsigned long long seed = 0;
    long long epoch = 0, index = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|KLL:_apply_transform", kwlist, &spec, &xo, &seed,
                                     &epoch, &index))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "transform", "img");
    if (!x) return NULL;
    ts_transform *t = transform_from_spec(spec);
    if (!t) return NULL;
    ts_transform_ctx c = {.seed = seed, .epoch = epoch, .index = index};
    ts_tensor *y;
    TSP_NOGIL(y = ts_transform_apply(t, ts_retain(x), &c););
    ts_transform_free(t);
    return tsp_wrap_owned(y);
}

/* ------------------------------------------------------------------ _C._Sampler */

typedef struct {
    PyObject_HEAD ts_sampler *s;
} sampler_object;

static void sampler_dealloc(sampler_object *self) {
    ts_sampler_free(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _Sampler(dataset_len, num_replicas=0, rank=0, shuffle=True, seed=0, drop_last=False):
 * PyTorch's DistributedSampler (num_replicas 0: the world size and this process's rank) */
static PyObject *sampler_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dataset_len", "num_replicas", "rank", "shuffle",
                             "seed",        "drop_last",    NULL};
    long long n;
    int shuffle = 1, drop_last = 0;
    unsigned long long seed = 0;
    ts_distributed_sampler_opts o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "L|iipKp:DistributedSampler", kwlist, &n,
                                     &o.num_replicas, &o.rank, &shuffle, &seed, &drop_last))
        return NULL;
    o.no_shuffle = !shuffle, o.seed = seed, o.drop_last = drop_last;
    sampler_object *self = (sampler_object *)type->tp_alloc(type, 0);
    if (self && !(self->s = ts_distributed_sampler_new(n, o))) {
        Py_DECREF(self);
        return tsp_raise_pending();
    }
    return (PyObject *)self;
}

static Py_ssize_t sampler_len(sampler_object *self) { return (Py_ssize_t)ts_sampler_len(self->s); }

static PyObject *sampler_set_epoch(sampler_object *self, PyObject *arg) {
    long long e = PyLong_AsLongLong(arg);
    if (e == -1 && PyErr_Occurred()) return NULL;
    if (ts_sampler_set_epoch(self->s, e)) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* this replica's indices of the current epoch, as a list of ints */
static PyObject *sampler_indices(sampler_object *self, PyObject *unused) {
    (void)unused;
    int64_t n = ts_sampler_len(self->s);
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx) return PyErr_NoMemory();
    PyObject *res = ts_sampler_indices(self->s, idx) ? tsp_raise_pending() : PyList_New(n);
    for (int64_t i = 0; res && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(idx[i]);
        if (!v)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, v);
    }
    free(idx);
    return res;
}

static PyMethodDef sampler_methods[] = {
    {"set_epoch", (PyCFunction)sampler_set_epoch, METH_O, "set_epoch(epoch)"},
    {"indices", (PyCFunction)sampler_indices, METH_NOARGS, "indices(): this replica's, in order"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods sampler_seq = {.sq_length = (lenfunc)sampler_len};

static PyTypeObject sampler_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._Sampler",
    .tp_basicsize = sizeof(sampler_object),
    .tp_dealloc = (destructor)sampler_dealloc,
    .tp_as_sequence = &sampler_seq,
    .tp_methods = sampler_methods,
    .tp_new = sampler_new,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The C library's DistributedSampler.",
};

/* ------------------------------------------------------------------ _C._Loader */

typedef struct {
    PyObject_HEAD ts_loader *l;
    PyObject *dataset; /* the _Dataset: outlives the loader */
    PyObject *sampler; /* the _Sampler or NULL: outlives it too */
} loader_object;

static void loader_dealloc(loader_object *self) {
    ts_loader *l = self->l;
    TSP_NOGIL(ts_loader_free(l);); /* joins the workers */
    Py_XDECREF(self->dataset);
    Py_XDECREF(self->sampler);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _Loader(dataset, batch_size=1, shuffle=False, drop_last=False, num_workers=0, pin_memory=False,
 * seed=0, prefetch=0, sampler=None) */
static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dataset",    "batch_size", "shuffle",  "drop_last", "num_workers",
                             "pin_memory", "seed",       "prefetch", "sampler",   NULL};
    PyObject *dso, *so = Py_None;
    ts_loader_opts o = {.batch_size = 1};
    int shuffle = 0, drop_last = 0, pin = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|ippipKiO:_Loader", kwlist, &ds_type, &dso,
                                     &o.batch_size, &shuffle, &drop_last, &o.workers, &pin, &seed,
                                     &o.prefetch, &so))
        return NULL;
    if (so != Py_None && !PyObject_TypeCheck(so, &sampler_type)) {
        PyErr_Format(PyExc_TypeError, "_Loader(): argument 'sampler' must be _Sampler, not %.100s",
                     Py_TYPE(so)->tp_name);
        return NULL;
    }
    o.sampler = so == Py_None ? NULL : ((sampler_object *)so)->s;
    if (o.batch_size < 1 || o.workers < 0 || o.prefetch < 0) {
        PyErr_Format(PyExc_ValueError,
                     "DataLoader: batch_size must be positive and num_workers, "
                     "prefetch_factor non-negative (got %d, %d, %d)",
                     o.batch_size, o.workers, o.prefetch);
        return NULL;
    }
    ds_object *ds = (ds_object *)dso;
    o.shuffle = shuffle, o.drop_last = drop_last, o.pin_memory = pin, o.seed = seed;
    if (ds->spec != Py_None && !(o.transform = transform_from_spec(ds->spec))) return NULL;
    loader_object *self = (loader_object *)type->tp_alloc(type, 0);
    if (!self) {
        ts_transform_free(o.transform);
        return NULL;
    }
    self->dataset = Py_NewRef(dso);
    self->sampler = so == Py_None ? NULL : Py_NewRef(so);
    TSP_NOGIL(self->l = ts_loader_new(ds->d, o);); /* owns o.transform, also on failure */
    if (!self->l) {
        Py_DECREF(self);
        return tsp_raise_pending();
    }
    return (PyObject *)self;
}

/* next() -> [x, y] of the current epoch, or None at its end (the next call starts the next) */
static PyObject *loader_next(loader_object *self, PyObject *unused) {
    (void)unused;
    if (tsp_enter() < 0) return NULL;
    ts_batch b;
    bool more;
    TSP_NOGIL(more = ts_loader_next(self->l, &b););
    if (!more) {
        if (ts_error()) return tsp_raise_pending();
        Py_RETURN_NONE;
    }
    /* the batch belongs to the loader until the next call: each Tensor takes a reference */
    PyObject *x = tsp_wrap_owned(ts_retain(b.x));
    PyObject *y = x ? tsp_wrap_owned(ts_retain(b.y)) : NULL;
    PyObject *res = y ? PyList_New(2) : NULL;
    if (res) {
        PyList_SET_ITEM(res, 0, x);
        PyList_SET_ITEM(res, 1, y);
        return res;
    }
    Py_XDECREF(x);
    Py_XDECREF(y);
    return NULL;
}

static PyObject *loader_set_epoch(loader_object *self, PyObject *arg) {
    long long e = PyLong_AsLongLong(arg);
    if (e == -1 && PyErr_Occurred()) return NULL;
    ts_status s;
    TSP_NOGIL(s = ts_loader_set_epoch(self->l, e););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *loader_epoch(loader_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(ts_loader_epoch(self->l));
}

static Py_ssize_t loader_len(loader_object *self) {
    return (Py_ssize_t)ts_loader_num_batches(self->l);
}

static PyMethodDef loader_methods[] = {
    {"next", (PyCFunction)loader_next, METH_NOARGS,
     "next(): [inputs, labels] of the epoch, or None at its end"},
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_O, "set_epoch(epoch): start that epoch"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"epoch", (getter)loader_epoch, NULL, "the epoch being made", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods loader_seq = {.sq_length = (lenfunc)loader_len};

static PyTypeObject loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._Loader",
    .tp_basicsize = sizeof(loader_object),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_as_sequence = &loader_seq,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_new = loader_new,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The C library's data loader over a _Dataset (batches made by worker threads).",
};

/* A seed for a loader's shuffle, drawn from tessera's generator (so tessera.manual_seed makes
 * the order reproducible, as torch's DataLoader does). */
static PyObject *py_loader_seed(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_tensor *r = ts_randint(0, (int64_t)1 << 52, TS_SHAPE(1), (ts_opts){.device = ts_cpu()});
    double v = r ? ts_item(r) : 0;
    ts_release(r);
    if (tsp_check()) return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)v);
}

static PyMethodDef data_methods[] = {
    {"_mnist", TSP_KW(py_mnist), "_mnist(root=None, train=True, transform=None)"},
    {"_cifar10", TSP_KW(py_cifar10), "_cifar10(root=None, train=True, transform=None)"},
    {"_tensor_dataset", TSP_KW(py_tensor_dataset), "_tensor_dataset(x, y=None, transform=None)"},
    {"_idx_dataset", TSP_KW(py_idx_dataset), "_idx_dataset(images, labels, transform=None)"},
    {"_apply_transform", TSP_KW(py_apply_transform), NULL},
    {"_loader_seed", py_loader_seed, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_data(PyObject *m) {
    if (tsp_add_type(m, "_Dataset", &ds_type) < 0 || tsp_add_type(m, "_Loader", &loader_type) < 0 ||
        tsp_add_type(m, "_Sampler", &sampler_type) < 0)
        return -1;
    return PyModule_AddFunctions(m, data_methods);
}
