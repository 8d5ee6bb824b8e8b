"""gen_mnist_pickle.py — not from pytorch/tutorials: writes ./data/mnist/mnist.pkl.gz, the file
nn_tutorial.py downloads (deeplearning.net's MNIST pickle: ((x_train, y_train), (x_valid, y_valid),
(x_test, y_test)), images as float32 rows of 784 pixels in [0, 1], labels int64), from the
Fashion-MNIST images the harness writes to ./data/FashionMNIST/raw (1000 training images; the 500
test images serve as both the validation and the test split)."""
import gzip
import os
import pickle
import struct

import numpy as np


def read_idx(path):
    with open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range((magic & 0xFF) - 1)]
        return np.frombuffer(f.read(), dtype=np.uint8).reshape([n] + dims)


raw = os.path.join("data", "FashionMNIST", "raw")
splits = []
for split in ("train", "t10k"):
    x = read_idx(os.path.join(raw, split + "-images-idx3-ubyte"))
    y = read_idx(os.path.join(raw, split + "-labels-idx1-ubyte"))
    splits.append((x.reshape(len(x), 784).astype(np.float32) / 255.0, y.astype(np.int64)))
os.makedirs(os.path.join("data", "mnist"), exist_ok=True)
with gzip.open(os.path.join("data", "mnist", "mnist.pkl.gz"), "wb") as f:
    pickle.dump((splits[0], splits[1], splits[1]), f)
