/* test_meta_device.c — the meta device (TS_META, "meta"): tensors with shapes, dtypes and strides
 * but no memory. Parsing and printing its name; factories that allocate nothing (a 16 GiB tensor
 * costs no byte anywhere) yet count as live tensors; ops that check their arguments and give the
 * results' shapes and dtypes (elementwise, broadcasting, reductions, matmul, conv2d, softmax, cat,
 * indexing without value checks) and their gradients' in backward; every read of the data refused
 * with TS_ERR_DEVICE naming the op (item, a copy out, copy_to_host, copy_ into another device),
 * writes into it a no-op; mixing meta with another device refused; the printer's "..." form;
 * data_ptr 0; .npy and safetensors files of meta tensors refused (no file left); a meta parameter
 * given real memory with ts_tensor_set_data; the ops that plan on the host from values (sorting,
 * quantile, scatter_reduce, take, masked_scatter, searches, linalg beyond the factorizations, eig,
 * ldl_factor / ldl_solve and lstsq included) give the cpu's result and gradient shapes and dtypes
 * on meta, and those whose sizes depend on the values refuse naming the op. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/complex.h"
#include "tessera/indexing.h"
#include "tessera/linalg.h"
#include "tessera/memory.h"
#include "tessera/nn.h"
#include "tessera/storage.h"
#include "tessera/views.h"
#include "ts_test.h"

static const ts_opts META = {.dtype = TS_F32, .device = {TS_META, 0}};

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t || ts_ndim(t) != s.ndim) return false;
    for (int d = 0; d < s.ndim; d++)
        if (ts_size(t, d) != s.dims[d]) return false;
    return true;
}
static bool on_meta(ts_tensor *t) { return t && ts_device_of(t).type == TS_META; }

static void test_names(void) {
    ts_device d = {0};
    CHECK(ts_device_parse("meta", &d) == TS_OK && d.type == TS_META && d.index == 0);
    CHECK(ts_device_parse("meta:0", &d) == TS_OK && d.type == TS_META && d.index == 0);
    CHECK(ts_device_parse("meta:1", &d) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "one meta device");
    CHECK(ts_device_parse("metal", &d) != TS_OK);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_STREQ(ts_device_str(ts_meta()), "meta");
    CHECK_EQ(ts_device_count(TS_META), 1);
    CHECK(ts_device_is_available(ts_meta()));
    CHECK(ts_device_equal(ts_meta(), (ts_device){TS_META, 0}));
    CHECK(!ts_device_equal(ts_meta(), ts_cpu()));
}

static void test_no_memory(void) {
    ts_scope_begin();
    ts_mem_stats cpu0, meta0, cpu1, meta1;
    CHECK(ts_memory_stats(ts_cpu(), &cpu0) == TS_OK && ts_memory_stats(ts_meta(), &meta0) == TS_OK);
    /* 2^32 floats: 16 GiB, more than this machine's memory */
    ts_tensor *big = ts_empty(TS_SHAPE((int64_t)1 << 20, 1 << 12), META);
    ts_tensor *z = ts_zeros(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_I64, .device = ts_meta()});
    ts_tensor *r = ts_randn(TS_SHAPE(5), META);
    CHECK_OK();
    CHECK(on_meta(big) && shape_is(big, TS_SHAPE((int64_t)1 << 20, 1 << 12)));
    CHECK(on_meta(z) && ts_dtype_of(z) == TS_I64 && on_meta(r));
    CHECK_EQ(ts_data_ptr(big), 0);
    CHECK(ts_memory_stats(ts_cpu(), &cpu1) == TS_OK && ts_memory_stats(ts_meta(), &meta1) == TS_OK);
    CHECK_EQ(cpu1.allocated, cpu0.allocated);
    CHECK_EQ(meta1.allocated, 0);
    CHECK_EQ(meta1.live_tensors, meta0.live_tensors + 3);
    ts_tensor *sum = ts_sum(big); /* an op over 16 GiB that touches nothing */
    CHECK(on_meta(sum) && ts_ndim(sum) == 0);
    ts_scope_end();
    CHECK(ts_memory_stats(ts_meta(), &meta1) == TS_OK);
    CHECK_EQ(meta1.live_tensors, meta0.live_tensors);
}

static void test_shapes(void) {
    ts_scope_begin();
    ts_tensor *a = ts_empty(TS_SHAPE(3, 4), META), *b = ts_empty(TS_SHAPE(4, 5), META);
    CHECK(shape_is(ts_matmul(a, b), TS_SHAPE(3, 5)));
    ts_tensor *col = ts_empty(TS_SHAPE(3, 1), META);
    ts_tensor *s = ts_add(a, col); /* broadcasting */
    CHECK(on_meta(s) && shape_is(s, TS_SHAPE(3, 4)));
    CHECK(shape_is(ts_sum_dim(s, 1, true), TS_SHAPE(3, 1)));
    CHECK(shape_is(ts_softmax(a, 1), TS_SHAPE(3, 4)));
    ts_tensor *parts[2] = {a, a};
    CHECK(shape_is(ts_cat(parts, 2, 0), TS_SHAPE(6, 4)));
    CHECK(shape_is(ts_reshape(a, TS_SHAPE(2, 6)), TS_SHAPE(2, 6)));
    ts_tensor *x = ts_empty(TS_SHAPE(2, 3, 8, 8), META), *w = ts_empty(TS_SHAPE(4, 3, 3, 3), META);
    ts_tensor *y = ts_conv2d(x, w, NULL, (ts_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}});
    CHECK(on_meta(y) && shape_is(y, TS_SHAPE(2, 4, 4, 4)));
    CHECK_OK();
    /* argument checks still run: a shape mismatch is the same error as on the cpu */
    CHECK(ts_matmul(a, a) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    /* index values are not checked (they have none), the index's dtype and shape are */
    ts_tensor *idx = ts_empty(TS_SHAPE(7), (ts_opts){.dtype = TS_I64, .device = ts_meta()});
    CHECK(shape_is(ts_index_select(a, 1, idx), TS_SHAPE(3, 7)));
    ts_tensor *emb = ts_embedding(ts_empty(TS_SHAPE(10, 6), META), idx);
    CHECK(on_meta(emb) && shape_is(emb, TS_SHAPE(7, 6)));
    CHECK_OK();
    CHECK(ts_index_select(a, 1, a) == NULL); /* a float index */
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    /* meta does not mix with another device */
    ts_tensor *c = ts_ones(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_F32});
    CHECK(ts_add(a, c) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "meta");
    ts_scope_end();
}

/* the fused kernels' entries (workspace sizes, the host-side info of a factorization) */
static void test_fused_entries(void) {
    ts_scope_begin();
    size_t free_b = 1, total_b = 1;
    CHECK(ts_device_memory(ts_meta(), &free_b, &total_b) == TS_OK && free_b == 0 && total_b == 0);
    ts_tensor *x = ts_empty(TS_SHAPE(4, 6),
                            (ts_opts){.dtype = TS_F32, .device = ts_meta(), .requires_grad = true});
    ts_tensor *w = ts_empty(TS_SHAPE(6),
                            (ts_opts){.dtype = TS_F32, .device = ts_meta(), .requires_grad = true});
    ts_tensor *y = ts_layer_norm(x, TS_SHAPE(6), w, NULL, 1e-5);
    CHECK(on_meta(y) && shape_is(y, TS_SHAPE(4, 6)));
    ts_backward(ts_sum(y));
    CHECK_OK();
    CHECK(on_meta(ts_grad(x)) && shape_is(ts_grad(x), TS_SHAPE(4, 6)));
    CHECK(on_meta(ts_grad(w)) && shape_is(ts_grad(w), TS_SHAPE(6)));
    /* a batch of 5: every matrix's info must read "factorized" */
    ts_tensor *inv = ts_linalg_inv(ts_empty(TS_SHAPE(5, 3, 3), META));
    CHECK(on_meta(inv) && shape_is(inv, TS_SHAPE(5, 3, 3)));
    CHECK_OK();
    ts_scope_end();
}

static void test_backward(void) {
    ts_scope_begin();
    ts_tensor *x = ts_empty(TS_SHAPE(8, 4), META);
    ts_tensor *w = ts_empty(TS_SHAPE(4, 3),
                            (ts_opts){.dtype = TS_F32, .device = ts_meta(), .requires_grad = true});
    ts_backward(ts_sum(ts_relu(ts_matmul(x, w))));
    CHECK_OK();
    ts_tensor *g = ts_grad(w);
    CHECK(on_meta(g) && shape_is(g, TS_SHAPE(4, 3)) && ts_dtype_of(g) == TS_F32);
    ts_scope_end();
}

static void test_reads_refused(void) {
    ts_scope_begin();
    ts_tensor *m = ts_empty(TS_SHAPE(2, 3), META);
    double v = ts_item(ts_sum(m));
    CHECK(v != v); /* NaN with the error */
    CHECK_ERR_HAS(TS_ERR_DEVICE, "item: cannot read the data of a meta tensor");
    CHECK(ts_to(m, ts_cpu()) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "cannot copy out of meta tensor");
    if (ts_device_count(TS_SIM) > 0) {
        CHECK(ts_to(m, ts_sim(0)) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "cannot copy out of meta tensor");
    }
    float host[6] = {0};
    CHECK(ts_copy_to_host(m, host, sizeof host) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "copy_to_host");
    ts_tensor *dst = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F32});
    CHECK(ts_copy_(dst, m) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_item(ts_sum(dst)) == 0); /* left as it was */
    /* into meta: nothing to write, and it works */
    ts_tensor *src = ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F32});
    ts_tensor *moved = ts_to(src, ts_meta());
    CHECK(on_meta(moved) && shape_is(moved, TS_SHAPE(2, 3)));
    CHECK(ts_copy_(m, src) == m);
    CHECK_OK();
    ts_scope_end();
}

static void test_print(void) {
    ts_scope_begin();
    char *s = ts_to_string(ts_empty(TS_SHAPE(2, 3), META));
    CHECK(s && !strcmp(s, "tensor(..., device='meta', size=(2, 3))"));
    free(s);
    s = ts_to_string(ts_empty(TS_SHAPE(4), (ts_opts){.dtype = TS_I64, .device = ts_meta()}));
    CHECK(s && !strcmp(s, "tensor(..., device='meta', size=(4,), dtype=torch.int64)"));
    free(s);
    s = ts_to_string(ts_empty(
        TS_SHAPE(), (ts_opts){.dtype = TS_F32, .device = ts_meta(), .requires_grad = true}));
    CHECK(s && !strcmp(s, "tensor(..., device='meta', size=(), requires_grad=True)"));
    free(s);
    CHECK_OK();
    ts_scope_end();
}

/* a file of a meta tensor would hold bytes nobody wrote: refused, and no file is left */
static void test_files_refused(void) {
    ts_scope_begin();
    char dir[] = "/tmp/ts_meta_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char npy[64], st[64];
    snprintf(npy, sizeof npy, "%s/m.npy", dir);
    snprintf(st, sizeof st, "%s/m.safetensors", dir);
    ts_tensor *m = ts_empty(TS_SHAPE(4, 4), META);
    CHECK(ts_npy_save(npy, m) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "meta");
    CHECK(access(npy, F_OK) != 0);
    ts_tensor_list l = {0};
    CHECK(ts_tensor_list_add(&l, "w", ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_F32})) == TS_OK);
    CHECK(ts_tensor_list_add(&l, "m", m) == TS_OK);
    CHECK(ts_safetensors_save(st, &l, NULL, 0) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "meta");
    CHECK(access(st, F_OK) != 0);
    ts_tensor_list_free(&l);
    rmdir(dir);
    ts_scope_end();
}

/* a model built on meta gets real memory: the parameter handle stays, its data is the cpu's */
static void test_set_data(void) {
    ts_scope_begin();
    ts_tensor *p = ts_empty(TS_SHAPE(2, 2),
                            (ts_opts){.dtype = TS_F32, .device = ts_meta(), .requires_grad = true});
    ts_tensor *real = ts_full(TS_SHAPE(2, 2), 1.5, (ts_opts){.dtype = TS_F32});
    CHECK(ts_tensor_set_data(p, real) == TS_OK);
    CHECK(ts_device_of(p).type == TS_CPU && ts_requires_grad(p));
    CHECK(ts_item(ts_sum(p)) == 6.0);
    CHECK(ts_data_ptr(p) == ts_data_ptr(real)); /* shared, not copied */
    CHECK_OK();
    ts_scope_end();
}

/* ---- ops whose kernels run on the host (sorting, scatter_reduce, searches, linalg beyond the
 * backend's factorizations): on meta they give the results' shapes and dtypes without values, the
 * same as the cpu's with values, gradients included */
typedef struct host_case {
    const char *name;
    /* the op on inputs made by in() on device d; *aux: a second result or NULL; *leaf: the input
     * whose gradient is compared (NULL: none) */
    ts_tensor *(*run)(ts_device d, ts_tensor **aux, ts_tensor **leaf);
} host_case;

/* a float32 input: N(0, 1) values on the cpu, none on meta; rg: requires grad */
static ts_tensor *in(ts_device d, ts_shape s, bool rg) {
    ts_opts o = {.dtype = TS_F32, .device = d, .requires_grad = rg};
    if (d.type == TS_META) return ts_empty(s, o);
    o.requires_grad = false;
    ts_tensor *t = ts_randn(s, o);
    if (t && rg) ts_set_requires_grad(t, true);
    return t;
}
/* an int64 index in [0, hi) */
static ts_tensor *idx_in(ts_device d, ts_shape s, int64_t hi) {
    ts_opts o = {.dtype = TS_I64, .device = d};
    return d.type == TS_META ? ts_empty(s, o) : ts_randint(0, hi, s, o);
}
/* an upper-triangular float32 matrix batch with a diagonal away from zero (finite solves) */
static ts_tensor *tri_in(ts_device d, ts_shape s, bool rg) {
    ts_tensor *t = ts_triu(in(d, s, false), 0);
    const int64_t n = s.dims[s.ndim - 1];
    if (d.type != TS_META) t = ts_add(t, ts_full(TS_SHAPE(n), 4.0, (ts_opts){.dtype = TS_F32}));
    if (d.type != TS_META) t = ts_triu(t, 0);
    if (t && rg) t = ts_detach(t), ts_set_requires_grad(t, true);
    return t;
}

static ts_tensor *c_sort(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_sort(*leaf = in(d, TS_SHAPE(3, 5, 2), true), 1, true, false, aux);
}
static ts_tensor *c_argsort(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    return ts_argsort(in(d, TS_SHAPE(4, 6), false), 0, false, true);
}
static ts_tensor *c_msort(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_msort(*leaf = in(d, TS_SHAPE(4, 3), true));
}
static ts_tensor *c_topk(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_topk(*leaf = in(d, TS_SHAPE(2, 7, 3), true), 2, 1, true, true, aux);
}
static ts_tensor *c_kthvalue(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_kthvalue(*leaf = in(d, TS_SHAPE(3, 5), true), 2, -1, false, aux);
}
static ts_tensor *c_kthvalue_keep(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_kthvalue(*leaf = in(d, TS_SHAPE(3, 5), true), 3, 0, true, aux);
}
static ts_tensor *c_median_dim(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_median_dim(*leaf = in(d, TS_SHAPE(2, 3, 4), true), 1, false, aux);
}
static ts_tensor *c_nanmedian_dim(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_nanmedian_dim(*leaf = in(d, TS_SHAPE(2, 3, 4), true), 2, true, aux);
}
static ts_tensor *c_median(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_median(*leaf = in(d, TS_SHAPE(3, 4), true));
}
static ts_tensor *c_mode(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_mode(*leaf = in(d, TS_SHAPE(4, 5), true), 0, false, aux);
}
static ts_tensor *c_sort_0dim(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return ts_sort(*leaf = in(d, TS_SHAPE(), true), 0, false, false, aux);
}
static ts_tensor *c_quantile(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    const ts_opts o = {.dtype = TS_F32, .device = d};
    ts_tensor *q = d.type == TS_META ? ts_empty(TS_SHAPE(3), o) : ts_rand(TS_SHAPE(3), o);
    return ts_quantile(*leaf = in(d, TS_SHAPE(4, 6), true), q, 0, true, 1, true, "linear");
}
static ts_tensor *c_scatter_reduce(ts_device d, ts_tensor **aux, ts_tensor **leaf, const char *r,
                                   bool self) {
    (void)aux;
    ts_tensor *t = *leaf = in(d, TS_SHAPE(4, 3), true);
    return ts_scatter_reduce(t, 0, idx_in(d, TS_SHAPE(6, 3), 4), in(d, TS_SHAPE(6, 3), false), r,
                             self);
}
static ts_tensor *c_scatter_sum(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return c_scatter_reduce(d, aux, leaf, "sum", true);
}
static ts_tensor *c_scatter_mean(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return c_scatter_reduce(d, aux, leaf, "mean", false);
}
static ts_tensor *c_scatter_amax(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return c_scatter_reduce(d, aux, leaf, "amax", false);
}
static ts_tensor *c_scatter_prod(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    return c_scatter_reduce(d, aux, leaf, "prod", true);
}
static ts_tensor *c_scatter_src(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux; /* the source's gradient */
    ts_tensor *src = *leaf = in(d, TS_SHAPE(2, 5), true);
    return ts_scatter_reduce(in(d, TS_SHAPE(3, 5), false), 0, idx_in(d, TS_SHAPE(2, 5), 3), src,
                             "amin", true);
}
static ts_tensor *c_take(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_take(*leaf = in(d, TS_SHAPE(3, 4), true), idx_in(d, TS_SHAPE(2, 5), 12));
}
static ts_tensor *c_masked_scatter(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    ts_tensor *mask = ts_gt_scalar(in(d, TS_SHAPE(3, 4), false), 0);
    return ts_masked_scatter(*leaf = in(d, TS_SHAPE(3, 4), true), mask, in(d, TS_SHAPE(12), false));
}
static ts_tensor *c_searchsorted(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    ts_tensor *seq = ts_sort(in(d, TS_SHAPE(2, 5), false), -1, false, false, NULL);
    return ts_searchsorted(seq, in(d, TS_SHAPE(2, 3), false), true, false, NULL);
}
static ts_tensor *c_isin(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    return ts_isin(idx_in(d, TS_SHAPE(2, 3), 5), idx_in(d, TS_SHAPE(4), 5), false, true);
}
static ts_tensor *c_histc(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    return ts_histc(in(d, TS_SHAPE(10), false), 7, 0, 0);
}
static ts_tensor *c_solve_tri(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    ts_tensor *A = tri_in(d, TS_SHAPE(2, 3, 3), false);
    return ts_linalg_solve_triangular(A, *leaf = in(d, TS_SHAPE(2, 4, 3), true), true, false,
                                      false);
}
static ts_tensor *c_solve_tri_A(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    ts_tensor *A = *leaf = tri_in(d, TS_SHAPE(3, 3), true);
    return ts_linalg_solve_triangular(A, in(d, TS_SHAPE(2, 3, 2), false), true, true, false);
}
static ts_tensor *c_cholesky_solve(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    ts_tensor *L = ts_transpose(tri_in(d, TS_SHAPE(3, 3), false), -2, -1);
    return ts_cholesky_solve(*leaf = in(d, TS_SHAPE(3, 2), true), L, false);
}
static ts_tensor *c_cholesky_inverse(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_cholesky_inverse(*leaf = tri_in(d, TS_SHAPE(2, 4, 4), true), true);
}
static ts_tensor *c_geqrf(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)leaf;
    return ts_geqrf(in(d, TS_SHAPE(2, 5, 3), false), aux);
}
static ts_tensor *c_lu(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    ts_tensor *L = NULL;
    ts_tensor *P = ts_linalg_lu(*leaf = in(d, TS_SHAPE(2, 4, 3), true), &L, aux);
    return P && L ? ts_add(ts_sum(L), ts_sum(*aux)) : NULL; /* L and U's gradient */
}
static ts_tensor *c_lu_p(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)leaf;
    return ts_linalg_lu(in(d, TS_SHAPE(3, 5), false), aux, NULL);
}
static ts_tensor *c_lu_solve(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    ts_tensor *piv = NULL, *LU = ts_linalg_lu_factor_ex(in(d, TS_SHAPE(3, 3), false), &piv, NULL);
    return ts_linalg_lu_solve(LU, piv, *leaf = in(d, TS_SHAPE(2, 3), true), false, true);
}
static ts_tensor *c_pinv(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_linalg_pinv(*leaf = in(d, TS_SHAPE(2, 4, 3), true), -1, -1, false);
}
static ts_tensor *c_matrix_rank(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    return ts_linalg_matrix_rank(in(d, TS_SHAPE(3, 4, 2), false), -1, -1, false);
}
/* eig: the eigenvalues' pairs summed (a real loss), the eigenvectors as aux */
static ts_tensor *c_eig(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    ts_tensor *L = ts_linalg_eig(*leaf = in(d, TS_SHAPE(2, 4, 4), true), aux);
    return L ? ts_sum(ts_view_as_real(L)) : NULL;
}
static ts_tensor *c_eigvals(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf;
    return ts_linalg_eigvals(in(d, TS_SHAPE(3, 3), false));
}
static ts_tensor *c_ldl_factor(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)leaf;
    return ts_linalg_ldl_factor_ex(in(d, TS_SHAPE(2, 4, 4), false), false, aux, NULL);
}
static ts_tensor *c_ldl_solve(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf; /* B's batch broadcast against LD's */
    ts_tensor *piv = NULL,
              *LD = ts_linalg_ldl_factor_ex(in(d, TS_SHAPE(2, 3, 3), false), false, &piv, NULL);
    return ts_linalg_ldl_solve(LD, piv, in(d, TS_SHAPE(4, 1, 3, 2), false), false);
}
static ts_tensor *c_lstsq(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux; /* gelsy: no residuals */
    return ts_linalg_lstsq(*leaf = in(d, TS_SHAPE(2, 5, 3), true), in(d, TS_SHAPE(2, 5, 2), false),
                           -1, NULL, NULL, NULL, NULL);
}
static ts_tensor *c_lstsq_gelsd(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    ts_tensor *rank = NULL, *sv = NULL; /* tall and of full rank: residuals per column */
    ts_tensor *X = ts_linalg_lstsq(*leaf = in(d, TS_SHAPE(6, 3), true),
                                   in(d, TS_SHAPE(6, 2), false), -1, "gelsd", aux, &rank, &sv);
    const bool ok = rank && sv && ts_ndim(rank) == 0 && ts_dtype_of(rank) == TS_I64 &&
                    ts_numel(sv) == 3 && ts_ndim(*aux) == 1 && ts_numel(*aux) == 2;
    return ok ? X : NULL;
}
static ts_tensor *c_lstsq_vec(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)leaf; /* B a vector; gels: rank and singular values empty */
    ts_tensor *rank = NULL;
    ts_tensor *X = ts_linalg_lstsq(in(d, TS_SHAPE(5, 3), false), in(d, TS_SHAPE(5), false), -1,
                                   "gels", aux, &rank, NULL);
    return rank && ts_numel(rank) == 0 ? X : NULL;
}
static ts_tensor *c_nonzero_empty(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux, (void)leaf; /* no elements: an empty result needs no values */
    return ts_nonzero(in(d, TS_SHAPE(0, 3), false));
}
static ts_tensor *c_matrix_exp(ts_device d, ts_tensor **aux, ts_tensor **leaf) {
    (void)aux;
    return ts_linalg_matrix_exp(*leaf = in(d, TS_SHAPE(2, 3, 3), true));
}

static bool same_structure(ts_tensor *c, ts_tensor *m) {
    if (!c || !m) return !c && !m;
    if (!on_meta(m) || ts_dtype_of(c) != ts_dtype_of(m) ||
        ts_requires_grad(c) != ts_requires_grad(m))
        return false;
    return shape_is(m, ts_shape_of(c));
}

static void test_host_ops(void) {
    static const host_case cases[] = {
        {"sort", c_sort},
        {"argsort", c_argsort},
        {"msort", c_msort},
        {"topk", c_topk},
        {"kthvalue", c_kthvalue},
        {"kthvalue keepdim", c_kthvalue_keep},
        {"median dim", c_median_dim},
        {"nanmedian dim", c_nanmedian_dim},
        {"median", c_median},
        {"mode", c_mode},
        {"sort 0-dim", c_sort_0dim},
        {"quantile", c_quantile},
        {"scatter_reduce sum", c_scatter_sum},
        {"scatter_reduce mean", c_scatter_mean},
        {"scatter_reduce amax", c_scatter_amax},
        {"scatter_reduce prod", c_scatter_prod},
        {"scatter_reduce src", c_scatter_src},
        {"take", c_take},
        {"masked_scatter", c_masked_scatter},
        {"searchsorted", c_searchsorted},
        {"isin", c_isin},
        {"histc", c_histc},
        {"solve_triangular", c_solve_tri},
        {"solve_triangular A", c_solve_tri_A},
        {"cholesky_solve", c_cholesky_solve},
        {"cholesky_inverse", c_cholesky_inverse},
        {"geqrf", c_geqrf},
        {"lu", c_lu},
        {"lu P", c_lu_p},
        {"lu_solve", c_lu_solve},
        {"matrix_exp", c_matrix_exp},
        {"pinv", c_pinv},
        {"matrix_rank", c_matrix_rank},
        {"eig", c_eig},
        {"eigvals", c_eigvals},
        {"ldl_factor_ex", c_ldl_factor},
        {"ldl_solve", c_ldl_solve},
        {"lstsq", c_lstsq},
        {"lstsq gelsd", c_lstsq_gelsd},
        {"lstsq vector gels", c_lstsq_vec},
        {"nonzero empty", c_nonzero_empty},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_scope_begin();
        ts_manual_seed(7);
        ts_tensor *ca = NULL, *cl = NULL, *ma = NULL, *ml = NULL;
        ts_tensor *cy = cases[i].run(ts_cpu(), &ca, &cl);
        const bool cpu_ok = cy && ts_error() == TS_OK;
        ts_error_clear();
        ts_tensor *my = cases[i].run(ts_meta(), &ma, &ml);
        const bool meta_ok = my && ts_error() == TS_OK;
        if (!cpu_ok || !meta_ok || !same_structure(cy, my) || !same_structure(ca, ma))
            fprintf(stderr, "  %s: cpu %s, meta %s\n", cases[i].name, cpu_ok ? "ok" : "failed",
                    meta_ok ? "ok" : ts_error_message());
        CHECK(cpu_ok && meta_ok);
        CHECK(same_structure(cy, my));
        CHECK(same_structure(ca, ma));
        ts_error_clear();
        if (cl && ml && ts_requires_grad(cy)) { /* the gradient's shape and dtype */
            ts_backward(ts_sum(cy));
            ts_backward(ts_sum(my));
            CHECK_OK();
            CHECK(ts_grad(cl) && same_structure(ts_grad(cl), ts_grad(ml)));
        }
        ts_scope_end();
    }
    /* refusals keep their checks on meta: k out of range, a uint64 sort */
    ts_scope_begin();
    ts_tensor *m = ts_empty(TS_SHAPE(3, 4), META);
    CHECK(ts_topk(m, 5, 1, true, true, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "topk: selected index k out of range");
    CHECK(ts_sort(ts_empty(TS_SHAPE(3), (ts_opts){.dtype = TS_U64, .device = ts_meta()}), 0, false,
                  false, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "sort: not implemented for 'UInt64'");
    CHECK(ts_scatter_reduce(m, 0, ts_empty(TS_SHAPE(2, 4), META), m, "sum", true) == NULL);
    CHECK(ts_error() != TS_OK); /* a float index */
    ts_error_clear();
    /* sizes that depend on the values: refused naming the op */
    ts_tensor *mask = ts_empty(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_BOOL, .device = ts_meta()});
    CHECK(ts_nonzero(m) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "nonzero: the size of its result depends on the values");
    CHECK(ts_masked_select(m, mask) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "masked_select: the size of its result depends on the values");
    CHECK(ts_unique(m, true, false, 0, NULL, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "unique: the size of its result depends on the values");
    CHECK(ts_bincount(ts_empty(TS_SHAPE(4), (ts_opts){.dtype = TS_I64, .device = ts_meta()}), NULL,
                      0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "bincount: the size of its result depends on the values");
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(2, 0);
    ts_mem_stats before, after;
    ts_memory_stats(ts_cpu(), &before);
    test_names();
    test_no_memory();
    test_shapes();
    test_backward();
    test_fused_entries();
    test_reads_refused();
    test_print();
    test_files_refused();
    test_set_data();
    test_host_ops();
    ts_memory_stats(ts_cpu(), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
