/* functional_internal.h — helpers shared by the functional nn ops and the losses (not public). */
#ifndef TS_NN_FUNCTIONAL_INTERNAL_H
#define TS_NN_FUNCTIONAL_INTERNAL_H

#include "autograd/autograd.h"

/* Scans an integer index tensor on the host. Values equal to `ignore` (when has_ignore) are
 * counted in *n_ignored; *bad gets the first other value outside [0, size). Returns false when such
 * a value exists (*bad set; the caller words the error) or the copy failed (error recorded). */
bool tsi_nn_index_scan(const char *op, ts_tensor *idx, int64_t size, bool has_ignore,
                       int64_t ignore, int64_t *n_ignored, int64_t *bad);

/* The loss reduction: the tensor itself (none), its sum or its mean (0-dim). NULL-safe. */
ts_tensor *tsi_loss_reduce(ts_tensor *loss, ts_reduction r);
bool tsi_check_reduction(const char *op, ts_reduction r);

/* a * b, written into a when no graph is recorded and a (a temporary the caller made) keeps its
 * dtype and shape: saves an allocation and a pass over memory in inference. */
ts_tensor *tsi_nn_mul_into(ts_tensor *a, ts_tensor *b);
ts_tensor *tsi_nn_add_into(ts_tensor *a, ts_tensor *b);

/* scaled_dot_product_attention composed from differentiable ops (arguments already checked). */
ts_tensor *tsi_sdpa_reference(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                              double dropout_p, bool is_causal, double scale);
/* Its attention weights softmax(q k^T scale + mask) before dropout, rows that mask every key
 * 0 (scale 0: 1/sqrt(E)); the fused node's backward under create_graph differentiates them. */
ts_tensor *tsi_sdpa_probs(ts_tensor *q, ts_tensor *k, ts_tensor *mask, bool is_causal,
                          double scale);
/* The backend's fused kernels (attention_fused.c): whether they take these arguments (already
 * checked), and the op through them. */
bool tsi_sdpa_fused_applies(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                            double dropout_p);
ts_tensor *tsi_sdpa_fused(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                          double dropout_p, bool is_causal, double scale);

/* layer_norm through the backend's fused kernels (layer_norm_fused.c): whether they take x's
 * shape (already checked; nnorm = normalized_shape's dims) in dtype dt, and the op through them
 * (x, w and b of one dtype; norm.c decides which, and casts around them for float16 / bfloat16). */
/* linear_fused.c: x [rows, in] @ w^T + b in one backend call (matmul_bias) with one
 * AddmmBackward0 node; takes: the backend has it, f32 / f64, x 2-D, a bias, nothing empty */
bool tsi_linear_fused_takes(ts_tensor *x, ts_tensor *w, ts_tensor *b);
ts_tensor *tsi_linear_fused(ts_tensor *x, ts_tensor *w, ts_tensor *b);
/* The views linear's product hands the matmul slots: x [rows, in] and w^T [in, out] (a view of w
 * [out, in]) in matmul's 3-D form, y [rows, out] contiguous */
void tsi_linear_kviews(ts_tensor *x, ts_tensor *w, ts_tensor *y, ts_kview *ka, ts_kview *kb,
                       ts_kview *ko);
/* AddmmBackward0's gradients for the output gradient g of a node with inputs (x, w, b) and saved
 * slots 0 = x, 1 = w (linear_act_fused.c's node reuses them for its pre-activation gradient) */
void tsi_addmm_grads(ts_node *n, ts_tensor *g, ts_tensor **gi);
bool tsi_layer_norm_fused_takes(ts_tensor *x, int nnorm, ts_dtype dt);
/* Whether the backend's fused kernels take a norm over x (nnorm: the normalized dims) in dtype
 * dt: tsi_layer_norm_fused_takes, tsi_rms_norm_fused_takes, batch_norm's (norm.c). */
typedef bool (*tsi_norm_takes_fn)(ts_tensor *x, int nnorm, ts_dtype dt);
/* The dtype a norm over x (affine parameters w, b or NULL) runs in through the fused kernels, in
 * *dt; false: the composition runs (norm.c). */
bool tsi_norm_fused_dtype(ts_tensor *x, ts_tensor *w, ts_tensor *b, int nnorm,
                          tsi_norm_takes_fn takes, ts_dtype *dt);
ts_tensor *tsi_layer_norm_fused(ts_tensor *x, int nnorm, ts_tensor *w, ts_tensor *b, double eps);

/* The fused norms' backward (node inputs x, weight, bias): begin casts the output gradient go to
 * x's dtype, contiguous (dy), and makes uninitialised tensors for the gradients the node needs
 * (g[0] of x's shape and dtype, g[1] and g[2] of the weight's and bias's; NULL where not needed);
 * false, with everything released and the error recorded, when that fails. end releases dy and
 * hands the gradients to gi (ok) or releases them. */
typedef struct tsi_norm_grads {
    ts_tensor *dy, *g[3];
} tsi_norm_grads;
bool tsi_norm_grads_begin(const char *op, ts_node *n, ts_tensor *x, ts_tensor *go,
                          tsi_norm_grads *r);
void tsi_norm_grads_end(tsi_norm_grads *r, bool ok, ts_tensor **gi);

/* batch_norm in training mode through the backend's fused kernels (batch_norm_fused.c): whether
 * they take x's shape (already checked) in dtype dt, and the op through them (x, w and b of one
 * dtype, as for layer_norm, or a float16 / bfloat16 x with float32 w and b). mean_out and var_out
 * (both or neither): the batch's per-channel mean and biased variance ([C], float32 or float64
 * for a float64 input, owned by the open scope), for the running statistics. */
bool tsi_batch_norm_fused_takes(ts_tensor *x, ts_dtype dt);
ts_tensor *tsi_batch_norm_fused(ts_tensor *x, ts_tensor *w, ts_tensor *b, double eps,
                                ts_tensor **mean_out, ts_tensor **var_out);

/* cross_entropy through the backend's fused kernels (loss_ce_fused.c): whether they take an input
 * x (checked, class-index targets) with these class weights — [N, C] or [C], no weights, nothing
 * empty, the backend has the entries — and the losses of its rows ([N], or 0-dim for [C]; 0 where
 * the target is ignore_index) in x's compute dtype (float32, float64 for float64) through them,
 * with their CrossEntropyLossBackward0 node. */
bool tsi_cross_entropy_fused_takes(ts_tensor *x, ts_tensor *weight);
ts_tensor *tsi_cross_entropy_fused(ts_tensor *x, ts_tensor *target, int64_t ignore_index,
                                   double label_smoothing);

#endif /* TS_NN_FUNCTIONAL_INTERNAL_H */
