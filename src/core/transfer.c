/* transfer.c — copies: between devices (ts_to, and ts_to_async's pinned path), between dtypes,
 * to contiguous memory, in place. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/sim/sim_link.h"
#include "core/internal.h"
#include "core/pinned.h"
#include "core/profiler_hooks.h"
#include "core/quant_desc.h"
#include "core/sync_debug.h"

ts_tensor *tsi_contiguous(const char *op, ts_tensor *t) {
    if (tsi_is_contiguous(t)) return ts_retain(t);
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, tsi_device(t));
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    if (t->quant) { /* the same shape: the same parameters (a per-channel axis included) */
        atomic_fetch_add_explicit(&t->quant->refs, 1, memory_order_relaxed);
        out->quant = t->quant;
    }
    return out;
}

ts_tensor *tsi_cast(const char *op, ts_tensor *t, ts_dtype dt) {
    dt = tsi_resolve_dtype(dt);
    if (t->dtype == dt) return ts_retain(t);
    if (!TSI_DTYPE_GATE(op, t->dtype, t)) return NULL; /* complex -> real drops a part */
    if (tsi_is_complex(t->dtype) && dt == TS_BOOL) /* a nonzero test of both parts: not a copy */
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: casting complex to bool is not supported; compare with 0 "
                             "instead (input: %s)",
                             op, tsi_desc(t)),
               NULL;
    ts_tensor *out = tsi_new_like(op, t->shape, dt, tsi_device(t), t);
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    return out;
}

/* Raw bytes from one device's memory to another's, staging through the host when neither side
 * is the cpu and the backends differ. */
static bool move_bytes(const char *op, ts_device dd, void *dst, ts_device sd, const void *src,
                       size_t n) {
    const ts_backend *dbe = tsi_capture_redirect(tsi_backend_for(dd.type), dd),
                     *sbe = tsi_capture_redirect(tsi_backend_for(sd.type), sd);
    if (sd.type == TS_CPU) {
        dbe->copy_h2d(dbe, dd.index, dst, src, n);
    } else if (dd.type == TS_CPU) {
        sbe->copy_d2h(sbe, sd.index, dst, src, n);
    } else if (sd.type == dd.type) {
        dbe->copy_d2d(dbe, dd.index, dst, sd.index, src, n);
    } else {
        void *stage = malloc(n ? n : 1);
        if (!stage)
            return tsi_error_set(TS_ERR_OOM, "%s: out of host memory staging a copy", op), false;
        sbe->copy_d2h(sbe, sd.index, stage, src, n);
        dbe->copy_h2d(dbe, dd.index, dst, stage, n);
        free(stage);
    }
    return true;
}

ts_tensor *tsi_to_device(const char *op, ts_tensor *t, ts_device d) {
    d = tsi_resolve_device(d);
    if (tsi_device_eq(d, tsi_device(t))) return ts_retain(t);
    if (!tsi_check_device(op, d)) return NULL;
    /* a meta tensor has no data to copy out (a copy into the meta device copies none) */
    if (d.type != TS_META && tsi_device(t).type == TS_META)
        return tsi_error_set(TS_ERR_DEVICE,
                             "%s: cannot copy out of meta tensor %s; it has no data. To move a "
                             "module from meta to another device, use Module.to_empty() instead "
                             "of Module.to()",
                             op, tsi_desc(t)),
               NULL;
    /* int4 packs two values a byte: its bytes are not numel * size (quint4x2 is not moved) */
    if (t->dtype == TS_QUINT4X2)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: packed int4 tensors (%s) do not move between devices; move the "
                             "float weight and quantize it there",
                             op, tsi_desc(t)),
               NULL;
    /* a copy into pageable host memory waits for the device */
    if (d.type == TS_CPU && !tsi_sync_point(op, tsi_device(t), TSI_CALLER)) return NULL;
    ts_tensor *src = tsi_contiguous(op, t);
    if (!src) return NULL;
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, d);
    if (out && t->quant) { /* a quantized tensor keeps its parameters (host memory) */
        atomic_fetch_add_explicit(&t->quant->refs, 1, memory_order_relaxed);
        out->quant = t->quant;
    }
    if (out) {
        size_t n = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
        bool prof = atomic_load_explicit(&tsi_placement_on, memory_order_relaxed);
        int64_t t0 = prof ? tsi_prof_now() : 0;
        if (n && !move_bytes(op, d, tsi_kview(out).data, tsi_device(src), tsi_kview(src).data, n)) {
            ts_release(out);
            out = NULL;
        } else {
            if (prof && tsi_prof_active())
                tsi_prof_transfer(d, tsi_device(src), n,
                                  src->storage->pinned || out->storage->pinned, t0);
            /* a peer copy runs on the source device's current stream and writes the destination,
             * whose memory otherwise knows only streams of its own device */
            if (n && d.type == TS_CUDA && tsi_device(src).type == TS_CUDA)
                tsi_storage_record_stream(out, tsc_current_stream_id(tsi_dev_index(src)));
        }
    }
    ts_release(src);
    return out;
}

ts_tensor *tsi_private_copy(const char *op, ts_tensor *t, ts_device dev, ts_dtype dt) {
    ts_tensor *a = tsi_to_device(op, t, dev);
    ts_tensor *b = a ? tsi_cast(op, a, dt) : NULL;
    ts_release(a);
    if (!b || (b != t && tsi_is_contiguous(b))) return b; /* already a private copy */
    ts_tensor *c = tsi_new(op, b->shape, dt, tsi_device(b));
    if (c && tsi_numel(c->shape) > 0) {
        ts_kview kc = tsi_kview(c), kb = tsi_kview(b);
        tsi_be(c)->copy(tsi_be(c), tsi_dev_index(c), &kc, &kb);
    }
    ts_release(b);
    return c;
}

/* ts_to_async to a sim device with a simulated link: queued on its host-to-device engine */
static ts_tensor *sim_link_async(const char *op, ts_tensor *t, ts_device d) {
    if (!tsi_check_device(op, d)) return NULL;
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, d);
    if (!out) return NULL;
    size_t n = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    bool prof = atomic_load_explicit(&tsi_placement_on, memory_order_relaxed);
    int64_t t0 = prof ? tsi_prof_now() : 0;
    if (!tsi_sim_link_copy_async(d.index, out->storage->uid, tsi_kview(out).data, tsi_kview(t).data,
                                 n))
        move_bytes(op, d, tsi_kview(out).data, tsi_device(t), tsi_kview(t).data, n);
    if (prof && tsi_prof_active()) tsi_prof_transfer(d, tsi_device(t), n, true, t0);
    return out;
}

ts_tensor *tsi_to_device_async(const char *op, ts_tensor *t, ts_device d) {
    d = tsi_resolve_device(d);
    /* only a dense pinned source can be read by the copy engine while the host moves on */
    bool async =
        (d.type == TS_CUDA ||
         (d.type == TS_SIM && atomic_load_explicit(&tsi_sim_link_on, memory_order_relaxed))) &&
        tsi_device(t).type == TS_CPU && t->storage->pinned && tsi_is_contiguous(t) &&
        tsi_numel(t->shape) > 0 && !t->quant; /* quantized: the synchronous copy carries the
                                                  parameters */
    if (!async) return tsi_to_device(op, t, d);
    if (d.type == TS_SIM) return sim_link_async(op, t, d);
    if (!tsi_check_device(op, d)) return NULL;
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, d);
    if (!out) return NULL;
    size_t n = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    bool prof = atomic_load_explicit(&tsi_placement_on, memory_order_relaxed);
    int64_t t0 = prof ? tsi_prof_now() : 0;
    if (!tsc_copy_h2d_async(d.index, tsi_kview(out).data, tsi_kview(t).data, n)) {
        ts_release(out);
        return NULL;
    }
    /* queued, not finished: the span is the host's time to enqueue it */
    if (prof && tsi_prof_active()) tsi_prof_transfer(d, tsi_device(t), n, true, t0);
    /* whoever gets the pinned block next waits for this copy's event (not for the stream) */
    tsi_storage_record_stream(t, tsc_pinned_use_record(d.index));
    return out;
}

/* tsi_copy_queue_h2d / _d2h: dev is the device tensor, host the pinned cpu one */
static tsi_copy_queue copy_queue(ts_tensor *dev, ts_tensor *host, bool h2d, uintptr_t *use) {
    if (use) *use = 0;
    if (!host->storage->pinned) return TSI_COPY_NOT_QUEUED;
    const int idx = tsi_dev_index(dev);
    const size_t n = (size_t)tsi_numel(dev->shape) * tsi_dtype_size(dev->dtype);
    void *dp = tsi_kview(dev).data, *hp = tsi_kview(host).data;
    switch (tsi_device(dev).type) {
    case TS_SIM:
        if (h2d ? tsi_sim_link_copy_async(idx, dev->storage->uid, dp, hp, n)
                : tsi_sim_link_copy_async_d2h(idx, host->storage->uid, hp, dp, n))
            return TSI_COPY_QUEUED;
        return TSI_COPY_NOT_QUEUED; /* no link */
    case TS_CUDA: {
        if (!(h2d ? tsc_copy_h2d_async(idx, dp, hp, n) : tsc_copy_d2h_async(idx, hp, dp, n)))
            return TSI_COPY_FAILED;                      /* TS_ERR_CUDA is set */
        const uintptr_t ev = tsc_pinned_use_record(idx); /* 0: it has waited already */
        if (ev) tsi_storage_record_stream(host, ev);
        if (use) *use = ev;
        return TSI_COPY_QUEUED;
    }
    default:
        return TSI_COPY_NOT_QUEUED;
    }
}

tsi_copy_queue tsi_copy_queue_h2d(ts_tensor *dev, ts_tensor *host, uintptr_t *use) {
    return copy_queue(dev, host, true, use);
}

tsi_copy_queue tsi_copy_queue_d2h(ts_tensor *host, ts_tensor *dev, uintptr_t *use) {
    return copy_queue(dev, host, false, use);
}

void tsi_copy_use_wait(ts_device dev, uintptr_t *use) {
    if (!*use) return;
    const ts_alloc_hooks *h = tsc_pinned_alloc_hooks();
    if (h && h->stream_wait) h->stream_wait(dev.index, *use, 0);
    *use = 0;
}

void tsi_copy_link_wait(ts_device dev, ts_tensor *t) { TSI_SIM_LINK_USE(dev, t->storage->uid); }
