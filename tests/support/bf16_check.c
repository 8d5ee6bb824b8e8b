/* bf16_check.c — see bf16_check.h. */
#include "bf16_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tol_check.h"
#include "ts_test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

ts_tensor *ts_test_random_bf16(ts_shape s, double scale, bool requires_grad) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = uniform() * scale;
    ts_tensor *t = ts_tensor_f64(s, v, (ts_opts){.dtype = TS_BF16, .requires_grad = requires_grad});
    free(v);
    return t;
}

double ts_test_check_bf16_sum(const char *file, int line, const char *what, ts_tensor *got,
                              ts_tensor *want, ts_tensor *mag, double K) {
    const int64_t n = want ? ts_numel(want) : 0;
    const bool same = got && mag && ts_numel(got) == n && ts_numel(mag) == n;
    double *g = ts_test_host_f64(got, n), *w = ts_test_host_f64(want, n);
    double *m = ts_test_host_f64(mag, n);
    const double u = ldexp(1, -24), gamma = K * u / (1 - K * u);
    double worst = 0;
    int64_t bad = same ? 0 : 1;
    for (int64_t i = 0; same && g && w && m && i < n; i++) {
        const double bound = ldexp(fabs(w[i]), -8) + (1 + ldexp(1, -8)) * gamma * m[i];
        const double err = fabs(g[i] - w[i]);
        if (!(err <= bound)) bad++;
        if (bound > 0 && err / bound > worst) worst = err / bound;
    }
    ts_test_record(bad == 0 && g && w && m);
    if (bad || !g || !w || !m)
        ts_test_failf(file, line, "%s: %lld of %lld elements past the bound (worst %.3g x)%s", what,
                      (long long)bad, (long long)n, worst,
                      same ? "" : " (the tensors differ in size)");
    free(g), free(w), free(m);
    return worst;
}

const char *ts_test_bf16_cap(bool conv) {
    const char *isa = getenv("TS_CPU_ISA"), *dnnl = getenv("ONEDNN_MAX_CPU_ISA");
    const char *provider = getenv("TS_CONV");
    if (isa && (!strcmp(isa, "avx2") || !strcmp(isa, "generic"))) return "TS_CPU_ISA";
    if (dnnl && *dnnl && !strstr(dnnl, "BF16") && !strstr(dnnl, "AMX") && strcmp(dnnl, "ALL"))
        return "ONEDNN_MAX_CPU_ISA";
    if (conv && provider && !strcmp(provider, "builtin")) return "TS_CONV=builtin";
    return NULL;
}

/* whether the flags line of /proc/cpuinfo names one of the two flags (b may be NULL) */
static bool cpu_flag(const char *a, const char *b) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool has = false;
    while (!has && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) has = strstr(line, a) || (b && strstr(line, b));
    fclose(f);
    return has;
}

bool ts_test_dnnl_below_amx(void) {
    const char *dnnl = getenv("ONEDNN_MAX_CPU_ISA");
    return dnnl && *dnnl && !strstr(dnnl, "AMX") && strcmp(dnnl, "ALL") != 0;
}

bool ts_test_host_has_bf16(void) { return cpu_flag(" avx512_bf16", " amx_bf16"); }
bool ts_test_host_has_amx_bf16(void) { return cpu_flag(" amx_bf16", NULL); }
