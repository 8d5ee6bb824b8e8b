/* fuzz_safetensors.c — libFuzzer target: the safetensors reader on arbitrary bytes must return a
 * status with a message and release everything (tools/fuzz.sh builds and runs it). */
#include <stdint.h>
#include <stdlib.h>

#include "tessera.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_tensor_list l = {0};
    ts_status st = ts_safetensors_parse(data, size, ts_cpu(), &l);
    /* anything else (or a silent failure) is a bug worth a crash report */
    if (st != TS_OK && st != TS_ERR_FORMAT && st != TS_ERR_UNSUPPORTED && st != TS_ERR_OOM) abort();
    if (st != TS_OK && (ts_error() != st || !ts_error_message()[0] || l.n != 0)) abort();
    for (int i = 0; i < l.n; i++)
        if (!l.tensors[i] || !l.names[i]) abort();
    ts_tensor_list_free(&l);
    ts_error_clear();
    return 0;
}
