/* replicate.c — torch.nn.parallel.replicate: the module tree copied onto each further device. All
 * parameters travel in one coalesced broadcast (broadcast.c: one BroadcastBackward node for the
 * whole model, whose backward sums the replicas' gradients into the originals), the buffers in one
 * detached broadcast; the module copies then pick their tensors from that table. */
#include <stdint.h>
#include <stdlib.h>

#include "parallel/parallel_internal.h"
#include "parallel/transport.h"

/* One distinct tensor of the tree: a tensor registered twice (tied weights) is one entry, a
 * parameter if any of its registrations is one. */
typedef struct rep_entry {
    ts_tensor *t;
    bool is_param;
} rep_entry;

/* The copies of every distinct tensor: copies[(r - 1) * n + j] is entries[j]'s copy on device r;
 * entries are sorted by address for the lookup of tsi_module_replicate's callback. */
typedef struct rep_table {
    rep_entry *entries;
    int n;
    ts_tensor **copies;
    int replica; /* the replica being built (1 .. n_devices - 1) */
} rep_table;

static int count_tensors(ts_module *m) {
    int n = m->impl->params.n + m->impl->buffers.n;
    for (int i = 0; i < m->impl->children.n; i++) n += count_tensors(m->impl->children.items[i]);
    return n;
}

static void collect(ts_module *m, rep_entry *out, int *k) {
    for (int i = 0; i < m->impl->params.n; i++)
        out[(*k)++] = (rep_entry){m->impl->params.items[i], true};
    for (int i = 0; i < m->impl->buffers.n; i++)
        out[(*k)++] = (rep_entry){m->impl->buffers.items[i], false};
    for (int i = 0; i < m->impl->children.n; i++) collect(m->impl->children.items[i], out, k);
}

static int cmp_address(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const rep_entry *)a)->t, y = (uintptr_t)((const rep_entry *)b)->t;
    return (x > y) - (x < y);
}

/* by address, and a tensor's parameter registration before its buffer ones */
static int cmp_entry(const void *a, const void *b) {
    int c = cmp_address(a, b);
    return c ? c : (int)((const rep_entry *)b)->is_param - (int)((const rep_entry *)a)->is_param;
}

/* Sorted distinct tensors of the tree in *out (malloc'ed); -1 on OOM. */
static int distinct_tensors(ts_module *m, rep_entry **out) {
    int total = count_tensors(m), n = 0, k = 0;
    rep_entry *e = malloc(((size_t)total + 1) * sizeof *e);
    if (!e) return -1;
    collect(m, e, &k);
    qsort(e, (size_t)total, sizeof *e, cmp_entry);
    for (int i = 0; i < total; i++)
        if (n == 0 || e[n - 1].t != e[i].t) e[n++] = e[i];
    *out = e;
    return n;
}

/* Broadcasts the entries that are (or are not) parameters and files the copies in the table. */
static bool broadcast_group(rep_table *tb, bool params, const ts_device *devices, int n_devices) {
    const int R = n_devices - 1;
    int m = 0;
    for (int j = 0; j < tb->n; j++) m += tb->entries[j].is_param == params;
    if (m == 0) return true;
    ts_tensor **src = malloc((size_t)m * sizeof *src);
    ts_tensor **dst = malloc((size_t)m * (size_t)R * sizeof *dst);
    int *where = malloc((size_t)m * sizeof *where);
    bool ok = src && dst && where;
    if (!ok) tsi_error_set(TS_ERR_OOM, "replicate: out of host memory");
    if (ok) {
        for (int j = 0, i = 0; j < tb->n; j++)
            if (tb->entries[j].is_param == params) {
                where[i] = j;
                src[i++] = tb->entries[j].t;
            }
        /* buffers are copied without history, as PyTorch's detached broadcast of them */
        ok = params ? tsi_broadcast_coalesced(src, m, devices, n_devices, dst)
                    : tsi_transport_broadcast("replicate", src, m, devices, n_devices, dst);
    }
    if (ok)
        for (int r = 0; r < R; r++)
            for (int i = 0; i < m; i++) tb->copies[r * tb->n + where[i]] = dst[r * m + i];
    free(src);
    free(dst);
    free(where);
    return ok;
}

/* tsi_module_replicate's callback: the replica's copy of orig, from the table. */
static ts_tensor *copy_for_replica(ts_tensor *orig, bool is_param, void *ctx) {
    (void)is_param;
    const rep_table *tb = ctx;
    rep_entry key = {orig, false};
    const rep_entry *e = bsearch(&key, tb->entries, (size_t)tb->n, sizeof key, cmp_address);
    if (!e) /* the tree changed under us: cannot happen while replicate holds the module */
        return tsi_error_set(TS_ERR_STATE, "replicate: a tensor of the module was not broadcast"),
               NULL;
    return ts_retain(tb->copies[(tb->replica - 1) * tb->n + (int)(e - tb->entries)]);
}

bool tsi_replicate(ts_module *m, const ts_device *devices, int n, ts_module **replicas) {
    replicas[0] = m;
    if (n < 2) return true;
    ts_device devs[TSI_DP_MAX_DEVICES];
    for (int i = 0; i < n; i++) devs[i] = tsi_resolve_device(devices[i]);
    rep_table tb = {0};
    tb.n = distinct_tensors(m, &tb.entries);
    tb.copies = tb.n >= 0 ? calloc((size_t)tb.n * (size_t)(n - 1) + 1, sizeof *tb.copies) : NULL;
    bool ok = tb.copies != NULL;
    if (!ok) tsi_error_set(TS_ERR_OOM, "replicate: out of host memory copying %s", m->type_name);
    ok = ok && broadcast_group(&tb, true, devs, n) && broadcast_group(&tb, false, devs, n);
    for (int i = 1; i < n && ok; i++) {
        tb.replica = i;
        replicas[i] = tsi_module_replicate(m, copy_for_replica, &tb);
        ok = replicas[i] != NULL;
        if (!ok) tsi_replicas_free(replicas, i);
    }
    /* each replica holds its own references now */
    if (tb.copies)
        for (int k = 0; k < tb.n * (n - 1); k++) ts_release(tb.copies[k]);
    free(tb.copies);
    free(tb.entries);
    return ok;
}

void tsi_replicas_free(ts_module **replicas, int n) {
    for (int i = 1; i < n; i++) {
        ts_module_free(replicas[i]);
        replicas[i] = NULL;
    }
}
