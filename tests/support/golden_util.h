/* golden_util.h — comparing Tessera's tensors with golden files written by PyTorch. */
#ifndef TS_GOLDEN_UTIL_H
#define TS_GOLDEN_UTIL_H

#include <stdbool.h>

#include "tessera.h"

/* Every element within atol + rtol * |want|; prints the worst err/tol when not (what names it). */
bool ts_golden_close(const char *what, ts_tensor *got, ts_tensor *want, double rtol, double atol);
/* The entries whose names start with prefix, under their names without it (retained). */
ts_tensor_list ts_golden_prefix(const ts_tensor_list *all, const char *prefix);
/* "<dir of this source file>/golden/<name>.safetensors" into out */
void ts_golden_path(const char *source_file, const char *name, char *out, size_t n);
/* Loads that golden file onto the cpu into *out; false, with a failure recorded and printed (the
 * path and the error), when it cannot. */
bool ts_golden_load(const char *source_file, const char *name, ts_tensor_list *out);

#endif /* TS_GOLDEN_UTIL_H */
