/* lenet_model.h — LeNet-5's shape, which several tests train: conv(in, 6, 5, padding) -> ReLU ->
 * max pool 2 -> conv(6, 16, 5) -> ReLU -> max pool 2 -> flatten (400) -> linear 120 -> ReLU ->
 * linear 84 -> ReLU -> linear 10. LeNet-5 itself on 1 x 28 x 28 with padding 2; the CIFAR
 * tutorial's SimpleCNN (bench_gpu's) on 3 x 32 x 32 with padding 0. */
#ifndef TS_TEST_LENET_MODEL_H
#define TS_TEST_LENET_MODEL_H

#include "tessera.h"

/* A fresh model on the cpu, its parameters drawn from the generator as it stands. */
ts_module *ts_test_lenet_new(int64_t in_channels, int padding);

#endif /* TS_TEST_LENET_MODEL_H */
