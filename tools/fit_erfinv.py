#!/usr/bin/env python3
"""Fits the polynomials of the float erfinv (src/backend/kernel_math.h, ts_erfinv_f).

erfinv(x) = x * p(w) with w = -log(1 - x^2); p is a polynomial in t = w - 2.5 for w < 5 and in
t = sqrt(w) - 3 above (Giles' variables, "Approximating the erfinv function", GPU Computing Gems
Jade Edition, 2011). This script refits both to near-minimax Chebyshev fits of erfinv(x) / x
against mpmath's 40-digit erfinv, raising the degree until the fit's error is below 1e-10 (a
float result then rounds as the exact value would but for near-ties), and prints the coefficients,
highest degree first, as the C arrays ts_erfinv_f uses. w up to 16.5 covers every float below 1
(the largest, 1 - 2^-24, has w = 15.9).

Needs mpmath (Debian: python3-mpmath):  python3 tools/fit_erfinv.py
"""
import sys

import mpmath as mp

mp.mp.dps = 40


def ratio_of_w(w):
    """erfinv(x) / x where w = -log(1 - x^2); its limit sqrt(pi) / 2 at w = 0"""
    w = max(mp.mpf(w), mp.mpf("1e-35"))
    x = mp.sqrt(-mp.expm1(-w))
    return mp.erfinv(x) / x


def central(t):
    return ratio_of_w(mp.mpf(t) + mp.mpf("2.5"))


def tail(t):
    return ratio_of_w((mp.mpf(t) + 3) ** 2)


def main():
    pieces = [("central", central, -2.5, 2.5), ("tail", tail, mp.sqrt(5) - 3, mp.sqrt(16.5) - 3)]
    for name, f, a, b in pieces:
        for degree in range(8, 22):
            coef, err = mp.chebyfit(f, [a, b], degree, error=True)
            if err < 1e-10:
                print("%s: %d coefficients, error %s" % (name, degree, mp.nstr(err, 3)),
                      file=sys.stderr)
                print("const double %s[%d] = {%s};" % (
                    name, len(coef), ", ".join(mp.nstr(v, 21) for v in coef)))
                break


if __name__ == "__main__":
    main()
