/* dnnl_common.h — what the oneDNN primitives (conv_dnnl.c, matmul_dnnl.c) share: one CPU engine,
 * made after the GEMM provider has set oneDNN's ISA cap (TS_CPU_ISA), and scratchpads over the
 * cached host memory of host_scratch.c. Only where the build found oneDNN. */
#ifndef TS_DNNL_COMMON_H
#define TS_DNNL_COMMON_H

#ifdef TS_HAVE_DNNL
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dnnl.h>

#include "backend/cpu/host_scratch.h"

/* The engine, made at the first call; NULL when oneDNN could not make one. */
dnnl_engine_t tsi_dnnl_engine(void);

/* A u8 memory object of `bytes` over a host_scratch block (*block: give it back with
 * tsi_host_scratch_put, NULL-safe; *mem: destroy it); false when either could not be had. */
bool tsi_dnnl_scratchpad(size_t bytes, dnnl_memory_t *mem, ts_block **block);

/* The thread count a primitive made now would run with (OpenMP's max threads here). oneDNN fixes
 * a primitive's thread count when it is made: a primitive cached under one count runs with it
 * forever, so the caches key on this (before, convolutions made while ts_set_num_threads(1) was
 * in force kept one thread after ts_set_num_threads(2): ResNet-18's convs ran at half speed). */
int tsi_dnnl_threads(void);

/* A plain descriptor of nd dims (at most DNNL_MAX_NDIMS) in the tag's order and type dt. */
void tsi_dnnl_plain_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_format_tag_t tag,
                       dnnl_data_type_t dt);
/* The reorder from src to dst descriptors, or *out NULL when they are equal; false on failure. */
bool tsi_dnnl_make_reorder(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                           dnnl_primitive_t *out);
#endif

#endif /* TS_DNNL_COMMON_H */
