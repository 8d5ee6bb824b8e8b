/* test_dlpack.c — DLPack exchange: round trips of every dtype, views keeping strides and offsets,
 * pointer identity both ways, the deleter's timing (once, after the last reference), the capsule
 * keeping Tessera's memory alive, each refusal with its code, an allocation-failure sweep, and the
 * cuda paths when a GPU is present. */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h" /* the element pointer of a tensor, for pointer identity */
#include "fault_sweep.h"
#include "ts_test.h"

static char *elem_ptr(ts_tensor *t) { return tsi_kview(t).data; }

static int64_t live_cpu(void) {
    ts_mem_stats s;
    ts_memory_stats(ts_cpu(), &s);
    return s.live_tensors;
}

static size_t allocated_cpu(void) {
    ts_mem_stats s;
    ts_memory_stats(ts_cpu(), &s);
    return s.allocated;
}

/* Values of any tensor as doubles, in its logical row-major order. */
static bool read_f64(ts_tensor *t, double *out, int64_t max) {
    int64_t n = ts_numel(t);
    if (n < 0 || n > max) return false;
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    bool ok = c && ts_copy_to_host(c, out, (size_t)n * sizeof(double)) == TS_OK;
    ts_scope_end();
    return ok;
}

/* The sum of a tensor's elements, and one element, with no temporaries left behind. */
static double sum_of(ts_tensor *t) {
    ts_scope_begin();
    double v = ts_item(ts_sum(ts_to_dtype(t, TS_F64)));
    ts_scope_end();
    return v;
}

static double item_at(ts_tensor *t, int dim, int64_t i) {
    ts_scope_begin();
    double v = ts_item(ts_select(t, dim, i));
    ts_scope_end();
    return v;
}

static bool same_values(ts_tensor *a, ts_tensor *b) {
    double va[256], vb[256];
    int64_t n = ts_numel(a);
    if (n != ts_numel(b) || !read_f64(a, va, 256) || !read_f64(b, vb, 256)) return false;
    return memcmp(va, vb, (size_t)n * sizeof(double)) == 0;
}

/* ------------------------------------------------------------------ a foreign producer */
/* A DLManagedTensor as another framework would hand it over: its own buffer (malloc'ed, so that
 * ASan sees a use after the deleter freed it) and a deleter that counts its calls. */
typedef struct foreign {
    DLManagedTensor m;
    int64_t shape[16], strides[16];
    void *buf;
} foreign;

static int deleter_calls;

static void foreign_deleter(DLManagedTensor *m) {
    foreign *f = m->manager_ctx;
    deleter_calls++;
    free(f->buf);
    free(f);
}

/* buf_bytes of float32 0, 1, 2, ... (as far as they fit); the DLTensor is filled in by the
 * caller. */
static foreign *foreign_new(size_t buf_bytes) {
    foreign *f = calloc(1, sizeof *f);
    f->buf = malloc(buf_bytes ? buf_bytes : 1);
    for (size_t i = 0; i < buf_bytes / sizeof(float); i++) ((float *)f->buf)[i] = (float)i;
    f->m.manager_ctx = f;
    f->m.deleter = foreign_deleter;
    f->m.dl_tensor = (DLTensor){.data = f->buf,
                                .device = {kDLCPU, 0},
                                .ndim = 0,
                                .dtype = {kDLFloat, 32, 1},
                                .shape = f->shape,
                                .strides = NULL,
                                .byte_offset = 0};
    return f;
}

static void foreign_shape(foreign *f, int ndim, const int64_t *shape, const int64_t *strides) {
    f->m.dl_tensor.ndim = ndim;
    for (int i = 0; i < ndim; i++) f->shape[i] = shape[i];
    if (strides) {
        for (int i = 0; i < ndim; i++) f->strides[i] = strides[i];
        f->m.dl_tensor.strides = f->strides;
    }
}

/* ------------------------------------------------------------------ every dtype, both ways */
static void test_round_trip_dtypes(void) {
    static const struct {
        ts_dtype dt;
        uint8_t code, bits;
    } cases[] = {
        {TS_F32, kDLFloat, 32},   {TS_F64, kDLFloat, 64},     {TS_F16, kDLFloat, 16},
        {TS_BF16, kDLBfloat, 16}, {TS_I64, kDLInt, 64},       {TS_I32, kDLInt, 32},
        {TS_U8, kDLUInt, 8},      {TS_BOOL, kDLUInt, 8}, /* DLPack 0.6: no kDLBool */
        {TS_C64, kDLComplex, 64}, {TS_C128, kDLComplex, 128},
    };
    int64_t live0 = live_cpu();
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ts_dtype dt = cases[k].dt;
        ts_scope_begin();
        ts_tensor *t = ts_view(ts_to_dtype(ts_arange(0, 6, 1, (ts_opts){0}), dt), TS_SHAPE(2, 3));
        DLManagedTensor *m = ts_to_dlpack(t);
        CHECK(m != NULL);
        CHECK_OK();
        if (!m) {
            ts_scope_end();
            continue;
        }
        DLTensor *d = &m->dl_tensor;
        CHECK(d->data == elem_ptr(t));
        CHECK_EQ(d->byte_offset, 0);
        CHECK_EQ(d->device.device_type, kDLCPU);
        CHECK_EQ(d->device.device_id, 0);
        CHECK_EQ(d->ndim, 2);
        CHECK(d->shape && d->shape[0] == 2 && d->shape[1] == 3);
        CHECK(d->strides && d->strides[0] == 3 && d->strides[1] == 1);
        CHECK_EQ(d->dtype.code, cases[k].code);
        CHECK_EQ(d->dtype.bits, cases[k].bits);
        CHECK_EQ(d->dtype.lanes, 1);
        ts_tensor *u = ts_from_dlpack(m);
        CHECK(u != NULL);
        CHECK_OK();
        if (!u) {
            m->deleter(m);
            ts_scope_end();
            continue;
        }
        CHECK_EQ(ts_dtype_of(u), dt); /* bool comes back as bool from a capsule of ours */
        CHECK(elem_ptr(u) == elem_ptr(t));
        CHECK_EQ(ts_stride(u, 0), 3);
        CHECK_EQ(ts_stride(u, 1), 1);
        CHECK_EQ(ts_storage_offset(u), 0);
        /* complex: the (real, imaginary) pairs, imaginary parts 0 */
        const bool cx = ts_dtype_is_complex(dt);
        ts_tensor *tv = cx ? ts_view_as_real(t) : t, *uv = cx ? ts_view_as_real(u) : u;
        CHECK(same_values(tv, uv));
        CHECK_EQ(sum_of(uv), dt == TS_BOOL ? 5 : 15);
        /* the memory is shared: a write through one is seen through the other */
        ts_fill_(u, 1);
        CHECK_EQ(sum_of(tv), 6);
        ts_scope_end();
        CHECK_OK();
    }
    CHECK_EQ(live_cpu(), live0);

    /* a scalar, and an empty tensor */
    ts_scope_begin();
    ts_tensor *s = ts_scalar(2.5, (ts_opts){.dtype = TS_F64});
    DLManagedTensor *m = ts_to_dlpack(s);
    CHECK(m && m->dl_tensor.ndim == 0);
    ts_tensor *u = ts_from_dlpack(m);
    CHECK(u && ts_ndim(u) == 0 && ts_item(u) == 2.5);
    ts_tensor *e = ts_empty(TS_SHAPE(0, 3), (ts_opts){0});
    m = ts_to_dlpack(e);
    u = ts_from_dlpack(m);
    CHECK(u && ts_numel(u) == 0 && ts_size(u, 1) == 3);
    ts_scope_end();
    CHECK_OK();
    CHECK_EQ(live_cpu(), live0);
}

/* ------------------------------------------------------------------ views */
static void check_export_view(const char *what, ts_tensor *v, int ndim, const int64_t *strides,
                              int64_t offset) {
    DLManagedTensor *m = ts_to_dlpack(v);
    CHECK(m != NULL);
    if (!m) return;
    DLTensor *d = &m->dl_tensor;
    bool ok = d->ndim == ndim && d->byte_offset == 0 && d->data == elem_ptr(v) &&
              ts_storage_offset(v) == offset;
    for (int i = 0; i < ndim && ok; i++)
        ok = d->strides[i] == strides[i] && d->shape[i] == ts_size(v, i);
    if (!ok) fprintf(stderr, "export of %s: wrong layout\n", what);
    CHECK(ok);
    ts_tensor *u = ts_from_dlpack(m);
    CHECK(u != NULL);
    if (!u) {
        m->deleter(m);
        return;
    }
    bool back = elem_ptr(u) == elem_ptr(v) && same_values(u, v);
    for (int i = 0; i < ndim; i++) back = back && ts_stride(u, i) == strides[i];
    if (!back) fprintf(stderr, "round trip of %s: wrong tensor\n", what);
    CHECK(back); /* u belongs to the caller's scope */
}

static void test_views(void) {
    ts_scope_begin();
    ts_tensor *a = ts_view(ts_arange(0, 40, 1, (ts_opts){.dtype = TS_F32}), TS_SHAPE(4, 10));
    char *base = elem_ptr(a);
    ts_tensor *tr = ts_transpose(a, 0, 1); /* [10, 4], strides [1, 10] */
    check_export_view("transpose", tr, 2, (const int64_t[]){1, 10}, 0);
    ts_tensor *sl = ts_slice(a, 1, 1, 10, 3); /* [4, 3], strides [10, 3], offset 1 */
    CHECK(elem_ptr(sl) == base + 4);
    check_export_view("slice with step", sl, 2, (const int64_t[]){10, 3}, 1);
    ts_tensor *nr = ts_narrow(a, 0, 2, 2); /* [2, 10], offset 20 */
    check_export_view("narrow", nr, 2, (const int64_t[]){10, 1}, 20);
    ts_tensor *both = ts_narrow(ts_transpose(ts_slice(a, 0, 1, 4, 2), 0, 1), 0, 3, 5);
    check_export_view("slice, transpose, narrow", both, 2, (const int64_t[]){1, 20}, 13);
    ts_tensor *ex = ts_expand(ts_narrow(ts_view(a, TS_SHAPE(40)), 0, 7, 1), TS_SHAPE(3, 1));
    CHECK(ex != NULL);
    check_export_view("expand (stride 0)", ex, 2, (const int64_t[]){0, 1}, 7);
    ts_scope_end();
    CHECK_OK();

    /* a foreign tensor with byte_offset and strides: [2, 3] at element 3, rows 5 apart */
    deleter_calls = 0;
    foreign *f = foreign_new(16 * sizeof(float));
    foreign_shape(f, 2, (const int64_t[]){2, 3}, (const int64_t[]){5, 1});
    f->m.dl_tensor.byte_offset = 3 * sizeof(float);
    float *buf = f->buf;
    ts_tensor *u = ts_from_dlpack(&f->m);
    CHECK(u != NULL);
    if (u) {
        CHECK(elem_ptr(u) == (char *)(buf + 3));
        CHECK_EQ(ts_stride(u, 0), 5);
        CHECK_EQ(ts_stride(u, 1), 1);
        CHECK_EQ(ts_storage_offset(u), 0);
        double v[6];
        CHECK(read_f64(u, v, 6));
        CHECK(v[0] == 3 && v[1] == 4 && v[2] == 5 && v[3] == 8 && v[4] == 9 && v[5] == 10);
        /* and out again: the same element pointer, byte_offset folded in (PyTorch's way) */
        DLManagedTensor *m = ts_to_dlpack(u);
        CHECK(m && m->dl_tensor.data == (void *)(buf + 3) && m->dl_tensor.byte_offset == 0);
        CHECK(m && m->dl_tensor.strides[0] == 5);
        ts_release(u);
        CHECK_EQ(deleter_calls, 0); /* the capsule still holds the memory */
        if (m) m->deleter(m);
    }
    CHECK_EQ(deleter_calls, 1);

    /* NULL strides: compact row-major */
    f = foreign_new(24 * sizeof(float));
    foreign_shape(f, 3, (const int64_t[]){2, 3, 4}, NULL);
    u = ts_from_dlpack(&f->m);
    CHECK(u && ts_stride(u, 0) == 12 && ts_stride(u, 1) == 4 && ts_stride(u, 2) == 1);
    CHECK(u && ts_is_contiguous(u));
    CHECK(u && sum_of(u) == 276); /* 0 + ... + 23 */
    ts_release(u);
    CHECK_EQ(deleter_calls, 2);
    CHECK_OK();
}

/* ------------------------------------------------------------------ contiguous, not row-major
 * Buffers with no gap that are not in C order (column-major, a permuted 3-d layout, size-1 dims
 * with any stride): the strides are kept as given, and every way of reading the tensor (values,
 * reductions along each dim, a matmul, reshape, a copy to another device) sees element (i, j) at
 * buf[i * stride0 + j * stride1]. */
static void check_column_major_ops(ts_tensor *u) {
    double v[12];
    CHECK(read_f64(u, v, 12));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) CHECK(v[i * 4 + j] == i + 3 * j);
    ts_scope_begin();
    double rows[3], cols[4];
    CHECK(read_f64(ts_sum_dim(u, 1, false), rows, 3));
    CHECK(read_f64(ts_sum_dim(u, 0, false), cols, 4));
    for (int i = 0; i < 3; i++) CHECK(rows[i] == 4 * i + 18); /* sum_j i + 3j */
    for (int j = 0; j < 4; j++) CHECK(cols[j] == 3 + 9 * j);  /* sum_i i + 3j */
    /* u @ [1, 10, 100, 1000]: i * 1111 + 3 * (10 + 200 + 3000) */
    ts_tensor *w =
        ts_from_data(TS_SHAPE(4), TS_F32, (const float[]){1, 10, 100, 1000}, (ts_opts){0});
    double mv[3];
    CHECK(read_f64(ts_matmul(u, w), mv, 3));
    for (int i = 0; i < 3; i++) CHECK(mv[i] == 1111.0 * i + 9630);
    double flat[12];
    CHECK(read_f64(ts_reshape(u, TS_SHAPE(12)), flat, 12));
    CHECK(read_f64(ts_clone(u), v, 12));
    for (int k = 0; k < 12; k++) CHECK(flat[k] == v[k] && v[k] == (k / 4) + 3 * (k % 4));
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_dev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < n_dev; d++) {
        CHECK(read_f64(ts_to(u, devs[d]), v, 12));
        for (int k = 0; k < 12; k++) CHECK(v[k] == (k / 4) + 3 * (k % 4));
    }
    ts_scope_end();
}

static void test_not_row_major(void) {
    deleter_calls = 0;
    /* [3, 4] column-major: strides [1, 3], element (i, j) = i + 3 j */
    foreign *f = foreign_new(12 * sizeof(float));
    foreign_shape(f, 2, (const int64_t[]){3, 4}, (const int64_t[]){1, 3});
    ts_tensor *u = ts_from_dlpack(&f->m);
    CHECK(u != NULL);
    if (u) {
        CHECK(ts_stride(u, 0) == 1 && ts_stride(u, 1) == 3);
        CHECK(!ts_is_contiguous(u));
        check_column_major_ops(u);
        ts_release(u);
    }
    CHECK_EQ(deleter_calls, 1);

    /* [2, 3, 4] laid out with dim 0 fastest, then dim 2, then dim 1: strides [1, 8, 2] */
    f = foreign_new(24 * sizeof(float));
    foreign_shape(f, 3, (const int64_t[]){2, 3, 4}, (const int64_t[]){1, 8, 2});
    u = ts_from_dlpack(&f->m);
    CHECK(u && !ts_is_contiguous(u));
    double v[24];
    CHECK(u && read_f64(u, v, 24));
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) CHECK(v[(a * 3 + b) * 4 + c] == a + 8 * b + 2 * c);
    ts_scope_begin();
    double s1[8]; /* sum over dim 1: a + 2c + 8 (0 + 1 + 2) */
    CHECK(u && read_f64(ts_sum_dim(u, 1, false), s1, 8));
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) CHECK(s1[a * 4 + c] == 3 * (a + 2 * c) + 24);
    ts_scope_end();
    ts_release(u);
    CHECK_EQ(deleter_calls, 2);

    /* size-1 dims with strides that are never used (0 and a large one): row-major all the same */
    f = foreign_new(8 * sizeof(float));
    foreign_shape(f, 4, (const int64_t[]){2, 1, 4, 1}, (const int64_t[]){4, 0, 1, 1000});
    u = ts_from_dlpack(&f->m);
    CHECK(u && ts_is_contiguous(u));
    CHECK(u && read_f64(u, v, 8));
    for (int k = 0; k < 8; k++) CHECK(v[k] == k);
    ts_scope_begin();
    double s2[2];
    CHECK(u && read_f64(ts_sum_dim(ts_reshape(u, TS_SHAPE(2, 4)), 1, false), s2, 2));
    CHECK(s2[0] == 6 && s2[1] == 22);
    ts_scope_end();
    ts_release(u);
    CHECK_EQ(deleter_calls, 3);
    CHECK_OK();
}

/* ------------------------------------------------------------------ the deleter */
static void test_deleter_timing(void) {
    deleter_calls = 0;
    int64_t live0 = live_cpu();
    size_t alloc0 = allocated_cpu();
    foreign *f = foreign_new(1 << 20);
    foreign_shape(f, 1, (const int64_t[]){(1 << 20) / 4}, NULL);
    ts_tensor *u = ts_from_dlpack(&f->m);
    CHECK(u != NULL);
    /* foreign memory is not the caching allocator's */
    CHECK_EQ(allocated_cpu(), alloc0);
    ts_tensor *v = ts_narrow(u, 0, 10, 5); /* a view holds the memory too */
    ts_tensor *d = ts_detach(u);
    ts_release(u);
    CHECK_EQ(deleter_calls, 0);
    ts_release(v);
    CHECK_EQ(deleter_calls, 0);
    CHECK_NEAR(sum_of(d), 34359607296.0, 1e4);
    ts_release(d);
    CHECK_EQ(deleter_calls, 1);
    CHECK_EQ(live_cpu(), live0);
    CHECK_EQ(allocated_cpu(), alloc0);

    /* under a scope: freed when the scope ends */
    f = foreign_new(64);
    foreign_shape(f, 1, (const int64_t[]){16}, NULL);
    ts_scope_begin();
    u = ts_from_dlpack(&f->m);
    ts_tensor *w = ts_mul_scalar(u, 2); /* a result is new memory: does not hold the foreign one */
    w = ts_keep(w);
    CHECK_EQ(deleter_calls, 1);
    ts_scope_end();
    CHECK_EQ(deleter_calls, 2);
    CHECK(w && sum_of(w) == 240);
    ts_release(w);

    /* re-exported: the capsule holds the foreign memory after the tensor is gone */
    f = foreign_new(64);
    foreign_shape(f, 1, (const int64_t[]){16}, NULL);
    float *buf = f->buf;
    u = ts_from_dlpack(&f->m);
    DLManagedTensor *m = ts_to_dlpack(u);
    CHECK(m && m->dl_tensor.data == (void *)buf);
    ts_release(u);
    CHECK_EQ(deleter_calls, 2);
    ts_tensor *again = ts_from_dlpack(m); /* Tessera -> DLPack -> Tessera -> DLPack -> Tessera */
    CHECK(again && elem_ptr(again) == (char *)buf);
    CHECK(again && item_at(again, 0, 15) == 15);
    ts_release(again); /* calls m's deleter, which lets go of the foreign memory */
    CHECK_EQ(deleter_calls, 3);

    /* a NULL deleter ("no way to provide one"): accepted, nothing to call */
    float local[4] = {1, 2, 3, 4};
    DLManagedTensor bare = {.dl_tensor = {.data = local,
                                          .device = {kDLCPU, 0},
                                          .ndim = 1,
                                          .dtype = {kDLFloat, 32, 1},
                                          .shape = (int64_t[]){4}}};
    u = ts_from_dlpack(&bare);
    CHECK(u && sum_of(u) == 10);
    ts_release(u);

    /* kDLCUDAHost is host memory; kDLBool (DLPack 0.8's code 6) is bool */
    f = foreign_new(4);
    memcpy(f->buf, (const unsigned char[]){1, 0, 1, 1}, 4);
    foreign_shape(f, 1, (const int64_t[]){4}, NULL);
    f->m.dl_tensor.device = (DLDevice){kDLCUDAHost, 0};
    f->m.dl_tensor.dtype = (DLDataType){6, 8, 1};
    u = ts_from_dlpack(&f->m);
    CHECK(u && ts_dtype_of(u) == TS_BOOL && ts_device_of(u).type == TS_CPU);
    CHECK(u && sum_of(u) == 3);
    ts_release(u);
    CHECK_EQ(deleter_calls, 4);
    CHECK_OK();
}

/* ------------------------------------------------------------------ the capsule keeps memory */
static void test_capsule_keeps_memory(void) {
    int64_t live0 = live_cpu();
    size_t alloc0 = allocated_cpu();
    ts_tensor *t = ts_arange(0, 1000, 1, (ts_opts){.dtype = TS_F64});
    DLManagedTensor *m = ts_to_dlpack(t);
    CHECK(m != NULL);
    if (!m) return;
    ts_release(t);
    CHECK_EQ(live_cpu(), live0 + 1); /* the capsule's own handle */
    CHECK(allocated_cpu() >= alloc0 + 8000);
    /* nothing reuses the memory, and it is not handed back to the system */
    ts_tensor *w = ts_full(TS_SHAPE(1000), -1, (ts_opts){.dtype = TS_F64});
    CHECK(elem_ptr(w) != (char *)m->dl_tensor.data);
    ts_release(w);
    ts_empty_cache(ts_cpu());
    const double *p = m->dl_tensor.data; /* ASan: a use after free if the memory went */
    double sum = 0;
    for (int i = 0; i < 1000; i++) sum += p[i];
    CHECK_EQ(sum, 499500);
    m->deleter(m);
    CHECK_EQ(live_cpu(), live0);
    CHECK_EQ(allocated_cpu(), alloc0);

    /* a module moving its parameter in place (a new storage) leaves the capsule's memory alone */
    ts_tensor *q = ts_ones(TS_SHAPE(8), (ts_opts){0});
    m = ts_to_dlpack(q);
    CHECK(tsi_tensor_cast_storage(q, TS_F64) == TS_OK);
    ts_release(q);
    ts_empty_cache(ts_cpu());
    CHECK(m && ((const float *)m->dl_tensor.data)[7] == 1.0f);
    if (m) m->deleter(m);
    CHECK_EQ(live_cpu(), live0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ refusals */
/* from_dlpack refuses f: the code, a message naming the op and fragment, and the caller still
 * owns f (the deleter was not called). */
static void check_refused(foreign *f, ts_status code, const char *fragment) {
    int before = deleter_calls;
    ts_tensor *u = ts_from_dlpack(&f->m);
    CHECK(u == NULL);
    CHECK(strncmp(ts_error_message(), "from_dlpack: ", 13) == 0);
    CHECK_ERR_HAS(code, fragment);
    CHECK_EQ(deleter_calls, before);
    ts_release(u);
    f->m.deleter(&f->m);
}

static foreign *foreign_1d(uint8_t code, uint8_t bits, uint16_t lanes) {
    foreign *f = foreign_new(64);
    foreign_shape(f, 1, (const int64_t[]){2}, NULL);
    f->m.dl_tensor.dtype = (DLDataType){code, bits, lanes};
    return f;
}

static void test_refusals(void) {
    ts_error_clear();
    /* to_dlpack */
    CHECK(ts_to_dlpack(NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "to_dlpack: tensor is NULL");
    ts_tensor *g = ts_randn(TS_SHAPE(2, 3), (ts_opts){.requires_grad = true});
    CHECK(ts_to_dlpack(g) == NULL);
    CHECK(strstr(ts_error_message(), "float32 [2, 3] on cpu") != NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "to_dlpack: can't export tensors that require gradient");
    ts_tensor *gd = ts_detach(g);
    DLManagedTensor *m = ts_to_dlpack(gd);
    CHECK(m && m->dl_tensor.data == (void *)elem_ptr(g));
    if (m) m->deleter(m);
    ts_release(gd);
    ts_release(g);
    ts_tensor *s = ts_ones(TS_SHAPE(3), (ts_opts){.device = ts_sim(0)});
    CHECK(s != NULL);
    CHECK(ts_to_dlpack(s) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "to_dlpack: sim:0 has no DLPack device type");
    ts_release(s);

    /* from_dlpack */
    CHECK(ts_from_dlpack(NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "from_dlpack: the DLManagedTensor is NULL");
    deleter_calls = 0;
    check_refused(foreign_1d(kDLComplex, 32, 1), TS_ERR_DTYPE, "complex32 (code 5, bits 32");
    check_refused(foreign_1d(kDLInt, 128, 1), TS_ERR_DTYPE, "dtype int128");
    check_refused(foreign_1d(kDLInt, 4, 1), TS_ERR_DTYPE, "dtype int4");
    check_refused(foreign_1d(kDLUInt, 24, 1), TS_ERR_DTYPE, "dtype uint24");
    check_refused(foreign_1d(kDLUInt, 128, 1), TS_ERR_DTYPE, "dtype uint128");
    check_refused(foreign_1d(kDLFloat, 8, 1), TS_ERR_DTYPE, "dtype float8");
    check_refused(foreign_1d(kDLBfloat, 32, 1), TS_ERR_DTYPE, "dtype bfloat32");
    check_refused(foreign_1d(kDLOpaqueHandle, 64, 1), TS_ERR_DTYPE, "opaque handle");
    check_refused(foreign_1d(99, 32, 1), TS_ERR_DTYPE, "code 99");
    check_refused(foreign_1d(kDLFloat, 32, 2), TS_ERR_DTYPE, "lanes 2");

    int refused = 10;
    foreign *f = foreign_1d(kDLFloat, 32, 1);
    foreign_shape(f, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 2}, NULL);
    check_refused(f, TS_ERR_SHAPE, "9 dimensions; at most 8");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.ndim = -1;
    check_refused(f, TS_ERR_SHAPE, "-1 dimensions");
    f = foreign_1d(kDLFloat, 32, 1);
    foreign_shape(f, 2, (const int64_t[]){2, -3}, NULL);
    check_refused(f, TS_ERR_SHAPE, "negative dimension -3");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.shape = NULL;
    check_refused(f, TS_ERR_ARG, "shape is NULL");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.data = NULL;
    check_refused(f, TS_ERR_ARG, "data is NULL (float32 [2])");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.device = (DLDevice){kDLOpenCL, 0};
    check_refused(f, TS_ERR_UNSUPPORTED, "device type kDLOpenCL (4) is not supported");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.device = (DLDevice){kDLCUDAManaged, 0};
    check_refused(f, TS_ERR_UNSUPPORTED, "kDLCUDAManaged (13)");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.device = (DLDevice){(DLDeviceType)77, 0};
    check_refused(f, TS_ERR_UNSUPPORTED, "unknown (77)");
    if (!ts_cuda_is_available()) {
        f = foreign_1d(kDLFloat, 32, 1);
        f->m.dl_tensor.device = (DLDevice){kDLCUDA, 0};
        check_refused(f, TS_ERR_DEVICE, "cuda:0 is not available");
        refused++;
    }
    f = foreign_1d(kDLFloat, 32, 1);
    foreign_shape(f, 2, (const int64_t[]){2, 3}, (const int64_t[]){-3, 1});
    f->m.dl_tensor.byte_offset = 3 * sizeof(float);
    check_refused(f, TS_ERR_UNSUPPORTED, "negative strides are not supported (stride -3 of dim 0");
    f = foreign_1d(kDLFloat, 32, 1);
    f->m.dl_tensor.byte_offset = 2;
    check_refused(f, TS_ERR_UNSUPPORTED, "not aligned to the 4-byte float32 elements");
    f = foreign_1d(kDLFloat, 64, 1);
    foreign_shape(f, 2, (const int64_t[]){3, 4}, (const int64_t[]){INT64_MAX / 2, 1});
    check_refused(f, TS_ERR_SHAPE, "span more than");
    refused += 11;
    CHECK_EQ(deleter_calls, refused);

    /* what needs no data: NULL data for no elements, any stride on a dim of size 1 */
    f = foreign_1d(kDLFloat, 32, 1);
    foreign_shape(f, 2, (const int64_t[]){0, 5}, NULL);
    f->m.dl_tensor.data = NULL;
    ts_tensor *u = ts_from_dlpack(&f->m);
    CHECK(u && ts_numel(u) == 0 && ts_size(u, 1) == 5);
    ts_release(u);
    f = foreign_1d(kDLFloat, 32, 1);
    foreign_shape(f, 2, (const int64_t[]){1, 2}, (const int64_t[]){-7, 1});
    u = ts_from_dlpack(&f->m);
    CHECK(u && item_at(u, 1, 1) == 1);
    ts_release(u);
    CHECK_EQ(deleter_calls, refused + 2);
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
typedef struct sweep_st {
    ts_tensor *src;
    bool scoped;
    int deleted; /* foreign deleter calls when the run began */
} sweep_st;

static void *sweep_setup_plain(void) {
    sweep_st *s = calloc(1, sizeof *s);
    ts_scope_begin();
    s->src = ts_keep(ts_view(ts_arange(0, 12, 1, (ts_opts){.dtype = TS_F32}), TS_SHAPE(3, 4)));
    ts_scope_end();
    return s;
}

static void *sweep_setup_scoped(void) {
    sweep_st *s = sweep_setup_plain();
    s->scoped = true;
    return s;
}

/* Tessera -> DLPack -> Tessera, then a foreign tensor in: a failure anywhere leaves the capsule
 * (and the foreign tensor) with the caller, who lets go of it. Under a scope the imported tensor
 * is the first the scope records (the scope's array is allocated then, and can fail). */
static bool sweep_run(void *p) {
    sweep_st *s = p;
    s->deleted = deleter_calls;
    if (s->scoped) ts_scope_begin();
    ts_tensor *src = s->scoped ? ts_retain(s->src) : ts_transpose(s->src, 0, 1);
    DLManagedTensor *m = src ? ts_to_dlpack(src) : NULL;
    ts_tensor *u = m ? ts_from_dlpack(m) : NULL;
    if (m && !u) m->deleter(m); /* refused: still ours */
    foreign *f = foreign_new(12 * sizeof(float));
    if (s->scoped)
        foreign_shape(f, 2, (const int64_t[]){3, 4}, NULL);
    else
        foreign_shape(f, 2, (const int64_t[]){4, 3}, (const int64_t[]){1, 4});
    ts_tensor *v = u ? ts_from_dlpack(&f->m) : NULL;
    if (!v) f->m.deleter(&f->m);
    bool ok = v && same_values(u, v) && elem_ptr(u) == elem_ptr(src);
    if (s->scoped) ts_scope_end();
    if (!s->scoped) ts_release(u), ts_release(v);
    ts_release(src);
    return ok && ts_error() == TS_OK;
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    (void)ok;
    /* the foreign tensor went exactly once, whoever freed it */
    CHECK_EQ(deleter_calls, s->deleted + 1);
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_release(s->src);
    free(s);
}

static void test_fault_sweep(void) {
    ts_sweep_case plain = {.name = "dlpack round trip",
                           .setup = sweep_setup_plain,
                           .run = sweep_run,
                           .teardown = sweep_teardown,
                           .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&plain, 200);
    CHECK(st.allocations >= 4 && st.oom == st.errors);
    ts_sweep_case scoped = plain;
    scoped.name = "dlpack round trip (scope)";
    scoped.setup = sweep_setup_scoped;
    st = ts_fault_sweep(&scoped, 200);
    CHECK(st.allocations >= 4 && st.oom == st.errors);
}

/* ------------------------------------------------------------------ cuda */
static void test_cuda(void) {
    if (!ts_cuda_is_available()) {
        ts_test_no_cuda("test_dlpack: the cuda paths are not tested");
        return;
    }
    int64_t live0 = live_cpu();
    ts_scope_begin();
    ts_tensor *t = ts_view(ts_arange(0, 12, 1, (ts_opts){.device = ts_cuda(0)}), TS_SHAPE(3, 4));
    ts_tensor *v = ts_transpose(t, 0, 1);
    DLManagedTensor *m = ts_to_dlpack(v);
    CHECK(m != NULL);
    if (m) {
        CHECK_EQ(m->dl_tensor.device.device_type, kDLCUDA);
        CHECK_EQ(m->dl_tensor.device.device_id, 0);
        CHECK(m->dl_tensor.data == (void *)elem_ptr(v));
        CHECK(m->dl_tensor.strides[0] == 1 && m->dl_tensor.strides[1] == 4);
        ts_tensor *u = ts_from_dlpack(m);
        CHECK(u && ts_device_of(u).type == TS_CUDA && elem_ptr(u) == elem_ptr(v));
        CHECK(u && same_values(u, v));
        ts_fill_(u, 7); /* written on the device, seen through t */
        CHECK(sum_of(t) == 84);
    }
    /* device memory from elsewhere: a block of Tessera's own, lent through a hand-made capsule */
    ts_tensor *backing = ts_full(TS_SHAPE(6), 3, (ts_opts){.device = ts_cuda(0)});
    deleter_calls = 0;
    foreign *f = foreign_new(4);
    f->m.dl_tensor.data = elem_ptr(backing);
    f->m.dl_tensor.device = (DLDevice){kDLCUDA, 0};
    foreign_shape(f, 2, (const int64_t[]){2, 3}, NULL);
    ts_tensor *w = ts_from_dlpack(&f->m);
    CHECK(w && ts_device_of(w).type == TS_CUDA && ts_device_of(w).index == 0);
    CHECK(w && sum_of(w) == 18);
    ts_scope_end();
    CHECK_EQ(deleter_calls, 1);
    CHECK_EQ(live_cpu(), live0);
    f = foreign_new(4);
    f->m.dl_tensor.device = (DLDevice){kDLCUDA, ts_device_count(TS_CUDA)};
    foreign_shape(f, 1, (const int64_t[]){1}, NULL);
    check_refused(f, TS_ERR_DEVICE, "is not available");
    CHECK_OK();
}

int main(void) {
    test_round_trip_dtypes();
    test_views();
    test_not_row_major();
    test_deleter_timing();
    test_capsule_keeps_memory();
    test_refusals();
    test_fault_sweep();
    test_cuda();
    return ts_test_finish();
}
