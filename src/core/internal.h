/* internal.h — tensor and storage layout plus the helpers every op front end uses (not public). */
#ifndef TS_CORE_INTERNAL_H
#define TS_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>

#include "backend/alloc.h"
#include "backend/backend.h"
#include "tessera.h"

/* ------------------------------------------------------------------ objects */
typedef struct ts_storage {
    atomic_int refs;
    ts_device device; /* resolved: never TS_DEVICE_DEFAULT, cuda index >= 0 */
    const ts_backend *be;
    ts_allocator *alloc;
    ts_block *block;
    char *data; /* device pointer (host pointer for cpu and sim) */
    size_t nbytes;
    atomic_uint_fast64_t version; /* shared by every view: bumped by in-place ops */
    /* Unique for the process's life (never 0, never reused, unlike the struct's or the data's
     * address, which the caching allocator hands out again): names the memory for caches of what
     * was computed from it (conv_dnnl.c's reordered weights), with version for its contents. */
    uint64_t uid;
    /* Handed to another framework (ts_to_dlpack): it may write the memory without a version
     * bump, so no cache may key on uid + version (conv.c's weight identity). Never cleared. */
    atomic_bool exported;
    /* Index values read and found within [0, range_below) (core/index_range.c), for the elements,
     * dtype and version that hashed to range_key: a later bounds check of a tensor viewing the
     * same elements against a size >= range_below reads nothing from the device. 0: none. */
    atomic_uint_fast64_t range_key;
    atomic_int_fast64_t range_below;
    bool pinned;
    /* Memory Tessera does not own (ts_from_dlpack, tsi_new_external): alloc and block are NULL
     * and the last reference calls release(release_ctx) instead of giving a block back, so the
     * device's caching allocator never counts nor frees it. NULL for allocator memory. */
    void (*release)(void *ctx);
    void *release_ctx;
    /* Allocated while a graph was captured on its device (core/capture.h): its block is the
     * graph's (slot capture_slot of its pool), kept from the allocator while the graph lives.
     * NULL and -1 otherwise. */
    struct tsi_capture_pool *capture_pool;
    int64_t capture_slot;
} ts_storage;

struct ts_node; /* autograd graph node (autograd issue) */

struct ts_tensor {
    atomic_int refs;
    ts_dtype dtype; /* never TS_DTYPE_DEFAULT */
    bool requires_grad;
    ts_storage *storage;
    int64_t offset; /* in elements */
    ts_shape shape;
    int64_t strides[TS_MAX_DIMS]; /* in elements, never negative */
    bool is_view;                 /* shares storage with the tensor it was made from */
    ts_tensor *grad;
    struct ts_node *grad_fn;
    int output_nr;
    struct tsi_grad_hooks *hooks; /* post-accumulate-grad hooks (leaves; autograd/hooks.c) */
    /* A view made by a view op (autograd/copy_slices.h): the tensor it looks into (retained; the
     * root, never itself such a view), the storage version its grad_fn was derived at, how it was
     * made (TSI_VIEW_*) and, for one of several views a split makes, which one. NULL otherwise. */
    ts_tensor *view_base;
    uint64_t view_version;
    const char *view_multi_op; /* "Split", "Unbind": the multi-output op (PyTorch's name) */
    int32_t view_multi_nr;
    uint8_t view_creation;
    bool view_writing; /* tsi_check_inplace passed it for a recorded write: its node rebases */
    /* A quantized tensor's scales and zero points (core/quant_desc.h: refcounted, released with
     * the tensor); NULL for every other dtype (decision 0042). */
    struct tsi_quant *quant;
};
/* ts_tensor.view_creation: in grad mode, under no_grad, or one of several outputs of one op */
enum { TSI_VIEW_DEFAULT = 0, TSI_VIEW_NO_GRAD = 1, TSI_VIEW_MULTI = 2 };

/* Index bounds already checked (core/index_range.c): whether every value of idx is known to lie
 * in [0, size) from an earlier read of the same elements (storage version, dtype, offset and the
 * dims' sizes and strides unchanged, in any order; never for memory shared with another framework
 * or not Tessera's own), and the record of such a read (one per storage, the latest). The checks of
 * gather, index_select, scatter and the losses' targets ask first, so the label tensor of a
 * training step is read to the host once, not by every op that indexes with it. Writes through
 * ts_data_ptr that bump no version are outside the contract, as for the convolution's weight
 * caches. */
bool tsi_index_range_known(const ts_tensor *idx, int64_t size);
void tsi_index_range_note(ts_tensor *idx, int64_t below);

/* ------------------------------------------------------------------ distributed hooks */
/* The distributed layer's answers to the grad scaler (a layer below it): the maximum of a value
 * over a group's processes (the found-inf, so every rank skips a step or none does; g NULL: the
 * world) and the group's size. Registered by ts_dist_init for the life of the world
 * (dist/process_group.c), NULL before and after. */
typedef struct ts_dist_group ts_dist_group;
extern double (*tsi_dist_agree_max)(ts_dist_group *g, double local);
extern int (*tsi_dist_agree_size)(ts_dist_group *g);

/* ------------------------------------------------------------------ errors */
/* Records the error unless one is already pending (first wins); returns code. Message is
 * printf-formatted and should start with the op's name: "add: ...". */
ts_status tsi_error_set(ts_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds context to the pending error's message (" (in onnx node 'x' (Add))"); no-op when none. */
void tsi_error_append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Checks an input pointer: NULL with no pending error records TS_ERR_ARG "<op>: <what> is NULL";
 * NULL with a pending error keeps it. Returns t != NULL. */
bool tsi_check_input(const char *op, const ts_tensor *t, const char *what);
/* Complex tensors pass only the ops listed in src/core/complex_gate.c (its comment says why):
 * tsi_check_input, tsi_new and tsi_cast refuse a complex tensor or dtype for any other op with
 * TS_ERR_DTYPE "<op>: not implemented for 'ComplexFloat' (input: ...)". */
bool tsi_complex_op_ok(const char *op);
bool tsi_complex_refuse(const char *op, ts_dtype dt, const ts_tensor *t); /* sets it; false */
#define TSI_COMPLEX_GATE(op, dt, t)                                                                \
    (!tsi_is_complex(dt) || tsi_complex_op_ok(op) || tsi_complex_refuse(op, dt, t))
/* Quantized tensors (qint8, quint8, qint32, quint4x2) likewise pass only the ops listed in
 * src/core/quant_gate.c, at the same doors: any other op would read their integers as numbers and
 * ignore the scale. TS_ERR_DTYPE "<op>: quantized tensors are not supported (input: qint8 [2] on
 * cpu); take ts_dequantize first". TSI_DTYPE_GATE is both gates, what the doors call. */
bool tsi_quant_op_ok(const char *op);
bool tsi_quant_view_op(const char *op); /* the view ops of its second list: per tensor only */
bool tsi_quant_refuse(const char *op, ts_dtype dt, const ts_tensor *t); /* sets it; false */
bool tsi_quant_gate(const char *op, ts_dtype dt, const ts_tensor *t);   /* both lists */
#define TSI_QUANT_GATE(op, dt, t) (!tsi_is_quantized(dt) || tsi_quant_gate(op, dt, t))
#define TSI_DTYPE_GATE(op, dt, t) (TSI_COMPLEX_GATE(op, dt, t) && TSI_QUANT_GATE(op, dt, t))

/* Thread-local ring of formatting buffers for messages: valid until ~16 more calls. */
char *tsi_fmt_buf(void);
#define TSI_FMT_BUF_LEN 256
const char *tsi_shape_str(ts_shape s); /* "[2, 3]" */
/* Whether a and b have the same dims */
static inline bool tsi_shape_equal(ts_shape a, ts_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dims[i] != b.dims[i]) return false;
    return true;
}
const char *tsi_desc(const ts_tensor *t); /* "float32 [2, 3] on sim:0" */

/* ------------------------------------------------------------------ scopes */
/* Hands a tensor the caller holds one reference to over to the innermost scope (or to the user
 * when no scope is open). Every public function returning a tensor ends with `return tsi_own(t)`.
 * NULL-safe. */
ts_tensor *tsi_own(ts_tensor *t);

/* ------------------------------------------------------------------ devices, dtypes, shapes */
ts_device tsi_resolve_device(ts_device d); /* default -> thread default; cuda -1 -> current */
/* TS_ERR_DEVICE "<op>: device sim:5 is not available (2 sim devices)" when absent */
bool tsi_check_device(const char *op, ts_device d);
/* False (TS_ERR_DEVICE naming op and t) when t is a meta tensor, whose data a host read or a copy
 * to another device would need: it has none. True otherwise. */
bool tsi_meta_refuse(const char *op, const ts_tensor *t);
static inline ts_dtype tsi_resolve_dtype(ts_dtype d) { return d == TS_DTYPE_DEFAULT ? TS_F32 : d; }
bool tsi_device_eq(ts_device a, ts_device b); /* both resolved */
/* All non-NULL tensors on one device; a 0-dim cpu tensor may join others when allow_cpu_scalar.
 * Error: "<op>: expected all tensors to be on the same device, but found at least two devices,
 * sim:0 and cpu". *dev gets the common device. */
bool tsi_same_device(const char *op, ts_tensor *const *ts, int n, bool allow_cpu_scalar,
                     ts_device *dev);

static inline bool tsi_is_float(ts_dtype d) {
    return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16;
}
static inline bool tsi_is_int(ts_dtype d) {
    return d == TS_I64 || d == TS_I32 || d == TS_U8 || d == TS_I8 || d == TS_I16 || d == TS_U16 ||
           d == TS_U32 || d == TS_U64;
}
static inline bool tsi_is_complex(ts_dtype d) { return d == TS_C64 || d == TS_C128; }
static inline bool tsi_is_quantized(ts_dtype d) {
    return d == TS_QINT8 || d == TS_QUINT8 || d == TS_QINT32 || d == TS_QUINT4X2;
}
/* complex64 -> float32, complex128 -> float64 (the dtype of a complex number's parts) */
static inline ts_dtype tsi_complex_part(ts_dtype d) { return d == TS_C128 ? TS_F64 : TS_F32; }
/* float64 -> complex128, any other -> complex64 (PyTorch's complex dtype for a real one) */
static inline ts_dtype tsi_complex_of(ts_dtype d) { return d == TS_F64 ? TS_C128 : TS_C64; }
/* the unsigned types past uint8 that PyTorch promotes only with themselves and floats */
static inline bool tsi_is_wide_uint(ts_dtype d) {
    return d == TS_U16 || d == TS_U32 || d == TS_U64;
}
/* r (a promotion's result) is a dtype; TS_DTYPE_COUNT (no rule for a and b) sets TS_ERR_DTYPE
 * "<op>: Promotion for uint16, uint32, uint64 types is not supported, attempted to promote UInt16
 * and Int" and returns false */
bool tsi_check_promotion(const char *op, ts_dtype r, ts_dtype a, ts_dtype b);
/* PyTorch's ScalarType names ("Float", "Long"), for messages copied from PyTorch word for word */
const char *tsi_torch_scalar_name(ts_dtype d);
extern const size_t tsi_dtype_sizes[TS_DTYPE_COUNT];
static inline size_t tsi_dtype_size(ts_dtype d) {
    return (unsigned)d < TS_DTYPE_COUNT ? tsi_dtype_sizes[d] : 0;
}

int64_t tsi_numel(ts_shape s);
/* ndim in [0, 8], dims >= 0 (or -1 where allow_infer), numel without overflow; TS_ERR_SHAPE */
bool tsi_check_shape(const char *op, ts_shape s);
void tsi_contiguous_strides(const ts_shape *s, int64_t *strides);
bool tsi_is_contiguous(const ts_tensor *t);
/* Broadcast two shapes (numpy rules); TS_ERR_SHAPE "<op>: shapes [2, 3] and [4] cannot be
 * broadcast together" */
bool tsi_broadcast_shapes(const char *op, ts_shape a, ts_shape b, ts_shape *out);
/* Normalise a possibly negative dim for a tensor of ndim dims (0-dim tensors accept -1 and 0, like
 * PyTorch). Returns -1 and records TS_ERR_ARG "<op>: dimension 3 out of range (expected to be in
 * range of [-2, 1])" when out of range. */
int tsi_wrap_dim(const char *op, int dim, int ndim);

/* ------------------------------------------------------------------ tensors */
/* New contiguous tensor, uninitialised, one reference held by the caller, not in any scope.
 * NULL + TS_ERR_OOM ("<op>: out of memory on sim:0: tried to allocate ...") on failure. */
ts_tensor *tsi_new(const char *op, ts_shape s, ts_dtype dt, ts_device dev);
/* The most elements a new tensor may have on this thread (0: no limit), for code that runs
 * untrusted input (an ONNX file's Tile, Pad, Range... size their outputs from its data): tsi_new
 * and the factories that stage values on the host refuse more with TS_ERR_OOM before allocating.
 * Returns the previous limit, for the caller to restore. */
int64_t tsi_tensor_cap_set(int64_t max_elements);
/* false + TS_ERR_OOM "<op>: 10000000 elements would exceed the limit of 16777216 elements a tensor
 * may have here" when numel is over this thread's limit */
bool tsi_tensor_cap_check(const char *op, int64_t numel);
/* New tensor of shape s (contiguous strides, offset 0: the caller may change both) over nbytes of
 * external memory at data on device dev (resolved, checked): one reference held by the caller,
 * not in any scope. The storage borrows the memory (release NULL) until the caller sets
 * t->storage->release and release_ctx, which it does once nothing can fail any more, so that a
 * failure never frees memory the caller still owns. NULL + TS_ERR_OOM on failure. Used by DLPack
 * (src/core/dlpack.c). */
ts_tensor *tsi_new_external(const char *op, ts_shape s, ts_dtype dt, ts_device dev, void *data,
                            size_t nbytes);
/* A tensor of dtype dt on dev holding a copy of host_data (contiguous, dt's layout): one reference
 * held by the caller, not in any scope. */
ts_tensor *tsi_from_host(const char *op, ts_shape s, ts_dtype dt, const void *host_data,
                         ts_device dev);
/* View sharing t's storage: one reference held by the caller, not in any scope. */
ts_tensor *tsi_view_of(ts_tensor *t, ts_shape s, const int64_t *strides, int64_t offset);
/* The kernel view of a tensor, and the same broadcast to `to` (stride 0 on expanded dims;
 * the caller has checked that the shapes broadcast). The _fill forms write straight into *v: hot
 * front ends build their views in place instead of copying 144-byte structs around. */
static inline void tsi_kview_fill(ts_kview *v, const ts_tensor *t) {
    v->data = t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
    v->dtype = t->dtype;
    v->ndim = t->shape.ndim;
    for (int i = 0; i < TS_MAX_DIMS; i++) {
        v->shape[i] = i < t->shape.ndim ? t->shape.dims[i] : 1;
        v->strides[i] = i < t->shape.ndim ? t->strides[i] : 0;
    }
}
static inline void tsi_kview_fill_broadcast(ts_kview *v, const ts_tensor *t, const ts_shape *to) {
    tsi_kview_fill(v, t);
    int lead = to->ndim - t->shape.ndim;
    for (int i = to->ndim - 1; i >= 0; i--) {
        int j = i - lead;
        bool expanded = j < 0 || (t->shape.dims[j] == 1 && to->dims[i] != 1);
        v->strides[i] = expanded ? 0 : t->strides[j];
        v->shape[i] = to->dims[i];
    }
    v->ndim = to->ndim;
}
static inline ts_kview tsi_kview(const ts_tensor *t) {
    ts_kview v;
    tsi_kview_fill(&v, t);
    return v;
}
static inline ts_kview tsi_kview_broadcast(const ts_tensor *t, ts_shape to) {
    ts_kview v;
    tsi_kview_fill_broadcast(&v, t, &to);
    return v;
}
/* While this thread captures a graph (core/capture.h), kernels on the capture's device go to the
 * recording stand-in of their backend */
extern _Thread_local struct ts_graph *tsi_capture_graph;
const ts_backend *tsi_capture_redirect(const ts_backend *real, ts_device dev);
static inline const ts_backend *tsi_be(const ts_tensor *t) {
    return tsi_capture_graph ? tsi_capture_redirect(t->storage->be, t->storage->device)
                             : t->storage->be;
}
static inline int tsi_dev_index(const ts_tensor *t) { return t->storage->device.index; }
static inline ts_device tsi_device(const ts_tensor *t) { return t->storage->device; }
/* Copy of t with the given dtype on the same device (new reference, not in a scope); when t already
 * has that dtype, returns t retained. */
ts_tensor *tsi_cast(const char *op, ts_tensor *t, ts_dtype dt);
/* Contiguous copy (or t retained when already contiguous); not in a scope. */
ts_tensor *tsi_contiguous(const char *op, ts_tensor *t);
/* Memory formats (core/memory_format.c). Channels_last: a 4-D [N, C, H, W] tensor whose elements
 * lie in NHWC order, dims of one element aside (PyTorch's is_contiguous(channels_last));
 * "prefers" it: channels_last and not also NCHW-contiguous (PyTorch's suggest_memory_format), the
 * layout an op's output keeps. */
void tsi_channels_last_strides(const ts_shape *s, int64_t *strides); /* contiguous unless 4-D */
bool tsi_is_channels_last(const ts_tensor *t);
bool tsi_prefers_channels_last(const ts_tensor *t);
/* New tensor (as tsi_new) with channels_last strides (s 4-D), and one with like's memory format:
 * channels_last when like has shape s and prefers it, else contiguous. */
ts_tensor *tsi_new_channels_last(const char *op, ts_shape s, ts_dtype dt, ts_device dev);
ts_tensor *tsi_new_like(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                        const ts_tensor *like);
/* A channels_last copy of t (4-D), or t retained when it already is; not in a scope. */
ts_tensor *tsi_channels_last(const char *op, ts_tensor *t);
/* Copy t to device d (new reference, not in a scope; t retained when already there). */
ts_tensor *tsi_to_device(const char *op, ts_tensor *t, ts_device d);
/* A contiguous copy of t of dtype dt on device dev that nobody else holds (new reference, not in a
 * scope): what a load stages before it changes anything. */
ts_tensor *tsi_private_copy(const char *op, ts_tensor *t, ts_device dev, ts_dtype dt);
/* Grad mode (thread-local, ts_no_grad_begin/end): autograd records only while it is on. */
bool tsi_grad_mode(void);
/* In-place ops with grad mode on (core/inplace_rules.c): PyTorch's refusals (TS_ERR_STATE) of a
 * leaf that requires grad, a view of one, a view made under no_grad or by a multi-output op
 * (split, unbind) whose write would be recorded; a view with no known base that requires grad is
 * TS_ERR_UNSUPPORTED. A view of a tensor that requires grad, or written with an operand that
 * does, is fine: its base gets a CopySlices node (autograd/copy_slices.h). */
bool tsi_check_inplace(const char *op, ts_tensor *t);
bool tsi_check_inplace_operand(const char *op, ts_tensor *t, bool operand_requires_grad);
/* PyTorch's refusal of a write into a tensor whose elements overlap (an expanded view: a stride 0
 * over a dim of size > 1): which value lands there would be arbitrary. TS_ERR_ARG, one message. */
bool tsi_check_no_self_overlap(const char *op, ts_tensor *t);
/* The base a view op's view looks into, or NULL (not such a view, or its storage was swapped). */
static inline ts_tensor *tsi_view_base(const ts_tensor *t) {
    return t->view_base && t->view_base->storage == t->storage ? t->view_base : NULL;
}
/* Set by autograd (copy_slices.c): a view whose storage changed in place since its grad_fn was
 * derived takes its history from its base again (PyTorch regenerates it lazily the same way). */
typedef void (*tsi_view_refresh_t)(ts_tensor *t);
extern _Atomic(tsi_view_refresh_t) tsi_view_refresh_fn; /* set by the first view's attach */
static inline void tsi_view_sync(ts_tensor *t) {
    if (t && t->view_base &&
        atomic_load_explicit(&t->storage->version, memory_order_relaxed) != t->view_version) {
        tsi_view_refresh_t f = atomic_load_explicit(&tsi_view_refresh_fn, memory_order_relaxed);
        if (f) f(t);
    }
}
/* Set by the autograd engine: releases a node when its output tensor dies. */
extern void (*tsi_grad_fn_release)(struct ts_node *node);
/* While capturing on its device, a storage changed in place is noted by the graph, whose replays
 * bump its version again (core/capture.c), so caches keyed on uid + version see what a replay
 * changed. */
void tsi_capture_note_write(ts_storage *s);
/* Mark t's storage as modified in place. */
static inline void tsi_bump_version(ts_tensor *t) {
    atomic_fetch_add(&t->storage->version, 1);
    if (tsi_capture_graph) tsi_capture_note_write(t->storage);
}
/* A reference to a storage, for what keeps one without a tensor (a captured graph) */
void tsi_storage_retain(ts_storage *s);
void tsi_storage_release(ts_storage *s);

/* ------------------------------------------------------------------ memory accounting */
ts_allocator *tsi_allocator(ts_device d); /* d resolved; created on first use */
void tsi_live_tensors_add(ts_device d, int delta);
int64_t tsi_live_tensors(ts_device d);
/* Destroy the allocators of every device of a type (nothing may be live there). */
void tsi_memory_drop_allocators(ts_device_type t);
void tsi_memory_init(void); /* start-up: the debug leak report */

/* ------------------------------------------------------------------ misc */
/* Placement log: one cheap branch when off. */
extern atomic_bool tsi_placement_on;
void tsi_log_placement_emit(const char *op, ts_device d);
static inline void tsi_log_op(const char *op, ts_device d) {
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed))
        tsi_log_placement_emit(op, d);
}
/* Reserve n Philox counters from the global generator (thread-safe): returns seed and the first
 * offset. Counters are consumed in multiples of 4 (one Philox block gives 4 numbers). */
void tsi_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset);
/* The same for a draw made on dev: while this thread captures there, the counters come from the
 * graph's own stream and a replay supplies the generator's (docs/CAPTURE.md). */
void tsi_rng_reserve_on(ts_device dev, uint64_t n, uint64_t *seed, uint64_t *offset);
/* Until tsi_rng_stream_end, the calling thread draws from a stream of its own starting at
 * (seed, offset) instead of the global generator (which it leaves alone). Begin returns the
 * thread's previous stream, which end restores: a replica that runs data parallel itself (or
 * runs in its caller's thread) nests. */
typedef struct tsi_rng_stream {
    bool on;
    uint64_t seed, offset;
} tsi_rng_stream;
tsi_rng_stream tsi_rng_stream_begin(uint64_t seed, uint64_t offset);
void tsi_rng_stream_end(tsi_rng_stream prev);
/* Counters reserved for each data-parallel replica's stream: 2^36 numbers (256 GiB of f32), far
 * more than one forward draws, so the streams of one call never overlap. */
#define TSI_RNG_REPLICA_SPAN ((uint64_t)1 << 36)

/* library start-up (environment variables, backends); idempotent, called by every entry point
 * that needs it through tsi_init() */
void tsi_init_once(void);
extern atomic_bool tsi_initialised;
static inline void tsi_init(void) {
    if (!atomic_load_explicit(&tsi_initialised, memory_order_acquire)) tsi_init_once();
}

/* ------------------------------------------------------------------ in-place storage moves */
/* Give t a contiguous copy of its data on device d (or in dtype dt) in place: the handle, shape,
 * requires_grad, grad and version stay; t stops being a view. No-op when already there. Used by
 * ts_module_to / ts_module_to_dtype (src/core/tensor_move.c). */
ts_status tsi_tensor_move_storage(ts_tensor *t, ts_device d);
ts_status tsi_tensor_cast_storage(ts_tensor *t, ts_dtype dt);

/* ------------------------------------------------------------------ sharded parameters (FSDP) */
/* t (same dtype and device as base, which the caller checked) becomes a contiguous view of
 * base's storage at offset elements: the handle, shape, requires_grad, grad and hooks stay, the
 * old storage loses t's reference. A parameter turned into a slice of a flat buffer this way is
 * still the module's own tensor (modules that keep its pointer see the same handle). */
void tsi_tensor_alias_storage(ts_tensor *t, ts_tensor *base, int64_t offset);
/* Gives a storage's memory back to its allocator while the storage object and every view of it
 * stay (PyTorch's storage().resize_(0), which FSDP2 reshards with); data is NULL until
 * tsi_storage_alloc_data brings memory of the same size back (contents undefined). No-op for
 * external memory and for a storage whose memory is already gone / already there. */
void tsi_storage_free_data(ts_storage *s);
bool tsi_storage_alloc_data(const char *op, ts_storage *s); /* false + TS_ERR_OOM */

#endif /* TS_CORE_INTERNAL_H */
