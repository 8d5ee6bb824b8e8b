/* tsp.h — what the files of the extension module tessera._C share: the Tensor object, turning C
 * errors into Python exceptions, and parsing the arguments every function takes (devices, dtypes,
 * shapes, tensors). Only the public C API (tessera.h, tessera/NAME.h) is used below this layer:
 * what Python needs and C lacks is added to the C API first (DESIGN.md, section 14). */
#ifndef TSP_H
#define TSP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include <tessera.h>

/* ------------------------------------------------------------------ the Tensor object
 * A Python Tensor owns one reference to its ts_tensor (created outside any scope: the caller owns
 * what a C function returns) and releases it when Python drops the object. Parameters, gradients
 * and views are Tensors like any other. */
typedef struct tsp_tensor {
    PyObject_HEAD ts_tensor *t;
    PyObject *weakrefs;
    PyObject *dict; /* attributes a user or nn.Parameter sets (a Python subclass may add more) */
} tsp_tensor;

extern PyTypeObject *tsp_tensor_type; /* tessera.Tensor, made by tensor.c's init */

/* A new Tensor owning t (its one reference moves into the object). t NULL or a C error pending:
 * t is released, the error raised (tsp_raise_pending), NULL returned. */
PyObject *tsp_wrap(ts_tensor *t);
/* The same, into an instance of `type` (a subclass of Tensor, e.g. nn.Parameter). */
PyObject *tsp_wrap_as(PyTypeObject *type, ts_tensor *t);
/* o's tensor (borrowed) or NULL when o is not a Tensor (no exception set). */
ts_tensor *tsp_tensor_of(PyObject *o);
/* o's tensor (borrowed), or NULL with TypeError "fn(): argument 'arg' must be Tensor, not T". */
ts_tensor *tsp_tensor_arg(PyObject *o, const char *fn, const char *arg);

/* Tensor slots whose bodies live in other files (tensor.c's type points at them):
 * tensor_index.c — t[key] and t[key] = v (basic and advanced indexing, read and write; the key
 * parsed and planned by tensor_index_plan.c) */
PyObject *tsp_tensor_getitem(PyObject *self, PyObject *key);
int tsp_tensor_setitem(PyObject *self, PyObject *key, PyObject *value);
/* dlpack.c — the methods __dlpack__(stream=None, ...), __dlpack_device__(), numpy() */
PyObject *tsp_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *tsp_tensor_dlpack_device(PyObject *self, PyObject *unused);
PyObject *tsp_tensor_numpy(PyObject *self, PyObject *unused);
PyObject *tsp_tensor_array(PyObject *self, PyObject *args, PyObject *kw);
PyObject *tsp_tensor_array_wrap(PyObject *self, PyObject *args, PyObject *kw);

/* ------------------------------------------------------------------ errors
 * tessera.TesseraError (a RuntimeError) carries the C library's message and its status name
 * (.status: "TS_ERR_DEVICE" ...). Each status has its own subclass (DeviceError, ShapeError, ...)
 * so `except tessera.DeviceError` works, and OOM is also a MemoryError. */
extern PyObject *tsp_error_type;
/* Raises the pending C error (clearing it) and returns -1; 0 when none is pending. */
int tsp_check(void);
/* tsp_check for functions returning PyObject *: NULL after raising. Use as
 * `if (tsp_check()) return NULL;` or `return tsp_raise_pending();` */
PyObject *tsp_raise_pending(void);
/* Ctrl-C: a pending signal raises (KeyboardInterrupt) at the next op; -1 then. Every entry point
 * that runs kernels calls it first. */
int tsp_enter(void);

/* While tessera.cuda.memory._record_memory_history is on, the Python stack of each call into the
 * library becomes the thread's allocation context (ts_memory_history_context), so snapshots list
 * the Python frames of every allocation after its C frames (sync_debug.c). */
extern int tsp_history_on;
void tsp_history_mark(void);

/* The GIL is released around every C call that may take long (kernels, copies, backward,
 * loading): TSP_NOGIL(y = ts_matmul(a, b);) */
#define TSP_NOGIL(...)                                                                             \
    do {                                                                                           \
        if (tsp_history_on) tsp_history_mark();                                                    \
        Py_BEGIN_ALLOW_THREADS __VA_ARGS__;                                                        \
        Py_END_ALLOW_THREADS                                                                       \
    } while (0)

/* ------------------------------------------------------------------ arguments
 * Each returns 0, or -1 with TypeError / ValueError naming fn and the argument. */
/* None (the thread's default device), "cpu", "cuda", "cuda:1", "sim:0", a tessera.device, an int
 * (cuda:N) */
int tsp_device_arg(PyObject *o, ts_device *out, const char *fn, const char *arg);
/* nn_cmodule.c: place(budgets, example_input, with_grads, output_device, dry_run[, overrides])
 * on m (a C module or an ONNX model) -> the plan's text (tessera.nn.utils.place) */
PyObject *tsp_place(ts_module *m, PyObject *args);
/* None (keeps *out), a tessera.dtype object, or a string ("float32", "bfloat16", "int64") */
int tsp_dtype_arg(PyObject *o, ts_dtype *out, const char *fn, const char *arg);
/* A memory_format argument: 0 contiguous_format, 1 channels_last, -1 preserve_format / absent /
 * None, -2 with a TypeError set (tensor_move.c) */
int tsp_memory_format_arg(PyObject *o, const char *fn);
/* A shape: ints as separate arguments (args, from index `first`) or one sequence of ints. */
int tsp_shape_args(PyObject *args, Py_ssize_t first, ts_shape *out, const char *fn);
int tsp_shape_arg(PyObject *o, ts_shape *out, const char *fn, const char *arg);
/* a dim in [-ndim, ndim) (any int: the C op names a wrong one) */
int tsp_int_arg(PyObject *o, int64_t *out, const char *fn, const char *arg);

/* New references to the Python objects for a device / dtype (tessera.device, tessera.dtype). */
PyObject *tsp_device_obj(ts_device d);
PyObject *tsp_dtype_obj(ts_dtype dt);

/* ------------------------------------------------------------------ the module's parts
 * module.c's PyInit__C calls each in this order; each adds its types and functions to m and
 * returns 0, or -1 with an exception set. One file (or a few) per part, each owning its names. */
int tsp_init_errors(PyObject *m);   /* errors.c: TesseraError and subclasses */
int tsp_init_dtypes(PyObject *m);   /* dtype_device.c: tessera.dtype, tessera.device, names */
int tsp_init_tensor(PyObject *m);   /* tensor.c: the Tensor type, factories, ops, operators */
int tsp_init_autograd(PyObject *m); /* autograd.c: backward, grad, no_grad state */
int tsp_init_index(PyObject *m);    /* tensor_index.c: indexing and slicing */
int tsp_init_dlpack(PyObject *m);   /* dlpack.c: __dlpack__, from_dlpack, numpy */
int tsp_init_nn(PyObject *m);       /* nn.c: the C library's modules, functional ops, losses */
int tsp_init_optim(PyObject *m);    /* optim.c: optimizers, schedulers, clipping */
int tsp_init_lbfgs(PyObject *m);    /* optim_lbfgs.c: LBFGS (called by optim.c) */
/* lr_schedule.c: the schedulers' arithmetic (called by optim.c) */
int tsp_init_lr_schedule(PyObject *m);
int tsp_init_amp(PyObject *m);      /* amp.c: autocast, GradScaler */
int tsp_init_data(PyObject *m);     /* data.c: data sets and the loader */
int tsp_init_io(PyObject *m);       /* io.c: save / load, memory statistics, device scopes */
int tsp_init_dist(PyObject *m);     /* dist.c: distributed, DDP, ONNX functions */
int tsp_init_cuda(PyObject *m);     /* cuda_api.c: streams, events, set_default_device */
int tsp_init_profiler(PyObject *m); /* profiler.c: tessera.profiler's primitives */
/* sync_debug.c: sync debug mode and memory snapshots (tessera.cuda, tessera.cuda.memory) */
int tsp_init_sync_debug(PyObject *m);
int tsp_init_image(PyObject *m);      /* image.c: PNG writing, image decoding (vision) */
int tsp_init_vision_ops(PyObject *m); /* vision_ops.c: torchvision.ops (tessera.vision.ops) */
int tsp_init_masked(PyObject *m);     /* masked.c: tessera.masked's C functions */
int tsp_init_tfevents(PyObject *m);   /* tfevents.c: event files (utils.tensorboard) */
/* vision_color.c: the transforms' colour, blur, dtype and resize kernels */
int tsp_init_vision_color(PyObject *m);
/* saved_hooks.c: saved-tensor hooks, save_on_cpu, the sim link (tessera.sim) */
int tsp_init_saved_hooks(PyObject *m);

/* ------------------------------------------------------------------ py-data's additions
 * tsp_wrap for a reference the caller owns whatever the scope (ts_retain's result, a data set's
 * sample, a loaded file's tensors): inside a C scope tsp_wrap takes a reference of its own, so
 * this one releases the caller's (io.c). */
PyObject *tsp_wrap_owned(ts_tensor *t);
PyObject *tsp_wrap_owned_as(PyTypeObject *type, ts_tensor *t);
/* A method table's entries: FN(f) casts a C function of any signature to PyCFunction, FAST is
 * the flags of a fastcall function with keywords ({"name", FN(f), FAST, doc}). */
#define FN(f) (PyCFunction)(void (*)(void))(f)
#define FAST  (METH_FASTCALL | METH_KEYWORDS)
/* a PyMethodDef's function and flags for fn(self, args, kwargs) */
#define TSP_KW(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS
/* PyType_Ready(type) and m.name = type; 0, or -1 with an exception (io.c) */
int tsp_add_type(PyObject *m, const char *name, PyTypeObject *type);
int tsp_init_onnx(PyObject *m); /* onnx.c: tessera.onnx's load and export (called by dist.c) */

/* ------------------------------------------------------------------ py-tensor's additions
 * Ownership inside a C scope (Python code the C core calls back: a Python Dataset, a module's
 * forward): what an op returns there belongs to the scope, so an intermediate result must not be
 * ts_release()d. tsp_drop(t) gives up an op's result (released outside a scope, left to the
 * scope inside one); tsp_own(t) makes an op's result a reference the caller keeps for good
 * (retained inside a scope). tensor.c. */
void tsp_drop(ts_tensor *t);
ts_tensor *tsp_own(ts_tensor *t);

/* a sequence of floats as a PyMem array of *n (+1) doubles (PyMem_Free it); NULL with an
 * exception naming `what` (lr_schedule.c) */
double *tsp_doubles(PyObject *seq, Py_ssize_t *n, const char *what);
/* a list of the n doubles v; NULL with an exception (lr_schedule.c) */
PyObject *tsp_doubles_list(const double *v, Py_ssize_t n);

#endif /* TSP_H */
