"""tessera.backends.mkldnn — oneDNN: not used by Tessera's cpu kernels."""
enabled = True


def is_available():
    return False
