/* tessera/nn.h — neural-network functions, losses and modules (included by tessera.h). */
#ifndef TESSERA_NN_H
#define TESSERA_NN_H

/* ========================================================== functional layers */
/* y = x @ w^T + b; x [..., in], w [out, in], b [out] or NULL; or, as PyTorch, a 1-D w [in]:
 * y = x @ w + b, x [..., in] -> [...], b 0-d or NULL */
TS_API ts_tensor *ts_linear(ts_tensor *x, ts_tensor *w, ts_tensor *b);

/* Zero means PyTorch's default: stride 1, padding 0, dilation 1, groups 1. */
typedef struct ts_conv2d_opts {
    int stride[2], padding[2], dilation[2];
    int groups;
    bool no_bias; /* modules only: create no bias parameter */
} ts_conv2d_opts;
/* x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or NULL */
TS_API ts_tensor *ts_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o);

/* kernel is required; stride 0 means the kernel size; padding 0; dilation 0 means 1. */
typedef struct ts_pool2d_opts {
    int kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode;
    bool exclude_pad;     /* avg_pool2d: count_include_pad=False */
    int divisor_override; /* avg_pool2d: > 0 divides every window's sum by it; 0: none */
} ts_pool2d_opts;
TS_API ts_tensor *ts_max_pool2d(ts_tensor *x, ts_pool2d_opts o);
/* max_pool2d(return_indices=True): also *indices (int64, the output's shape, in the caller's
 * scope): each maximum's flat position h * W + w within its input plane, as PyTorch's (first
 * occurrence; NaN wins). *indices is NULL when the call fails. */
TS_API ts_tensor *ts_max_pool2d_with_indices(ts_tensor *x, ts_pool2d_opts o, ts_tensor **indices);
/* aten.max_pool2d_with_indices_backward: max_pool2d's input gradient (x's shape, dtype and memory
 * format) from the output's gradient go and max_pool2d_with_indices' indices (both the output's
 * shape, o as the forward's): each go element added at its index. Indices outside the input plane:
 * TS_ERR_ARG. Differentiable: go's gradient gathers at the indices, x's is zero (PyTorch's). */
TS_API ts_tensor *ts_max_pool2d_backward(ts_tensor *go, ts_tensor *x, ts_pool2d_opts o,
                                         ts_tensor *indices);
TS_API ts_tensor *ts_avg_pool2d(ts_tensor *x, ts_pool2d_opts o);
TS_API ts_tensor *ts_adaptive_avg_pool2d(ts_tensor *x, int64_t out_h, int64_t out_w);

/* torch.nn.functional.pad: pad[0..npad) pairs (before, after) from the last dim backwards (npad
 * even, npad / 2 <= ndim). CONSTANT fills with value (cast to x's dtype; negative pads crop; any
 * dtype). REFLECT (mirror, the border not repeated; each pad < the dim), REPLICATE (the border
 * repeated) and CIRCULAR (wrap; each pad <= the dim) pad the last 1, 2 or 3 dims of a 2/3-, 3/4-
 * or 4/5-dim x (npad 2, 4, 6), negative pads cropping as PyTorch; value must be 0 for them.
 * Differentiable (index_select / cat), every device. TS_ERR_ARG / TS_ERR_SHAPE with PyTorch's
 * messages otherwise. */
typedef enum ts_pad_mode {
    TS_PAD_CONSTANT = 0,
    TS_PAD_REFLECT,
    TS_PAD_REPLICATE,
    TS_PAD_CIRCULAR
} ts_pad_mode;
TS_API ts_tensor *ts_pad(ts_tensor *x, const int64_t *pad, int npad, ts_pad_mode mode,
                         double value);

/* torch.nn.functional.interpolate on x [N, C, d1..dk], k = 1, 2 or 3 (LINEAR needs k = 1,
 * BILINEAR and BICUBIC k = 2, TRILINEAR k = 3). Exactly one of size (k output sizes) and
 * scale_factor (k positive factors) is given (the other NULL, n = k). With scale_factor the output
 * size is floor(d * scale); the interpolation then uses 1 / scale as PyTorch does unless
 * recompute_scale_factor (the sizes' ratio then). PyTorch's index arithmetic exactly (UpSample.h:
 * nearest floor(i * scale) in float, nearest-exact floor((i + 0.5) * scale), linear half-pixel or
 * align_corners, bicubic A = -0.75 with clamped taps, AREA = adaptive average pooling). Floating
 * dtypes (NEAREST* also uint8); differentiable, every device. antialias: BILINEAR / BICUBIC on
 * 4-D input (PyTorch's _aa kernels: the filter widened by the downscale factor, bicubic a = -0.5),
 * else TS_ERR_ARG. */
typedef enum ts_interp_mode {
    TS_INTERP_NEAREST = 0,
    TS_INTERP_NEAREST_EXACT,
    TS_INTERP_LINEAR,
    TS_INTERP_BILINEAR,
    TS_INTERP_BICUBIC,
    TS_INTERP_TRILINEAR,
    TS_INTERP_AREA
} ts_interp_mode;
typedef struct ts_interp_opts {
    ts_interp_mode mode;
    const int64_t *size;        /* n output sizes, or NULL */
    const double *scale_factor; /* n scale factors, or NULL */
    int n;
    bool align_corners; /* LINEAR, BILINEAR, BICUBIC, TRILINEAR only */
    bool recompute_scale_factor;
    bool antialias; /* BILINEAR / BICUBIC on 4-D input only (PyTorch's _aa kernels) */
} ts_interp_opts;
TS_API ts_tensor *ts_interpolate(ts_tensor *x, ts_interp_opts o);
/* torch.nn.functional.grid_sample: input [N, C, H, W] with grid [N, Ho, Wo, 2], or [N, C, D, H, W]
 * with grid [N, Do, Ho, Wo, 3], of (x, y[, z]) in [-1, 1] -> [N, C, Ho, Wo] / [N, C, Do, Ho, Wo];
 * PyTorch's arithmetic (GridSampler.h): bilinear (trilinear), nearest (round half to even), bicubic
 * (A = -0.75, 4 taps per dim); zeros / border / reflection padding. Floating input, grid of its
 * dtype and device; differentiable in input and grid, every device (src/nn/grid_sample.c). */
typedef enum ts_grid_mode { TS_GRID_BILINEAR = 0, TS_GRID_NEAREST, TS_GRID_BICUBIC } ts_grid_mode;
typedef enum ts_grid_padding {
    TS_GRID_ZEROS = 0,
    TS_GRID_BORDER,
    TS_GRID_REFLECTION
} ts_grid_padding;
TS_API ts_tensor *ts_grid_sample(ts_tensor *input, ts_tensor *grid, ts_grid_mode mode,
                                 ts_grid_padding padding_mode, bool align_corners);
/* torch.nn.functional.affine_grid: the sampling grid [N, H, W, 2] / [N, D, H, W, 3] of affine
 * matrices theta [N, 2, 3] / [N, 3, 4] for an output of size (N, C, H, W) / (N, C, D, H, W);
 * differentiable in theta */
TS_API ts_tensor *ts_affine_grid(ts_tensor *theta, ts_shape size, bool align_corners);
/* torch.nn.functional.pixel_shuffle: [*, C r^2, H, W] -> [*, C, H r, W r]; pixel_unshuffle the
 * inverse ([*, C, H r, W r] -> [*, C r^2, H, W]). Reshape and permute: any dtype, differentiable.
 */
TS_API ts_tensor *ts_pixel_shuffle(ts_tensor *x, int64_t upscale_factor);
TS_API ts_tensor *ts_pixel_unshuffle(ts_tensor *x, int64_t downscale_factor);
/* torch.nn.functional.channel_shuffle: [N, C, *] (at least 3-D) with its channels regrouped as
 * [N, groups, C / groups, *] transposed to [N, C / groups, groups, *]; groups > 0 divides C (else
 * TS_ERR_ARG, PyTorch's messages). Any dtype, differentiable. */
TS_API ts_tensor *ts_channel_shuffle(ts_tensor *x, int64_t groups);
/* torch.nn.functional.bilinear: y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j]
 * + bias[o]; input1 [..., in1] and input2 [..., in2] with the same batch dims, weight [out, in1,
 * in2], bias NULL or [out]; one floating dtype, one device. Differentiable in all four;
 * TS_ERR_SHAPE / TS_ERR_DTYPE with PyTorch's messages. */
TS_API ts_tensor *ts_bilinear(ts_tensor *input1, ts_tensor *input2, ts_tensor *weight,
                              ts_tensor *bias);
/* x itself when nothing is dropped (!training, p 0, no element), as PyTorch; a quantized x only
 * then (passed through: eval mode), TS_ERR_DTYPE otherwise */
TS_API ts_tensor *ts_dropout(ts_tensor *x, double p, bool training);
/* in place: the dropped and rescaled values written into x, which is returned (retained into the
 * scope), as F.dropout(inplace=True) */
TS_API ts_tensor *ts_dropout_(ts_tensor *x, double p, bool training);
/* ATen's feature dropout (torch.nn.functional.dropout1d / 2d / 3d): one Bernoulli(1 - p) draw per
 * channel, mask [N, C, 1, ...] of x [N, C, ...] (unbatched: [C, 1, ...] of x [C, ...]), kept
 * channels scaled by 1 / (1 - p); p = 1 gives x * 0. Not training, p = 0 or no elements: x itself
 * (retained). Floating x (TS_ERR_DTYPE), p in [0, 1] (TS_ERR_ARG), at least 2-D when batched
 * (TS_ERR_SHAPE). The `_` form writes the result into x and returns x. */
TS_API ts_tensor *ts_feature_dropout(ts_tensor *x, double p, bool training, bool unbatched);
TS_API ts_tensor *ts_feature_dropout_(ts_tensor *x, double p, bool training, bool unbatched);
/* x [N, C] or [N, C, L] (1d) or [N, C, H, W] (2d). In training, batch statistics are used and the
 * running statistics (may be NULL) are updated in place with momentum taken literally, as
 * PyTorch's: running = (1 - momentum) running + momentum batch, so 0 leaves them unchanged; in
 * eval, the running statistics are used. w, b may be NULL. eps 0 -> 1e-5. */
TS_API ts_tensor *ts_batch_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                                ts_tensor *w, ts_tensor *b, bool training, double momentum,
                                double eps);
/* normalises over the last normalized_shape.ndim dims; w, b of normalized_shape or NULL;
 * eps 0 -> 1e-5 */
TS_API ts_tensor *ts_layer_norm(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, ts_tensor *b,
                                double eps);
/* weight [num, dim], indices integer tensor of any shape -> indices.shape + [dim] */
TS_API ts_tensor *ts_embedding(ts_tensor *weight, ts_tensor *indices);
/* embedding with PyTorch's padding_idx: that row of weight (in [0, num_embeddings)) gets no
 * gradient from its uses, -1 for none (ts_embedding); TS_ERR_ARG outside that range */
TS_API ts_tensor *ts_embedding_padded(ts_tensor *weight, ts_tensor *indices, int64_t padding_idx);
/* PyTorch's embedding_renorm_ (F.embedding's and F.embedding_bag's max_norm): each row of weight
 * [num, dim] (floating) that indices (int64 / int32, any shape, each in [0, num)) name and whose
 * norm_type-norm (ts_vector_norm's ord, in weight's dtype) exceeds max_norm is scaled in place by
 * max_norm / (norm + 1e-7); outside autograd (no graph, as PyTorch's no_grad). Returns weight. */
TS_API ts_tensor *ts_embedding_renorm_(ts_tensor *weight, ts_tensor *indices, double max_norm,
                                       double norm_type);
/* F.embedding's arguments: has_padding_idx: padding_idx in [-num, num) (a negative one counts
 * from the end), that row gets no gradient (ts_embedding_padded); has_max_norm: the rows used are
 * ts_embedding_renorm_'d (max_norm, norm_type used as given: PyTorch's default norm_type is 2)
 * before the lookup. Zero-initialised: ts_embedding. */
typedef struct ts_embedding_opts {
    bool has_padding_idx;
    int64_t padding_idx;
    bool has_max_norm;
    double max_norm, norm_type;
} ts_embedding_opts;
TS_API ts_tensor *ts_embedding_ex(ts_tensor *weight, ts_tensor *indices, ts_embedding_opts o);
/* F.embedding_bag's arguments: ts_embedding_bag with o's padding_idx (negative from the end) and
 * max_norm (ts_embedding_renorm_ of the rows indices name, first) as ts_embedding_ex's. */
TS_API ts_tensor *ts_embedding_bag_ex(ts_tensor *weight, ts_tensor *indices, ts_tensor *offsets,
                                      int mode, ts_tensor *per_sample_weights,
                                      bool include_last_offset, ts_embedding_opts o);
/* torch.nn.functional.embedding_bag, modes sum (0), mean (1) and max (2): out [bags, dim] = each
 * bag's rows of weight [num, dim] summed or averaged (over the kept entries; an empty bag gives
 * zeros). indices int64 / int32: 2-D [bags, L] with offsets NULL, or 1-D with 1-D integer offsets
 * (bag b = indices[offsets[b] : offsets[b + 1]], the last bag running to the end, or ending at the
 * last offset with include_last_offset). per_sample_weights (NULL: none; mode sum only) of indices'
 * shape and weight's dtype scale each row. Entries equal to padding_idx (-1: none) are left out.
 * Differentiable in weight and per_sample_weights. Mode max (2): each bag's elementwise maximum
 * over its kept rows (an empty bag zeros; the gradient to the first maximal row, PyTorch's); not
 * in a captured step. An index outside [0, num) or bad offsets TS_ERR_ARG. */
TS_API ts_tensor *ts_embedding_bag(ts_tensor *weight, ts_tensor *indices, ts_tensor *offsets,
                                   int mode, ts_tensor *per_sample_weights, int64_t padding_idx,
                                   bool include_last_offset);
/* torch.nn.functional.scaled_dot_product_attention: q [..., L, E], k [..., S, E], v [..., S, Ev]
 * -> [..., L, Ev]; batch dims broadcast. attn_mask (NULL: none) broadcasts to [..., L, S]: bool
 * (true = may attend) or of q's dtype (added to the scores). is_causal: query i attends to keys
 * j <= i (top-left aligned; not together with attn_mask). dropout_p > 0 drops attention weights
 * (always, as the functional form). scale 0 -> 1/sqrt(E). */
TS_API ts_tensor *ts_scaled_dot_product_attention(ts_tensor *q, ts_tensor *k, ts_tensor *v,
                                                  ts_tensor *attn_mask, double dropout_p,
                                                  bool is_causal, double scale);
/* the same with enable_gqa: k and v may have fewer heads (dim -3, inputs of 3+ dims) than q, a
 * divisor of q's (else TS_ERR_SHAPE); each of their heads serves hq / hk query heads
 * (repeat_interleave, PyTorch's). enable_gqa false: ts_scaled_dot_product_attention. */
TS_API ts_tensor *ts_scaled_dot_product_attention_ex(ts_tensor *q, ts_tensor *k, ts_tensor *v,
                                                     ts_tensor *attn_mask, double dropout_p,
                                                     bool is_causal, double scale, bool enable_gqa);

/* ===================================================================== losses */
#include "tessera/losses.h"

/* ==================================================================== modules */
typedef struct ts_module ts_module;
typedef ts_tensor *(*ts_forward_fn)(ts_module *self, ts_tensor *x);

/* The base every module embeds as its FIRST member (user modules too):
 *   typedef struct { ts_module base; ts_module *fc1, *fc2; } mlp;
 *   mlp *m = ts_module_alloc(sizeof *m, "MLP", mlp_forward);
 *   m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(784, 128));
 * Fields below are read-only for users; use the functions. */
struct ts_module {
    const char *type_name; /* "Linear", "Conv2d", user's name */
    ts_forward_fn forward;
    /* optional hooks */
    void (*destroy)(ts_module *self);                         /* free user-owned extras */
    void (*extra_repr)(ts_module *self, char *buf, size_t n); /* "3, 6, kernel_size=(5, 5)" */
    bool training;
    struct ts_module_impl *impl; /* children, parameters, buffers (private) */
};

/* Allocates a zeroed module of `size` bytes (>= sizeof(ts_module)) with the given type name
 * (copied) and forward function. Free with ts_module_free. */
TS_API void *ts_module_alloc(size_t size, const char *type_name, ts_forward_fn forward);
/* Registers child under name (owned by parent from now on) and returns it. NULL-safe. On failure
 * (bad or clashing name, NULL parent) the child is freed, unless it already belongs to a module or
 * is parent's own ancestor (a cycle): then it is left where it was. */
TS_API void *ts_module_add(ts_module *parent, const char *name, ts_module *child);
/* Registers a parameter (requires_grad is set; floating leaf tensors only) or a buffer under a name
 * without "."; the same name again replaces the tensor in place. Ownership: outside any scope the
 * module takes over the caller's reference; inside a scope it takes a reference of its own (the
 * scope keeps its one). So `ts_module_param(m, "weight", ts_empty(...))` never leaks either way.
 * The reference is consumed the same way on failure (NULL). Returns t, borrowed. */
TS_API ts_tensor *ts_module_param(ts_module *m, const char *name, ts_tensor *t);
TS_API ts_tensor *ts_module_buffer(ts_module *m, const char *name, ts_tensor *t);
TS_API ts_tensor *ts_module_get(ts_module *m, const char *name);   /* "conv1.weight"; borrowed */
TS_API ts_module *ts_module_child(ts_module *m, const char *name); /* "features.0"; borrowed */
/* Recursive; NULL-safe. Only root modules: a child is freed by its parent (TS_ERR_STATE). */
TS_API void ts_module_free(ts_module *m);
/* Runs m->forward inside a scope of its own: its intermediates are released on return (autograd
 * keeps what backward needs) and the result belongs to the caller's scope (or to the caller). */
TS_API ts_tensor *ts_forward(ts_module *m, ts_tensor *x);
/* Activation checkpointing per module (ts_checkpoint): with the flag on, ts_forward runs the
 * module's forward so that its intermediates are recomputed in backward instead of kept (its
 * hooks run once, outside). Replicas (data parallel) keep the flag. */
TS_API ts_status ts_module_set_checkpoint(ts_module *m, bool on);
TS_API bool ts_module_checkpointed(ts_module *m);
/* PyTorch's checkpoint_sequential: seq's children in order, split into `segments` runs of
 * n / segments children (the last run takes the rest; segments > n counts as n), every run but
 * the last under ts_checkpoint. -> the output, in the caller's scope. */
TS_API ts_tensor *ts_checkpoint_sequential(ts_module *seq, int segments, ts_tensor *x);
/* Forward hooks (PyTorch's register_forward_pre_hook / register_forward_hook), run by ts_forward
 * and by the functional forms that take a module (ts_transformer_encoder_layer): pre hooks before
 * the module's forward, in registration order (a status other than TS_OK stops the forward, which
 * returns NULL); post hooks after it, each given the output and returning the output to use (the
 * same tensor, or a replacement in the current scope; NULL with an error set fails the forward).
 * Used by sharded data parallel (ts_fsdp) to gather a unit's parameters just before it runs.
 * Returns a handle > 0, or 0 on error; hooks are not copied into replicas. */
typedef ts_status (*ts_forward_pre_hook_fn)(ts_module *m, ts_tensor *x, void *ctx);
typedef ts_tensor *(*ts_forward_hook_fn)(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx);
TS_API int ts_module_register_forward_pre_hook(ts_module *m, ts_forward_pre_hook_fn fn, void *ctx);
TS_API int ts_module_register_forward_hook(ts_module *m, ts_forward_hook_fn fn, void *ctx);
TS_API ts_status ts_module_remove_forward_hook(ts_module *m, int handle);
/* Moves parameters, their gradients and buffers in place (their ts_tensor handles stay the same, as
 * in PyTorch); returns m, also on failure (error pending) so `net = ts_module_to(net, d)` cannot
 * lose the model. ts_module_to_dtype converts floating tensors only (num_batches_tracked stays
 * int64) and accepts floating dtypes only. */
TS_API ts_module *ts_module_to(ts_module *m, ts_device d);
TS_API ts_module *ts_module_to_dtype(ts_module *m, ts_dtype dt);
TS_API void ts_module_train(ts_module *m, bool on); /* recursive */
TS_API void ts_module_eval(ts_module *m);
TS_API int64_t ts_module_num_parameters(ts_module *m); /* elements; a shared tensor counts once */

/* A list of named tensors (names owned by the list; each tensor retained by it). */
typedef struct ts_tensor_list {
    int n, cap;
    char **names;
    ts_tensor **tensors;
} ts_tensor_list;
TS_API ts_status ts_tensor_list_add(ts_tensor_list *l, const char *name,
                                    ts_tensor *t); /* retains */
TS_API ts_tensor *ts_tensor_list_get(const ts_tensor_list *l,
                                     const char *name); /* borrowed; NULL if absent */
TS_API void ts_tensor_list_free(ts_tensor_list *l);     /* releases and empties */
/* PyTorch's order and names: a module's parameters, then its buffers, then each child's.
 * named_parameters/named_buffers list a shared tensor once (PyTorch's remove_duplicate). */
TS_API ts_tensor_list ts_module_named_parameters(ts_module *m);
TS_API ts_tensor_list ts_module_named_buffers(ts_module *m);
TS_API ts_tensor_list ts_module_state_dict(ts_module *m); /* parameters and buffers */
/* Copies values into the module's tensors (any source device/dtype), without a graph. strict:
 * every key must match both ways (TS_ERR_ARG, PyTorch's "Missing key(s) in state_dict: ..."
 * message); shapes must agree in both modes (TS_ERR_SHAPE naming the key and both shapes). Nothing
 * is copied when it fails (out of memory included: values are staged on the tensors' devices and
 * dtypes first). */
TS_API ts_status ts_module_load_state_dict(ts_module *m, const ts_tensor_list *sd, bool strict);
/* PyTorch's repr: "SimpleCNN(\n  (conv1): Conv2d(3, 6, kernel_size=(5, 5), stride=(1, 1))\n..." */
TS_API char *ts_module_repr(ts_module *m); /* malloc'ed */
TS_API void
ts_module_summary(ts_module *m); /* repr, "Total parameters: N", "Trainable parameters: N" */

/* built-in modules (parameters initialised as PyTorch's defaults from the global generator, on the
 * default device) */
typedef struct ts_linear_opts {
    bool no_bias;
    ts_dtype dtype;
    ts_device device;
} ts_linear_opts;
TS_API ts_module *ts_linear_new(int64_t in_features, int64_t out_features);
TS_API ts_module *ts_linear_new_ex(int64_t in_features, int64_t out_features, ts_linear_opts o);
TS_API ts_module *ts_conv2d_new(int64_t in_channels, int64_t out_channels, int kernel_size,
                                ts_conv2d_opts o);
TS_API ts_module *ts_conv2d_new2(int64_t in_channels, int64_t out_channels, int kh, int kw,
                                 ts_conv2d_opts o);
/* reprs print an equal pair as one int (nn.MaxPool2d(2, 2)); AdaptiveAvgPool2d prints a tuple */
TS_API ts_module *ts_max_pool2d_new(ts_pool2d_opts o);
TS_API ts_module *ts_avg_pool2d_new(ts_pool2d_opts o);
TS_API ts_module *ts_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w);
TS_API ts_module *ts_relu_new(void);
TS_API ts_module *ts_gelu_new(void);
TS_API ts_module *ts_sigmoid_new(void);
TS_API ts_module *ts_tanh_new(void);
TS_API ts_module *ts_softmax_new(int dim);
TS_API ts_module *ts_flatten_new(int start_dim, int end_dim); /* nn.Flatten(): 1, -1 */
TS_API ts_module *ts_identity_new(void);                      /* nn.Identity: returns its input */
TS_API ts_module *ts_dropout_new(double p);
typedef struct ts_norm_opts {
    double eps;      /* 0 -> 1e-5 */
    double momentum; /* 0 -> 0.1 unless momentum_set (BatchNorm) */
    bool no_affine;
    bool no_running_stats;
    bool no_bias; /* LayerNorm(bias=False): a weight without a bias */
    /* true: momentum is taken as given, 0 included (running statistics frozen, as PyTorch's
     * momentum=0); false (the zeroed default): momentum 0 means PyTorch's default 0.1 */
    bool momentum_set;
} ts_norm_opts;
TS_API ts_module *ts_batch_norm1d_new(int64_t num_features, ts_norm_opts o);
TS_API ts_module *ts_batch_norm2d_new(int64_t num_features, ts_norm_opts o);
TS_API ts_module *ts_layer_norm_new(ts_shape normalized_shape, ts_norm_opts o);
TS_API ts_module *ts_embedding_new(int64_t num_embeddings, int64_t embedding_dim);
/* children named "0", "1", ... like nn.Sequential. Takes over every module given, also when it
 * fails (a NULL entry: a constructor that failed); one that already belongs to a module stays
 * there. ts_sequential_append takes over m likewise and returns seq, also on failure (error
 * pending), as ts_module_to does. */
TS_API ts_module *ts_sequential_new(int n, ts_module *const *modules);
TS_API ts_module *ts_sequential_append(ts_module *seq, ts_module *m);

/* act(bn(conv(x))) for a Conv2d, a BatchNorm2d or NULL, and a ReLU or NULL: ts_forward of each in
 * turn, or, when no gradient is recorded (grad mode off, or neither x nor a parameter requires
 * grad), no trace or autocast is on, bn is a BatchNorm2d in eval mode with running statistics
 * and the tensors are float32 or float64, ONE convolution with bn folded into its weight and bias
 * (W' = W gamma / sqrt(var + eps), b' = (b - mean) gamma / sqrt(var + eps) + beta, in float64,
 * rounded once) and the ReLU applied as the output is written. The folded tensors are kept in
 * the Conv2d until any of their sources changes (in place or replaced); the module's parameters,
 * buffers and state dict never change. Results agree with the modules' within float rounding
 * (bench/results/cpu-conv.md, "Eval path"). Sequential does this by itself for every such run of
 * its children, as do the ResNet builders' blocks. */
TS_API ts_tensor *ts_forward_conv_bn(ts_module *conv, ts_module *bn, ts_module *act, ts_tensor *x);
/* Turns that fusion on (the default) or off for the whole process, for comparisons and
 * benchmarks; returns the previous setting. */
TS_API bool ts_set_eval_fusion(bool on);
/* torch.nn.utils.fusion.fuse_conv_bn_weights / fuse_linear_bn_weights: the weight and bias of a
 * convolution (w [O, I/g, ...]; transpose: a transposed one, w [I, O/g, ...] with groups 1) or a
 * linear layer (w [O, I]) with an eval-mode batch norm folded in, the same arithmetic as the eval
 * fusion above (float64, rounded once): W' = W s, b' = (b - mean) s + beta per output channel,
 * s = gamma / sqrt(var + eps). b, gamma, beta may be NULL (0, 1, 0); mean, var, gamma, beta are
 * [O] ([1] for the linear form too: broadcast, as PyTorch's). *w_out has w's dtype, shape and
 * device, *b_out [O] b's dtype (w's without b), on w's device; new tensors, no graph. */
TS_API ts_status ts_fuse_conv_bn_weights(ts_tensor *w, ts_tensor *b, ts_tensor *mean,
                                         ts_tensor *var, double eps, ts_tensor *gamma,
                                         ts_tensor *beta, bool transpose, ts_tensor **w_out,
                                         ts_tensor **b_out);
TS_API ts_status ts_fuse_linear_bn_weights(ts_tensor *w, ts_tensor *b, ts_tensor *mean,
                                           ts_tensor *var, double eps, ts_tensor *gamma,
                                           ts_tensor *beta, ts_tensor **w_out, ts_tensor **b_out);

/* init (in place, no graph, from the global generator), PyTorch's formulas; return t (borrowed: no
 * new reference, unlike the in-place ops) or NULL. kaiming_uniform_ is mode fan_in, leaky_relu. */
TS_API ts_tensor *ts_init_kaiming_uniform_(ts_tensor *t, double a);
/* kaiming_normal_(t, a, mode, 'leaky_relu'): N(0, std), std = gain / sqrt(fan), gain =
 * sqrt(2 / (1 + a^2)); a = 0 is nonlinearity='relu'. TS_FAN_OUT is torchvision's ResNet init. */
typedef enum ts_fan_mode { TS_FAN_IN = 0, TS_FAN_OUT } ts_fan_mode;
TS_API ts_tensor *ts_init_kaiming_normal_(ts_tensor *t, double a, ts_fan_mode mode);
TS_API ts_tensor *ts_init_uniform_(ts_tensor *t, double low, double high);
TS_API ts_tensor *ts_init_normal_(ts_tensor *t, double mean, double std);
TS_API ts_tensor *ts_init_xavier_uniform_(ts_tensor *t, double gain);
TS_API ts_tensor *ts_init_zeros_(ts_tensor *t);
TS_API ts_tensor *ts_init_ones_(ts_tensor *t);
/* calculate_gain: 1 for linear, conv*, conv_transpose* and sigmoid, 5/3 tanh, sqrt(2) relu,
 * sqrt(2 / (1 + slope^2)) leaky_relu (param NAN: PyTorch's None, slope 0.01), 3/4 selu; NAN and
 * TS_ERR_ARG for any other name */
TS_API double ts_init_calculate_gain(const char *nonlinearity, double param);
/* kaiming_uniform_ (normal false) / kaiming_normal_ with any mode and nonlinearity calculate_gain
 * knows (a: leaky_relu's slope): std = gain / sqrt(fan), U(-sqrt(3) std, sqrt(3) std) or
 * N(0, std) */
TS_API ts_tensor *ts_init_kaiming_(ts_tensor *t, double a, ts_fan_mode mode,
                                   const char *nonlinearity, bool normal);
TS_API ts_tensor *ts_init_xavier_normal_(ts_tensor *t, double gain);
/* N(mean, std) truncated to [a, b]: PyTorch's inverse-CDF draws, clamped */
TS_API ts_tensor *ts_init_trunc_normal_(ts_tensor *t, double mean, double std, double a, double b);
/* a (semi-)orthogonal [rows, numel / rows] from the QR of normal draws (R's diagonal signs folded
 * into Q), times gain; at least 2 dims */
TS_API ts_tensor *ts_init_orthogonal_(ts_tensor *t, double gain);
/* 2-D: N(0, std) with ceil(sparsity * rows) random rows of each column zeroed */
TS_API ts_tensor *ts_init_sparse_(ts_tensor *t, double sparsity, double std);
/* 3- to 5-D convolution weight: the identity (Dirac delta per channel, per group) */
TS_API ts_tensor *ts_init_dirac_(ts_tensor *t, int64_t groups);

/* ======================================================== more activations (issue 52)
 * torch.nn.functional's, with PyTorch's formulas, NaN propagation and gradients (the kink points
 * included: hardtanh / relu6 pass no gradient at their bounds, threshold keeps x only where x >
 * threshold, elu's gradient at 0 is alpha); floating dtypes (f16 / bf16 computed in float) on
 * every device. The `_` forms write into t and return it (retained into the scope) as ts_relu_.
 * TS_ERR_DTYPE for integer inputs where PyTorch has no kernel, TS_ERR_ARG / TS_ERR_SHAPE with
 * PyTorch's messages for bad numbers and shapes. */
TS_API ts_tensor *ts_elu(ts_tensor *t, double alpha); /* x > 0 ? x : alpha (e^x - 1) */
TS_API ts_tensor *ts_elu_(ts_tensor *t, double alpha);
/* x > 0 ? x : alpha (e^(x / alpha) - 1); alpha != 0 */
TS_API ts_tensor *ts_celu(ts_tensor *t, double alpha);
TS_API ts_tensor *ts_celu_(ts_tensor *t, double alpha);
TS_API ts_tensor *ts_selu(ts_tensor *t); /* scale * elu(x, alpha), PyTorch's constants */
TS_API ts_tensor *ts_selu_(ts_tensor *t);
/* x > 0 ? x : x * negative_slope (PyTorch's default slope is 0.01); floating dtypes only; the
 * gradient at 0 (and at NaN) is negative_slope, as PyTorch's */
TS_API ts_tensor *ts_leaky_relu(ts_tensor *t, double negative_slope);
TS_API ts_tensor *ts_leaky_relu_(ts_tensor *t, double negative_slope);
/* clamp(x, min_val, max_val) (min_val <= max_val; integer tensors too, with the numbers truncated,
 * as PyTorch); relu6 is hardtanh(x, 0, 6) */
TS_API ts_tensor *ts_hardtanh(ts_tensor *t, double min_val, double max_val);
TS_API ts_tensor *ts_hardtanh_(ts_tensor *t, double min_val, double max_val);
TS_API ts_tensor *ts_relu6(ts_tensor *t);
TS_API ts_tensor *ts_relu6_(ts_tensor *t);
/* x <= threshold ? value : x (integer tensors too: the numbers truncated, TS_ERR_ARG when they do
 * not fit the dtype) */
TS_API ts_tensor *ts_threshold(ts_tensor *t, double threshold, double value);
TS_API ts_tensor *ts_threshold_(ts_tensor *t, double threshold, double value);
TS_API ts_tensor *ts_hardshrink(ts_tensor *t, double lambd); /* 0 on [-lambd, lambd], else x */
/* x -+ lambd outside [-lambd, lambd], else 0; lambd >= 0 */
TS_API ts_tensor *ts_softshrink(ts_tensor *t, double lambd);
TS_API ts_tensor *ts_tanhshrink(ts_tensor *t); /* x - tanh(x) */
TS_API ts_tensor *ts_softsign(ts_tensor *t);   /* x / (1 + |x|) */
TS_API ts_tensor *ts_logsigmoid(ts_tensor *t); /* log(sigmoid(x)), stable both sides */
TS_API ts_tensor *ts_mish(ts_tensor *t);       /* x tanh(log(1 + e^x)) */
TS_API ts_tensor *ts_mish_(ts_tensor *t);
TS_API ts_tensor *ts_hardsigmoid(ts_tensor *t); /* min(max(x + 3, 0), 6) / 6 */
TS_API ts_tensor *ts_hardsigmoid_(ts_tensor *t);
TS_API ts_tensor *ts_hardswish(ts_tensor *t); /* x min(max(x + 3, 0), 6) / 6 */
TS_API ts_tensor *ts_hardswish_(ts_tensor *t);
/* glu: a * sigmoid(b), a and b the halves of dim (even size) */
TS_API ts_tensor *ts_glu(ts_tensor *t, int dim);
/* prelu: x > 0 ? x : w x; w (t's dtype and device) 0-dim or 1-D of 1 or C = t's dim 1 (a 0-/1-dim
 * t has one channel) elements; differentiable in both */
TS_API ts_tensor *ts_prelu(ts_tensor *t, ts_tensor *w);
TS_API ts_tensor *ts_softmin(ts_tensor *t, int dim); /* softmax(-x, dim) */
/* torch.nn.functional.softplus(x, beta, threshold): x where beta x > threshold, else
 * log(1 + exp(beta x)) / beta, with PyTorch's gradient; floating dtypes (TS_ERR_DTYPE else) */
TS_API ts_tensor *ts_softplus_ex(ts_tensor *t, double beta, double threshold);
/* torch.nn.functional.rrelu: training: x where x > 0, else a x with a ~ U(lower, upper) drawn per
 * element (gradient a there, 1 elsewhere); evaluation: leaky_relu(x, (lower + upper) / 2).
 * lower <= upper (TS_ERR_ARG), floating x (TS_ERR_DTYPE). The `_` form writes into x, returns x. */
TS_API ts_tensor *ts_rrelu(ts_tensor *x, double lower, double upper, bool training);
TS_API ts_tensor *ts_rrelu_(ts_tensor *x, double lower, double upper, bool training);

/* =============================================================== transformers
 * (docs/TRANSFORMER.md) */
/* GELU's tanh approximation, torch.nn.functional.gelu(x, approximate='tanh'):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), composed from differentiable ops. */
TS_API ts_tensor *ts_gelu_tanh(ts_tensor *t);
typedef enum ts_gelu_approximate { TS_GELU_NONE = 0, TS_GELU_TANH } ts_gelu_approximate;
TS_API ts_module *ts_gelu_new_ex(ts_gelu_approximate approximate); /* nn.GELU(approximate=...) */

/* torch.nn.functional.rms_norm: x / sqrt(mean(x^2 over the last normalized_shape.ndim dims) + eps)
 * * w; w of normalized_shape or NULL; eps 0 -> None, PyTorch's default: the machine epsilon of the
 * type it computes in (f64 2.2e-16; f32 1.19e-7, also for f16/bf16 inputs, which are computed in
 * f32); eps -0.0 -> an eps of exactly zero (F.rms_norm(eps=0.0)); any other eps is added as given,
 * a negative one too, as PyTorch does. Autocast: float32. Fused kernels where the backend has them
 * (decision 0028). */
TS_API ts_tensor *ts_rms_norm(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, double eps);
/* nn.RMSNorm: parameter "weight" (ones) unless o.no_affine; o.eps 0 -> None as above (momentum,
 * no_running_stats, no_bias unused). */
TS_API ts_module *ts_rms_norm_new(ts_shape normalized_shape, ts_norm_opts o);
/* A pre-norm block's residual add and the next norm in one pass (decision 0031): *h = x +
 * residual (ts_add's bits; x and residual of one shape, dtype and device, no broadcasting) and
 * returns ts_layer_norm(*h, ...) / ts_rms_norm(*h, ...) with the same bits. h is an output of its
 * own: its gradient (from y and from any later use) flows to x and residual. h must not be NULL;
 * on failure NULL is returned and *h is NULL. */
TS_API ts_tensor *ts_add_layer_norm(ts_tensor *x, ts_tensor *residual, ts_shape normalized_shape,
                                    ts_tensor *w, ts_tensor *b, double eps, ts_tensor **h);
TS_API ts_tensor *ts_add_rms_norm(ts_tensor *x, ts_tensor *residual, ts_shape normalized_shape,
                                  ts_tensor *w, double eps, ts_tensor **h);

/* nn.MultiheadAttention(embed_dim, num_heads, dropout, bias=!no_bias, batch_first): parameters
 * in_proj_weight [3E, E] (xavier_uniform_), in_proj_bias [3E] (zeros), out_proj.weight,
 * out_proj.bias (a Linear child "out_proj"; bias zeros). kdim/vdim, add_bias_kv, add_zero_attn are
 * not supported. */
typedef struct ts_mha_opts {
    double dropout; /* on the attention weights, in training; PyTorch's default 0 */
    bool no_bias;
    bool batch_first; /* inputs [N, L, E]; false: [L, N, E] (PyTorch's default) */
} ts_mha_opts;
TS_API ts_module *ts_multihead_attention_new(int64_t embed_dim, int64_t num_heads, ts_mha_opts o);
/* MultiheadAttention.forward: query [L, N, E] ([N, L, E] batch_first) or unbatched [L, E]; key and
 * value [S, N, E] likewise. key_padding_mask [N, S] ([S] unbatched) and attn_mask [L, S] or
 * [N * num_heads, L, S] (NULL: none): bool (true = NOT allowed to attend, PyTorch's MHA convention,
 * the opposite of SDPA's) or of the query's dtype (added). is_causal: a causal mask; with attn_mask
 * given it is a hint that attn_mask is causal (PyTorch); without one Tessera makes the causal mask
 * (PyTorch requires attn_mask). need_weights: *attn_weights_out (may be NULL) gets the attention
 * weights averaged over the heads [N, L, S] ([L, S] unbatched), in the caller's scope; otherwise
 * the attention runs through ts_scaled_dot_product_attention and *attn_weights_out is NULL. Returns
 * attn_output of the query's shape. ts_forward(mha, x) is self-attention without masks. */
TS_API ts_tensor *ts_multihead_attention(ts_module *mha, ts_tensor *query, ts_tensor *key,
                                         ts_tensor *value, ts_tensor *key_padding_mask,
                                         ts_tensor *attn_mask, bool is_causal, bool need_weights,
                                         ts_tensor **attn_weights_out);

/* torch.nn.functional.multi_head_attention_forward's arguments (beyond query, key, value). Zero
 * initialisation is not PyTorch's defaults: set training, need_weights and average_attn_weights
 * (PyTorch's True). Tensors NULL: None. */
typedef struct ts_mha_forward_args {
    int64_t embed_dim_to_check, num_heads;
    ts_tensor *in_proj_weight, *in_proj_bias;   /* [3E, E], [3E] (bias split in 3 either way) */
    ts_tensor *bias_k, *bias_v;                 /* [1, 1, E] each, appended to the keys / values */
    bool add_zero_attn;                         /* a zero key and value appended per head */
    double dropout_p;                           /* on the attention weights, when training */
    ts_tensor *out_proj_weight, *out_proj_bias; /* [E, E] (required), [E] */
    bool training;
    ts_tensor *key_padding_mask; /* [N, S] ([S] unbatched): bool true = ignored, or float added */
    bool need_weights;
    ts_tensor *attn_mask; /* [L, S] or [N * num_heads, L, S]: bool true = not allowed, or float */
    bool use_separate_proj_weight; /* q / k / v_proj_weight [E, E], [E, kdim], [E, vdim] */
    ts_tensor *q_proj_weight, *k_proj_weight, *v_proj_weight;
    ts_tensor *static_k,
        *static_v; /* [N * num_heads, S', E / num_heads]: replace the projections */
    bool average_attn_weights;
    bool is_causal; /* a hint that attn_mask (required) is causal, as PyTorch's */
} ts_mha_forward_args;
/* F.multi_head_attention_forward: query [L, N, E] (or unbatched [L, E]), key and value [S, N, *]
 * ([S, *]) sequence-first; returns attn_output [L, N, E] ([L, E]). need_weights: the attention
 * weights go to *attn_weights_out (may be NULL; caller's scope): [N, L, S'] averaged over the
 * heads or [N, num_heads, L, S'] (unbatched without N); otherwise the attention runs through
 * ts_scaled_dot_product_attention and *attn_weights_out is NULL. Differentiable in every float
 * tensor, on every device. PyTorch's checks and messages (TS_ERR_SHAPE / TS_ERR_ARG). */
TS_API ts_tensor *ts_multi_head_attention_forward(ts_tensor *query, ts_tensor *key,
                                                  ts_tensor *value, const ts_mha_forward_args *a,
                                                  ts_tensor **attn_weights_out);

typedef enum ts_activation {
    TS_ACT_RELU = 0, /* PyTorch's default */
    TS_ACT_GELU,     /* activation="gelu": exact (erf) form */
    TS_ACT_GELU_TANH /* GELU's tanh approximation (no PyTorch string for it) */
} ts_activation;
/* nn.TransformerEncoderLayer options; zero is PyTorch's default except dropout: */
typedef struct ts_transformer_opts {
    int64_t dim_feedforward; /* 0 -> 2048 */
    bool has_dropout;        /* false: PyTorch's default dropout 0.1; true: `dropout` (0 allowed) */
    double dropout;
    ts_activation activation;
    double layer_norm_eps; /* 0 -> 1e-5 */
    bool batch_first, norm_first;
    bool no_bias; /* bias=False: the linear layers, the attention and the layer norms */
} ts_transformer_opts;
/* Children in PyTorch's order and names: self_attn (MultiheadAttention), linear1, dropout,
 * linear2, norm1, norm2, dropout1, dropout2. */
TS_API ts_module *ts_transformer_encoder_layer_new(int64_t d_model, int64_t nhead,
                                                   ts_transformer_opts o);
/* TransformerEncoderLayer.forward(src, src_mask, src_key_padding_mask, is_causal); masks as
 * ts_multihead_attention's. ts_forward(layer, src) runs it without masks. */
TS_API ts_tensor *ts_transformer_encoder_layer(ts_module *layer, ts_tensor *src, ts_tensor *mask,
                                               bool is_causal, ts_tensor *key_padding_mask);
/* Activation checkpointing of the layer's two sublayers, each on its own (the attention with its
 * residual and norm, then the feed-forward with its): each runs under ts_checkpoint, so a backward
 * recomputes one sublayer's intermediates at a time, never the whole layer's. Results and
 * gradients are those of the plain layer, bit for bit. TS_ERR_ARG for a module that is not a
 * TransformerEncoderLayer. */
TS_API ts_status ts_transformer_encoder_layer_checkpoint_sublayers(ts_module *layer, bool on);

/* A GPT (decoder-only transformer) built from the modules above: tok_emb (Embedding vocab x d),
 * pos_emb (Embedding context x d), drop (Dropout), blocks.N (TransformerEncoderLayer(d, n_head,
 * 4d, dropout, activation gelu (erf), batch_first, norm_first) run with is_causal), ln_f
 * (LayerNorm d); the head is tied to tok_emb.weight: logits = x @ tok_emb.weight^T, no parameter of
 * its own and no "head.weight" key. Initialised as nanoGPT (normal(0, 0.02), residual projections
 * 0.02/sqrt(2 n_layer), zero biases). */
typedef struct ts_gpt_config {
    int64_t vocab_size; /* 0 -> 256 */
    int64_t context;    /* 0 -> 256: longest sequence (position embeddings) */
    int64_t n_layer;    /* 0 -> 4 */
    int64_t n_head;     /* 0 -> 4 */
    int64_t n_embd;     /* 0 -> 256 */
    double dropout;     /* 0 */
} ts_gpt_config;
/* ts_forward(gpt, idx i64 [B, T]) -> logits [B, T, vocab]; T <= context, else TS_ERR_SHAPE */
TS_API ts_module *ts_gpt_new(ts_gpt_config c);
TS_API ts_gpt_config ts_gpt_get_config(ts_module *gpt); /* defaults resolved; zeros if not a GPT */
typedef struct ts_sample_opts {
    double temperature; /* 0 -> 1 */
    int64_t top_k;      /* 0: every token */
    bool greedy;        /* argmax (the first of equal maxima) */
} ts_sample_opts;
/* One token per row of logits [B, V] (any floating dtype and device): softmax(logits /
 * temperature) restricted to the top_k largest (ties with the k-th kept, as nanoGPT), drawn with
 * one U[0, 1) per row from the global generator. -> i64 [B] on the logits' device. */
TS_API ts_tensor *ts_sample_logits(ts_tensor *logits, ts_sample_opts o);
/* Appends new_tokens sampled tokens to idx i64 [B, T0] -> i64 [B, T0 + new_tokens]; each step
 * feeds the last `context` tokens (nanoGPT's crop) and recomputes them (no key/value cache). Runs
 * without a graph and in eval mode (the module's mode is restored afterwards). */
TS_API ts_tensor *ts_gpt_generate(ts_module *gpt, ts_tensor *idx, int64_t new_tokens,
                                  ts_sample_opts o);
/* Activation checkpointing of the blocks (ts_module_set_checkpoint): block i is checkpointed when
 * every > 0 and i % every == 0 (1: all of them; 0: none). TS_ERR_ARG for a module that is not a
 * GPT or every < 0. */
TS_API ts_status ts_gpt_checkpoint_blocks(ts_module *gpt, int every);
/* The same choice of blocks (every > 0 and i % every == 0), each checkpointed by sublayer
 * (ts_transformer_encoder_layer_checkpoint_sublayers): the recomputation held in backward is one
 * sublayer's, for one more kept input per block (the feed-forward's). Each call replaces the
 * other's setting (ts_gpt_checkpoint_blocks(gpt, 0) switches both off). Errors as
 * ts_gpt_checkpoint_blocks'. */
TS_API ts_status ts_gpt_checkpoint_sublayers(ts_module *gpt, int every);
/* Weight-only quantization of a GPT for decoding (torchao's int8_weight_only / int4_weight_only,
 * include/tessera/quant.h): every block's linears (self_attn.in_proj, self_attn.out_proj, linear1,
 * linear2) and the tied head get quantized copies (ts_quantize_int8_weight_only, or
 * ts_quantize_int4_weight_only with group_size) and the forward runs them through
 * ts_weight_only_linear from then on, in eval mode only (training or a graph: TS_ERR_STATE). The
 * float parameters stay (the embedding shares the head's); on_layer (NULL: none) is told each
 * layer's name, its float32 and its quantized weight bytes. Again on a quantized GPT:
 * TS_ERR_STATE. */
typedef struct ts_gpt_quant_opts {
    int bits;           /* 8 or 4 */
    int64_t group_size; /* int4: 32, 64, 128 or 256 (0: 128) */
    void (*on_layer)(void *ctx, const char *name, int64_t float_bytes, int64_t quant_bytes);
    void *ctx;
    /* 0: weight-only (float activations); 8: int8 dynamic activations per token (torchao's 8da8w
     * / 8da4w, ts_int8_dynamic_activation_linear; int4 weights from
     * ts_quantize_int4_symmetric_weight). ts_gpt2_quantize only (the nanoGPT path refuses 8). */
    int act_bits;
} ts_gpt_quant_opts;
TS_API ts_status ts_gpt_quantize_weight_only(ts_module *gpt, ts_gpt_quant_opts o);

/* ======================================================== residual networks (docs/RESNET.md) */
/* torchvision's blocks (ResNet v1.5: a block's stride is on its 3x3 conv), convs without bias.
 * BasicBlock: children conv1 (3x3, stride), bn1, relu, conv2 (3x3), bn2, downsample;
 *   forward relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
 * Bottleneck: conv1 (1x1, width), bn1, conv2 (3x3, width, stride, groups), bn2, conv3 (1x1,
 *   planes * 4), bn3, relu, downsample; width = planes * width_per_group / 64 * groups.
 * shortcut(x) is downsample(x) when a downsample module is given (the block takes it over, also
 * on failure), else x itself. Children keep PyTorch's default init; the ResNet builders re-init. */
TS_API ts_module *ts_basic_block_new(int64_t inplanes, int64_t planes, int stride,
                                     ts_module *downsample);
/* groups, width_per_group 0 -> 1, 64 (torchvision's; ResNeXt and wide ResNets change them) */
TS_API ts_module *ts_bottleneck_new(int64_t inplanes, int64_t planes, int stride,
                                    ts_module *downsample, int64_t groups, int64_t width_per_group);
/* torchvision's downsample: Sequential("0": Conv2d 1x1 stride without bias, "1": BatchNorm2d) */
TS_API ts_module *ts_resnet_downsample_new(int64_t inplanes, int64_t outplanes, int stride);

typedef enum ts_resnet_block { TS_BASIC_BLOCK = 0, TS_BOTTLENECK } ts_resnet_block;
typedef struct ts_resnet_config {
    int64_t num_classes; /* 0 -> 1000 (ts_resnet_cifar: 10) */
    int64_t in_channels; /* 0 -> 3 (1 for Fashion-MNIST) */
    int64_t width;       /* 0 -> 64 (ts_resnet_cifar: 16): channels of the stem and the first
                            stage; each later stage doubles them. Not torchvision's width_per_group */
    bool cifar_stem; /* conv1 3x3 stride 1 padding 1 and maxpool an Identity: the usual adaptation
                        to 32x32 images (ts_resnet_cifar always has it) */
    bool zero_init_residual; /* each block's last BatchNorm weight starts at 0 (bn2, or bn3) */
    int64_t groups, width_per_group; /* Bottleneck only: 0 -> 1, 64 */
    bool shortcut_conv; /* ts_resnet_cifar: option B shortcuts (torchvision's downsample) where
                           the shape changes, instead of the paper's option A */
    bool plain_layout;  /* keep the activations NCHW. By default the forward moves a 4-D input to
                           the channels_last memory format (ts_contiguous_format), which the CPU's
                           (and sim's) convolutions, batch-norms and activations keep: no oneDNN
                           reorders between layers, ~5% of a training step (docs/RESNET.md). The
                           output, the gradients and the parameters are the same either way (the
                           same math, summed in another order) */
} ts_resnet_config;
/* torchvision's ResNet: children conv1 (7x7 stride 2 padding 3, or the CIFAR stem), bn1, relu,
 * maxpool (3x3 stride 2 padding 1), layer1..layer4 (Sequentials of blocks "0", "1", ...; the first
 * block of layer2..4 has stride 2 and, as any block whose shape changes, a downsample), avgpool
 * (AdaptiveAvgPool2d (1, 1)), fc (Linear). layers[i] blocks in stage i. Init as torchvision's:
 * convs kaiming_normal_ fan_out relu, BatchNorm weight 1 and bias 0, fc PyTorch's default.
 * ts_forward(resnet, x [N, in_channels, H, W]) -> logits [N, num_classes]. */
TS_API ts_module *ts_resnet_new(ts_resnet_block block, const int layers[4], ts_resnet_config c);
/* Checkpointing of the residual blocks, counted over all stages (ts_gpt_checkpoint_blocks's rule).
 */
TS_API ts_status ts_resnet_checkpoint_blocks(ts_module *resnet, int every);
/* BasicBlock [2, 2, 2, 2]: 11.7M parameters */
TS_API ts_module *ts_resnet18_new(ts_resnet_config c);
TS_API ts_module *ts_resnet34_new(ts_resnet_config c); /* BasicBlock [3, 4, 6, 3]: 21.8M */
TS_API ts_module *ts_resnet50_new(ts_resnet_config c); /* Bottleneck [3, 4, 6, 3]: 25.6M */
/* He et al.'s CIFAR ResNets (2016, section 4.2), depth = 6n + 2: conv1 (3x3, width), bn1, relu,
 * layer1..layer3 (n BasicBlocks each, width, 2 width, 4 width channels; the first block of
 * layer2 and layer3 has stride 2), avgpool, fc. Where the shape changes the shortcut is the
 * paper's option A: x[:, :, ::2, ::2] with zero channels added on both sides, no parameters (the
 * block's downsample child is a parameter-free "ShortcutA"); with shortcut_conv, option B
 * (torchvision's downsample.0 / downsample.1). Same init as the ResNets above. ts_resnet20: n 3,
 * 0.27M parameters, about 41M multiply-adds for a 32x32 image. */
TS_API ts_module *ts_resnet_cifar_new(int depth, ts_resnet_config c);
TS_API ts_module *ts_resnet20_new(ts_resnet_config c);

/* ============================================ recurrent layers (nn.RNN, nn.LSTM, nn.GRU, cells)
 * PyTorch's parameters, names and shapes: per layer l and direction (suffix "_reverse" for the
 * second) weight_ih_l{l} [G*H, in], weight_hh_l{l} [G*H, H_out], bias_ih_l{l}, bias_hh_l{l}
 * [G*H], weight_hr_l{l} [proj_size, H] (LSTM with proj_size); G = 1 (RNN), 4 (LSTM: gates i, f,
 * g, o), 3 (GRU: r, z, n, n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); in = input_size for
 * layer 0, else H_out * directions; H_out = proj_size or hidden_size. Cells: weight_ih, weight_hh,
 * bias_ih, bias_hh. All drawn from uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as
 * PyTorch's reset_parameters, on the default device in float32 (ts_module_to* moves them). */
typedef enum ts_rnn_nonlinearity { TS_RNN_TANH = 0, TS_RNN_RELU } ts_rnn_nonlinearity;
typedef struct ts_rnn_opts {
    int64_t num_layers;               /* 0 -> 1 */
    ts_rnn_nonlinearity nonlinearity; /* RNN and RNNCell only */
    bool no_bias;                     /* bias=False */
    bool batch_first;                 /* input and output [B, T, *] (not h_n / c_n) */
    double dropout;                   /* on each layer's output but the last's, in training */
    bool bidirectional;
    int64_t proj_size; /* LSTM only: 0 none, else < hidden_size */
} ts_rnn_opts;
TS_API ts_module *ts_rnn_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
TS_API ts_module *ts_lstm_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
TS_API ts_module *ts_gru_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
/* cells: only o.nonlinearity (RNNCell) and o.no_bias are used */
TS_API ts_module *ts_rnn_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
TS_API ts_module *ts_lstm_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
TS_API ts_module *ts_gru_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o);
/* RNN/LSTM/GRU.forward: input [T, B, I] ([B, T, I] batch_first) or unbatched [T, I]; h0 [L*D, B,
 * H_out] ([L*D, H_out] unbatched), c0 (LSTM only) [L*D, B, H], NULL: zeros; lengths (NULL: all T)
 * an integer tensor [B]: sequence b's steps past lengths[b] leave the state as it was and output
 * zeros (packed sequences' semantics; the reverse direction starts at each sequence's end).
 * Returns output [T, B, D*H_out] (input's layout); *h_n [L*D, B, H_out] and *c_n [L*D, B, H] (LSTM;
 * NULL otherwise) in the caller's scope when not NULL. ts_forward(m, x) returns the output alone.
 * The input's dtype must be the parameters' (TS_ERR_DTYPE); shapes are checked (TS_ERR_SHAPE). */
TS_API ts_tensor *ts_rnn_forward(ts_module *m, ts_tensor *input, ts_tensor *h0, ts_tensor *c0,
                                 ts_tensor *lengths, ts_tensor **h_n, ts_tensor **c_n);
/* Cell forward: input [B, I] or [I]; hx (and cx, LSTMCell) [B, H] or [H], NULL: zeros. Returns
 * h'; *c_out gets c' (LSTMCell). ts_forward(cell, x) returns h' from zero states. */
TS_API ts_tensor *ts_rnn_cell_forward(ts_module *cell, ts_tensor *input, ts_tensor *hx,
                                      ts_tensor *cx, ts_tensor **c_out);

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_module *ts_resnet18(ts_resnet_config c);
TS_API ts_module *ts_resnet34(ts_resnet_config c);
TS_API ts_module *ts_resnet50(ts_resnet_config c);
TS_API ts_module *ts_resnet_cifar(int depth, ts_resnet_config c);
TS_API ts_module *ts_resnet20(ts_resnet_config c);

#endif /* TESSERA_NN_H */
