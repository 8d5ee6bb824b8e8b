/* test_ops_elementwise_inplace.c — in-place elementwise forms, where, masked_fill, clamp,
 * add_alpha, cpu 0-dim operands with sim tensors, device and NULL errors. */
#include "ops_elementwise_util.h"

/* ------------------------------------------------------------------ in place */
static void test_inplace(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_device dv = devs[di];
        const double av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
        ts_tensor *a = mk(TS_SHAPE(2, 3), TS_F32, av, dv), *b = mk1(3, TS_F32, bv, dv);
        uint64_t v0 = ts_version(a);
        CHECK(ts_add_(a, b) == a && ts_version(a) == v0 + 1);
        const double r1[6] = {11, 22, 33, 14, 25, 36};
        CHECK_VALS("add_ broadcast", a, TS_F32, r1, 6);
        CHECK(ts_mul_(a, a) == a); /* the same view on both sides */
        double r2[6];
        for (int i = 0; i < 6; i++) r2[i] = r1[i] * r1[i];
        CHECK_VALS("mul_ self", a, TS_F32, r2, 6);
        /* through a transposed view: base [3,2] seen as [2,3] */
        ts_tensor *base = mk(TS_SHAPE(3, 2), TS_F64, av, dv);
        ts_tensor *v = ts_transpose(base, 0, 1);
        CHECK(ts_sub_(v, mk(TS_SHAPE(2, 3), TS_I64, av, dv)) == v);
        const double r3[6] = {0, -2, 1, -1, 2, 0}; /* base[i][j] -= other[j][i] */
        CHECK_VALS("sub_ into a view", base, TS_F64, r3, 6);
        /* partial overlap: sq += sq^T must read the old values */
        const double q[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        ts_tensor *sq = mk(TS_SHAPE(3, 3), TS_F32, q, dv);
        CHECK(ts_add_(sq, ts_transpose(sq, 0, 1)) == sq);
        double r4[9];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) r4[i * 3 + j] = q[i * 3 + j] + q[j * 3 + i];
        CHECK_VALS("add_ overlapping transpose", sq, TS_F32, r4, 9);
        /* castable wider results: f16 *= f32 and i32 += i64 */
        ts_tensor *h = mk1(3, TS_F16, bv, dv);
        CHECK(ts_div_(h, mk1(3, TS_F32, (const double[]){4, 8, 16}, dv)) == h);
        const double r5[3] = {2.5, 2.5, 1.875};
        CHECK_VALS("div_ f16 by f32", h, TS_F16, r5, 3);
        ts_tensor *i32 = mk1(3, TS_I32, bv, dv);
        CHECK(ts_add_(i32, mk1(3, TS_I64, av, dv)) == i32);
        const double r6[3] = {11, 22, 33};
        CHECK_VALS("add_ i32 += i64", i32, TS_I32, r6, 3);
        CHECK(ts_pow_(i32, mk(TS_SHAPE(), TS_I64, (const double[]){2}, dv)) == i32);
        const double r7[3] = {121, 484, 1089};
        CHECK_VALS("pow_ by 0-dim", i32, TS_I32, r7, 3);
        /* scalar in-place forms on a strided view */
        ts_tensor *sv = ts_slice(mk1(6, TS_F32, av, dv), 0, 1, 6, 2); /* 2, 4, 6 */
        ts_add_scalar_(sv, 1);
        ts_sub_scalar_(sv, 0.5);
        ts_mul_scalar_(sv, 2);
        ts_div_scalar_(sv, 4);
        ts_pow_scalar_(sv, 2);
        double r8[3];
        for (int i = 0; i < 3; i++) r8[i] = pow((2.0 * (i + 1) + 0.5) * 2 / 4, 2);
        CHECK_VALS("scalar in-place chain", sv, TS_F32, r8, 3);
        CHECK_OK();
        ts_scope_end();
    }
    ts_scope_begin();
    const double iv[3] = {1, 2, 3}, fv[3] = {0.5, 1, 2};
    ts_tensor *ti = mk1(3, TS_I64, iv, ts_cpu()), *tf = mk1(3, TS_F32, fv, ts_cpu());
    uint64_t v0 = ts_version(ti);
    CHECK(ts_add_(ti, tf) == NULL);
    CHECK_ERR_MSG(TS_ERR_DTYPE, "add_: result type Float can't be cast to the desired output type "
                                "Long (output int64 [3] on cpu)");
    CHECK(ts_version(ti) == v0); /* a refused op leaves the destination alone */
    CHECK(ts_div_(ti, ti) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_add_scalar_(ti, 2.5) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_add_scalar_(ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_BOOL}), 1) == NULL);
    CHECK_ERR_MSG(TS_ERR_DTYPE, "add_scalar_: result type Long can't be cast to the desired "
                                "output type Bool (output bool [2] on cpu)");
    CHECK(ts_add_(tf, ts_zeros(TS_SHAPE(2, 3), (ts_opts){0})) == NULL);
    CHECK_ERR_MSG(TS_ERR_SHAPE, "add_: output with shape [3] doesn't match the broadcast shape "
                                "[2, 3]");
    ts_tensor *leaf = ts_ones(TS_SHAPE(3), (ts_opts){.requires_grad = true});
    CHECK(ts_mul_(leaf, tf) == NULL);
    CHECK_ERR_MSG(TS_ERR_STATE, "mul_: a leaf Variable that requires grad is being used in an "
                                "in-place operation.");
    CHECK(ts_pow_scalar_(ti, -2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_add_(ts_expand(tf, TS_SHAPE(2, 3)), tf) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ where, masked_fill, clamp */
static void test_where_masked_clamp(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_device dv = devs[di];
        const double cv[6] = {1, 0, 0, 1, 1, 0}, av[3] = {1, 2, 3}, bv[2] = {-1.5, -2.5};
        ts_tensor *c = mk(TS_SHAPE(2, 3), TS_BOOL, cv, dv);
        ts_tensor *a = mk1(3, TS_I64, av, dv), *b = mk(TS_SHAPE(2, 1), TS_F32, bv, dv);
        double ref[6];
        for (int i = 0; i < 6; i++) ref[i] = cv[i] ? av[i % 3] : bv[i / 3];
        CHECK_VALS("where broadcast + promotion", ts_where(c, a, b), TS_F32, ref, 6);
        CHECK_VALS("where uint8 condition", ts_where(ts_to_dtype(c, TS_U8), a, b), TS_F32, ref, 6);
        ts_tensor *h =
            ts_where(c, mk1(3, TS_F16, av, dv), ts_scalar(7, (ts_opts){.device = ts_cpu()}));
        for (int i = 0; i < 6; i++) ref[i] = cv[i] ? av[i % 3] : 7;
        CHECK_VALS("where f16 with a cpu 0-dim f32", h, TS_F16, ref, 6);

        /* masked_fill: out of place broadcasts t and mask; in place writes through a view */
        const double mv[2] = {1, 0};
        ts_tensor *m = mk(TS_SHAPE(2, 1), TS_BOOL, mv, dv);
        for (int i = 0; i < 6; i++) ref[i] = i < 3 ? 2 : av[i % 3];
        CHECK_VALS("masked_fill int with 2.5", ts_masked_fill(a, m, 2.5), TS_I64, ref, 6);
        const double tv[6] = {1, 2, 3, 4, 5, 6};
        ts_tensor *base = mk(TS_SHAPE(3, 2), TS_F32, tv, dv);
        ts_tensor *v = ts_transpose(base, 0, 1); /* [[1,3,5],[2,4,6]] */
        CHECK(ts_masked_fill_(v, m, -1) == v);
        const double r2[6] = {-1, 2, -1, 4, -1, 6};
        CHECK_VALS("masked_fill_ through a view", base, TS_F32, r2, 6);
        ts_tensor *bm = mk1(3, TS_BOOL, (const double[]){1, 0, 1}, dv);
        CHECK(ts_masked_fill_(bm, bm, 0) == bm); /* mask aliasing the destination */
        const double r3[3] = {0, 0, 0};
        CHECK_VALS("masked_fill_ self mask", bm, TS_BOOL, r3, 3);
        /* in place on a dense view past its storage's start: the element before it stays (the
         * mask's element before its own view is set) */
        const double pv[5] = {10, 20, 30, 40, 50}, pm[5] = {1, 0, 1, 0, 1};
        ts_tensor *pb = mk1(5, TS_F32, pv, dv), *pmb = mk1(5, TS_BOOL, pm, dv);
        CHECK(ts_masked_fill_(ts_narrow(pb, 0, 1, 4), ts_narrow(pmb, 0, 1, 4), -1) != NULL);
        const double rn[5] = {10, 20, -1, 40, -1};
        CHECK_VALS("masked_fill_ of a narrowed view", pb, TS_F32, rn, 5);

        /* clamp: NAN leaves a side open; bounds promote like Python numbers */
        const double xv[6] = {-3, -0.5, 0, 0.7, 2, NAN};
        ts_tensor *x = mk1(6, TS_F32, xv, dv);
        const double c1[6] = {-1, -0.5, 0, 0.7, 1, NAN}, c2[6] = {-1, -0.5, 0, 0.7, 2, NAN},
                     c3[6] = {-3, -0.5, 0, 0.5, 0.5, NAN}, c4[6] = {0.5, 0.5, 0.5, 0.5, 0.5, NAN};
        CHECK_VALS("clamp", ts_clamp(x, -1, 1), TS_F32, c1, 6);
        CHECK_VALS("clamp_min", ts_clamp_min(x, -1), TS_F32, c2, 6);
        CHECK_VALS("clamp_max", ts_clamp_max(x, 0.5), TS_F32, c3, 6);
        CHECK_VALS("clamp min > max", ts_clamp(x, 2, 0.5), TS_F32, c4, 6);
        const double iv[3] = {-3, 1, 5}, i1[3] = {0, 1, 2}, i2[3] = {0.5, 1, 5};
        ts_tensor *ti = mk1(3, TS_I64, iv, dv);
        CHECK_VALS("clamp int", ts_clamp(ti, 0, 2), TS_I64, i1, 3);
        CHECK_VALS("clamp int by 0.5", ts_clamp(ti, 0.5, NAN), TS_F32, i2, 3);
        const double b1[3] = {1, 1, 1};
        CHECK_VALS("clamp bool",
                   ts_clamp(ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_BOOL, .device = dv}), 0, 2),
                   TS_I64, b1, 3);
        ts_tensor *sv = ts_slice(mk1(6, TS_F64, xv, dv), 0, 0, 6, 2);
        CHECK(ts_clamp_(sv, -1, 0.25) == sv);
        const double c5[3] = {-1, 0, 0.25};
        CHECK_VALS("clamp_ strided", sv, TS_F64, c5, 3);

        /* add_alpha */
        const double fa[3] = {1, 2, 3}, fb[3] = {0.5, -1, 4};
        double r4[3];
        for (int i = 0; i < 3; i++) r4[i] = fa[i] + 2.5 * fb[i];
        CHECK_VALS("add_alpha", ts_add_alpha(mk1(3, TS_F32, fa, dv), mk1(3, TS_F32, fb, dv), 2.5),
                   TS_F32, r4, 3);
        for (int i = 0; i < 3; i++) r4[i] = fa[i] - 3 * fa[i];
        ti = mk1(3, TS_I32, fa, dv);
        CHECK_VALS("add_alpha int", ts_add_alpha(ti, ti, -3), TS_I32, r4, 3);
        for (int i = 0; i < 3; i++) r4[i] = fa[i] + 2.5 * fb[i];
        CHECK_VALS("add_alpha int + float", ts_add_alpha(ti, mk1(3, TS_F32, fb, dv), 2.5), TS_F32,
                   r4, 3);
        CHECK_OK();
        ts_scope_end();
    }
    ts_scope_begin();
    const double iv[3] = {1, 2, 3};
    ts_tensor *ti = mk1(3, TS_I64, iv, ts_cpu());
    CHECK(ts_where(ti, ti, ti) == NULL);
    CHECK_ERR_MSG(TS_ERR_DTYPE, "where: expected condition to be a boolean tensor, but got a "
                                "tensor with dtype Long (condition: int64 [3] on cpu)");
    CHECK(ts_masked_fill(ti, ti, 1) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *m = ts_ones(TS_SHAPE(2, 1), (ts_opts){.dtype = TS_BOOL});
    CHECK(ts_masked_fill_(ti, m, 1) == NULL);
    CHECK_ERR_MSG(TS_ERR_SHAPE, "masked_fill_: output with shape [3] doesn't match the broadcast "
                                "shape [2, 3]");
    CHECK(ts_masked_fill(ts_to_dtype(ti, TS_F16), m, 1e6) == NULL);
    CHECK_ERR_MSG(TS_ERR_ARG, "masked_fill: value cannot be converted to type float16 without "
                              "overflow (value 1e+06, input: float16 [3] on cpu)");
    CHECK(ts_masked_fill(ts_to_dtype(ti, TS_U8), m, -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_clamp(ti, NAN, NAN) == NULL);
    CHECK_ERR_MSG(TS_ERR_ARG, "clamp: At least one of 'min' or 'max' must not be None (NAN) "
                              "(input: int64 [3] on cpu)");
    CHECK(ts_clamp_(ti, 0.5, 2) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_add_alpha(ti, ti, 0.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ devices, NULL, memory */
static void test_devices(void) {
    ts_scope_begin();
    ts_device sim = ts_sim(0);
    const double av[3] = {1, 2, 4}, fv[3] = {0.5, -1, 2};
    ts_tensor *si = mk1(3, TS_I64, av, sim), *sf = mk1(3, TS_F32, fv, sim);
    ts_tensor *c2 = ts_scalar(2, (ts_opts){.device = ts_cpu()});                  /* f32 */
    ts_tensor *ci = ts_scalar(3, (ts_opts){.dtype = TS_I64, .device = ts_cpu()}); /* i64 */
    ts_tensor *cb = ts_scalar(1, (ts_opts){.dtype = TS_BOOL, .device = ts_cpu()});
    ts_tensor *cd = ts_scalar(0.5, (ts_opts){.dtype = TS_F64, .device = ts_cpu()});
    struct {
        const char *what;
        ts_tensor *r;
        ts_dtype dt;
        double ref[3];
    } C[] = {
        {"sim f32 + cpu 2", ts_add(sf, c2), TS_F32, {2.5, 1, 4}},
        {"cpu 2 - sim f32", ts_sub(c2, sf), TS_F32, {1.5, 3, 0}},
        {"sim i64 - cpu i64", ts_sub(si, ci), TS_I64, {-2, -1, 1}},
        {"cpu i64 / sim i64", ts_div(ci, si), TS_F32, {3, 1.5, 0.75}},
        {"sim i64 * cpu f64", ts_mul(si, cd), TS_F64, {0.5, 1, 2}},
        {"cpu 2 ** sim f32", ts_pow(c2, sf), TS_F32, {sqrt(2.0), 0.5, 4}},
        {"sim i64 ** cpu i64", ts_pow(si, ci), TS_I64, {1, 8, 64}},
        {"sim i64 fmod cpu i64", ts_fmod(si, ci), TS_I64, {1, 2, 1}},
        {"cpu i64 fmod sim i64", ts_fmod(ci, si), TS_I64, {0, 1, 3}},
        {"cpu 2 < sim f32", ts_lt(c2, sf), TS_BOOL, {0, 0, 0}},
        {"cpu 2 <= sim f32", ts_le(c2, sf), TS_BOOL, {0, 0, 1}},
        {"sim f32 >= cpu 2", ts_ge(sf, c2), TS_BOOL, {0, 0, 1}},
        {"cpu true and sim f32", ts_logical_and(cb, sf), TS_BOOL, {1, 1, 1}},
        {"sim i64 max cpu i64", ts_maximum(si, ci), TS_I64, {3, 3, 4}},
        {"where(sim, cpu, sim)", ts_where(ts_gt_scalar(sf, 0), c2, sf), TS_F32, {2, -1, 2}},
        {"add_alpha(sim, cpu)", ts_add_alpha(sf, c2, -1), TS_F32, {-1.5, -3, 0}},
        {"masked_fill(sim, cpu mask)", ts_masked_fill(sf, cb, 9), TS_F32, {9, 9, 9}},
    };
    for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
        CHECK_VALS(C[k].what, C[k].r, C[k].dt, C[k].ref, 3);
        CHECK(C[k].r && ts_device_equal(ts_device_of(C[k].r), sim));
    }
    /* a 0-dim cpu integer too large for a double: copied over, exact */
    int64_t big = ((int64_t)1 << 60) + 1, got[3];
    ts_tensor *cbig = ts_from_data(TS_SHAPE(), TS_I64, &big, (ts_opts){.device = ts_cpu()});
    ts_tensor *rb = ts_add(si, cbig);
    CHECK(rb && ts_copy_to_host(ts_to(rb, ts_cpu()), got, sizeof got) == TS_OK);
    CHECK(got[0] == big + 1 && got[2] == big + 4);
    CHECK(ts_add_(si, ci) == si); /* in place with a cpu 0-dim operand */
    const double r1[3] = {4, 5, 7};
    CHECK_VALS("sim add_ cpu 0-dim", si, TS_I64, r1, 3);
    CHECK_OK();

    /* any other mix is an error with PyTorch's message */
    ts_tensor *c1 = mk1(3, TS_F32, fv, ts_cpu());
    CHECK(ts_add(sf, c1) == NULL);
    CHECK_ERR_MSG(TS_ERR_DEVICE, "add: expected all tensors to be on the same device, but found at "
                                 "least two devices, sim:0 and cpu");
    CHECK(ts_mul(c1, sf) == NULL);
    CHECK_ERR_MSG(TS_ERR_DEVICE, "mul: expected all tensors to be on the same device, but found at "
                                 "least two devices, cpu and sim:0");
    CHECK(ts_add_(c2, ts_scalar(1, (ts_opts){.device = sim})) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_where(ts_gt_scalar(sf, 0), sf, c1) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    if (ts_device_count(TS_SIM) > 1) {
        CHECK(ts_add(sf, mk1(3, TS_F32, fv, ts_sim(1))) == NULL);
        CHECK_ERR_MSG(TS_ERR_DEVICE, "add: expected all tensors to be on the same device, but "
                                     "found at least two devices, sim:0 and sim:1");
    }
    ts_scope_end();
}

static void test_null_inputs(void) {
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2), (ts_opts){0});
    CHECK(ts_add(NULL, x) == NULL);
    CHECK_STREQ(ts_error_message(), "add: a is NULL");
    CHECK(ts_exp(ts_mul(x, NULL)) == NULL); /* the first error is kept */
    CHECK_STREQ(ts_error_message(), "add: a is NULL");
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_where(x, NULL, x) == NULL && ts_clamp(NULL, 0, 1) == NULL &&
          ts_add_scalar_(NULL, 1) == NULL && ts_masked_fill(x, NULL, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}
/* where's contiguous selects by element size (kern_binary.c's WHERE_SEG): x and y full or one
 * broadcast value each, and masked_fill (one pass through where with a broadcast value), over a
 * random condition of an odd length, against the same select made here byte for byte (so a NaN's
 * payload must pass through unchanged too). */
static void test_where_select_paths(void) {
    static const ts_dtype DT[] = {TS_BOOL, TS_U8, TS_F16, TS_BF16, TS_I32, TS_F32, TS_F64, TS_I64};
    enum { N = 1037 };
    static uint8_t c[N], x[N * 8], y[N * 8], xs[8], ys[8], got[N * 8], want[N * 8];
    uint64_t st = 88172645463325252ull;
    for (int di = 0; di < ndev; di++)
        for (size_t d = 0; d < sizeof DT / sizeof DT[0]; d++) {
            const ts_dtype dt = DT[d];
            const size_t sz = ts_dtype_size(dt);
            for (size_t i = 0; i < N * sz; i++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                x[i] = (uint8_t)st, y[i] = (uint8_t)(st >> 8);
                if (dt == TS_BOOL) x[i] &= 1, y[i] &= 1;
            }
            for (int i = 0; i < N; i++) {
                st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                c[i] = (uint8_t)(st >> 20) & 1;
            }
            memcpy(xs, x + 3 * sz, sz), memcpy(ys, y + 5 * sz, sz);
            ts_scope_begin();
            const ts_device dev = devs[di];
            const ts_opts o = {.dtype = dt, .device = dev};
            ts_tensor *tc = ts_from_data(TS_SHAPE(N), TS_BOOL, c, (ts_opts){.device = dev});
            ts_tensor *tx = ts_from_data(TS_SHAPE(N), dt, x, o);
            ts_tensor *ty = ts_from_data(TS_SHAPE(N), dt, y, o);
            ts_tensor *sx = ts_from_data((ts_shape){0}, dt, xs, o);
            ts_tensor *sy = ts_from_data((ts_shape){0}, dt, ys, o);
            for (int form = 0; form < 4; form++) {
                const bool fx = form & 1, fy = form & 2; /* full x, full y */
                ts_tensor *r = ts_where(tc, fx ? tx : sx, fy ? ty : sy);
                for (int i = 0; i < N; i++)
                    memcpy(want + i * sz, c[i] ? (fx ? x + i * sz : xs) : (fy ? y + i * sz : ys),
                           sz);
                CHECK(r != NULL && ts_copy_to_host(r, got, N * sz) == TS_OK);
                if (r && memcmp(got, want, N * sz)) {
                    fprintf(stderr, "where form %d, %s on %s differs\n", form, ts_dtype_name(dt),
                            ts_device_str(dev));
                    CHECK(false);
                }
            }
            if (ts_dtype_is_floating(dt)) {
                ts_tensor *v = ts_to_dtype(ts_scalar(0.5, (ts_opts){.device = dev}), dt);
                uint8_t vb[8];
                CHECK(v && ts_copy_to_host(v, vb, sz) == TS_OK);
                ts_tensor *r = ts_masked_fill(tx, tc, 0.5);
                for (int i = 0; i < N; i++) memcpy(want + i * sz, c[i] ? vb : x + i * sz, sz);
                CHECK(r != NULL && ts_copy_to_host(r, got, N * sz) == TS_OK);
                if (r && memcmp(got, want, N * sz)) {
                    fprintf(stderr, "masked_fill, %s on %s differs\n", ts_dtype_name(dt),
                            ts_device_str(dev));
                    CHECK(false);
                }
            }
            CHECK_OK();
            ts_scope_end();
        }
}

/* where's select off the contiguous path: a condition broadcast along the inner dimension (stride
 * 0) and an x read with a stride of 2, for every element size, against the select made here byte
 * for byte (the one-byte types must not take the contiguous select for these either). */
static void test_where_strided(void) {
    static const ts_dtype DT[] = {TS_BOOL, TS_U8, TS_F16, TS_I32, TS_F64};
    enum { R = 7, C = 9 };
    uint8_t c[R], x[R * 2 * C * 8], y[R * C * 8], got[R * C * 8], want[R * C * 8];
    for (int i = 0; i < R; i++) c[i] = (uint8_t)((i * 5 + 1) % 3 == 0);
    for (int di = 0; di < ndev; di++)
        for (size_t d = 0; d < sizeof DT / sizeof DT[0]; d++) {
            const ts_dtype dt = DT[d];
            const size_t sz = ts_dtype_size(dt);
            for (size_t i = 0; i < sizeof x; i++) x[i] = (uint8_t)(i * 37 + 11);
            for (size_t i = 0; i < sizeof y; i++) y[i] = (uint8_t)(i * 59 + 3);
            if (dt == TS_BOOL) {
                for (size_t i = 0; i < sizeof x; i++) x[i] &= 1;
                for (size_t i = 0; i < sizeof y; i++) y[i] = (uint8_t)((y[i] & 1) ^ 1);
            }
            ts_scope_begin();
            const ts_device dev = devs[di];
            const ts_opts o = {.dtype = dt, .device = dev};
            ts_tensor *tc = ts_from_data(TS_SHAPE(R, 1), TS_BOOL, c, (ts_opts){.device = dev});
            ts_tensor *tx = ts_slice(ts_from_data(TS_SHAPE(R, 2 * C), dt, x, o), 1, 0, 2 * C, 2);
            ts_tensor *ty = ts_from_data(TS_SHAPE(R, C), dt, y, o);
            ts_tensor *r = ts_where(tc, tx, ty);
            for (int i = 0; i < R; i++)
                for (int j = 0; j < C; j++)
                    memcpy(want + (i * C + j) * sz,
                           c[i] ? x + (i * 2 * C + 2 * j) * sz : y + (i * C + j) * sz, sz);
            CHECK(r != NULL && ts_copy_to_host(r, got, R * C * sz) == TS_OK);
            if (r && memcmp(got, want, R * C * sz)) {
                fprintf(stderr, "where strided, %s on %s differs\n", ts_dtype_name(dt),
                        ts_device_str(dev));
                CHECK(false);
            }
            /* the condition broadcast alone (x, y contiguous) */
            r = ts_where(tc, ty, ts_fliplr(ty));
            for (int i = 0; i < R; i++)
                for (int j = 0; j < C; j++)
                    memcpy(want + (i * C + j) * sz, y + (i * C + (c[i] ? j : C - 1 - j)) * sz, sz);
            CHECK(r != NULL && ts_copy_to_host(r, got, R * C * sz) == TS_OK);
            if (r && memcmp(got, want, R * C * sz)) {
                fprintf(stderr, "where broadcast condition, %s on %s differs\n", ts_dtype_name(dt),
                        ts_device_str(dev));
                CHECK(false);
            }
            CHECK_OK();
            ts_scope_end();
        }
}

int main(void) {
    if (!ew_setup_devices()) return ts_test_skip("no sim devices: %s", ts_error_message());
    int64_t before[2];
    ew_live_tensors(before);
    test_inplace();
    test_where_masked_clamp();
    test_where_select_paths();
    test_where_strided();
    test_devices();
    test_null_inputs();
    return ew_finish(before);
}
