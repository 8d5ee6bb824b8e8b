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
} ts_device_type;

typedef struct ts_device {
    ts_device_type type;
    int index; /* -1 means "current" for cuda; 0 for cpu */
} ts_device;

TS_API ts_device ts_cpu(void);
TS_API ts_device ts_cuda(int i);
TS_API ts_device ts_sim(int i);
TS_API bool ts_device_equal(ts_device a, ts_device b); /* after resolving default and current */
/* PyTorch's rules: "cpu", "cuda", "cuda:1", "sim:0"; "cuda:01", "cuda:", "gpu", "cpu:1x" are errors
 */
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
TS_API ts_tensor *ts_rand(ts_shape s, ts_opts o);  /* U[0, 1) */
TS_API ts_tensor *ts_randn(ts_shape s, ts_opts o); /* N(0, 1) */
TS_API ts_tensor *ts_randint(int64_t low, int64_t high, ts_shape s,
                             ts_opts o);                  /* default dtype i64 */
TS_API ts_tensor *ts_randperm(int64_t n, ts_opts o);      /* default dtype i64 */
TS_API ts_tensor *ts_bernoulli(ts_tensor *p);             /* each element 1 with probability p */
TS_API ts_tensor *ts_bernoulli_p(ts_tensor *t, double p); /* like t, 1 with probability p */
TS_API ts_tensor *ts_normal_(ts_tensor *t, double mean, double std);
TS_API ts_tensor *ts_uniform_(ts_tensor *t, double low, double high);

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

/* ================================================================== elementwise ops */
TS_API ts_tensor *ts_neg(ts_tensor *t);
TS_API ts_tensor *ts_abs(ts_tensor *t);
TS_API ts_tensor *ts_exp(ts_tensor *t);
TS_API ts_tensor *ts_log(ts_tensor *t);
TS_API ts_tensor *ts_log1p(ts_tensor *t);
TS_API ts_tensor *ts_sqrt(ts_tensor *t);
TS_API ts_tensor *ts_rsqrt(ts_tensor *t);
TS_API ts_tensor *ts_sin(ts_tensor *t);
TS_API ts_tensor *ts_cos(ts_tensor *t);
TS_API ts_tensor *ts_tan(ts_tensor *t);
TS_API ts_tensor *ts_asin(ts_tensor *t);
TS_API ts_tensor *ts_acos(ts_tensor *t);
TS_API ts_tensor *ts_atan(ts_tensor *t);
TS_API ts_tensor *ts_sinh(ts_tensor *t);
TS_API ts_tensor *ts_cosh(ts_tensor *t);
TS_API ts_tensor *ts_asinh(ts_tensor *t);
TS_API ts_tensor *ts_acosh(ts_tensor *t);
TS_API ts_tensor *ts_atanh(ts_tensor *t);
TS_API ts_tensor *ts_erf(ts_tensor *t);
TS_API ts_tensor *ts_tanh(ts_tensor *t);
TS_API ts_tensor *ts_sigmoid(ts_tensor *t);
TS_API ts_tensor *ts_relu(ts_tensor *t);
TS_API ts_tensor *ts_gelu(ts_tensor *t); /* exact (erf) form, PyTorch's default */
TS_API ts_tensor *ts_silu(ts_tensor *t);
TS_API ts_tensor *ts_softplus(ts_tensor *t); /* beta 1, threshold 20 */
TS_API ts_tensor *ts_sign(ts_tensor *t);
TS_API ts_tensor *ts_floor(ts_tensor *t);
TS_API ts_tensor *ts_ceil(ts_tensor *t);
TS_API ts_tensor *ts_round(ts_tensor *t); /* half to even */
/* torch.round(decimals=d): half to even of x * 10^d, divided by 10^d (d < 0: of x / 10^-d, times
 * 10^-d), float dtypes only (d = 0: ts_round, integers too); gradient zero */
TS_API ts_tensor *ts_round_decimals(ts_tensor *t, int64_t decimals);
TS_API ts_tensor *ts_reciprocal(ts_tensor *t);
TS_API ts_tensor *ts_square(ts_tensor *t);
TS_API ts_tensor *ts_logical_not(ts_tensor *t);
/* in place: return t (retained into the scope) or NULL */
TS_API ts_tensor *ts_neg_(ts_tensor *t);
TS_API ts_tensor *ts_abs_(ts_tensor *t);
TS_API ts_tensor *ts_exp_(ts_tensor *t);
TS_API ts_tensor *ts_log_(ts_tensor *t);
TS_API ts_tensor *ts_sqrt_(ts_tensor *t);
TS_API ts_tensor *ts_sigmoid_(ts_tensor *t);
TS_API ts_tensor *ts_relu_(ts_tensor *t);
TS_API ts_tensor *ts_tanh_(ts_tensor *t);
TS_API ts_tensor *ts_zero_(ts_tensor *t);
TS_API ts_tensor *ts_fill_(ts_tensor *t, double v);

/* special elementwise functions (issue 52), PyTorch's semantics: integer and bool inputs give
 * float32 (trunc / fix keep integers; frac refuses them; nan_to_num copies them) */
TS_API ts_tensor *ts_expm1(ts_tensor *t);
TS_API ts_tensor *ts_exp2(ts_tensor *t);
TS_API ts_tensor *ts_log2(ts_tensor *t);
TS_API ts_tensor *ts_log10(ts_tensor *t);
TS_API ts_tensor *ts_erfc(ts_tensor *t);
TS_API ts_tensor *ts_erfinv(ts_tensor *t);
TS_API ts_tensor *ts_lgamma(ts_tensor *t);
TS_API ts_tensor *ts_digamma(ts_tensor *t);          /* psi(0) = -inf, negative integers NaN */
TS_API ts_tensor *ts_polygamma(int n, ts_tensor *t); /* n >= 0; n = 0 is digamma */
TS_API ts_tensor *ts_i0(ts_tensor *t);   /* modified Bessel functions of the first kind */
TS_API ts_tensor *ts_i0e(ts_tensor *t);  /* e^-|x| i0(x) (torch.special.i0e) */
TS_API ts_tensor *ts_i1(ts_tensor *t);   /* torch.special.i1 */
TS_API ts_tensor *ts_i1e(ts_tensor *t);  /* e^-|x| i1(x) */
TS_API ts_tensor *ts_sinc(ts_tensor *t); /* sin(pi x) / (pi x), 1 at 0 */
TS_API ts_tensor *ts_logit(ts_tensor *t, double eps); /* eps NAN or < 0: no clamp */
/* NaN -> nan, +inf -> posinf, -inf -> neginf; posinf / neginf NAN: the dtype's largest / lowest
 * finite value */
TS_API ts_tensor *ts_nan_to_num(ts_tensor *t, double nan, double posinf, double neginf);
TS_API ts_tensor *ts_trunc(ts_tensor *t);
TS_API ts_tensor *ts_fix(ts_tensor *t);     /* trunc */
TS_API ts_tensor *ts_frac(ts_tensor *t);    /* x - trunc(x) */
TS_API ts_tensor *ts_sgn(ts_tensor *t);     /* sign (real tensors) */
TS_API ts_tensor *ts_signbit(ts_tensor *t); /* bool: the sign bit (-0.0 and -NaN set it) */
TS_API ts_tensor *ts_deg2rad(ts_tensor *t);
TS_API ts_tensor *ts_rad2deg(ts_tensor *t);
TS_API ts_tensor *ts_xlogy(ts_tensor *a,
                           ts_tensor *b); /* a log(b), 0 where a == 0 unless b is NaN */
TS_API ts_tensor *ts_xlog1py(ts_tensor *a, ts_tensor *b); /* a log1p(b), torch.special.xlog1py */
TS_API ts_tensor *ts_hypot(ts_tensor *a, ts_tensor *b);   /* float dtypes only */
TS_API ts_tensor *ts_copysign(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_atan2(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_nextafter(ts_tensor *a, ts_tensor *b);   /* float dtypes; gradient (g, 0) */
TS_API ts_tensor *ts_ldexp(ts_tensor *a, ts_tensor *b);       /* a * 2^b */
TS_API ts_tensor *ts_float_power(ts_tensor *a, ts_tensor *b); /* pow in float64 */
TS_API ts_tensor *ts_logaddexp(ts_tensor *a, ts_tensor *b);   /* float dtypes only */
TS_API ts_tensor *ts_logaddexp2(ts_tensor *a, ts_tensor *b);  /* float dtypes only */

/* binary, with broadcasting and PyTorch's type promotion */
TS_API ts_tensor *ts_add(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_sub(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_mul(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_div(ts_tensor *a, ts_tensor *b); /* true division */
TS_API ts_tensor *ts_pow(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_maximum(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_minimum(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_fmod(ts_tensor *a, ts_tensor *b);
/* torch.floor_divide (a // b, rounded down; no gradient) and torch.remainder (a - b * floor(a / b):
 * the divisor's sign; gradient -g floor(a / b) for b). Integers: x // 0 and x % 0 give 0 where
 * PyTorch raises. */
TS_API ts_tensor *ts_floor_divide(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_remainder(ts_tensor *a, ts_tensor *b);
/* torch.div(a, b, rounding_mode=None | 'trunc' | 'floor'): the rounded quotient in the result
 * dtype (integers stay integers; an integer zero divisor is refused, as PyTorch's
 * ZeroDivisionError); the rounded forms record no gradient (PyTorch's is zero). */
typedef enum ts_rounding_mode {
    TS_ROUNDING_NONE = 0,
    TS_ROUNDING_TRUNC,
    TS_ROUNDING_FLOOR
} ts_rounding_mode;
TS_API ts_tensor *ts_div_rounding(ts_tensor *a, ts_tensor *b, ts_rounding_mode mode);
/* torch.bitwise_*: integer and bool tensors (the shifts: integers), broadcasting and promoting
 * like the arithmetic ops; shifts by a negative amount or >= the width give PyTorch's results
 * (<<: 0, >>: the sign). bitwise_not: logical_not on bool. */
TS_API ts_tensor *ts_bitwise_and(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_or(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_xor(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_left_shift(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_right_shift(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_and_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_or_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_xor_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_left_shift_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_right_shift_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_not(ts_tensor *t);
TS_API ts_tensor *ts_eq(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_ne(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_lt(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_le(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_gt(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_ge(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_logical_and(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_logical_or(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_add_alpha(ts_tensor *a, ts_tensor *b, double alpha); /* a + alpha*b */
/* scalar forms: the scalar is a "weak" Python number: an integral value keeps integer tensors
 * integer, a fractional one promotes them to the default float dtype; float tensors keep theirs. */
TS_API ts_tensor *ts_add_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_sub_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_rsub_scalar(ts_tensor *a, double s); /* s - a */
TS_API ts_tensor *ts_mul_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_div_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_pow_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_rpow_scalar(ts_tensor *a, double s); /* s ** a */
TS_API ts_tensor *ts_maximum_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_minimum_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_fmod_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_eq_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_ne_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_lt_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_le_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_gt_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_ge_scalar(ts_tensor *a, double s);
/* in place: the result must keep a's dtype and shape (PyTorch's rules) */
TS_API ts_tensor *ts_add_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_sub_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_mul_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_div_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_pow_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_add_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_sub_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_mul_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_div_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_pow_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_clamp_(ts_tensor *t, double min, double max);

TS_API ts_tensor *ts_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_clamp(ts_tensor *t, double min, double max); /* NAN = no bound on that side */
TS_API ts_tensor *ts_clamp_min(ts_tensor *t, double min);
TS_API ts_tensor *ts_clamp_max(ts_tensor *t, double max);
/* clamp with tensor bounds (either NULL, not both), broadcasting and promoting: minimum(maximum(t,
 * min), max), NaN propagating; differentiable in t, min and max with PyTorch 2.x's gradients (a
 * tie splits the gradient, as maximum / minimum) */
TS_API ts_tensor *ts_clamp_tensor(ts_tensor *t, ts_tensor *min, ts_tensor *max);
TS_API ts_tensor *ts_clamp_tensor_(ts_tensor *t, ts_tensor *min, ts_tensor *max);
TS_API ts_tensor *ts_masked_fill(ts_tensor *t, ts_tensor *mask, double v);
TS_API ts_tensor *ts_masked_fill_(ts_tensor *t, ts_tensor *mask, double v);

/* ================================================================= reductions */
/* dims: TS_DIMS(0, 2); an empty ts_dims reduces over all dims */
TS_API ts_tensor *ts_sum(ts_tensor *t); /* over all elements: 0-dim result */
TS_API ts_tensor *ts_mean(ts_tensor *t);
TS_API ts_tensor *ts_prod(ts_tensor *t);
TS_API ts_tensor *ts_max(ts_tensor *t);
TS_API ts_tensor *ts_min(ts_tensor *t);
TS_API ts_tensor *ts_var(ts_tensor *t);    /* correction 1 */
TS_API ts_tensor *ts_std(ts_tensor *t);    /* correction 1 */
TS_API ts_tensor *ts_argmax(ts_tensor *t); /* index into the flattened tensor */
TS_API ts_tensor *ts_argmin(ts_tensor *t);
TS_API ts_tensor *ts_logsumexp(ts_tensor *t);
TS_API ts_tensor *ts_sum_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_mean_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_prod_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_amax_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_amin_dim(ts_tensor *t, int dim, bool keepdim);
/* torch.max(t, dim): values and (when indices != NULL) indices, both owned like any result */
TS_API ts_tensor *ts_max_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
TS_API ts_tensor *ts_min_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
TS_API ts_tensor *ts_argmax_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_argmin_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_var_dim(ts_tensor *t, int dim, bool keepdim, double correction);
TS_API ts_tensor *ts_std_dim(ts_tensor *t, int dim, bool keepdim, double correction);
TS_API ts_tensor *ts_logsumexp_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_sum_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_mean_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_amax_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_amin_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_var_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction);
TS_API ts_tensor *ts_std_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction);
TS_API ts_tensor *ts_logsumexp_dims(ts_tensor *t, ts_dims dims, bool keepdim);

/* ==================================================================== linear algebra */
TS_API ts_tensor *ts_mm(ts_tensor *a, ts_tensor *b);     /* [n,k] @ [k,m] */
TS_API ts_tensor *ts_bmm(ts_tensor *a, ts_tensor *b);    /* [B,n,k] @ [B,k,m] */
TS_API ts_tensor *ts_matmul(ts_tensor *a, ts_tensor *b); /* torch.matmul, batch dims broadcast */
/* Products with PyTorch's names and checks (src/ops/products.c), composed of differentiable ops.
 * addX: beta * input + alpha * product, input broadcast to the product's shape (never the other
 * way); beta == 0 ignores input's values (NaN and inf too) and gives it no gradient; integer
 * operands need integral beta and alpha (TS_ERR_ARG); all operands share one dtype. The in-place
 * forms write into input, whose shape must be the product's. */
TS_API ts_tensor *ts_addmm(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta,
                           double alpha);
TS_API ts_tensor *ts_addmv(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta,
                           double alpha);
TS_API ts_tensor *ts_addr(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta,
                          double alpha);
TS_API ts_tensor *ts_baddbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                             double alpha);
TS_API ts_tensor *ts_addbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                            double alpha); /* the batch of products summed: [n, m] */
TS_API ts_tensor *ts_addmm_(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta,
                            double alpha);
TS_API ts_tensor *ts_addmv_(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta,
                            double alpha);
TS_API ts_tensor *ts_addr_(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta,
                           double alpha);
TS_API ts_tensor *ts_baddbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                              double alpha);
TS_API ts_tensor *ts_addbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                             double alpha);
TS_API ts_tensor *ts_mv(ts_tensor *mat, ts_tensor *vec); /* [n, m] @ [m] */
TS_API ts_tensor *ts_dot(ts_tensor *a, ts_tensor *b);    /* 1-D, same size and dtype: 0-dim */
TS_API ts_tensor *ts_vdot(ts_tensor *a, ts_tensor *b);   /* dot (real tensors: no conjugate) */
TS_API ts_tensor *ts_outer(ts_tensor *a, ts_tensor *b);  /* 1-D a, b: [n, m] (torch.ger) */
TS_API ts_tensor *ts_inner(ts_tensor *a,
                           ts_tensor *b); /* over the last dims; a 0-dim operand: a * b */
/* sum over a's dims da[i] paired with b's db[i] (same count; a size-1 dim broadcasts): the
 * result's dims are a's others then b's others. torch.tensordot(dims=k): da = a's last k dims,
 * db = b's first k. */
TS_API ts_tensor *ts_tensordot(ts_tensor *a, ts_tensor *b, ts_dims da, ts_dims db);
TS_API ts_tensor *ts_kron(ts_tensor *a,
                          ts_tensor *b);  /* up to 4 dims after padding to the same ndim */
TS_API ts_tensor *ts_trace(ts_tensor *t); /* 2-D: the diagonal's sum (integers: int64) */
/* torch.linalg.multi_dot: n >= 2 tensors, 2-D but the first and last, which may be 1-D; the
 * cheapest order of products (PyTorch's) */
TS_API ts_tensor *ts_multi_dot(ts_tensor *const *ts, int n);

/* ==================================================================== norms and moments */
/* (src/ops/reduce_norm.c) torch.linalg.vector_norm: (sum |x|^ord)^(1/ord) over dims (n == 0: all
 * dims), ord any number: INFINITY max |x|, -INFINITY min |x|, 0 the count of non-zeros. Float
 * inputs only; dtype (TS_DTYPE_DEFAULT: t's) casts t first. PyTorch's gradients, including 0 where
 * the norm is 0 (ord = 2, general ord) and ties sharing evenly (inf). */
TS_API ts_tensor *ts_vector_norm(ts_tensor *t, double ord, ts_dims dims, bool keepdim,
                                 ts_dtype dtype);
/* torch.linalg.matrix_norm over dims (d0, d1): ord "fro", "1", "-1", "inf", "-inf", and "nuc",
 * "2", "-2" from the singular values (tessera/linalg.h: LAPACK; TS_ERR_UNSUPPORTED in a build
 * without LAPACKE). */
TS_API ts_tensor *ts_matrix_norm(ts_tensor *t, const char *ord, int d0, int d1, bool keepdim,
                                 ts_dtype dtype);
/* F.normalize: t / max(||t||_p over dim, eps) (ts_normalize is data.h's transform) */
TS_API ts_tensor *ts_lp_normalize(ts_tensor *t, double p, int dim, double eps);
/* var and mean (std and mean) over dims (n == 0: all) in one call; *mean gets the mean */
TS_API ts_tensor *ts_var_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                              ts_tensor **mean);
TS_API ts_tensor *ts_std_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                              ts_tensor **mean);
/* torch.aminmax: returns the min, *max gets the max; over dim, or all elements when !has_dim */
TS_API ts_tensor *ts_aminmax(ts_tensor *t, bool has_dim, int dim, bool keepdim, ts_tensor **max);
TS_API ts_tensor *ts_count_nonzero(ts_tensor *t, ts_dims dims); /* int64; n == 0: all dims */
/* F.cosine_similarity: sum over dim of (a / max(||a||, eps)) * (b / max(||b||, eps)), a and b
 * broadcast; PyTorch's gradient (the clamp does not stop it) */
TS_API ts_tensor *ts_cosine_similarity(ts_tensor *a, ts_tensor *b, int dim, double eps);
/* F.pairwise_distance: ||a - b + eps||_p over the last dim */
TS_API ts_tensor *ts_pairwise_distance(ts_tensor *a, ts_tensor *b, double p, double eps,
                                       bool keepdim);
/* torch.cdist: [..., P, M] and [..., R, M] (batch dims broadcast) -> [..., P, R], p >= 0 */
TS_API ts_tensor *ts_cdist(ts_tensor *a, ts_tensor *b, double p);

/* joining, splitting, indexing, sorting, counting, softmax */
#include "tessera/indexing.h"

/* predicates, logical and bitwise forms, cumulative ops, more pointwise forms */
#include "tessera/logic.h"

/* in this order: each section uses the types of the one before */
#include "tessera/memory.h"

#include "tessera/autograd.h"

#include "tessera/cuda.h"

#include "tessera/nn.h"

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
#include "tessera/special_more.h"
/* convolutions beyond conv2d, pools and norms beyond 2-d, the transformer decoder */
#include "tessera/conv.h"
#include "tessera/pool_norm.h"
#include "tessera/transformer.h"
/* custom autograd functions, the graph seen from a tensor, tensor hooks */
#include "tessera/custom_function.h"
/* PyTorch checkpoints (.pt) and PNG images */
#include "tessera/image.h"
#include "tessera/pt.h"
/* the profiler; implicit synchronisations and memory snapshots */
#include "tessera/profiler.h"
#include "tessera/sync_debug.h"
/* models bigger than the device: a simulated host link, saved tensors offloaded, placement by
 * memory budget, the optimizer offloaded to the host */
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
