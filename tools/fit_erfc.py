#!/usr/bin/env python3
"""fit_erfc.py — the erfc polynomial of src/backend/cpu/vec_math_impl.h (tsv_erfc_e): P(q) fitted
to F(q) = (a + K) e^(a^2) erfc(a) with q = (a - K) / (a + K), a in [0, A], for the smallest
relative error (Lawson's iteratively reweighted least squares towards the minimax fit, in mpmath).
The vector code takes erfc(a) = e^-a^2 w P(q) with w = 1 / (a + K). Prints the largest relative
error (in float ulps) and the coefficients, constant term first.
Usage: tools/fit_erfc.py [K DEGREE A ITERATIONS]   (defaults 2 9 9.36 60, the ones in use)"""
import sys

import mpmath as mp

mp.mp.dps = 30


def lawson(f, lo, hi, n, npts=300, iters=60):
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (i + 0.5) / npts) for i in range(npts)]
    ys = [f(x) for x in xs]
    w = [mp.mpf(1) / npts] * npts
    best = None
    for _ in range(iters):
        A = mp.matrix(n + 1, n + 1)
        b = mp.matrix(n + 1, 1)
        for i, x in enumerate(xs):
            s = w[i] / ys[i] ** 2
            pw = [x**k for k in range(n + 1)]
            for j in range(n + 1):
                b[j] += s * pw[j] * ys[i]
                for k in range(n + 1):
                    A[j, k] += s * pw[j] * pw[k]
        c = mp.lu_solve(A, b)
        errs = [(mp.polyval(list(reversed(c)), x) - ys[i]) / ys[i] for i, x in enumerate(xs)]
        m = max(abs(e) for e in errs)
        if best is None or m < best[0]:
            best = (m, c)
        tot = sum(w[i] * abs(errs[i]) for i in range(npts))
        w = [w[i] * abs(errs[i]) / tot for i in range(npts)]
    return best


def main():
    args = sys.argv[1:] + ["2", "9", "9.36", "60"][len(sys.argv) - 1 :]
    K, n, A, iters = mp.mpf(args[0]), int(args[1]), mp.mpf(args[2]), int(args[3])

    def F(q):
        a = K * (1 + q) / (1 - q)
        return (a + K) * mp.erfc(a) * mp.exp(a * a)

    m, c = lawson(F, mp.mpf(-1), (A - K) / (A + K), n, iters=iters)
    print("K %s degree %d: largest relative error %.3g (%.2f float ulps)" % (K, n, m, m * 2**24))
    for x in c:
        print("%.9e" % float(x))


if __name__ == "__main__":
    main()
