/* fuzz_idx.c — libFuzzer target: the IDX reader (plain and gzip) on arbitrary bytes, then the
 * dataset built from what it accepts, sample by sample (tools/fuzz.sh builds and runs it). */
#include <stdint.h>
#include <stdlib.h>

#include "data_probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tsi_idx x;
    bool bad = false;
    ts_status st = tsi_idx_parse(data, size, "<fuzz>", &x);
    if (st == TS_OK) st = probe_idx(&x, "<fuzz>", &bad);
    /* anything else (or a silent failure, or a wrong sample) is a bug worth a crash report */
    if (st != TS_OK && st != TS_ERR_FORMAT && st != TS_ERR_UNSUPPORTED && st != TS_ERR_OOM) abort();
    if (bad || !probe_failure_ok(st)) abort();
    ts_error_clear();
    return 0;
}
