/* tessera.h — the one public header of Tessera, a device-aware deep-learning library in C. */
#ifndef TESSERA_H
#define TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TS_API marks the library's public functions: the only symbols libtessera.so exports (the rest
 * is compiled with -fvisibility=hidden). tools/abi_check.py checks that every declaration in the
 * public headers carries it and that the exported list matches abi/libtessera.symbols. */
#ifndef TS_API
#define TS_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TS_VERSION_MAJOR 0
#define TS_VERSION_MINOR 1
#define TS_VERSION_PATCH 0
/* The version of the library linked at run time ("0.1.0"), which may differ from the header's
 * TS_VERSION_* when a program runs against a newer libtessera.so of the same ABI. */
TS_API const char *ts_library_version(void);

/* ===================================================================== errors */
typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_DEVICE,      /* operands on different devices, device not available */
    TS_ERR_SHAPE,       /* shapes that do not fit the op */
    TS_ERR_DTYPE,       /* dtypes the op does not accept */
    TS_ERR_ARG,         /* bad argument value (dim out of range, NULL, negative size...) */
    TS_ERR_OOM,         /* allocation failed even after freeing the cache */
    TS_ERR_IO,          /* file system error */
    TS_ERR_FORMAT,      /* malformed file */
    TS_ERR_CUDA,        /* CUDA runtime / library failure */
    TS_ERR_UNSUPPORTED, /* valid request this build or device cannot do */
    TS_ERR_STATE,       /* call in the wrong state (scope underflow, backward twice...) */
    TS_ERR_DIST,        /* another process failed, timed out or disagrees (distributed) */
} ts_status;

/* First error wins until cleared; thread-local. */
TS_API ts_status ts_error(void);
TS_API const char *ts_error_message(void); /* "" when no error */
TS_API void ts_error_clear(void);
TS_API const char *ts_status_string(ts_status s); /* "TS_ERR_DEVICE" ... */
/* Records an error from user code (a custom dataset, transform or module) like the library does:
 * printf-style message, first error wins. Returns code. */
TS_API ts_status ts_error_set(ts_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ==================================================================== devices */
typedef enum ts_device_type {
    TS_DEVICE_DEFAULT = 0, /* use the thread's default device */
    TS_CPU,
    TS_CUDA,
    TS_SIM,
    /* "meta": tensors with a shape, dtype and strides but no data (PyTorch's meta device). Ops
     * check their arguments and compute their results' shapes and dtypes without running a
     * kernel; reading the data (ts_item, a copy to another device, saving) is TS_ERR_DEVICE. A
     * model built on it costs no memory: ts_assign_ or Module.to_empty give it real tensors. */
    TS_META,
} ts_device_type;

typedef struct ts_device {
    ts_device_type type;
    int index; /* -1 means "current" for cuda; 0 for cpu */
} ts_device;

TS_API ts_device ts_cpu(void);
TS_API ts_device ts_cuda(int i);
TS_API ts_device ts_sim(int i);
TS_API ts_device ts_meta(void);
TS_API bool ts_device_equal(ts_device a, ts_device b); /* after resolving default and current */
/* PyTorch's rules: "cpu", "cuda", "cuda:1", "sim:0", "meta"; "cuda:01", "cuda:", "gpu", "cpu:1x"
 * are errors */
TS_API ts_status ts_device_parse(const char *s, ts_device *out);
TS_API const char *
ts_device_str(ts_device d); /* "cpu", "cuda:0", "sim:1" (thread-local ring buffer) */
TS_API int ts_device_count(ts_device_type t);
TS_API bool ts_device_is_available(ts_device d);
TS_API bool ts_cuda_is_available(void);
/* Thread-local default-device stack, like `with torch.device(d)` / `with tf.device(d)`. */
TS_API void ts_device_push(ts_device d);
TS_API void ts_device_pop(void); /* TS_ERR_STATE on underflow */
TS_API ts_device ts_default_device(void);
/* Simulated devices sim:0..count-1; capacity 0 = unlimited. Re-configuring with live tensors on
 * sim devices is TS_ERR_STATE. TS_SIM_DEVICES=N in the environment configures at start-up. */
TS_API ts_status ts_sim_configure(int count, size_t capacity_bytes);
/* Log each op with its device to stderr (also TS_LOG_PLACEMENT=1). */
TS_API void ts_log_placement(bool on);
/* Threads used by CPU kernels (OpenMP); 0 = library default. */
TS_API void ts_set_num_threads(int n);
TS_API int ts_get_num_threads(void);
/* The vector ISA the CPU kernels use ("avx512", "avx2" or "generic": the best this CPU has, capped
 * by TS_CPU_ISA) and the best this CPU has. */
TS_API const char *ts_cpu_vector_isa(void);
TS_API const char *ts_cpu_vector_isa_best(void);
/* One line about the CPU kernels: the vector ISA in use and the best, threads, the BLAS library,
 * the OpenMP wait policy (thread-local buffer). */
TS_API const char *ts_cpu_describe(void);
/* For programs on shared machines, called first thing in main(argc, argv): libgomp's default wait
 * (spinning a few milliseconds after each parallel region) collapses when other processes want
 * the cores, and libgomp reads its settings only when it loads, before main. Unless OMP_WAIT_POLICY
 * or GOMP_SPINCOUNT is set, this re-executes the program once (same argv, /proc/self/exe) with
 * GOMP_SPINCOUNT=1000 (about 10 us of spinning, then sleep) and returns only when it did nothing;
 * the library takes the variable out of the environment again at start-up, so child processes see
 * the original. The `tessera` command does this. */
TS_API void ts_cpu_bounded_spin(char **argv);

/* ===================================================================== dtypes */
typedef enum ts_dtype {
    TS_DTYPE_DEFAULT = 0, /* f32 */
    TS_F32,
    TS_F64,
    TS_F16,
    TS_BF16,
    TS_I64,
    TS_I32,
    TS_U8,
    TS_BOOL,
    TS_I8,   /* torch.int8 */
    TS_I16,  /* torch.int16 */
    TS_U16,  /* torch.uint16: like PyTorch, no promotion with another integer type */
    TS_U32,  /* torch.uint32 (same) */
    TS_U64,  /* torch.uint64 (same) */
    TS_C64,  /* torch.complex64: interleaved float32 (real, imaginary) pairs */
    TS_C128, /* torch.complex128: interleaved float64 pairs */
    /* quantized (tessera/quant.h): integers with an affine scale and zero point the tensor
     * carries; only the ops quant.h lists take them, every other op refuses them */
    TS_QINT8,    /* torch.qint8: int8 values */
    TS_QUINT8,   /* torch.quint8: uint8 values */
    TS_QINT32,   /* torch.qint32: int32 values */
    TS_QUINT4X2, /* torch.quint4x2: 4-bit values 0..15, two a byte along the last dim */
    TS_DTYPE_COUNT
} ts_dtype;

TS_API size_t ts_dtype_size(ts_dtype dt);
TS_API const char *ts_dtype_name(ts_dtype dt); /* PyTorch's: "float32", "int64", "bool" ... */
TS_API bool ts_dtype_is_floating(ts_dtype dt); /* float16 ... float64 (complex: false) */
TS_API bool ts_dtype_is_complex(ts_dtype dt);  /* complex64, complex128 */
/* torch.promote_types; TS_DTYPE_COUNT where PyTorch has no rule (uint16, uint32 or uint64 with
 * another integer or bool type): the ops that promote refuse such a pair with TS_ERR_DTYPE. */
TS_API ts_dtype ts_promote_types(ts_dtype a, ts_dtype b);

/* ===================================================================== shapes */
#define TS_MAX_DIMS 8
typedef struct ts_shape {
    int ndim;
    int64_t dims[TS_MAX_DIMS];
} ts_shape;

/* Builds a shape from the given dims; more than TS_MAX_DIMS dims gives ndim > TS_MAX_DIMS, which
 * every op rejects with TS_ERR_SHAPE. */
static inline ts_shape ts_shape_make(size_t ndim, const int64_t *dims) {
    ts_shape s;
    s.ndim = (int)ndim;
    for (size_t i = 0; i < TS_MAX_DIMS; i++) s.dims[i] = i < ndim ? dims[i] : 0;
    return s;
}
/* TS_SHAPE(2, 3) is a 2x3 shape; TS_SHAPE() is the 0-dim shape of a scalar. */
#define TS_SHAPE(...)                                                                              \
    ts_shape_make(sizeof((int64_t[]){0, __VA_ARGS__}) / sizeof(int64_t) - 1,                       \
                  (const int64_t[]){0, __VA_ARGS__} + 1)
/* A list of ints (dims for permute, reductions...). */
typedef struct ts_dims {
    int n;
    int d[TS_MAX_DIMS];
} ts_dims;
#define TS_DIMS(...)                                                                               \
    ((ts_dims){.n = (int)(sizeof((int[]){0, __VA_ARGS__}) / sizeof(int) - 1), .d = {__VA_ARGS__}})

/* ==================================================================== tensors */
typedef struct ts_tensor ts_tensor;

/* Zero means default: (ts_opts){0} is f32 on the default device. */
typedef struct ts_opts {
    ts_dtype dtype;
    ts_device device;
    bool requires_grad;
    bool pin_memory;
} ts_opts;

/* memory: every tensor returned by a public function belongs to the innermost open scope of the
 * calling thread; outside any scope the caller owns it. */
TS_API ts_tensor *ts_retain(ts_tensor *t); /* NULL-safe; returns t */
TS_API void ts_release(ts_tensor *t);      /* NULL-safe */
TS_API void ts_scope_begin(void);          /* never fails: begin and end always pair */
TS_API void ts_scope_end(void);            /* TS_ERR_STATE when no scope is open */
/* Moves t to the enclosing scope (or to the caller) and returns it; out of host memory it returns
 * NULL with TS_ERR_OOM and t is released: use the result (`y = ts_keep(y)`), not t. */
TS_API ts_tensor *ts_keep(ts_tensor *t);
TS_API int ts_scope_depth(void);
/* From ts_scope_suspend to ts_scope_resume the calling thread behaves as outside any scope: what
 * public functions return belongs to the caller, scopes opened meanwhile nest from zero, and the
 * open scopes are untouched. For code called back from inside a scope that keeps references of
 * its own (a Python forward under a C module). Resume closes scopes left open since (an error). */
typedef struct ts_scope_suspension {
    int base, phantom;
} ts_scope_suspension;
TS_API ts_scope_suspension ts_scope_suspend(void);
TS_API void ts_scope_resume(ts_scope_suspension saved);

/* creation */
TS_API ts_tensor *ts_empty(ts_shape s, ts_opts o);
TS_API ts_tensor *ts_zeros(ts_shape s, ts_opts o);
TS_API ts_tensor *ts_ones(ts_shape s, ts_opts o);
TS_API ts_tensor *ts_full(ts_shape s, double v, ts_opts o);
TS_API ts_tensor *ts_scalar(double v, ts_opts o); /* 0-dim tensor */
TS_API ts_tensor *ts_arange(double start, double end, double step, ts_opts o);
TS_API ts_tensor *ts_linspace(double start, double end, int64_t steps, ts_opts o);
/* torch.logspace: base ** linspace(start, end, steps), computed in float64, then o.dtype */
TS_API ts_tensor *ts_logspace(double start, double end, int64_t steps, double base, ts_opts o);
TS_API ts_tensor *ts_eye(int64_t n, int64_t m, ts_opts o); /* m <= 0 means n */
TS_API ts_tensor *ts_from_data(ts_shape s, ts_dtype dt, const void *host_data,
                               ts_opts o); /* copies */
TS_API ts_tensor *ts_tensor_f32(ts_shape s, const float *host_data, ts_opts o);
TS_API ts_tensor *ts_tensor_f64(ts_shape s, const double *host_data, ts_opts o);
TS_API ts_tensor *ts_tensor_i64(ts_shape s, const int64_t *host_data, ts_opts o);
TS_API ts_tensor *ts_tensor_i32(ts_shape s, const int32_t *host_data, ts_opts o);
/* *_like: same shape, dtype and device as t */
TS_API ts_tensor *ts_empty_like(ts_tensor *t);
TS_API ts_tensor *ts_zeros_like(ts_tensor *t);
TS_API ts_tensor *ts_ones_like(ts_tensor *t);
TS_API ts_tensor *ts_full_like(ts_tensor *t, double v);
TS_API ts_tensor *ts_rand_like(ts_tensor *t);
TS_API ts_tensor *ts_randn_like(ts_tensor *t);

/* random: counter-based Philox; a seed gives the same numbers on every device and thread count */
TS_API void ts_manual_seed(uint64_t seed);
TS_API uint64_t ts_initial_seed(void);
typedef struct ts_rng_state {
    uint64_t seed, offset;
} ts_rng_state;
TS_API ts_rng_state ts_rng_get_state(void);
TS_API void ts_rng_set_state(ts_rng_state s);
/* A generator of the calling thread's own: from ts_rng_thread_begin(seed) to ts_rng_thread_end()
 * the thread draws from (seed, a counter from 0), and ts_manual_seed, ts_initial_seed and
 * ts_rng_get/set_state act on it; the global generator and other threads are untouched. Threads
 * that build or train models at the same time take one each, so their numbers do not depend on
 * how the threads interleave (docs/ARCHITECTURE.md, "Threads"). A second begin restarts it. */
TS_API void ts_rng_thread_begin(uint64_t seed);
TS_API void ts_rng_thread_end(void);
/* Exchanges the calling thread's own stream with (*on, *s): afterwards the thread draws from s
 * (or, *on false, from the global generator) and (*on, *s) hold the stream it had. Swapping twice
 * restores it and hands back where the drawing left s: a generator object of its own (PyTorch's
 * torch.Generator) that leaves the global one and other threads alone, and nests. */
TS_API void ts_rng_thread_swap(bool *on, ts_rng_state *s);
TS_API ts_tensor *ts_rand(ts_shape s, ts_opts o);  /* U[0, 1) */
TS_API ts_tensor *ts_randn(ts_shape s, ts_opts o); /* N(0, 1) */
TS_API ts_tensor *ts_randint(int64_t low, int64_t high, ts_shape s,
                             ts_opts o);                  /* default dtype i64 */
TS_API ts_tensor *ts_randperm(int64_t n, ts_opts o);      /* default dtype i64 */
TS_API ts_tensor *ts_bernoulli(ts_tensor *p);             /* each element 1 with probability p */
TS_API ts_tensor *ts_bernoulli_p(ts_tensor *t, double p); /* like t, 1 with probability p */
TS_API ts_tensor *ts_normal_(ts_tensor *t, double mean, double std);
TS_API ts_tensor *ts_uniform_(ts_tensor *t, double low, double high);
/* torch.multinomial: num_samples category indices (int64) per row of t's weights (1-D: one row,
 * result [num_samples]; 2-D: [rows, num_samples]); finite, non-negative weights, each row's sum >
 * 0; without replacement at most as many as the row's positive weights (src/ops/sampling.c) */
TS_API ts_tensor *ts_multinomial(ts_tensor *t, int64_t num_samples, bool replacement);
/* torch.normal's tensor forms: mean + std * N(0, 1), mean and std each a tensor (broadcast) or,
 * when NULL, the number mean_s / std_s (at least one a tensor; one device, floating dtype); std
 * must be >= 0 (a host read); differentiable in the tensor mean and std (src/ops/sampling.c) */
TS_API ts_tensor *ts_normal(ts_tensor *mean, double mean_s, ts_tensor *std, double std_s);

/* queries */
TS_API ts_device ts_device_of(ts_tensor *t);
TS_API ts_dtype ts_dtype_of(ts_tensor *t);
TS_API ts_shape ts_shape_of(ts_tensor *t);
TS_API int ts_ndim(ts_tensor *t);
TS_API int64_t ts_size(ts_tensor *t, int dim); /* negative dims count from the end */
TS_API int64_t ts_stride(ts_tensor *t, int dim);
TS_API int64_t ts_numel(ts_tensor *t);
TS_API size_t ts_element_size(ts_tensor *t);
TS_API size_t ts_nbytes(ts_tensor *t);
TS_API int64_t ts_storage_offset(ts_tensor *t);
TS_API bool ts_is_contiguous(ts_tensor *t);
TS_API bool ts_is_pinned(ts_tensor *t);
TS_API bool ts_shares_storage(ts_tensor *a, ts_tensor *b);
TS_API double
ts_item(ts_tensor *t); /* one-element tensor -> double; NAN and TS_ERR_SHAPE otherwise */
TS_API ts_status ts_copy_to_host(ts_tensor *t, void *dst,
                                 size_t dst_bytes); /* contiguous, same dtype */
/* printing in PyTorch's format: tensor([2., 4., 6.], device='sim:0') */
TS_API void ts_print(ts_tensor *t);
TS_API char *ts_to_string(ts_tensor *t); /* malloc'ed; free() it */
TS_API ts_status ts_print_options(int precision, int threshold, int edgeitems, int linewidth);

/* transfers */
TS_API ts_tensor *ts_to(ts_tensor *t, ts_device d); /* t itself (retained) when already there */
TS_API ts_tensor *ts_to_async(ts_tensor *t, ts_device d);
TS_API ts_tensor *ts_to_dtype(ts_tensor *t, ts_dtype dt);
TS_API ts_tensor *ts_pin_memory(ts_tensor *t);
TS_API ts_tensor *ts_clone(ts_tensor *t);
TS_API ts_tensor *ts_copy_(ts_tensor *dst,
                           ts_tensor *src); /* same device; broadcasts and casts src */
/* In place, keeping the handle (PyTorch's `p.data = p.data.to(d)`): t gets a contiguous copy of its
 * data on d (or in dtype dt), and so does its grad; shape, requires_grad and version stay, t stops
 * being a view. Out of memory t may have moved and its grad not (as with ts_module_to). */
TS_API ts_status ts_tensor_move_(ts_tensor *t, ts_device d);
TS_API ts_status ts_tensor_cast_(ts_tensor *t, ts_dtype dt);
/* PyTorch's `t.data = src`: t (the same handle) now shares src's storage, shape, strides and dtype;
 * its requires_grad, grad and graph stay. Out of host memory nothing changes. */
TS_API ts_status ts_tensor_set_data(ts_tensor *t, ts_tensor *src);

/* views, memory formats, resize_ */
#include "tessera/views.h"

/* elementwise ops: unary, binary with broadcasting, with a number, in place, where, clamp */
#include "tessera/elementwise.h"

/* reductions, products (mm, bmm, matmul...), norms and moments */
#include "tessera/reductions.h"
/* torch.masked: sum, mean, median, cumsum, cumprod, normalize over (input, mask) */
#include "tessera/masked.h"

/* joining, splitting, indexing, sorting, counting, softmax */
#include "tessera/indexing.h"

/* predicates, logical and bitwise forms, cumulative ops, more pointwise forms */
#include "tessera/logic.h"

/* in this order: each section uses the types of the one before */
#include "tessera/memory.h"

#include "tessera/autograd.h"

#include "tessera/cuda.h"

#include "tessera/nn.h"

/* after nn.h: it takes nn.h's ts_gpt_quant_opts */
#include "tessera/gpt2.h"

#include "tessera/parallel.h"

#include "tessera/distributed.h"

#include "tessera/optim.h"

#include "tessera/amp.h"

#include "tessera/io.h"
/* ONNX models in and out */
#include "tessera/onnx.h"

#include "tessera/dlpack.h"

#include "tessera/data.h"

#include "tessera/log.h"
/* captured steps: ts_graph_capture_begin / replay */
#include "tessera/graph.h"

/* torch.linalg (LAPACK), torch.special's remaining functions */
#include "tessera/complex.h"
#include "tessera/fft.h"
#include "tessera/linalg.h"
#include "tessera/special.h"
/* CTC loss, histograms, pdist, numerical gradients, frexp, index arithmetic (issue 76) */
#include "tessera/numeric.h"
/* copying forms of views, fill, range, rsub, in-place samplers (issue 76) */
#include "tessera/torch_forms.h"
/* sparse COO tensors: indices + values (decision 0047) */
#include "tessera/sparse.h"
/* convolutions beyond conv2d, pools and norms beyond 2-d, the transformer decoder */
#include "tessera/conv.h"
#include "tessera/pool_norm.h"
#include "tessera/transformer.h"
/* custom autograd functions, the graph seen from a tensor, tensor hooks */
#include "tessera/custom_function.h"
/* PyTorch checkpoints (.pt) and PNG images */
#include "tessera/image.h"
#include "tessera/pt.h"
/* torchvision.ops: nms, the box ops, roi_align, roi_pool */
#include "tessera/vision_ops.h"
/* the profiler; implicit synchronisations and memory snapshots */
#include "tessera/profiler.h"
#include "tessera/sync_debug.h"
/* models bigger than the device: a simulated host link, saved tensors offloaded, placement by
 * memory budget, the optimizer offloaded to the host */
#include "tessera/optim_master.h"
#include "tessera/optim_offload.h"
#include "tessera/placement.h"
#include "tessera/saved_hooks.h"
#include "tessera/sim_link.h"
#include "tessera/weight_stream.h"
/* the checks of an in-place op, for bindings that build one from the out-of-place op */
#include "tessera/inplace.h"
/* a tensor's storage: set_, as_strided_, data_ptr, its bytes as a tensor */
#include "tessera/storage.h"

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_H */
