/* golden_util.c — comparing Tessera's tensors with golden files written by PyTorch. */
#include "golden_util.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static double *host_f64(ts_tensor *t, int64_t *n) {
    *n = ts_numel(t);
    double *h = malloc((size_t)(*n ? *n : 1) * sizeof *h);
    ts_scope_begin();
    ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)*n * sizeof *h);
    ts_scope_end();
    return h;
}

bool ts_golden_close(const char *what, ts_tensor *got, ts_tensor *want, double rtol, double atol) {
    if (!got || !want) {
        printf("  %s: missing (%s)\n", what, got ? "golden" : "tessera");
        return false;
    }
    int64_t ng, nw;
    double *g = host_f64(got, &ng), *w = host_f64(want, &nw);
    bool ok = ng == nw;
    double worst = 0;
    for (int64_t i = 0; ok && i < ng; i++) {
        double err = fabs(g[i] - w[i]), tol = atol + rtol * fabs(w[i]);
        if (!(err <= tol)) ok = false;
        if (err / tol > worst) worst = err / tol;
    }
    if (!ok)
        printf("  %s: mismatch (%lld vs %lld elements, worst err/tol %.3g)\n", what, (long long)ng,
               (long long)nw, worst);
    free(g);
    free(w);
    return ok;
}

ts_tensor_list ts_golden_prefix(const ts_tensor_list *all, const char *prefix) {
    ts_tensor_list out = {0};
    size_t n = strlen(prefix);
    for (int i = 0; i < all->n; i++)
        if (!strncmp(all->names[i], prefix, n))
            ts_tensor_list_add(&out, all->names[i] + n, all->tensors[i]);
    return out;
}

void ts_golden_path(const char *source_file, const char *name, char *out, size_t n) {
    char src[4096];
    snprintf(src, sizeof src, "%s", source_file);
    snprintf(out, n, "%s/golden/%s.safetensors", dirname(src), name);
}

bool ts_golden_load(const char *source_file, const char *name, ts_tensor_list *out) {
    char path[4200];
    ts_golden_path(source_file, name, path, sizeof path);
    *out = (ts_tensor_list){0};
    const bool ok = ts_safetensors_load(path, ts_cpu(), out) == TS_OK;
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, __LINE__, "cannot load %s: %s", path, ts_error_message());
        ts_error_clear();
    }
    return ok;
}
