/* copy_slices.h — in-place writes through views (PyTorch's CopySlices and view regeneration,
 * internal; docs/decisions/0038-inplace-on-views.md).
 *
 * A view op's result remembers the tensor it looks into (ts_tensor.view_base, the root: a view of
 * a view points at the first one's base). An in-place op checked by tsi_check_inplace on such a
 * view records its node as usual; tsi_node_set_output hands it here instead of making it the
 * view's grad_fn: the base's grad_fn becomes a CopySlices node (the base's previous history, the
 * view's geometry over the storage, the op's node) and the view's grad_fn an AsStridedBackward0
 * node of the base's new history. A view whose storage changed since its grad_fn was derived
 * (a write through the base or another view) derives it again from its base when next used
 * (tsi_view_sync). */
#ifndef TS_AUTOGRAD_COPY_SLICES_H
#define TS_AUTOGRAD_COPY_SLICES_H

#include "autograd/autograd.h"

/* view (just made by a view op from src, sharing its storage) looks into src's base, or into src
 * when src is no view op's view; made under no_grad it says so (its writes may not be recorded
 * then). No-op for a NULL view or one with storage of its own (a copy). */
void tsi_view_attach(ts_tensor *src, ts_tensor *view);
/* view is output nr of the multi-output op `op` ("Split"): writes to it may not be recorded */
void tsi_view_mark_multi(ts_tensor *view, const char *op, int nr);
/* tsi_node_set_output's path for a view being written in place (view_writing): the base takes n
 * through a CopySlices node, the view a view of the base's new history. False when view is not
 * a view op's view (the caller rebases it as any tensor). */
bool tsi_view_rebase(ts_node *n, ts_tensor *view, int output_nr);

#endif /* TS_AUTOGRAD_COPY_SLICES_H */
