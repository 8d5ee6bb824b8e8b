/* capture_record.h — what the recording backend's files share: capture_record.c (the helpers,
 * raw memory, the stand-in backends), capture_record_ops.c (elementwise, reductions, products,
 * indexing, softmax, random) and capture_record_layers.c (convolution, pooling, the fused layers,
 * the optimizer step and grad scaler). Each recorder copies its call's views, scalars and
 * parameter structs into a block the graph owns and appends a replay function for it. */
#ifndef TS_CORE_CAPTURE_RECORD_H
#define TS_CORE_CAPTURE_RECORD_H

#include "core/capture.h"
#include "core/internal.h"

/* args of `size` bytes, zeroed; NULL + TS_ERR_OOM (the capture breaks) */
void *tsi_capture_args_new(size_t size);
/* the real backend behind a stand-in */
const ts_backend *tsi_capture_real_of(const ts_backend *rec);

/* a view copied, or an absent one (data NULL) for NULL */
static inline ts_kview view_of(const ts_kview *v) { return v ? *v : (ts_kview){0}; }
static inline const ts_kview *view_or_null(const ts_kview *v) { return v->data ? v : NULL; }

#define RECORD(fn, index, a) (void)tsi_capture_append(fn, index, a)

/* set b's slots of each family to its recorders (NULL where real has no kernel) */
void tsi_capture_install_ops(ts_backend *b, const ts_backend *real);
void tsi_capture_install_layers(ts_backend *b, const ts_backend *real);

#endif /* TS_CORE_CAPTURE_RECORD_H */
