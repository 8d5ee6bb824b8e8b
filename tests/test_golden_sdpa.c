/* test_golden_sdpa.c — scaled_dot_product_attention against PyTorch (tests/golden/sdpa.safetensors,
 * from tools/gen_golden_gpt.py): output and the gradients of query, key and value in float32 and
 * float64 for causal, bool and additive masks (one with a row that sees no key), L != S and a
 * custom scale, on cpu, sim:0 and cuda:0 when present — the fused kernels and, for comparison, the
 * reference composition. Runs under every vector ISA the host has (tests/CMakeLists.txt). */
#include <stdio.h>
#include <string.h>

#include "golden_util.h"
#include "nn/functional_internal.h"
#include "ts_test.h"

static const ts_tensor_list *F;

static ts_tensor *get(const char *name, const char *tag, const char *what) {
    char key[256];
    if (tag)
        snprintf(key, sizeof key, "%s.%s.%s", name, tag, what);
    else
        snprintf(key, sizeof key, "%s.%s", name, what);
    return ts_tensor_list_get(F, key);
}

static ts_tensor *leaf(ts_tensor *t, ts_device dev) {
    ts_tensor *x = ts_detach(ts_to(t, dev));
    ts_set_requires_grad(x, true);
    return x;
}

/* tolerances: PyTorch computes in another order (its flash kernel or its math path), so the
 * difference is rounding of both sides: a few hundred ulps of the dtype at the values' scale */
static void check_case(const char *name, ts_dtype dt, ts_device dev, bool reference) {
    const char *tag = dt == TS_F64 ? "f64" : "f32";
    const double rtol = dt == TS_F64 ? 1e-10 : 1e-4, atol = dt == TS_F64 ? 1e-12 : 1e-5;
    ts_scope_begin();
    ts_tensor *q = leaf(get(name, tag, "q"), dev), *k = leaf(get(name, tag, "k"), dev);
    ts_tensor *v = leaf(get(name, tag, "v"), dev), *mask = get(name, NULL, "mask");
    if (mask)
        mask =
            ts_to(ts_dtype_of(mask) == TS_I64 ? ts_ne_scalar(mask, 0) : ts_to_dtype(mask, dt), dev);
    const bool causal = ts_item(get(name, NULL, "causal")) != 0;
    const double scale = ts_item(get(name, NULL, "scale"));
    ts_tensor *out = reference ? tsi_sdpa_reference(q, k, v, mask, 0, causal, scale)
                               : ts_scaled_dot_product_attention(q, k, v, mask, 0, causal, scale);
    ts_backward_with(out, ts_to(get(name, tag, "r"), dev));
    CHECK_OK();
    bool ok = ts_golden_close("out", out, get(name, tag, "out"), rtol, atol);
    ok &= ts_golden_close("grad.q", ts_grad(q), get(name, tag, "grad.q"), rtol, atol);
    ok &= ts_golden_close("grad.k", ts_grad(k), get(name, tag, "grad.k"), rtol, atol);
    ok &= ts_golden_close("grad.v", ts_grad(v), get(name, tag, "grad.v"), rtol, atol);
    printf("golden sdpa %-12s %s %-6s %-9s %s\n", name, tag, ts_device_str(dev),
           reference ? "reference" : "fused", ok ? "ok" : "MISMATCH");
    CHECK(ok);
    ts_scope_end();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    static const char *cases[] = {"plain", "cross", "causal", "causal_wide", "bool", "additive"};
    ts_device devices[TS_TEST_MAX_DEVICES];
    const int ndev = ts_test_devices(devices, TS_TEST_MAX_DEVICES);
    ts_tensor_list file;
    if (!ts_golden_load(__FILE__, "sdpa", &file)) {
        return ts_test_finish();
    }
    F = &file;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int d = 0; d < ndev; d++)
            for (int dt = 0; dt < 2; dt++)
                for (int ref = 0; ref < 2; ref++)
                    check_case(cases[i], dt ? TS_F64 : TS_F32, devices[d], ref);
    ts_tensor_list_free(&file);
    return ts_test_finish();
}
