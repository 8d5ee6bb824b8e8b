/* fuzz_csv.c — libFuzzer target: the CSV reader on arbitrary bytes with each option set of
 * data_probe.h, then the dataset it builds, sample by sample (tools/fuzz.sh builds and runs it). */
#include <stdint.h>
#include <stdlib.h>

#include "data_probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int set = 0; set < PROBE_CSV_SETS; set++) {
        bool bad = false;
        ts_status st = probe_csv(data, size, "<fuzz>", set, &bad);
        if (st != TS_OK && st != TS_ERR_FORMAT && st != TS_ERR_ARG && st != TS_ERR_OOM) abort();
        if (bad || !probe_failure_ok(st)) abort();
        ts_error_clear();
    }
    return 0;
}
