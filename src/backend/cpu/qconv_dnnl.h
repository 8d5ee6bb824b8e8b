/* qconv_dnnl.h — the quantized 2-D convolution of kern_qconv.c through oneDNN's int8 primitive
 * (u8 activations x s8 weights -> s32 sums), requantized by Tessera's own epilogue (ONNX Runtime's
 * float32 rounding, bit for bit). Only where the build found oneDNN. */
#ifndef TS_QCONV_DNNL_H
#define TS_QCONV_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/quant_args.h"

typedef enum {
    TSI_QDNNL_DONE,     /* the output is written */
    TSI_QDNNL_DECLINED, /* nothing the caller relies on written: run the own kernels */
    TSI_QDNNL_FAILED    /* out of memory: the error set */
} tsi_qdnnl_status;

/* Whether tsi_qconv_dnnl can take a at all: oneDNN present, ONNX Runtime's float32
 * requantization (fmult), every weight zero point 0. */
bool tsi_qconv_dnnl_fits(const ts_qconv_args *a);
/* The convolution a (quant_args.h). DECLINED also when some raw sum reached 2^24, where oneDNN's
 * float32 store of the s32 result may have rounded it (the output is then the caller's to write
 * again). */
tsi_qdnnl_status tsi_qconv_dnnl(const ts_qconv_args *a);
/* Whether the route can run on this host at all (oneDNN's engine, AVX512-VNNI): kern_qconv.c
 * then asks for channels_last activations (backend.h's qconv_channels_last, decision 0053). */
bool tsi_qconv_dnnl_available(void);
/* Convolutions this route has completed and declined after running (2^24 sums), and those of the
 * completed that read a channels_last input where it lies (no copy), for tests. */
uint64_t tsi_qconv_dnnl_count(void);
uint64_t tsi_qconv_dnnl_inexact_count(void);
uint64_t tsi_qconv_dnnl_direct_count(void);
/* Completed convolutions that ran in bands of output rows (qconv_dnnl.c), for tests. */
uint64_t tsi_qconv_dnnl_banded_count(void);
/* The s32 sums a band holds a thread (bytes; <= 0: the default, 256 KiB), for tests. */
void tsi_qconv_dnnl_set_band_bytes(int64_t bytes);

#endif /* TS_QCONV_DNNL_H */
