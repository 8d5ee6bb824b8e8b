/* tensor_shared.c — shared-memory tensors from Python (tessera/storage.h's ts_share_memory_
 * family): Tensor.share_memory_(), Tensor.is_shared(), Tensor._shared_fd() and
 * tessera._C._from_shared_fd, the two halves tessera.multiprocessing's pickling reductions
 * (python/tessera/multiprocessing/reductions.py) send a tensor's memory to another process with. */
#include "tensor_impl.h"
#include "tessera/storage.h"

static PyObject *m_share_memory_(PyObject *self, PyObject *unused) {
    (void)unused;
    if (!ts_share_memory_(TSP_T(self))) return tsp_raise_pending();
    return Py_NewRef(self);
}

static PyObject *m_is_shared(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_is_shared(TSP_T(self)));
}

/* _shared_fd(): (fd, storage_nbytes, byte_offset) of a shared tensor; the fd stays the
 * storage's (dup it to keep it) */
static PyObject *m_shared_fd(PyObject *self, PyObject *unused) {
    (void)unused;
    int fd;
    size_t nbytes, off;
    if (ts_shared_fd(TSP_T(self), &fd, &nbytes, &off) != TS_OK) return tsp_raise_pending();
    return Py_BuildValue("(inn)", fd, (Py_ssize_t)nbytes, (Py_ssize_t)off);
}

static int int64_seq(PyObject *o, int64_t *out, int n, const char *arg) {
    PyObject *seq = PySequence_Fast(o, "_from_shared_fd(): size and stride must be sequences");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "_from_shared_fd(): %s has %zd entries, size has %d", arg,
                     PySequence_Fast_GET_SIZE(o), n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] == -1 && PyErr_Occurred()) return Py_DECREF(seq), -1;
    }
    Py_DECREF(seq);
    return 0;
}

/* _from_shared_fd(fd, storage_nbytes, dtype, size, stride, storage_offset): a cpu tensor over the
 * shared memory of fd (dup'ed; the caller keeps and closes fd), geometry checked against it */
static PyObject *f_from_shared_fd(PyObject *mod, PyObject *const *a, Py_ssize_t n) {
    (void)mod;
    if (n != 6) {
        PyErr_SetString(PyExc_TypeError, "_from_shared_fd() takes 6 arguments");
        return NULL;
    }
    long fdl = PyLong_AsLong(a[0]);
    if (fdl == -1 && PyErr_Occurred()) return NULL;
    if (fdl < 0 || fdl > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "_from_shared_fd(): fd %ld is not a file descriptor", fdl);
        return NULL;
    }
    int fd = (int)fdl;
    Py_ssize_t nbytes = PyLong_AsSsize_t(a[1]);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    if (nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "_from_shared_fd(): storage_nbytes is negative");
        return NULL;
    }
    ts_dtype dt = TS_DTYPE_DEFAULT;
    ts_shape s;
    int64_t strides[TS_MAX_DIMS];
    if (tsp_dtype_arg(a[2], &dt, "_from_shared_fd", "dtype") < 0 ||
        tsp_shape_arg(a[3], &s, "_from_shared_fd", "size") < 0 ||
        int64_seq(a[4], strides, s.ndim, "stride") < 0)
        return NULL;
    long long off = PyLong_AsLongLong(a[5]);
    if (off == -1 && PyErr_Occurred()) return NULL;
    return tsp_wrap(ts_from_shared_fd(fd, (size_t)nbytes, dt, s, strides, off));
}

PyMethodDef tsp_tensor_shared_methods[] = {
    {"share_memory_", m_share_memory_, METH_NOARGS,
     "share_memory_(): moves the storage into shared memory (no-op when already there)"},
    {"is_shared", m_is_shared, METH_NOARGS, "is_shared(): whether the storage is shared memory"},
    {"_shared_fd", m_shared_fd, METH_NOARGS,
     "_shared_fd(): (fd, storage_nbytes, byte_offset) of a shared tensor"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_shared_functions[] = {
    {"_from_shared_fd", FN(f_from_shared_fd), METH_FASTCALL,
     "_from_shared_fd(fd, storage_nbytes, dtype, size, stride, storage_offset)"},
    {NULL, NULL, 0, NULL},
};
