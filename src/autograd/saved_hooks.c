/* saved_hooks.c — saved-tensor hooks (tessera/saved_hooks.h): a thread-local stack of pack/unpack
 * pairs. checkpoint.c's saving asks here first; a tensor packed by hooks sits in its node's slot as
 * a placeholder frame holding a tsi_hooked (the hooks, the handle, the unpacked tensor). */
#include "autograd/saved_hooks.h"

#include <stdlib.h>

#include "tessera/saved_hooks.h"

typedef struct hooks {
    atomic_int refs; /* the stack's while pushed, and one per live handle */
    ts_saved_pack_fn pack;
    ts_saved_unpack_fn unpack;
    ts_saved_free_fn free_packed;
    void *ctx;
    void (*ctx_free)(void *ctx);
    const tsi_ckpt_frame *ckpt; /* the thread's innermost checkpoint when pushed */
    struct hooks *prev;
} hooks;

struct tsi_hooked {
    hooks *h;
    void *handle;
    ts_tensor *unpacked; /* retained, once unpacked */
    ts_shape shape;      /* the saved tensor's shape and dtype */
    ts_dtype dtype;
};

static _Thread_local hooks *top;

static void hooks_release(hooks *h) {
    if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1) return;
    if (h->ctx_free && h->ctx) h->ctx_free(h->ctx);
    free(h);
}

ts_status ts_saved_tensors_hooks_push(ts_saved_pack_fn pack, ts_saved_unpack_fn unpack,
                                      ts_saved_free_fn free_packed, void *ctx,
                                      void (*ctx_free)(void *ctx)) {
    tsi_init();
    if (!pack || !unpack) {
        if (ctx_free && ctx) ctx_free(ctx);
        return tsi_error_set(TS_ERR_ARG, "saved_tensors_hooks_push: pack and unpack are needed");
    }
    hooks *h = calloc(1, sizeof *h);
    if (!h) {
        if (ctx_free && ctx) ctx_free(ctx);
        return tsi_error_set(TS_ERR_OOM, "saved_tensors_hooks_push: out of host memory");
    }
    atomic_init(&h->refs, 1);
    h->pack = pack, h->unpack = unpack, h->free_packed = free_packed;
    h->ctx = ctx, h->ctx_free = ctx_free;
    h->ckpt = tsi_ckpt_innermost();
    h->prev = top;
    top = h;
    return TS_OK;
}

ts_status ts_saved_tensors_hooks_pop(void) {
    if (!top) return tsi_error_set(TS_ERR_STATE, "saved_tensors_hooks_pop: no hooks are pushed");
    hooks *h = top;
    top = h->prev;
    hooks_release(h);
    return TS_OK;
}

/* the innermost hooks' pack function and context (save_on_cpu.c checks its own) */
bool tsi_saved_hooks_top(ts_saved_pack_fn *pack, void **ctx) {
    if (!top) return false;
    *pack = top->pack, *ctx = top->ctx;
    return true;
}

bool tsi_saved_hooks_take(const tsi_ckpt_frame *ckpt) { return top && top->ckpt == ckpt; }

tsi_hooked *tsi_saved_hooks_pack(ts_tensor *t) {
    tsi_hooked *p = calloc(1, sizeof *p);
    if (!p) return NULL; /* saved as itself */
    hooks *h = top;
    /* the hooks' own ops record nothing (and so save nothing through the hooks again) */
    ts_no_grad_begin();
    ts_scope_begin();
    p->handle = h->pack(h->ctx, t);
    ts_scope_end();
    ts_no_grad_end();
    if (!p->handle) {
        if (ts_error() == TS_OK)
            tsi_error_set(TS_ERR_STATE, "saved_tensors_hooks: pack returned no handle");
        free(p);
        return NULL;
    }
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    p->h = h;
    p->shape = t->shape;
    p->dtype = t->dtype;
    return p;
}

ts_tensor *tsi_hooked_unpack(tsi_hooked *p) {
    if (p->unpacked) return p->unpacked;
    const ts_status before = ts_error();
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *t = p->h->unpack(p->h->ctx, p->handle);
    /* the backward's kernels read the saved tensor as the forward saved it: another shape is the
     * hooks' error; another dtype is cast back (PyTorch's ops would promote, or refuse) */
    if (t && !tsi_shape_equal(t->shape, p->shape)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "saved_tensors_hooks: unpack returned a tensor of shape %s for a saved "
                      "tensor of shape %s",
                      tsi_shape_str(t->shape), tsi_shape_str(p->shape));
        t = NULL;
    } else if (t && t->dtype != p->dtype) {
        t = ts_to_dtype(t, p->dtype);
    }
    p->unpacked = ts_retain(t);
    ts_scope_end();
    ts_no_grad_end();
    if (!t && ts_error() == before)
        tsi_error_set(TS_ERR_STATE, "saved_tensors_hooks: unpack returned no tensor");
    return p->unpacked;
}

void tsi_hooked_free(tsi_hooked *p) {
    if (!p) return;
    ts_release(p->unpacked);
    if (p->h->free_packed) p->h->free_packed(p->h->ctx, p->handle);
    hooks_release(p->h);
    free(p);
}
