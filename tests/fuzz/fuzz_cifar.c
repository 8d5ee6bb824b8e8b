/* fuzz_cifar.c — libFuzzer target: a CIFAR-10 batch on arbitrary bytes, then the dataset over the
 * records it accepts, sample by sample (tools/fuzz.sh builds and runs it). */
#include <stdint.h>
#include <stdlib.h>

#include "data_probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bool bad = false;
    ts_status st = probe_cifar(data, size, "<fuzz>", &bad);
    if (st != TS_OK && st != TS_ERR_FORMAT && st != TS_ERR_OOM) abort();
    if (bad || !probe_failure_ok(st)) abort();
    ts_error_clear();
    return 0;
}
