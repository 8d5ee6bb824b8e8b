/* dlpack.c — DLPack exchange (ts_to_dlpack / ts_from_dlpack): tensors shared with other
 * frameworks without a copy, in both directions. */
#include <dlpack/dlpack.h>
#include <stdlib.h>

#include "core/internal.h"

/* DLPack 0.8 added kDLBool (6); 0.6, the header this builds against, lacks it, but PyTorch 2 and
 * NumPy export bool tensors with it, so the importer accepts the code by value. */
#define TSI_DL_BOOL 6

/* What a capsule made by ts_to_dlpack holds: the DLPack struct first (the consumer sees only
 * that), then the arrays its shape and strides point into, and a private view of the tensor,
 * which keeps the memory alive: a view rather than the tensor itself, so that the user releasing
 * the tensor, or moving it in place (ts_module_to swaps a tensor's storage), changes nothing. */
typedef struct export_ctx {
    DLManagedTensor m;
    int64_t shape[TS_MAX_DIMS];
    int64_t strides[TS_MAX_DIMS];
    ts_tensor *view;
    ts_dtype dtype; /* exact dtype: bool leaves as kDLUInt 8 and comes back as bool */
} export_ctx;

/* Called by the consumer, on any thread, once. ts_release is thread-safe and needs no scope. */
static void export_deleter(DLManagedTensor *m) {
    if (!m) return;
    export_ctx *c = m->manager_ctx;
    ts_release(c->view);
    free(c);
}

static bool dtype_to_dl(ts_dtype dt, DLDataType *out) {
    out->lanes = 1;
    out->bits = (uint8_t)(tsi_dtype_size(dt) * 8);
    switch (dt) {
    case TS_F32:
    case TS_F64:
    case TS_F16:
        out->code = kDLFloat;
        return true;
    case TS_BF16:
        out->code = kDLBfloat;
        return true;
    case TS_C64:
    case TS_C128:
        out->code = kDLComplex;
        return true;
    case TS_I64:
    case TS_I32:
    case TS_I16:
    case TS_I8:
        out->code = kDLInt;
        return true;
    case TS_U16:
    case TS_U32:
    case TS_U64:
        out->code = kDLUInt;
        return true;
    case TS_U8:
    case TS_BOOL: /* no kDLBool in DLPack 0.6: one byte, 0 or 1, which consumers read as uint8 */
        out->code = kDLUInt;
        out->bits = 8;
        return true;
    default:
        return false;
    }
}

struct DLManagedTensor *ts_to_dlpack(ts_tensor *t) {
    static const char op[] = "to_dlpack";
    tsi_init();
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (t->requires_grad)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: can't export tensors that require gradient, use ts_detach() "
                             "(%s)",
                             op, tsi_desc(t)),
               NULL;
    ts_device dev = tsi_device(t);
    DLDevice dl_dev;
    if (dev.type == TS_CPU)
        dl_dev = (DLDevice){kDLCPU, 0};
    else if (dev.type == TS_CUDA)
        dl_dev = (DLDevice){kDLCUDA, dev.index};
    else
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: %s has no DLPack device type (sim devices exist only inside "
                             "Tessera); copy the tensor to the cpu first with ts_to (%s)",
                             op, ts_device_str(dev), tsi_desc(t)),
               NULL;
    DLDataType dl_dt;
    if (!dtype_to_dl(t->dtype, &dl_dt))
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype %s has no DLPack type (%s)", op,
                             ts_dtype_name(t->dtype), tsi_desc(t)),
               NULL;

    export_ctx *c = malloc(sizeof *c);
    if (!c) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory (%s)", op, tsi_desc(t)), NULL;
    c->view = tsi_view_of(t, t->shape, t->strides, t->offset);
    if (!c->view) {
        free(c);
        return NULL;
    }
    c->dtype = t->dtype;
    atomic_store(&t->storage->exported, true); /* the consumer may write it: no cached copies */
    int nd = t->shape.ndim;
    for (int i = 0; i < nd; i++) {
        c->shape[i] = t->shape.dims[i];
        c->strides[i] = t->strides[i];
    }
    /* The consumer reads the memory as soon as it has the capsule, knowing nothing of Tessera's
     * queues (DLPack 0.6 in C has no stream hand-over): let the work writing it finish first. */
    if (dev.type != TS_CPU) tsi_be(t)->synchronize(tsi_be(t), dev.index);
    c->m = (DLManagedTensor){
        .dl_tensor =
            {
                .data = tsi_kview(t).data, /* the first element, byte_offset 0: PyTorch's way */
                .device = dl_dev,
                .ndim = nd,
                .dtype = dl_dt,
                .shape = c->shape,
                .strides = c->strides,
                .byte_offset = 0,
            },
        .manager_ctx = c,
        .deleter = export_deleter,
    };
    return &c->m;
}

/* ------------------------------------------------------------------ import */
/* The storage's release callback: the last Tessera reference to the memory is gone. */
static void import_release(void *ctx) {
    DLManagedTensor *m = ctx;
    /* kernels queued on the memory may still run: its owner may reuse it the moment it has it */
    if (m->dl_tensor.device.device_type == kDLCUDA) {
        const ts_backend *be = tsi_backend_for(TS_CUDA);
        if (be) be->synchronize(be, m->dl_tensor.device.device_id);
    }
    if (m->deleter) m->deleter(m);
}

static const char *dl_code_name(uint8_t code) {
    switch (code) {
    case kDLInt:
        return "int";
    case kDLUInt:
        return "uint";
    case kDLFloat:
        return "float";
    case kDLOpaqueHandle:
        return "opaque handle";
    case kDLBfloat:
        return "bfloat";
    case kDLComplex:
        return "complex";
    case TSI_DL_BOOL:
        return "bool";
    default:
        return "unknown";
    }
}

static bool dtype_from_dl(const DLManagedTensor *m, ts_dtype *out) {
    DLDataType d = m->dl_tensor.dtype;
    if (d.lanes != 1)
        return tsi_error_set(TS_ERR_DTYPE,
                             "from_dlpack: vector dtypes are not supported (DLPack dtype code %u "
                             "(%s), bits %u, lanes %u)",
                             d.code, dl_code_name(d.code), d.bits, d.lanes),
               false;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (d.code == kDLFloat)
        dt = d.bits == 32 ? TS_F32 : d.bits == 64 ? TS_F64 : d.bits == 16 ? TS_F16 : dt;
    else if (d.code == kDLBfloat)
        dt = d.bits == 16 ? TS_BF16 : dt;
    else if (d.code == kDLComplex)
        dt = d.bits == 64 ? TS_C64 : d.bits == 128 ? TS_C128 : dt;
    else if (d.code == kDLInt)
        dt = d.bits == 64   ? TS_I64
             : d.bits == 32 ? TS_I32
             : d.bits == 16 ? TS_I16
             : d.bits == 8  ? TS_I8
                            : dt;
    else if (d.code == kDLUInt)
        dt = d.bits == 8    ? TS_U8
             : d.bits == 16 ? TS_U16
             : d.bits == 32 ? TS_U32
             : d.bits == 64 ? TS_U64
                            : dt;
    else if (d.code == TSI_DL_BOOL)
        dt = d.bits == 8 ? TS_BOOL : dt;
    if (dt == TS_DTYPE_DEFAULT)
        return tsi_error_set(TS_ERR_DTYPE,
                             "from_dlpack: unsupported DLPack dtype %s%u (code %u, bits %u, lanes "
                             "1); Tessera takes float16/32/64, bfloat16, int8/16/32/64, "
                             "uint8/16/32/64 and bool",
                             dl_code_name(d.code), d.bits, d.code, d.bits),
               false;
    /* a capsule of ours remembers what kDLUInt 8 stood for */
    if (m->deleter == export_deleter && dt == TS_U8)
        dt = ((const export_ctx *)m->manager_ctx)->dtype;
    *out = dt;
    return true;
}

static bool device_from_dl(DLDevice d, ts_device *out) {
    if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost) {
        *out = ts_cpu(); /* pinned host memory is host memory: plain cpu, not Tessera's pinned */
        return true;
    }
    if (d.device_type == kDLCUDA) {
        if (d.device_id < 0)
            return tsi_error_set(TS_ERR_DEVICE, "from_dlpack: invalid kDLCUDA device id %d",
                                 d.device_id),
                   false;
        *out = ts_cuda(d.device_id);
        return tsi_check_device("from_dlpack", *out);
    }
    static const char *const names[] = {
        [kDLOpenCL] = "kDLOpenCL", [kDLVulkan] = "kDLVulkan",
        [kDLMetal] = "kDLMetal",   [kDLVPI] = "kDLVPI",
        [kDLROCM] = "kDLROCM",     [kDLROCMHost] = "kDLROCMHost",
        [kDLExtDev] = "kDLExtDev", [kDLCUDAManaged] = "kDLCUDAManaged",
    };
    unsigned ty = (unsigned)d.device_type;
    const char *name = ty < sizeof names / sizeof *names && names[ty] ? names[ty] : "unknown";
    return tsi_error_set(TS_ERR_UNSUPPORTED,
                         "from_dlpack: DLPack device type %s (%u) is not supported; Tessera takes "
                         "kDLCPU, kDLCUDAHost and kDLCUDA",
                         name, ty),
           false;
}

ts_tensor *ts_from_dlpack(struct DLManagedTensor *m) {
    static const char op[] = "from_dlpack";
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: the DLManagedTensor is NULL", op), NULL;
    const DLTensor *d = &m->dl_tensor;
    if (d->ndim < 0 || d->ndim > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: the DLPack tensor has %d dimensions; at most %d are supported",
                             op, d->ndim, TS_MAX_DIMS),
               NULL;
    if (d->ndim > 0 && !d->shape)
        return tsi_error_set(TS_ERR_ARG, "%s: the DLPack tensor's shape is NULL (ndim %d)", op,
                             d->ndim),
               NULL;
    ts_shape s = ts_shape_make((size_t)d->ndim, d->shape);
    if (!tsi_check_shape(op, s)) return NULL;
    ts_dtype dt;
    ts_device dev;
    if (!dtype_from_dl(m, &dt) || !device_from_dl(d->device, &dev)) return NULL;
    int64_t numel = tsi_numel(s);
    size_t es = tsi_dtype_size(dt);
    char *data = d->data ? (char *)d->data + d->byte_offset : NULL;
    if (numel > 0 && !data)
        return tsi_error_set(TS_ERR_ARG, "%s: the DLPack tensor's data is NULL (%s %s)", op,
                             ts_dtype_name(dt), tsi_shape_str(s)),
               NULL;

    /* strides, and the bytes the elements span from the first one (the storage's size) */
    int64_t strides[TS_MAX_DIMS];
    tsi_contiguous_strides(&s, strides);
    for (int i = 0; i < s.ndim && d->strides; i++) {
        int64_t st = d->strides[i];
        if (s.dims[i] <= 1 || numel == 0) continue; /* the stride of such a dim is never used */
        if (st < 0)
            return tsi_error_set(TS_ERR_UNSUPPORTED,
                                 "%s: negative strides are not supported (stride %lld of dim %d, "
                                 "%s %s); make the tensor contiguous first",
                                 op, (long long)st, i, ts_dtype_name(dt), tsi_shape_str(s)),
                   NULL;
        strides[i] = st;
    }
    int64_t last = 0; /* index of the furthest element */
    bool overflow = false;
    for (int i = 0; i < s.ndim && numel > 0; i++) {
        int64_t span;
        overflow |= __builtin_mul_overflow(s.dims[i] - 1, strides[i], &span);
        overflow |= __builtin_add_overflow(last, span, &last);
    }
    size_t nbytes = 0;
    if (numel > 0) overflow |= __builtin_mul_overflow((uint64_t)last + 1, es, &nbytes);
    if (overflow)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the elements of %s %s span more than %zu bytes", op,
                             ts_dtype_name(dt), tsi_shape_str(s), SIZE_MAX),
               NULL;
    if (numel > 0 && (uintptr_t)data % es)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the first element's address %p (data + byte_offset %llu) is not "
                             "aligned to the %zu-byte %s elements",
                             op, (void *)data, (unsigned long long)d->byte_offset, es,
                             ts_dtype_name(dt)),
               NULL;

    ts_tensor *t = tsi_new_external(op, s, dt, dev, data, nbytes);
    if (!t) return NULL;
    for (int i = 0; i < s.ndim; i++) t->strides[i] = strides[i];
    /* Recording it in the scope is the last step that can fail; until the release callback is
     * set the storage only borrows the memory, so that on failure the caller still owns m. */
    t = tsi_own(t);
    if (!t) return NULL;
    t->storage->release = import_release;
    t->storage->release_ctx = m;
    return t;
}
