/* cuda_check.c — what the CUDA runtime's tests share (cuda_check.h). */
#include "cuda_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool err_is(ts_status code, const char *const *parts) {
    bool ok = ts_error() == code;
    for (int i = 0; ok && parts[i]; i++) ok = strstr(ts_error_message(), parts[i]) != NULL;
    if (!ok)
        printf("  expected %s with the parts below, got %s: %s\n", ts_status_string(code),
               ts_status_string(ts_error()), ts_error_message());
    ts_error_clear();
    return ok;
}

bool floats_equal(ts_tensor *t, const float *want, int64_t n) {
    float *got = malloc((size_t)n * sizeof *got);
    bool ok = ts_copy_to_host(t, got, (size_t)n * sizeof *got) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = got[i] == want[i];
    free(got);
    return ok;
}
