/* test_meta_device.c — the meta device (TS_META, "meta"): tensors with shapes, dtypes and strides
 * but no memory. Parsing and printing its name; factories that allocate nothing (a 16 GiB tensor
 * costs no byte anywhere) yet count as live tensors; ops that check their arguments and give the
 * results' shapes and dtypes (elementwise, broadcasting, reductions, matmul, conv2d, softmax, cat,
 * indexing without value checks) and their gradients' in backward; every read of the data refused
 * with TS_ERR_DEVICE naming the op (item, a copy out, copy_to_host, copy_ into another device),
 * writes into it a no-op; mixing meta with another device refused; the printer's "..." form;
 * data_ptr 0; .npy and safetensors files of meta tensors refused (no file left); a meta parameter
 * given real memory with ts_tensor_set_data. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    ts_memory_stats(ts_cpu(), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
