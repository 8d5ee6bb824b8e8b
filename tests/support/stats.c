/* stats.c — Kolmogorov-Smirnov and chi-square tests behind stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

double ts_stats_normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ts_stats_ks(double *v, int64_t n, double (*cdf)(double)) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double f = cdf(v[i]);
        double lo = f - (double)i / (double)n, hi = (double)(i + 1) / (double)n - f;
        if (lo > d) d = lo;
        if (hi > d) d = hi;
    }
    return d;
}

double ts_stats_ks_critical(int64_t n, double alpha) {
    return sqrt(-log(alpha / 2) / (2.0 * (double)n));
}

double ts_stats_chi2_uniform(const int64_t *counts, int k) {
    double total = 0, chi2 = 0;
    for (int i = 0; i < k; i++) total += (double)counts[i];
    double e = total / k;
    for (int i = 0; i < k; i++) chi2 += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
    return chi2;
}

double ts_stats_chi2_critical(int df) {
    double h = 2.0 / (9.0 * df), c = 1 - h + TS_STATS_Z * sqrt(h);
    return df * c * c * c;
}

int ts_stats_perm_index(const int64_t *p, int n) {
    if (n < 1 || n > 8) return -1;
    int index = 0, used = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || (used >> p[i] & 1)) return -1;
        int smaller_unused = 0;
        for (int v = 0; v < p[i]; v++) smaller_unused += !(used >> v & 1);
        used |= 1 << p[i];
        index = index * (n - i) + smaller_unused;
    }
    return index;
}
