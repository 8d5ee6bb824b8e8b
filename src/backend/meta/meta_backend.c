/* meta_backend.c — the "meta" device (PyTorch's): tensors with shapes, dtypes and strides but no
 * memory. Storage is made without an allocator (core/tensor.c gives every meta storage one shared
 * placeholder address), so every kernel here does nothing: the front ends have already checked the
 * arguments and sized the results, which is all a meta op computes. Host reads of meta data are
 * refused before they reach this table (tsi_meta_refuse, and the copy out in core/transfer.c), so
 * the copy entries only ever copy into meta memory, which is nothing to do. */
#include "backend/meta/meta_backend.h"

#include <string.h>

#include "backend/backend.h"

#define UNUSED(x) (void)(x)

static int meta_device_count(const ts_backend *be) { return UNUSED(be), 1; }

static void meta_memory_info(const ts_backend *be, int index, size_t *free_bytes,
                             size_t *total_bytes) {
    UNUSED(be), UNUSED(index);
    if (free_bytes) *free_bytes = 0; /* 0 total: no capacity, like an unlimited sim device */
    if (total_bytes) *total_bytes = 0;
}

/* never called (meta storage has no allocator); here so the table has no hole */
static void *meta_raw_alloc(const ts_backend *be, int index, size_t nbytes) {
    UNUSED(be), UNUSED(index), UNUSED(nbytes);
    return NULL;
}
static void meta_raw_free(const ts_backend *be, int index, void *p, size_t nbytes) {
    UNUSED(be), UNUSED(index), UNUSED(p), UNUSED(nbytes);
}
static void meta_bytes(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    UNUSED(be), UNUSED(index), UNUSED(dst), UNUSED(src), UNUSED(n);
}
static void meta_d2d(const ts_backend *be, int di, void *dst, int si, const void *src, size_t n) {
    UNUSED(be), UNUSED(di), UNUSED(dst), UNUSED(si), UNUSED(src), UNUSED(n);
}
static void meta_memset(const ts_backend *be, int index, void *p, size_t n) {
    UNUSED(be), UNUSED(index), UNUSED(p), UNUSED(n);
}
static void meta_sync(const ts_backend *be, int index) { UNUSED(be), UNUSED(index); }

/* ---- kernels: nothing to compute */
static void k_copy(const ts_backend *be, int i, const ts_kview *d, const ts_kview *s) {
    UNUSED(be), UNUSED(i), UNUSED(d), UNUSED(s);
}
static void k_fill(const ts_backend *be, int i, const ts_kview *d, double v) {
    UNUSED(be), UNUSED(i), UNUSED(d), UNUSED(v);
}
static void k_unary(const ts_backend *be, int i, ts_unary_op op, const ts_kview *o,
                    const ts_kview *a, double p0, double p1) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(a), UNUSED(p0), UNUSED(p1);
}
static void k_binary(const ts_backend *be, int i, ts_binary_op op, const ts_kview *o,
                     const ts_kview *a, const ts_kview *b) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(a), UNUSED(b);
}
static void k_binary_scalar(const ts_backend *be, int i, ts_binary_op op, const ts_kview *o,
                            const ts_kview *a, double s) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(a), UNUSED(s);
}
static void k_ternary(const ts_backend *be, int i, ts_ternary_op op, const ts_kview *o,
                      const ts_kview *a, const ts_kview *b, const ts_kview *c, double p) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(a), UNUSED(b), UNUSED(c), UNUSED(p);
}
static void k_where(const ts_backend *be, int i, const ts_kview *o, const ts_kview *c,
                    const ts_kview *a, const ts_kview *b) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(c), UNUSED(a), UNUSED(b);
}
static void k_reduce(const ts_backend *be, int i, ts_reduce_op op, const ts_kview *o,
                     const ts_kview *in, int nred, double p) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(in), UNUSED(nred), UNUSED(p);
}
static void k_scan(const ts_backend *be, int i, ts_scan_op op, const ts_kview *o,
                   const ts_kview *idx, const ts_kview *in, int dim) {
    UNUSED(be), UNUSED(i), UNUSED(op), UNUSED(o), UNUSED(idx), UNUSED(in), UNUSED(dim);
}
static void k_matmul(const ts_backend *be, int i, const ts_kview *o, const ts_kview *a,
                     const ts_kview *b) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(a), UNUSED(b);
}
static void k_matmul_bias(const ts_backend *be, int i, const ts_kview *o, const ts_kview *a,
                          const ts_kview *b, const ts_kview *bias) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(a), UNUSED(b), UNUSED(bias);
}
static bool k_dtype_yes(const ts_backend *be, int i, ts_dtype dt) {
    return UNUSED(be), UNUSED(i), UNUSED(dt), true;
}
static void k_index(const ts_backend *be, int i, const ts_kview *o, const ts_kview *in, int dim,
                    const ts_kview *idx) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(in), UNUSED(dim), UNUSED(idx);
}
static void k_scatter_add(const ts_backend *be, int i, const ts_kview *d, int dim,
                          const ts_kview *idx, const ts_kview *s) {
    UNUSED(be), UNUSED(i), UNUSED(d), UNUSED(dim), UNUSED(idx), UNUSED(s);
}
static void k_cdist(const ts_backend *be, int i, const ts_kview *o, const ts_kview *a,
                    const ts_kview *b, double p) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(a), UNUSED(b), UNUSED(p);
}
static void k_bag(const ts_backend *be, int i, const ts_kview *o, const ts_bag_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(a);
}
static void k_roi(const ts_backend *be, int i, const ts_roi_args *a, bool backward) {
    UNUSED(be), UNUSED(i), UNUSED(a), UNUSED(backward);
}
static void k_gather_dims(const ts_backend *be, int i, const ts_kview *o, const ts_kview *in, int k,
                          const ts_kview *idx) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(in), UNUSED(k), UNUSED(idx);
}
static bool k_fft(const ts_backend *be, int i, const ts_kview *o, const ts_kview *in, int dim,
                  ts_fft_kind kind, bool fwd, double scale) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(in), UNUSED(dim), UNUSED(kind), UNUSED(fwd);
    return UNUSED(scale), true;
}
/* info is on the host: every matrix "succeeded" (a meta op cannot know otherwise) */
static bool k_linalg(const ts_backend *be, int i, const ts_linalg_args *a) {
    UNUSED(be), UNUSED(i);
    if (a->info) memset(a->info, 0, (size_t)a->batch * sizeof *a->info);
    return true;
}
static void k_softmax(const ts_backend *be, int i, const ts_kview *o, const ts_kview *in, int dim,
                      bool log) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(in), UNUSED(dim), UNUSED(log);
}
static bool k_softmax_bw(const ts_backend *be, int i, const ts_kview *gx, const ts_kview *y,
                         const ts_kview *g, int dim, bool log) {
    UNUSED(be), UNUSED(i), UNUSED(gx), UNUSED(y), UNUSED(g), UNUSED(dim), UNUSED(log);
    return true;
}
static void k_random(const ts_backend *be, int i, ts_random_kind kind, const ts_kview *o, double p0,
                     double p1, uint64_t seed, uint64_t offset) {
    UNUSED(be), UNUSED(i), UNUSED(kind), UNUSED(o), UNUSED(p0), UNUSED(p1), UNUSED(seed);
    UNUSED(offset);
}
static void k_conv(const ts_backend *be, int i, const ts_kview *o, const ts_kview *x,
                   const ts_kview *w, const ts_kview *b, const ts_conv2d_params *p) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(x), UNUSED(w), UNUSED(b), UNUSED(p);
}
static void k_conv_bw(const ts_backend *be, int i, const ts_kview *g, const ts_kview *go,
                      const ts_kview *x, const ts_conv2d_params *p) {
    UNUSED(be), UNUSED(i), UNUSED(g), UNUSED(go), UNUSED(x), UNUSED(p);
}
static int k_conv_block(const ts_backend *be) { return UNUSED(be), 0; } /* no blocked layout */
static void k_pool(const ts_backend *be, int i, const ts_kview *o, const ts_kview *x,
                   const ts_kview *idx, const ts_pool2d_params *p) {
    UNUSED(be), UNUSED(i), UNUSED(o), UNUSED(x), UNUSED(idx), UNUSED(p);
}
static bool k_sdpa_supports(const ts_backend *be, int i, const ts_sdpa_args *a) {
    return UNUSED(be), UNUSED(i), UNUSED(a), true;
}
static size_t k_sdpa_ws(const ts_backend *be, int i, ts_sdpa_args *a, bool backward) {
    UNUSED(be), UNUSED(i), UNUSED(backward);
    a->threads = 1;
    return 0;
}
static void k_sdpa(const ts_backend *be, int i, const ts_sdpa_args *a, void *ws) {
    UNUSED(be), UNUSED(i), UNUSED(a), UNUSED(ws);
}
static bool k_ln_supports(const ts_backend *be, int i, const ts_layer_norm_args *a) {
    return UNUSED(be), UNUSED(i), UNUSED(a), true;
}
static size_t k_ln_ws(const ts_backend *be, int i, const ts_layer_norm_args *a) {
    return UNUSED(be), UNUSED(i), UNUSED(a), 0;
}
static void k_ln(const ts_backend *be, int i, const ts_layer_norm_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static void k_ln_bw(const ts_backend *be, int i, const ts_layer_norm_args *a, void *ws) {
    UNUSED(be), UNUSED(i), UNUSED(a), UNUSED(ws);
}
static void k_rnn_cell(const ts_backend *be, int i, const ts_rnn_cell_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static void k_rnn_seq(const ts_backend *be, int i, const ts_rnn_seq_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static bool k_bn_supports(const ts_backend *be, int i, const ts_batch_norm_args *a) {
    return UNUSED(be), UNUSED(i), UNUSED(a), true;
}
static void k_bn(const ts_backend *be, int i, const ts_batch_norm_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static void k_ce(const ts_backend *be, int i, const ts_cross_entropy_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static void k_optim(const ts_backend *be, int i, const struct ts_optim_step_args *a) {
    UNUSED(be), UNUSED(i), UNUSED(a);
}
static void k_amp_unscale(const ts_backend *be, int i, const ts_kview *g, int n, const ts_kview *f,
                          const ts_kview *s) {
    UNUSED(be), UNUSED(i), UNUSED(g), UNUSED(n), UNUSED(f), UNUSED(s);
}
static void k_amp_update(const ts_backend *be, int i, const ts_kview *s, const ts_kview *t,
                         const ts_kview *f, double g, double b, int n) {
    UNUSED(be), UNUSED(i), UNUSED(s), UNUSED(t), UNUSED(f), UNUSED(g), UNUSED(b), UNUSED(n);
}

/* Every kernel entry filled (no NULL: a NULL optional entry would send a front end to a host
 * fallback, which would read data); the graph entries stay NULL: capture is not for meta. The
 * channels_last entries say yes, so a channels_last input keeps its format as on the cpu. */
static const ts_backend meta_backend = {
    .name = "meta",
    .type = TS_META,
    .device_count = meta_device_count,
    .memory_info = meta_memory_info,
    .raw_alloc = meta_raw_alloc,
    .raw_free = meta_raw_free,
    .copy_h2d = meta_bytes,
    .copy_d2h = meta_bytes,
    .copy_d2d = meta_d2d,
    .memset_zero = meta_memset,
    .synchronize = meta_sync,
    .copy = k_copy,
    .fill = k_fill,
    .unary = k_unary,
    .binary = k_binary,
    .binary_widening = k_binary,
    .binary_scalar = k_binary_scalar,
    .ternary = k_ternary,
    .where = k_where,
    .reduce = k_reduce,
    .scan = k_scan,
    .matmul = k_matmul,
    .matmul_bias = k_matmul_bias,
    .half_products_native = k_dtype_yes,
    .index_select = k_index,
    .gather = k_index,
    .scatter_add = k_scatter_add,
    .cdist = k_cdist,
    .embedding_bag = k_bag,
    .roi_align = k_roi,
    .roi_pool = k_roi,
    .gather_dims = k_gather_dims,
    .fft = k_fft,
    .linalg = k_linalg,
    .softmax = k_softmax,
    .softmax_backward = k_softmax_bw,
    .random = k_random,
    .conv2d = k_conv,
    .conv2d_backward_data = k_conv_bw,
    .conv2d_backward_weight = k_conv_bw,
    .conv2d_channels_last = k_dtype_yes,
    .conv2d_block = k_conv_block,
    .pool2d = k_pool,
    .pool2d_backward = k_pool,
    .pool2d_channels_last = k_dtype_yes,
    .sdpa_supports = k_sdpa_supports,
    .sdpa_workspace = k_sdpa_ws,
    .sdpa_forward = k_sdpa,
    .sdpa_backward = k_sdpa,
    .layer_norm_supports = k_ln_supports,
    .layer_norm_workspace = k_ln_ws,
    .layer_norm_forward = k_ln,
    .layer_norm_backward = k_ln_bw,
    .rnn_cell_forward = k_rnn_cell,
    .rnn_cell_backward = k_rnn_cell,
    .rnn_seq_forward = k_rnn_seq,
    .rnn_seq_backward = k_rnn_seq,
    .batch_norm_supports = k_bn_supports,
    .batch_norm_forward = k_bn,
    .batch_norm_backward = k_bn,
    .cross_entropy_forward = k_ce,
    .cross_entropy_backward = k_ce,
    .optim_step = k_optim,
    .amp_unscale = k_amp_unscale,
    .amp_update_scale = k_amp_update,
};

void tsi_meta_backend_init(void) { tsi_backend_register(&meta_backend); }
