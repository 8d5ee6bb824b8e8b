"""tessera.backends.mkl — Intel MKL: not used by Tessera."""


def is_available():
    return False
