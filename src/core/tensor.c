/* tensor.c — tensor and storage lifetimes (and their struct caches), queries, host reads. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/fault_alloc.h"
#include "core/capture.h"
#include "core/grad_hooks_free.h"
#include "core/internal.h"
#include "core/profiler_hooks.h"
#include "core/quant_desc.h"
#include "core/sync_debug.h"

void (*tsi_grad_fn_release)(struct ts_node *node);
void (*tsi_grad_hooks_free)(struct tsi_grad_hooks *h);

/* ------------------------------------------------------------------ struct caches
 * A training step or a loop of small ops makes and frees hundreds of tensors at a time, more than
 * malloc's per-thread cache holds, so every op paid for malloc's slow paths twice (tensor and
 * storage). Each thread keeps its freed structs on two free-lists instead; a thread that ends gives
 * them back. Under AddressSanitizer the caches are off so that a use after release is still
 * caught. */
#if defined(__SANITIZE_ADDRESS__)
#define TS_STRUCT_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_STRUCT_CACHE 0
#endif
#endif
#ifndef TS_STRUCT_CACHE
#define TS_STRUCT_CACHE 1
#endif

#if TS_STRUCT_CACHE
#define CACHE_MAX 4096 /* per list and thread: ~1.2 MB at most */

typedef struct free_item {
    struct free_item *next;
} free_item;

typedef struct struct_cache {
    free_item *head[2]; /* CACHE_TENSOR, CACHE_STORAGE */
    int count[2];
    bool registered; /* the thread-exit destructor knows about this thread */
    bool closed;     /* the thread is ending: free directly from now on */
} struct_cache;
enum { CACHE_TENSOR, CACHE_STORAGE };

static _Thread_local struct_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

static void cache_thread_exit(void *p) {
    struct_cache *c = p;
    for (int k = 0; k < 2; k++) {
        while (c->head[k]) {
            free_item *it = c->head[k];
            c->head[k] = it->next;
            free(it);
        }
        c->count[k] = 0;
    }
    c->closed = true;
}

static void cache_key_init(void) {
    cache_key_ok = pthread_key_create(&cache_key, cache_thread_exit) == 0;
}

static inline void *cache_get(int k, size_t size) {
    free_item *it = cache.head[k];
    if (it) {
        /* a cached struct counts as an allocation too (TS_FAULT_ALLOC) */
        if (tsi_fault_alloc_hit((tsi_fault_site)cache_get)) return NULL;
        cache.head[k] = it->next;
        cache.count[k]--;
        return it;
    }
    return malloc(size);
}

static void cache_register(void) {
    pthread_once(&cache_key_once, cache_key_init);
    cache.registered = cache_key_ok && pthread_setspecific(cache_key, &cache) == 0;
}

static inline void cache_put(int k, void *p) {
    if (__builtin_expect(!cache.registered, 0) && !cache.closed) cache_register();
    if (cache.count[k] >= CACHE_MAX || !cache.registered || cache.closed) {
        free(p);
        return;
    }
    free_item *it = p;
    it->next = cache.head[k];
    cache.head[k] = it;
    cache.count[k]++;
}
#define STRUCT_ALLOC(k, size) cache_get(k, size)
#define STRUCT_FREE(k, p)     cache_put(k, p)
#else
#define STRUCT_ALLOC(k, size) malloc(size)
#define STRUCT_FREE(k, p)     free(p)
#endif

/* The last reference needs no atomic read-modify-write: nobody else holds one, so nobody may take
 * one concurrently. Saves a locked instruction per release on the common path. */
static inline bool drop_ref(atomic_int *refs) {
    if (atomic_load_explicit(refs, memory_order_acquire) == 1) return true;
    return atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1;
}

/* ------------------------------------------------------------------ storage */
static atomic_uint_fast64_t storage_uids; /* the last uid given out */

static uint64_t next_storage_uid(void) {
    return (uint64_t)atomic_fetch_add_explicit(&storage_uids, 1, memory_order_relaxed) + 1;
}

/* A meta tensor's memory: none. Its data pointer is this byte, which no kernel reads (the meta
 * backend's kernels do nothing) and no front end reads either (tsi_meta_refuse). */
static _Alignas(64) char meta_no_data[64];

static ts_storage *meta_storage_new(const char *op, size_t nbytes, ts_device dev) {
    ts_storage *s = STRUCT_ALLOC(CACHE_STORAGE, sizeof *s);
    if (!s) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    memset(s, 0, sizeof *s);
    s->device = dev;
    s->be = tsi_backend_for(TS_META);
    s->data = meta_no_data;
    s->nbytes = nbytes;
    s->uid = next_storage_uid();
    s->capture_slot = -1;
    atomic_init(&s->refs, 1);
    atomic_init(&s->version, 0);
    atomic_init(&s->exported, false);
    atomic_init(&s->range_key, 0);
    atomic_init(&s->range_below, 0);
    return s;
}

static ts_storage *storage_new(const char *op, size_t nbytes, ts_device dev) {
    if (dev.type == TS_META) return meta_storage_new(op, nbytes, dev);
    ts_allocator *a = tsi_allocator(dev);
    if (!a) { /* made on first use: with a backend there, only memory can be missing */
        if (tsi_backend_for(dev.type))
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory for the allocator of %s", op,
                          ts_device_str(dev));
        else
            tsi_error_set(TS_ERR_DEVICE, "%s: no allocator for device %s", op, ts_device_str(dev));
        return NULL;
    }
    ts_storage *s = STRUCT_ALLOC(CACHE_STORAGE, sizeof *s);
    if (!s) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    /* while a graph is captured on dev, through its pool (which may reuse a block the capture
     * released) */
    tsi_capture_pool *pool = NULL;
    int64_t slot = -1;
    ts_block *b = NULL;
    if (tsi_capture_graph && !tsi_capture_pool_alloc(op, dev, a, nbytes, &pool, &slot, &b)) {
        STRUCT_FREE(CACHE_STORAGE, s);
        return NULL;
    }
    char msg[TS_OOM_MSG_LEN];
    if (!b) b = tsi_allocator_alloc(a, nbytes, msg, sizeof msg);
    if (!b) {
        STRUCT_FREE(CACHE_STORAGE, s);
        tsi_error_set(TS_ERR_OOM, "%s: out of memory on %s: %s", op, ts_device_str(dev), msg);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->device = dev;
    s->be = tsi_backend_for(dev.type);
    s->alloc = a;
    s->block = b;
    s->data = tsi_block_ptr(b);
    s->nbytes = nbytes;
    atomic_init(&s->version, 0);
    s->uid = next_storage_uid();
    atomic_init(&s->exported, false);
    atomic_init(&s->range_key, 0);
    atomic_init(&s->range_below, 0);
    s->pinned = false;
    s->release = NULL;
    s->release_ctx = NULL;
    s->capture_pool = pool;
    s->capture_slot = slot;
    return s;
}

static void storage_release(ts_storage *s);
void tsi_storage_retain(ts_storage *s) {
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}
void tsi_storage_release(ts_storage *s) { storage_release(s); }

static void storage_release(ts_storage *s) {
    if (!drop_ref(&s->refs)) return;
    if (s->release)
        s->release(s->release_ctx);  /* external memory: its owner frees it */
    else if (s->alloc && s->block) { /* NULL: borrowed external memory, or data freed */
        /* the block of a captured graph, or one released while a graph is captured on its
         * device, stays the graph's while it lives */
        bool kept =
            (s->capture_pool || tsi_capture_graph) &&
            tsi_capture_pool_take(s->capture_pool, s->capture_slot, s->device, s->alloc, s->block);
        if (!kept) tsi_allocator_release(s->alloc, s->block);
    }
    STRUCT_FREE(CACHE_STORAGE, s);
}

/* FSDP's resharding (src/dist/fsdp_unit.c): the storage object, and every view of it, stays;
 * only its memory goes back to the allocator and comes again. */
void tsi_storage_free_data(ts_storage *s) {
    if (!s->alloc || !s->block) return;
    tsi_allocator_release(s->alloc, s->block);
    s->block = NULL;
    s->data = NULL;
}

bool tsi_storage_alloc_data(const char *op, ts_storage *s) {
    if (s->block || !s->alloc) return true;
    char msg[TS_OOM_MSG_LEN];
    ts_block *b = tsi_allocator_alloc(s->alloc, s->nbytes, msg, sizeof msg);
    if (!b)
        return tsi_error_set(TS_ERR_OOM, "%s: out of memory on %s: %s", op,
                             ts_device_str(s->device), msg),
               false;
    s->block = b;
    s->data = tsi_block_ptr(b);
    return true;
}

/* ------------------------------------------------------------------ tensors */
static ts_tensor *tensor_alloc(const char *op, ts_storage *st, ts_dtype dt) {
    ts_tensor *t = STRUCT_ALLOC(CACHE_TENSOR, sizeof *t);
    if (!t) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->dtype = dt;
    t->requires_grad = false;
    t->storage = st;
    t->offset = 0;
    t->is_view = false;
    t->grad = NULL;
    t->grad_fn = NULL;
    t->output_nr = 0;
    t->hooks = NULL;
    t->view_base = NULL;
    t->view_version = 0;
    t->view_multi_op = NULL;
    t->view_multi_nr = 0;
    t->view_creation = TSI_VIEW_DEFAULT;
    t->view_writing = false;
    t->quant = NULL;
    tsi_live_tensors_add(st->device, 1);
    return t;
}

static _Thread_local int64_t tensor_cap; /* 0: no limit */

int64_t tsi_tensor_cap_set(int64_t max_elements) {
    int64_t prev = tensor_cap;
    tensor_cap = max_elements > 0 ? max_elements : 0;
    return prev;
}

bool tsi_tensor_cap_check(const char *op, int64_t numel) {
    if (!tensor_cap || numel <= tensor_cap) return true;
    return tsi_error_set(TS_ERR_OOM,
                         "%s: %lld elements would exceed the limit of %lld elements a tensor may "
                         "have here",
                         op, (long long)numel, (long long)tensor_cap),
           false;
}

ts_tensor *tsi_new(const char *op, ts_shape s, ts_dtype dt, ts_device dev) {
    tsi_init();
    dt = tsi_resolve_dtype(dt);
    if (!tsi_check_shape(op, s)) return NULL;
    if ((unsigned)dt >= TS_DTYPE_COUNT)
        return tsi_error_set(TS_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt), NULL;
    if (!TSI_DTYPE_GATE(op, dt, NULL)) return NULL;
    dev = tsi_resolve_device(dev);
    if (dev.type != TS_CPU && !tsi_check_device(op, dev)) return NULL;
    int64_t numel = tsi_numel(s);
    if (!tsi_tensor_cap_check(op, numel)) return NULL;
    size_t es = tsi_dtype_size(dt);
    if (numel > 0 && (uint64_t)numel > SIZE_MAX / es)
        return tsi_error_set(TS_ERR_OOM, "%s: %s of %s is too large", op, tsi_shape_str(s),
                             ts_dtype_name(dt)),
               NULL;
    ts_storage *st = storage_new(op, (size_t)numel * es, dev);
    if (!st) return NULL;
    ts_tensor *t = tensor_alloc(op, st, dt);
    if (!t) {
        storage_release(st);
        return NULL;
    }
    t->shape = s;
    tsi_contiguous_strides(&s, t->strides);
    return t;
}

ts_tensor *tsi_new_external(const char *op, ts_shape s, ts_dtype dt, ts_device dev, void *data,
                            size_t nbytes) {
    ts_storage *st = STRUCT_ALLOC(CACHE_STORAGE, sizeof *st);
    if (!st) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    atomic_init(&st->refs, 1);
    st->device = dev;
    st->be = tsi_backend_for(dev.type);
    st->alloc = NULL;
    st->block = NULL;
    st->data = data;
    st->nbytes = nbytes;
    atomic_init(&st->version, 0);
    st->uid = next_storage_uid();
    atomic_init(&st->exported, false);
    atomic_init(&st->range_key, 0);
    atomic_init(&st->range_below, 0);
    st->pinned = false;
    st->release = NULL;
    st->release_ctx = NULL;
    st->capture_pool = NULL;
    st->capture_slot = -1;
    ts_tensor *t = tensor_alloc(op, st, dt);
    if (!t) {
        STRUCT_FREE(CACHE_STORAGE, st);
        return NULL;
    }
    t->shape = s;
    tsi_contiguous_strides(&s, t->strides);
    return t;
}

/* A view of a quantized tensor (core/quant_gate.c): the same layout shares the storage and the
 * descriptor; another layout (per tensor only, as the gate lets through) is a contiguous copy of
 * the view's integers carrying the descriptor. */
static ts_tensor *quantized_view(ts_tensor *base, ts_tensor *v) {
    bool same = v->offset == base->offset && tsi_shape_equal(v->shape, base->shape);
    for (int i = 0; same && i < v->shape.ndim; i++) same = v->strides[i] == base->strides[i];
    if (!same && (base->quant->scheme != TS_PER_TENSOR_AFFINE || base->dtype == TS_QUINT4X2)) {
        ts_release(v); /* not reached through the public ops: their gate refuses these first */
        return tsi_error_set(TS_ERR_DTYPE,
                             "view: a %s tensor quantized per channel or group "
                             "cannot change its layout; take ts_dequantize first",
                             ts_dtype_name(base->dtype)),
               NULL;
    }
    ts_tensor *out = v;
    if (!same && (out = tsi_new("view", v->shape, v->dtype, v->storage->device)) &&
        tsi_numel(v->shape) > 0) {
        ts_kview dv = tsi_kview(out), sv = tsi_kview(v);
        dv.dtype = sv.dtype = base->dtype == TS_QINT8    ? TS_I8
                              : base->dtype == TS_QUINT8 ? TS_U8
                                                         : TS_I32;
        tsi_be(v)->copy(tsi_be(v), tsi_dev_index(v), &dv, &sv);
    }
    if (out != v) ts_release(v);
    if (!out) return NULL;
    atomic_fetch_add_explicit(&base->quant->refs, 1, memory_order_relaxed);
    out->quant = base->quant;
    return out;
}

ts_tensor *tsi_view_of(ts_tensor *base, ts_shape s, const int64_t *strides, int64_t offset) {
    atomic_fetch_add_explicit(&base->storage->refs, 1, memory_order_relaxed);
    ts_tensor *t = tensor_alloc("view", base->storage, base->dtype);
    if (!t) {
        storage_release(base->storage);
        return NULL;
    }
    t->shape = s;
    for (int i = 0; i < TS_MAX_DIMS; i++) t->strides[i] = i < s.ndim ? strides[i] : 0;
    t->offset = offset;
    t->is_view = true;
    return base->quant ? quantized_view(base, t) : t;
}

void tsi_tensor_alias_storage(ts_tensor *t, ts_tensor *base, int64_t offset) {
    atomic_fetch_add_explicit(&base->storage->refs, 1, memory_order_relaxed);
    ts_storage *prev = t->storage;
    t->storage = base->storage;
    t->offset = offset;
    tsi_contiguous_strides(&t->shape, t->strides);
    t->is_view = true;
    storage_release(prev);
}

ts_tensor *ts_retain(ts_tensor *t) {
    if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void ts_release(ts_tensor *t) {
    if (!t) return;
    if (!drop_ref(&t->refs)) return;
    ts_release(t->grad);
    if (t->hooks) tsi_grad_hooks_free(t->hooks); /* set by autograd before any tensor has hooks */
    if (t->grad_fn && tsi_grad_fn_release) tsi_grad_fn_release(t->grad_fn);
    ts_release(t->view_base); /* a root: its own view_base is NULL (one level deep) */
    tsi_quant_release(t->quant);
    tsi_live_tensors_add(t->storage->device, -1);
    storage_release(t->storage);
    STRUCT_FREE(CACHE_TENSOR, t);
}

/* ------------------------------------------------------------------ queries */
ts_device ts_device_of(ts_tensor *t) {
    if (!tsi_check_input("device_of", t, "tensor")) return (ts_device){TS_DEVICE_DEFAULT, 0};
    return t->storage->device;
}
ts_dtype ts_dtype_of(ts_tensor *t) {
    return tsi_check_input("dtype_of", t, "tensor") ? t->dtype : TS_DTYPE_DEFAULT;
}
ts_shape ts_shape_of(ts_tensor *t) {
    return tsi_check_input("shape_of", t, "tensor") ? t->shape : (ts_shape){0};
}
int ts_ndim(ts_tensor *t) { return tsi_check_input("ndim", t, "tensor") ? t->shape.ndim : -1; }
int64_t ts_size(ts_tensor *t, int dim) {
    if (!tsi_check_input("size", t, "tensor")) return -1;
    int d = tsi_wrap_dim("size", dim, t->shape.ndim);
    if (d < 0) return -1;
    return t->shape.ndim ? t->shape.dims[d] : 1;
}
int64_t ts_stride(ts_tensor *t, int dim) {
    if (!tsi_check_input("stride", t, "tensor")) return -1;
    int d = tsi_wrap_dim("stride", dim, t->shape.ndim);
    if (d < 0) return -1;
    return t->shape.ndim ? t->strides[d] : 1;
}
int64_t ts_numel(ts_tensor *t) {
    return tsi_check_input("numel", t, "tensor") ? tsi_numel(t->shape) : -1;
}
size_t ts_element_size(ts_tensor *t) {
    return tsi_check_input("element_size", t, "tensor") ? tsi_dtype_size(t->dtype) : 0;
}
size_t ts_nbytes(ts_tensor *t) {
    return tsi_check_input("nbytes", t, "tensor")
               ? (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype)
               : 0;
}
int64_t ts_storage_offset(ts_tensor *t) {
    return tsi_check_input("storage_offset", t, "tensor") ? t->offset : -1;
}
bool ts_is_contiguous(ts_tensor *t) {
    return tsi_check_input("is_contiguous", t, "tensor") && tsi_is_contiguous(t);
}
bool ts_is_pinned(ts_tensor *t) { return t && t->storage->pinned; }
bool ts_shares_storage(ts_tensor *a, ts_tensor *b) { return a && b && a->storage == b->storage; }

/* ------------------------------------------------------------------ values back to the host */
bool tsi_meta_refuse(const char *op, const ts_tensor *t) {
    if (t->storage->device.type != TS_META) return true;
    tsi_error_set(TS_ERR_DEVICE,
                  "%s: cannot read the data of a meta tensor (%s): it has none; make it on "
                  "another device, or give a module real tensors with to_empty() or "
                  "load_state_dict(assign=True)",
                  op, tsi_desc(t));
    return false;
}

/* Converts one element already on the host to double through the CPU copy kernel, which owns the
 * single definition of every dtype conversion. */
static double host_element_to_double(const void *src, ts_dtype dt) {
    double out = 0;
    ts_kview dv = {.data = (char *)&out, .dtype = TS_F64, .ndim = 0};
    ts_kview sv = {.data = (char *)src, .dtype = dt, .ndim = 0};
    const ts_backend *cpu = tsi_backend_for(TS_CPU);
    cpu->copy(cpu, 0, &dv, &sv);
    return out;
}

/* A read of a device tensor's bytes into pageable host memory is a device-to-host transfer in the
 * profiler's trace (ts_to's copies are recorded by transfer.c); a cpu tensor's is not. */
static int64_t d2h_start(const ts_tensor *t) {
    return tsi_device(t).type != TS_CPU && tsi_prof_active() ? tsi_prof_now() : -1;
}
static void d2h_done(const ts_tensor *t, size_t bytes, int64_t t0) {
    if (t0 >= 0 && tsi_prof_active())
        tsi_prof_transfer((ts_device){.type = TS_CPU}, tsi_device(t), bytes, false, t0);
}

double ts_item(ts_tensor *t) {
    if (!tsi_check_input("item", t, "tensor")) return NAN;
    int64_t n = tsi_numel(t->shape);
    if (n != 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "item: a Tensor with %lld elements cannot be converted to Scalar",
                             (long long)n),
               NAN;
    if (tsi_capturing_on(tsi_device(t))) return tsi_capture_refuse("item", "a host read"), NAN;
    if (!tsi_meta_refuse("item", t)) return NAN;
    if (!tsi_sync_point("item", tsi_device(t), TSI_CALLER)) return NAN;
    unsigned char buf[8];
    ts_kview v = tsi_kview(t);
    const int64_t t0 = d2h_start(t);
    tsi_be(t)->copy_d2h(tsi_be(t), tsi_dev_index(t), buf, v.data, tsi_dtype_size(t->dtype));
    d2h_done(t, tsi_dtype_size(t->dtype), t0);
    return host_element_to_double(buf, t->dtype);
}

ts_status ts_copy_to_host(ts_tensor *t, void *dst, size_t dst_bytes) {
    if (!tsi_check_input("copy_to_host", t, "tensor")) return ts_error();
    size_t need = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    if (!dst && need)
        return tsi_error_set(TS_ERR_ARG, "copy_to_host: destination is NULL for %s", tsi_desc(t));
    if (dst_bytes < need)
        return tsi_error_set(TS_ERR_ARG,
                             "copy_to_host: destination holds %zu bytes but %s needs %zu",
                             dst_bytes, tsi_desc(t), need);
    if (need == 0) return TS_OK;
    if (tsi_capturing_on(tsi_device(t)))
        return tsi_capture_refuse("copy_to_host", "a host read"), ts_error();
    if (!tsi_meta_refuse("copy_to_host", t)) return ts_error();
    if (!tsi_sync_point("copy_to_host", tsi_device(t), TSI_CALLER)) return ts_error();
    ts_tensor *c = tsi_contiguous("copy_to_host", t);
    if (!c) return ts_error();
    const int64_t t0 = d2h_start(c);
    tsi_be(c)->copy_d2h(tsi_be(c), tsi_dev_index(c), dst, tsi_kview(c).data, need);
    d2h_done(c, need, t0);
    ts_release(c);
    return TS_OK;
}

/* ------------------------------------------------------------------ autograd fields */
ts_status ts_set_requires_grad(ts_tensor *t, bool on) {
    if (!tsi_check_input("set_requires_grad", t, "tensor")) return ts_error();
    if (on && !tsi_is_float(t->dtype) && !tsi_is_complex(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "set_requires_grad: only tensors of floating point and complex dtype "
                             "can require gradients, got %s",
                             tsi_desc(t));
    if (!on && t->grad_fn)
        return tsi_error_set(TS_ERR_STATE,
                             "set_requires_grad: you can only change requires_grad flags of leaf "
                             "variables");
    t->requires_grad = on;
    return TS_OK;
}
bool ts_requires_grad(ts_tensor *t) {
    tsi_view_sync(t);
    return t && t->requires_grad;
}
ts_tensor *ts_grad(ts_tensor *t) { return t ? t->grad : NULL; }
bool ts_is_leaf(ts_tensor *t) {
    tsi_view_sync(t);
    return t && t->grad_fn == NULL;
}
uint64_t ts_version(ts_tensor *t) { return t ? (uint64_t)atomic_load(&t->storage->version) : 0; }
