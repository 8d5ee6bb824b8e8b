"""tessera.backends.mps — Apple's Metal: not a Tessera backend."""


def is_available():
    return False


def is_built():
    return False
