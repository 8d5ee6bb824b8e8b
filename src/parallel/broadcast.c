/* broadcast.c — torch.nn.parallel._functions.Broadcast: the parameters on devices[0] copied to
 * every other device in one coalesced transfer, recorded as ONE autograd node whose backward is
 * ReduceAddCoalesced: the gradients that reach the copies summed onto devices[0], one gradient per
 * parameter, in one coalesced reduction (transport.h: NCCL on CUDA when present, device copies and
 * adds otherwise). */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "parallel/parallel_internal.h"
#include "parallel/transport.h"

/* The device set of one broadcast, for its backward. */
typedef struct bcast_ctx {
    int n_devices;
    ts_device devices[TSI_DP_MAX_DEVICES];
} bcast_ctx;

/* Under create_graph: the same sums from public ops (ts_to, ts_add), which record the gradient's
 * own graph, so the reduction is differentiable again (its derivative is a broadcast, as with
 * PyTorch's ReduceAddCoalesced). Summed in rank order, as tsi_copy_reduce_add does. */
static void reduce_add_recorded(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const bcast_ctx *c = n->ctx;
    const int P = n->n_in, D = c->n_devices;
    for (int p = 0; p < P; p++) {
        if (!tsi_node_needs(n, p)) continue;
        ts_tensor *acc = NULL;
        for (int r = 1; r < D; r++) {
            ts_tensor *g = go[(r - 1) * P + p];
            if (!g) continue;
            ts_tensor *moved = ts_to(g, c->devices[0]);
            acc = moved && acc ? ts_add(acc, moved) : moved;
            if (!acc) return;
        }
        gi[p] = acc;
    }
}

/* go[(r - 1) * P + p]: the gradient of parameter p's copy on devices[r]. The copies on one device
 * are rank r's contribution; devices[0] has none (its replica uses the parameters themselves, whose
 * gradients reach them directly). */
static void broadcast_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const bcast_ctx *c = n->ctx;
    const int P = n->n_in, D = c->n_devices;
    if (tsi_create_graph_active()) {
        reduce_add_recorded(n, go, gi);
        return;
    }
    ts_tensor **ins = calloc((size_t)P * (size_t)(D + 1), sizeof *ins);
    if (!ins) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %d gradients", n->op, P * D);
        return;
    }
    ts_tensor **sums = ins + (size_t)P * (size_t)D;
    for (int r = 1; r < D; r++)
        for (int p = 0; p < P; p++)
            if (tsi_node_needs(n, p)) ins[r * P + p] = go[(r - 1) * P + p];
    if (tsi_transport_reduce_add(n->op, ins, P, c->devices, D, sums))
        for (int p = 0; p < P; p++) gi[p] = tsi_own(sums[p]);
    free(ins);
}

static void ctx_free(void *ctx) { free(ctx); }

bool tsi_broadcast_coalesced(ts_tensor *const *params, int n_params, const ts_device *devices,
                             int n_devices, ts_tensor **copies) {
    const char *op = "broadcast_coalesced";
    if (n_params == 0 || n_devices < 2) return true;
    if (!tsi_transport_broadcast(op, params, n_params, devices, n_devices, copies)) return false;
    if (!tsi_needs_graph(params, n_params)) return true;
    const int n_out = n_params * (n_devices - 1);
    bcast_ctx *c = malloc(sizeof *c);
    ts_node *node = c ? tsi_node_new("BroadcastBackward", "reduce_add_coalesced",
                                     broadcast_backward, params, n_params, n_out, 0)
                      : NULL;
    if (!node) {
        if (!c) tsi_error_set(TS_ERR_OOM, "%s: out of host memory recording the graph", op);
        free(c);
        for (int k = 0; k < n_out; k++) {
            ts_release(copies[k]);
            copies[k] = NULL;
        }
        return false;
    }
    c->n_devices = n_devices;
    for (int r = 0; r < n_devices; r++) c->devices[r] = devices[r];
    node->ctx = c;
    node->ctx_free = ctx_free;
    node->flags |= TSI_NODE_TWICE; /* reduce_add_recorded under create_graph */
    /* copies of parameters that do not require grad stay plain tensors (PyTorch marks them
     * non-differentiable) */
    for (int k = 0; k < n_out; k++)
        if (params[k % n_params]->requires_grad) tsi_node_set_output(node, copies[k], k);
    tsi_node_release(node);
    return true;
}
