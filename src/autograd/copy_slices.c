/* copy_slices.c — in-place writes through views (copy_slices.h): PyTorch's CopySlices node on the
 * base, and the views' grad_fn derived from the base's history (AsStridedBackward0). Every step
 * is a public op (zeros, as_strided, copy_, clone), so it runs on any device and, under
 * create_graph, records the gradient's own graph. */
#include "autograd/copy_slices.h"

#include <stdlib.h>

#include "core/grad_mode.h"

/* a tensor's place in its storage */
typedef struct geom {
    ts_shape shape;
    int64_t strides[TS_MAX_DIMS];
    int64_t offset;
} geom;

static geom geom_of(const ts_tensor *t) {
    geom g = {.shape = t->shape, .offset = t->offset};
    for (int d = 0; d < TS_MAX_DIMS; d++) g.strides[d] = d < t->shape.ndim ? t->strides[d] : 0;
    return g;
}

/* one past the last storage element g reaches (g.offset when empty) */
static int64_t geom_end(const geom *g) {
    int64_t last = g->offset;
    for (int d = 0; d < g->shape.ndim; d++) {
        if (g->shape.dims[d] == 0) return g->offset;
        last += (g->shape.dims[d] - 1) * g->strides[d];
    }
    return last + 1;
}

/* no storage element reached twice (dims of size > 1 sorted by stride nest without overlap) */
static bool non_overlapping(const geom *g) {
    int64_t sz[TS_MAX_DIMS], st[TS_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < g->shape.ndim; d++) {
        if (g->shape.dims[d] == 0) return true;
        if (g->shape.dims[d] == 1) continue;
        int k = n++;
        for (; k > 0 && st[k - 1] > g->strides[d]; k--) sz[k] = sz[k - 1], st[k] = st[k - 1];
        sz[k] = g->shape.dims[d], st[k] = g->strides[d];
    }
    for (int k = 0; k < n; k++)
        if (st[k] < 1 || (k > 0 && st[k] < st[k - 1] * sz[k - 1])) return false;
    return true;
}

/* A zero buffer covering both geometries (first element at *lo), like g's dtype and device. */
static ts_tensor *span_buffer(const geom *a, const geom *b, const ts_tensor *like, int64_t *lo) {
    *lo = a->offset < b->offset ? a->offset : b->offset;
    int64_t ea = geom_end(a), eb = geom_end(b), hi = ea > eb ? ea : eb;
    return ts_zeros(TS_SHAPE(hi - *lo),
                    (ts_opts){.dtype = like->dtype, .device = tsi_device(like)});
}

static ts_tensor *place(ts_tensor *flat, const geom *g, int64_t lo) {
    return ts_as_strided(flat, g->shape, g->strides, g->offset - lo);
}

/* ------------------------------------------------------------------ the view of the base */
typedef struct view_ctx {
    geom base, view;
} view_ctx;

/* the view's gradient put at its elements of a zero gradient of the base (both non-overlapping) */
static void view_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const view_ctx *c = n->ctx;
    if (!go[0] || !c) return;
    int64_t lo;
    ts_tensor *flat = span_buffer(&c->base, &c->view, go[0], &lo);
    ts_tensor *region = flat ? place(flat, &c->view, lo) : NULL;
    if (!region || !ts_copy_(region, go[0])) return;
    gi[0] = place(flat, &c->base, lo);
}

/* The grad_fn of `view` as a view of base's current history (a reference), NULL + error. Views
 * that reach an element twice (expanded) take as_strided's own node, which sums. */
static ts_node *view_node(ts_tensor *base, ts_tensor *view) {
    view_ctx c = {geom_of(base), geom_of(view)};
    if (non_overlapping(&c.base) && non_overlapping(&c.view)) {
        ts_node *n =
            tsi_node_new("AsStridedBackward0", "as_strided", view_backward, &base, 1, 1, 0);
        view_ctx *h = n ? malloc(sizeof *h) : NULL;
        if (!h) {
            if (n) tsi_node_release(n), tsi_error_set(TS_ERR_OOM, "as_strided: out of host memory");
            return NULL;
        }
        *h = c;
        n->ctx = h, n->ctx_free = free;
        n->flags |= TSI_NODE_TWICE; /* zeros, as_strided and copy_ of the gradient */
        return n;
    }
    int depth = tsi_grad_depth_swap(0);
    ts_scope_begin();
    ts_tensor *a = ts_as_strided(base, c.view.shape, c.view.strides, c.view.offset);
    ts_node *n = a ? tsi_node_retain(a->grad_fn) : NULL;
    ts_scope_end();
    tsi_grad_depth_swap(depth);
    return n;
}

static void set_grad_fn(ts_tensor *t, ts_node *n) {
    ts_node *old = t->grad_fn;
    t->grad_fn = n; /* the caller's reference */
    t->output_nr = 0;
    t->requires_grad = true;
    if (old) tsi_node_release(old);
}

/* tsi_view_sync's work: the storage changed since the view's grad_fn was derived */
static void view_refresh(ts_tensor *t) {
    ts_tensor *base = tsi_view_base(t);
    const uint64_t now = atomic_load(&t->storage->version);
    /* a leaf the user made of the view keeps being one; a no_grad view gets no history */
    if (base && base->requires_grad && t->view_creation != TSI_VIEW_NO_GRAD &&
        !(t->requires_grad && !t->grad_fn)) {
        ts_node *n = view_node(base, t);
        if (!n) return; /* the error is pending; tried again at the next use */
        set_grad_fn(t, n);
    }
    t->view_version = now;
}

void tsi_view_attach(ts_tensor *src, ts_tensor *view) {
    if (!src || !view || view == src || view->storage != src->storage) return;
    ts_tensor *base = tsi_view_base(src) ? src->view_base : src;
    uint8_t creation = tsi_grad_mode() ? TSI_VIEW_DEFAULT : TSI_VIEW_NO_GRAD;
    if (base != src && creation == TSI_VIEW_DEFAULT && src->view_creation != TSI_VIEW_DEFAULT) {
        creation = src->view_creation; /* a view of a no_grad or multi-output view is one too */
        view->view_multi_op = src->view_multi_op;
        view->view_multi_nr = src->view_multi_nr;
    }
    ts_release(view->view_base);
    view->view_base = ts_retain(base);
    view->view_version = atomic_load(&view->storage->version);
    view->view_creation = creation;
    if (atomic_load_explicit(&tsi_view_refresh_fn, memory_order_relaxed) != view_refresh)
        atomic_store_explicit(&tsi_view_refresh_fn, view_refresh, memory_order_relaxed);
}

void tsi_view_mark_multi(ts_tensor *view, const char *op, int nr) {
    if (!view || !view->view_base || view->view_creation == TSI_VIEW_NO_GRAD) return;
    view->view_creation = TSI_VIEW_MULTI;
    view->view_multi_op = op;
    view->view_multi_nr = nr;
}

/* ------------------------------------------------------------------ CopySlices */
typedef struct slices_ctx {
    ts_node *fn; /* the in-place op's node (retained); its input 0 was the view */
    int output_nr;
    geom base, view;
} slices_ctx;

static void slices_ctx_free(void *p) {
    slices_ctx *c = p;
    tsi_node_release(c->fn);
    free(c);
}

/* The base's gradient g: the view's elements go through the op's backward (their gradient with
 * respect to the view's old values replaces them: zero for what copy_ or fill_ overwrote), the
 * rest passes on unchanged; the op's other inputs get theirs. */
static void copy_slices_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const slices_ctx *c = n->ctx;
    if (!go[0] || !c) return;
    ts_node *fn = c->fn;
    int64_t lo;
    ts_tensor *flat = span_buffer(&c->base, &c->view, go[0], &lo);
    ts_tensor *whole = flat ? place(flat, &c->base, lo) : NULL;
    if (!whole || !ts_copy_(whole, go[0])) return;
    ts_tensor *slice = place(flat, &c->view, lo);
    ts_tensor *g = slice ? ts_clone(slice) : NULL; /* the op's backward must not see it change */
    if (!g) return;
    ts_tensor *fn_out_small[4] = {0}, *fn_in_small[8] = {0};
    ts_tensor **fn_out = fn->n_out <= 4 ? fn_out_small : calloc((size_t)fn->n_out, sizeof *fn_out);
    ts_tensor **fn_in = fn->n_in <= 8 ? fn_in_small : calloc((size_t)fn->n_in, sizeof *fn_in);
    if (!fn_out || !fn_in) {
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory (%s)", n->name);
    } else {
        const ts_status before = ts_error();
        fn_out[c->output_nr] = g;
        fn->backward(fn, fn_out, fn_in);
        n->flags |= fn->flags & TSI_NODE_ONCE; /* a saved output it could not restore */
        if (ts_error() == before) {
            bool ok = fn_in[0] ? ts_copy_(slice, fn_in[0]) != NULL : ts_fill_(slice, 0) != NULL;
            if (ok && tsi_node_needs(n, 0)) gi[0] = place(flat, &c->base, lo);
            for (int i = 1; ok && i < n->n_in; i++)
                if (tsi_node_needs(n, i)) gi[i] = fn_in[i];
        }
    }
    if (fn_out != fn_out_small) free(fn_out);
    if (fn_in != fn_in_small) free(fn_in);
}

bool tsi_view_rebase(ts_node *fn, ts_tensor *view, int output_nr) {
    ts_tensor *base = tsi_view_base(view);
    if (!base || !view->view_writing) return false;
    view->view_writing = false;
    const char *op = fn->op ? fn->op : fn->name;
    /* tsi_check_inplace refuses these first; an op that skipped it fails here (its write done) */
    if (view->view_creation != TSI_VIEW_DEFAULT || (base->requires_grad && !base->grad_fn)) {
        if (tsi_check_inplace_operand(op, view, true)) /* sets the message */
            tsi_error_set(TS_ERR_STATE, "%s: this view cannot be modified in place", op);
        return true;
    }
    /* the op's input 0 is the tensor it writes (every in-place op records so): else its backward
     * would give the region another input's gradient */
    if (fn->n_in < 1 || !tsi_shape_equal(fn->in_shape[0], view->shape))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: in-place operation on a view (%s) whose node does not take the "
                             "view as its first input is not supported",
                             op, tsi_desc(view)),
               true;
    slices_ctx *c = malloc(sizeof *c);
    if (!c) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), true;
    *c = (slices_ctx){
        .fn = fn, .output_nr = output_nr, .base = geom_of(base), .view = geom_of(view)};
    if (!non_overlapping(&c->base)) {
        free(c);
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s: in-place operation on a view of %s, which reaches some storage "
                      "element more than once, is not supported; apply it to a clone",
                      op, tsi_desc(base));
        return true;
    }
    ts_tensor **ins = calloc((size_t)fn->n_in, sizeof *ins);
    ts_node *cs = ins ? (ins[0] = base,
                         tsi_node_new("CopySlices", op, copy_slices_backward, ins, fn->n_in, 1, 0))
                      : NULL;
    free(ins);
    if (!cs) {
        free(c);
        if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return true;
    }
    for (int i = 1; i < fn->n_in; i++) { /* the op's other inputs, as its node has them */
        cs->next[i].fn = tsi_node_retain(fn->next[i].fn);
        cs->next[i].output_nr = fn->next[i].output_nr;
        cs->next[i].leaf = ts_retain(fn->next[i].leaf);
        cs->in_shape[i] = fn->in_shape[i];
        cs->in_dtype[i] = fn->in_dtype[i];
        cs->in_device[i] = fn->in_device[i];
    }
    tsi_node_retain(fn);
    cs->ctx = c, cs->ctx_free = slices_ctx_free;
    cs->flags = fn->flags & (TSI_NODE_TWICE | TSI_NODE_ONCE);
    set_grad_fn(base, cs);
    ts_node *vn = view_node(base, view);
    if (!vn) return true; /* the error is pending */
    set_grad_fn(view, vn);
    view->view_version = atomic_load(&view->storage->version);
    return true;
}
