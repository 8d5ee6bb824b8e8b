/* offload.c — optimizer offload (ZeRO-Offload): float32 master weights and the optimizer's state
 * on the host, the step run there by the CPU kernels, the weights copied back in each parameter's
 * dtype. On a sim device with a simulated link the copies overlap: each gradient's is queued on
 * the link's device-to-host engine as backward finishes it (the step waits for it), each weight's
 * on the host-to-device engine after the step (the first op that reads the parameter waits for it,
 * as for any copy in flight: core/error.c). On cuda each weight's copy is queued on the current
 * stream (tsi_copy_queue_h2d from the pinned master or stage: the kernels after it on that stream
 * read the new weight) and the host waits for it only before it next writes that master or stage
 * (the next step, or the gradient's copy into stage), and each gradient's copy to the pinned
 * hgrad or stage is queued on it too as backward finishes it (tsi_copy_queue_d2h), the step
 * waiting for that copy's event alone. The wrapped optimizer
 * is unchanged: during a step its parameters are the masters (so its state is made and kept on the
 * host, in float32), outside it the device parameters (so zero_grad, the grad scaler, clipping and
 * state dicts see the model). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/pinned.h"
#include "optim/optim_internal.h"
#include "tessera/distributed.h"
#include "tessera/optim_offload.h"

typedef struct off_param {
    ts_tensor *dev;        /* the model's parameter (retained) */
    ts_tensor *master;     /* float32 on the host, pinned */
    ts_tensor *hgrad;      /* float32 on the host, pinned: the gradient a step uses */
    ts_tensor *stage;      /* the parameter's dtype on the host (NULL for float32): casts */
    uint64_t uid, version; /* dev's storage and version when master last equalled it, */
    int64_t offset;        /* and its offset there (p.data = another view moves it) */
    int hook;              /* the grad-ready hook on dev (0: none) */
    /* hgrad holds the gradient at (g_uid, g_version, g_data), copied by the hook in backward (into
     * stage when g_cast: cast into hgrad at the step, once the copy has landed) */
    uint64_t g_uid, g_version;
    const void *g_data;
    bool g_ready, g_cast;
    /* cuda: the pinned-use tokens of the copies in flight (0: none): the weight's from master or
     * stage, waited for before the host writes either; the gradient's to hgrad or stage, waited
     * for before the host reads it */
    uintptr_t h2d, d2h;
} off_param;

struct tsi_optim_offload {
    off_param *p;
    int n, cap;
};

static size_t nbytes(const ts_tensor *t) {
    return (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
}

/* A host tensor of d's shape, pinned. */
static ts_tensor *host_like(const char *op, const ts_tensor *d, ts_dtype dt) {
    ts_tensor *t = tsi_new(op, d->shape, dt, ts_cpu());
    if (t && !tsi_storage_pin(op, t)) ts_release(t), t = NULL;
    return t;
}

static void host_cast(ts_tensor *dst, ts_tensor *src) {
    const ts_backend *cpu = tsi_be(dst);
    ts_kview kd = tsi_kview(dst), ks = tsi_kview(src);
    cpu->copy(cpu, 0, &kd, &ks);
}

/* A device tensor (contiguous) read into a float32 host tensor, through stage when it is not
 * float32. No allocation. */
static void read_to_host(ts_tensor *dst, ts_tensor *stage, ts_tensor *src) {
    const ts_backend *be = tsi_be(src);
    ts_tensor *to = stage ? stage : dst;
    be->copy_d2h(be, tsi_dev_index(src), tsi_kview(to).data, tsi_kview(src).data, nbytes(src));
    if (stage) host_cast(dst, stage);
}

/* cuda: the host waits for one copy's event (recycled: done already) */
static void wait_use(const off_param *q, uintptr_t *use) {
    tsi_copy_use_wait(tsi_device(q->dev), use);
}

/* The gradient's bytes to the host buffer `to` (stage or hgrad): queued on the simulated link's
 * device-to-host engine when there is one, on cuda on the current stream after the backward that
 * made it (q->d2h notes it; to's block is not reused before it ran) (the step waits for either),
 * else copied now. */
static void grad_to_host(off_param *q, ts_tensor *to, ts_tensor *g) {
    /* an earlier pass's cuda copy into the same buffer, maybe elsewhere */
    if (tsi_device(g).type == TS_CUDA) wait_use(q, &q->d2h);
    if (tsi_copy_queue_d2h(to, g, &q->d2h) != TSI_COPY_NOT_QUEUED) return; /* or TS_ERR_CUDA */
    const ts_backend *be = tsi_be(g);
    be->copy_d2h(be, tsi_dev_index(g), tsi_kview(to).data, tsi_kview(g).data, nbytes(g));
}

/* The updated weight (src: master or stage) to the parameter: queued on the simulated link's
 * host-to-device engine when there is one (whatever reads the parameter next waits for it), on
 * cuda on the current stream (q->h2d notes it: the host waits before it rewrites src; src's block
 * is not reused before the copy ran either), else copied now. */
static void weight_to_device(off_param *q, ts_tensor *src) {
    ts_tensor *dev = q->dev;
    uintptr_t use = 0;
    const tsi_copy_queue r = tsi_copy_queue_h2d(dev, src, &use);
    if (tsi_device(dev).type == TS_CUDA && r == TSI_COPY_QUEUED) q->h2d = use;
    if (r != TSI_COPY_NOT_QUEUED) return; /* or TS_ERR_CUDA is set */
    const ts_backend *be = tsi_be(dev);
    be->copy_h2d(be, tsi_dev_index(dev), tsi_kview(dev).data, tsi_kview(src).data, nbytes(src));
}

/* Before the host reads or rewrites q's buffers: the gradient's queued copy has landed and the
 * last step's weight copy has left (no-ops without a simulated link or a cuda copy in flight). */
static void wait_copies(off_param *q) {
    wait_use(q, &q->h2d);
    wait_use(q, &q->d2h);
    tsi_copy_link_wait(tsi_device(q->dev), q->stage ? q->stage : q->hgrad);
    tsi_copy_link_wait(tsi_device(q->dev), q->dev);
}

static void note_synced(off_param *q) {
    q->uid = q->dev->storage->uid;
    q->version = atomic_load(&q->dev->storage->version);
    q->offset = q->dev->offset;
}

/* The parameter's host buffers (masters, gradient, stage); dtype, contiguity and device checked. */
static bool check_param(const char *op, ts_tensor *d, int i) {
    if (tsi_device(d).type == TS_CPU)
        return tsi_error_set(TS_ERR_DEVICE,
                             "%s: parameter %d (%s) is already on the cpu: nothing to offload", op,
                             i, tsi_desc(d)),
               false;
    if (!tsi_is_contiguous(d))
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: parameter %d (%s) is not contiguous", op, i,
                             tsi_desc(d)),
               false;
    if (!tsi_is_float(d->dtype) || d->dtype == TS_F64)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: parameter %d (%s) must be float32, bfloat16 or float16", op, i,
                             tsi_desc(d)),
               false;
    return true;
}

/* The gradient's identity: its storage (never reused), contents version and address. */
static bool grad_copied(const off_param *q, ts_tensor *g) {
    return q->g_ready && g->storage->uid == q->g_uid &&
           atomic_load(&g->storage->version) == q->g_version && tsi_kview(g).data == q->g_data;
}

static bool same_shape(const ts_tensor *a, const ts_tensor *b) {
    return a->shape.ndim == b->shape.ndim &&
           memcmp(a->shape.dims, b->shape.dims, sizeof(int64_t) * (size_t)a->shape.ndim) == 0;
}

/* A gradient that matches its parameter and the host buffers it is copied into, contiguous (the
 * parameter may have taken another shape since: ts_tensor_set_data). */
static bool grad_fits(const off_param *q, ts_tensor *g) {
    ts_tensor *d = q->dev;
    return g && tsi_device_eq(tsi_device(g), tsi_device(d)) && g->dtype == d->dtype &&
           g->dtype == (q->stage ? q->stage->dtype : TS_F32) && tsi_is_contiguous(g) &&
           same_shape(g, d) && same_shape(g, q->master);
}

/* The grad-ready hook (ts_register_post_accumulate_grad_hook): the gradient goes to the host as
 * soon as backward has finished it, instead of at the step. Only a shortcut: the step copies
 * again unless the gradient is still the one copied (same storage, version and address), and
 * copies what the hook skipped (a strided or mismatched gradient, a failed pass). */
static void grad_ready(ts_tensor *leaf, void *ctx) {
    ts_optim *opt = ctx;
    tsi_optim_offload *o = opt->offload; /* set: the hooks are added after it is made and removed
                                          * before it is freed (param_init, param_drop) */
    if (opt->offload_busy) return;
    for (int i = 0; i < o->n; i++) {
        off_param *q = &o->p[i];
        if (q->dev != leaf) continue;
        q->g_ready = false;
        ts_tensor *g = leaf->grad;
        if (ts_error() || !grad_fits(q, g)) return;
        if (q->stage) wait_use(q, &q->h2d); /* the last weight copy has read stage (cuda) */
        grad_to_host(q, q->stage ? q->stage : q->hgrad, g); /* the cast waits for the step */
        if (ts_error()) return;                             /* a failed copy (cuda) */
        q->g_uid = g->storage->uid;
        q->g_version = atomic_load(&g->storage->version);
        q->g_data = tsi_kview(g).data;
        q->g_cast = q->stage != NULL;
        q->g_ready = true;
        return;
    }
}

static bool param_init(const char *op, ts_optim *opt, off_param *q, ts_tensor *d, int i) {
    memset(q, 0, sizeof *q);
    if (!check_param(op, d, i)) return false;
    q->master = host_like(op, d, TS_F32);
    q->hgrad = q->master ? host_like(op, d, TS_F32) : NULL;
    q->stage = q->hgrad && d->dtype != TS_F32 ? host_like(op, d, d->dtype) : NULL;
    if (!q->hgrad || (d->dtype != TS_F32 && !q->stage)) {
        ts_release(q->master), ts_release(q->hgrad), ts_release(q->stage);
        memset(q, 0, sizeof *q);
        return false;
    }
    q->hook = ts_register_post_accumulate_grad_hook(d, grad_ready, opt);
    if (!q->hook) {
        ts_release(q->master), ts_release(q->hgrad), ts_release(q->stage);
        memset(q, 0, sizeof *q);
        return false;
    }
    q->dev = ts_retain(d);
    read_to_host(q->master, q->stage, d);
    note_synced(q);
    return true;
}

static void param_drop(off_param *q) {
    if (q->hook) ts_remove_grad_hook(q->dev, q->hook);
    ts_release(q->dev), ts_release(q->master), ts_release(q->hgrad), ts_release(q->stage);
}

void tsi_optim_offload_free(ts_optim *opt) {
    tsi_optim_offload *o = opt->offload;
    if (!o) return;
    for (int i = 0; i < o->n; i++) param_drop(&o->p[i]);
    free(o->p);
    free(o);
    opt->offload = NULL;
}

/* Masters for the parameters added since (a new group); all or none. */
static bool ensure(const char *op, ts_optim *opt) {
    tsi_optim_offload *o = opt->offload;
    if (o->n == opt->n_params) return true;
    if (opt->n_params > o->cap) {
        off_param *np = realloc(o->p, (size_t)opt->n_params * sizeof *np);
        if (!np) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
        o->p = np;
        o->cap = opt->n_params;
    }
    int i = o->n;
    for (; i < opt->n_params; i++)
        if (!param_init(op, opt, &o->p[i], opt->params[i].p, i)) break;
    if (i == opt->n_params) {
        o->n = i;
        return true;
    }
    while (i-- > o->n) param_drop(&o->p[i]);
    return false;
}

bool tsi_optim_offload_enter(const char *op, ts_optim *opt) {
    if (!ensure(op, opt)) return false;
    for (int i = 0; i < opt->n_params; i++) opt->params[i].p = opt->offload->p[i].master;
    return true;
}

void tsi_optim_offload_leave(ts_optim *opt) {
    for (int i = 0; i < opt->n_params; i++) opt->params[i].p = opt->offload->p[i].dev;
}

ts_status ts_optim_offload(ts_optim *opt) {
    static const char op[] = "optim_offload";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (opt->offload) return TS_OK;
    if (opt->capturable)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the optimizer's steps were captured (its scalars live on the "
                             "device): a capturable optimizer cannot be offloaded",
                             op);
    if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params, "offloading an optimizer"))
        return ts_error();
    for (int i = 0; i < opt->n_params; i++)
        if (!check_param(op, opt->params[i].p, i)) return ts_error();
    opt->offload = calloc(1, sizeof *opt->offload);
    if (!opt->offload) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    if (!ensure(op, opt)) {
        tsi_optim_offload_free(opt);
        return ts_error();
    }
    return TS_OK;
}

bool ts_optim_is_offloaded(ts_optim *opt) { return opt && opt->offload; }

ts_tensor *ts_optim_offload_master(ts_optim *opt, int i) {
    static const char op[] = "optim_offload_master";
    if (!opt || !opt->offload)
        return tsi_error_set(TS_ERR_ARG, "%s: the optimizer is not offloaded", op), NULL;
    if (i < 0 || i >= opt->offload->n)
        return tsi_error_set(TS_ERR_ARG, "%s: parameter %d out of range (%d offloaded)", op, i,
                             opt->offload->n),
               NULL;
    return opt->offload->p[i].master;
}

/* Checks parameter i's gradient against its parameter and the masters' buffers. */
static bool check_grad(const char *op, const off_param *q, int i) {
    ts_tensor *d = q->dev, *g = d->grad;
    /* a gradient set before the parameter took another shape (ts_tensor_set_data) */
    if (!tsi_device_eq(tsi_device(g), tsi_device(d)) || g->dtype != d->dtype || !same_shape(g, d))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: the gradient of parameter %d (%s) does not match it (%s)", op, i,
                             tsi_desc(g), tsi_desc(d)),
               false;
    if (d->dtype != (q->stage ? q->stage->dtype : TS_F32))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: parameter %d changed dtype since it was offloaded (now %s)", op,
                             i, tsi_desc(d)),
               false;
    if (!same_shape(d, q->master)) /* the host buffers (and the copies' sizes) are the old shape */
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: parameter %d changed shape since it was offloaded (now %s, "
                             "offloaded as %s)",
                             op, i, tsi_desc(d), tsi_shape_str(q->master->shape)),
               false;
    return check_param(op, d, i);
}

/* The offloaded step: gradients to the host, the wrapped step over the masters, weights back.
 * Everything that can fail happens before the first parameter changes. */
ts_status tsi_optim_offload_step(const char *op, ts_optim *opt, const ts_kview *skip_if) {
    if (skip_if)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: an offloaded optimizer's step cannot be captured (it copies "
                             "to and from the host)",
                             op);
    if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params,
                                   "an offloaded optimizer step (host copies)"))
        return ts_error();
    if (!ensure(op, opt)) return ts_error();
    tsi_optim_offload *o = opt->offload;
    for (int i = 0; i < o->n; i++)
        if (o->p[i].dev->grad && !check_grad(op, &o->p[i], i)) return ts_error();
    /* gradients (contiguous on the device first) and stale masters to the host */
    for (int i = 0; i < o->n; i++) {
        off_param *q = &o->p[i];
        ts_tensor *g = q->dev->grad;
        if (!g) continue;
        wait_copies(q);
        if (grad_copied(q, g) && q->g_cast) { /* landed in stage: before anything else uses it */
            host_cast(q->hgrad, q->stage);
            q->g_cast = false;
        }
        if (!grad_copied(q, g)) {
            ts_tensor *gc = tsi_contiguous(op, g);
            if (!gc) return ts_error();
            read_to_host(q->hgrad, q->stage, gc);
            ts_release(gc);
        }
        if (q->dev->storage->uid != q->uid || q->dev->offset != q->offset ||
            atomic_load(&q->dev->storage->version) != q->version) {
            read_to_host(q->master, q->stage, q->dev); /* changed from outside: re-read */
            note_synced(q);
        }
    }
    if (ts_error()) return ts_error(); /* a failed copy (cuda): nothing changed */
    for (int i = 0; i < o->n; i++)
        o->p[i].master->grad = o->p[i].dev->grad ? ts_retain(o->p[i].hgrad) : NULL;
    tsi_optim_offload_enter(op, opt); /* ensured above: cannot fail */
    opt->offload_busy = true;
    ts_status r = tsi_optim_step_unless(opt, NULL);
    opt->offload_busy = false;
    tsi_optim_offload_leave(opt);
    for (int i = 0; i < o->n; i++) {
        ts_release(o->p[i].master->grad);
        o->p[i].master->grad = NULL;
    }
    if (r) return r;
    /* the updated masters back, in each parameter's dtype */
    for (int i = 0; i < o->n; i++) {
        off_param *q = &o->p[i];
        if (!q->dev->grad) continue;
        ts_tensor *src = q->master;
        if (q->stage) host_cast(q->stage, q->master), src = q->stage;
        q->g_cast = false; /* stage holds the weight now */
        weight_to_device(q, src);
        tsi_bump_version(q->dev);
        note_synced(q);
    }
    return ts_error(); /* TS_OK unless a copy back failed (cuda): the masters are ahead then */
}
