/* fuzz_pt.c — libFuzzer target: the PyTorch checkpoint reader (zip, pickle, storages) on arbitrary
 * bytes must return tensors that match what it promises, or a status with a message, and release
 * everything (tools/fuzz.sh builds and runs it; the ctest fuzz_pt_corpus replays
 * tests/fuzz/corpus/pt: the checkpoints of tests/data/pt, and pickles from tools/gen_pt_corpus.py).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "tessera.h"
#include "tessera/pt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An input that starts as a pickle does (PROTO) is the data.pkl of a checkpoint made here, with
 * storages "0" to "7" of 256 bytes each (0 and 1 alternately): mutations reach the interpreter and
 * the tensors, where a mutated zip mostly stops at its CRCs. NULL (and no zip) on failure. */
static unsigned char *wrap_pickle(const uint8_t *data, size_t size, size_t *n) {
    static unsigned char storage[256];
    for (size_t i = 0; i < sizeof storage; i++) storage[i] = (unsigned char)(i & 1);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, NULL);
    if (!src) return NULL;
    zip_source_keep(src);
    zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, NULL);
    unsigned char *out = NULL;
    if (za) {
        bool ok = true;
        for (int i = -1; i < 8 && ok; i++) {
            char name[32];
            snprintf(name, sizeof name, i < 0 ? "archive/data.pkl" : "archive/data/%d", i);
            zip_source_t *s = i < 0 ? zip_source_buffer(za, data, size, 0)
                                    : zip_source_buffer(za, storage, sizeof storage, 0);
            zip_int64_t idx = s ? zip_file_add(za, name, s, 0) : -1;
            if (idx < 0) zip_source_free(s);
            ok = idx >= 0 && zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) == 0;
        }
        if (!ok || zip_close(za) != 0) zip_discard(za);
    }
    zip_stat_t zs;
    if (zip_source_stat(src, &zs) == 0 && zip_source_open(src) == 0) {
        out = malloc(zs.size ? zs.size : 1);
        if (out && zip_source_read(src, out, zs.size) != (zip_int64_t)zs.size) {
            free(out);
            out = NULL;
        }
        *n = zs.size;
        zip_source_close(src);
    }
    zip_source_free(src);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_tensor_list l = {0};
    unsigned char *zip = NULL;
    if (size && data[0] == 0x80) {
        size_t n = 0;
        zip = wrap_pickle(data, size, &n);
        if (!zip) return 0;
        data = zip;
        size = n;
    }
    ts_status st = ts_load_pt_parse(data, size, ts_cpu(), &l);
    /* anything else (or a silent failure) is a bug worth a crash report */
    if (st != TS_OK && st != TS_ERR_FORMAT && st != TS_ERR_UNSUPPORTED && st != TS_ERR_OOM) abort();
    if (st != ts_error()) abort();
    if (st != TS_OK && (!ts_error_message()[0] || l.n != 0)) abort();
    size_t total = 0;
    for (int i = 0; i < l.n; i++) {
        ts_tensor *t = l.tensors[i];
        if (!t || !l.names[i] || !ts_is_contiguous(t) || ts_ndim(t) > TS_MAX_DIMS) abort();
        bool seen = false; /* one tensor under two names counts once */
        for (int j = 0; j < i; j++) {
            if (!strcmp(l.names[i], l.names[j])) abort();
            seen |= l.tensors[j] == t;
        }
        /* every byte can be read back, bools are 0 or 1 */
        size_t n = ts_nbytes(t);
        if (!seen) total += n;
        unsigned char *buf = malloc(n ? n : 1);
        if (!buf || ts_copy_to_host(t, buf, n) != TS_OK) abort();
        if (ts_dtype_of(t) == TS_BOOL)
            for (size_t k = 0; k < n; k++)
                if (buf[k] > 1) abort();
        free(buf);
    }
    /* the reader's budget: four times the file plus 16 MiB */
    if (total > size * 4 + ((size_t)16 << 20)) abort();
    ts_tensor_list_free(&l);
    ts_error_clear();
    free(zip);
    return 0;
}
