/* fuzz_npy.c — libFuzzer target: the .npy reader on arbitrary bytes must return a tensor that
 * matches its header, or NULL with a status and a message, and release everything (tools/fuzz.sh
 * builds and runs it; the ctest fuzz_npy_corpus replays tests/fuzz/corpus/npy). */
#include <stdint.h>
#include <stdlib.h>

#include "tessera.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_tensor *t = ts_npy_parse(data, size, ts_cpu());
    ts_status st = ts_error();
    /* anything else (or a silent failure) is a bug worth a crash report */
    if (!t && st != TS_ERR_FORMAT && st != TS_ERR_UNSUPPORTED && st != TS_ERR_SHAPE &&
        st != TS_ERR_OOM)
        abort();
    if (!t && !ts_error_message()[0]) abort();
    if (t) {
        if (st != TS_OK || !ts_is_contiguous(t) || ts_ndim(t) > TS_MAX_DIMS) abort();
        /* the data section holds exactly the tensor's bytes, after a header of at least 10 */
        if (ts_nbytes(t) + 10 > size) abort();
        /* and every byte of it can be read back */
        size_t n = ts_nbytes(t);
        unsigned char *buf = malloc(n ? n : 1);
        if (!buf || ts_copy_to_host(t, buf, n) != TS_OK) abort();
        if (ts_dtype_of(t) == TS_BOOL)
            for (size_t i = 0; i < n; i++)
                if (buf[i] > 1) abort();
        free(buf);
    }
    ts_release(t);
    ts_error_clear();
    return 0;
}
