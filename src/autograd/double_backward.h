/* double_backward.h — create_graph for the engine (internal): the thread's flag, and the node that
 * stands in for a backward formula that cannot be differentiated again. */
#ifndef TS_AUTOGRAD_DOUBLE_BACKWARD_H
#define TS_AUTOGRAD_DOUBLE_BACKWARD_H

#include "autograd/autograd.h"

/* Sets this thread's create_graph flag (tsi_create_graph_active) and returns the previous one. */
bool tsi_create_graph_swap(bool on);

/* Whether n's backward recorded a graph that is its own derivative: its site marked it
 * TSI_NODE_TWICE and nothing marked it TSI_NODE_ONCE since. */
static inline bool tsi_node_twice(const ts_node *n) {
    return (n->flags & (TSI_NODE_TWICE | TSI_NODE_ONCE)) == TSI_NODE_TWICE;
}

/* Under create_graph, a gradient g made by n, whose backward is not differentiable again: an alias
 * of g (scope-owned) whose grad_fn fails the pass that reaches it, with an error naming n. Its
 * edges are n's own and those of n's incoming gradients, so a pass that would need the second
 * derivative reaches it (and never returns a gradient that lacks that part). NULL + error on
 * allocation failure. */
ts_tensor *tsi_delayed_error(ts_node *n, ts_tensor *const *grad_out, ts_tensor *g);

#endif /* TS_AUTOGRAD_DOUBLE_BACKWARD_H */
