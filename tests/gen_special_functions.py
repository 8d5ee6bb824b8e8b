#!/usr/bin/env python3
"""Prints tests/test_special_functions.c's reference tables: the Bessel functions J0, J1, Y0, Y1, K0,
K1 at a few points, from their power series (DLMF 10.2.2, 10.8.2, 10.25.2, 10.31.1-2) evaluated
with Python's decimal module at 80 digits: independent of Tessera's methods (Miller's recurrence,
Hankel's and Steed's expansions). Run: python3 tests/gen_special_functions.py"""
from decimal import Decimal as D, getcontext

getcontext().prec = 80
PI = D("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")
GAMMA = D("0.57721566490153286060651209008240243104215933593992359880576723488486772677766467")
TINY = D(10) ** -70


def series(x, nu, sign, extra=None):
    """sum_k sign^k (x/2)^(2k+nu) / (k! (k+nu)!) [* extra(k)]"""
    h = x / 2
    t = h ** nu
    for i in range(1, nu + 1):
        t /= i
    s = t * (extra(0) if extra else 1)
    k = 0
    while True:
        k += 1
        t = t * sign * h * h / (k * (k + nu))
        term = t * (extra(k) if extra else 1)
        s += term
        if abs(term) < TINY and abs(t) < TINY:
            return s


def harmonic(k):
    return sum((D(1) / i for i in range(1, k + 1)), D(0))


def psi(k):  # digamma(k) for an integer k >= 1
    return harmonic(k - 1) - GAMMA


def j(nu, x):
    return series(x, nu, -1)


def i(nu, x):
    return series(x, nu, 1)


def y0(x):
    return 2 / PI * ((x / 2).ln() + GAMMA) * j(0, x) + 2 / PI * series(x, 0, -1, lambda k: -harmonic(k))


def y1(x):
    return (-2 / (PI * x) + 2 / PI * (x / 2).ln() * j(1, x)
            - 1 / PI * series(x, 1, -1, lambda k: psi(k + 1) + psi(k + 2)))


def k0(x):
    return -((x / 2).ln() + GAMMA) * i(0, x) + series(x, 0, 1, harmonic)


def k1(x):
    return 1 / x + (x / 2).ln() * i(1, x) - series(x, 1, 1, lambda k: psi(k + 1) + psi(k + 2)) / 2


XS = ["0.0005", "0.1", "1", "2.5", "4.75", "8", "13.2", "24.9", "25.1", "40"]
for name, f in (("j0", lambda x: j(0, x)), ("j1", lambda x: j(1, x)), ("y0", y0), ("y1", y1),
                ("k0", k0), ("k1", k1)):
    print("static const double ref_%s[NB] = {%s};" % (
        name, ", ".join("%.17g" % float(f(D(x))) for x in XS)))
