/* stats.h — statistical tests for the random-number and shuffle tests, with critical values at a
 * tiny false-positive rate (TS_STATS_Z standard deviations, about 1e-9 one-sided): a failure means
 * a wrong distribution, never bad luck. Independent of the library's own random code. */
#ifndef TS_STATS_H
#define TS_STATS_H

#include <stdint.h>

/* 6 standard deviations: a false alarm about once in 10^9 runs */
#define TS_STATS_Z 6.0

/* The standard normal CDF, from erfc (libm). */
double ts_stats_normal_cdf(double x);

/* Kolmogorov-Smirnov statistic D = sup |F_n(x) - F(x)| of n samples (sorted in place) against the
 * CDF F. */
double ts_stats_ks(double *v, int64_t n, double (*cdf)(double));
/* D's critical value for n samples at false-positive rate alpha, from the
 * Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant, P(D > t) <= 2 exp(-2 n t^2), which
 * holds for every n. */
double ts_stats_ks_critical(int64_t n, double alpha);

/* Pearson's chi-square of observed counts against equal expected counts (total / k). */
double ts_stats_chi2_uniform(const int64_t *counts, int k);
/* The chi-square critical value with df degrees of freedom at TS_STATS_Z (Wilson-Hilferty). */
double ts_stats_chi2_critical(int df);

/* A permutation of 0..n-1 (n <= 8) as its index among all n! in lexicographic order; -1 when the
 * values are not a permutation. */
int ts_stats_perm_index(const int64_t *p, int n);

#endif /* TS_STATS_H */
