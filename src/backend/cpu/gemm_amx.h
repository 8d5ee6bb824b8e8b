/* gemm_amx.h — bf16 matrix products on AMX tiles (Intel Sapphire Rapids and later), written here
 * because Debian's oneDNN 2.6 runs its AMX kernel at under a quarter of the tiles' peak. */
#ifndef TS_GEMM_AMX_H
#define TS_GEMM_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the AMX kernel may run: the CPU has AMX-BF16, Linux granted this process the tiles'
 * state, nothing caps it (TS_CPU_ISA below avx512, ONEDNN_MAX_CPU_ISA below the AMX ISAs: one cap
 * for every AMX path, oneDNN's and this one) and TS_AMX_GEMM is not off. Read once. */
bool tsi_amx_gemm_ready(void);

/* Whether a bf16 product of `macs` multiply-adds goes to this kernel rather than oneDNN's: ready,
 * and from matmul_select.c's amx_min_macs (below it oneDNN 2.6's kernel, which packs nothing for
 * small operands, is as fast or faster: bench/results/autocast.md); any size with
 * TS_AMX_GEMM=all. */
bool tsi_amx_gemm_takes(double macs);

/* bf16 C = A B (+ bias) for each of bsz batches, A [m x k], B [k x n], C [m x n], strides as
 * tsi_dnnl_matmul_strided's (s[0] the batch stride, 0 for one matrix broadcast; s[1] rows;
 * s[2] columns; in elements). The products of bf16 numbers are exact in float32, the sums are
 * float32, the bias [n] (contiguous bf16, or NULL) is added to them and each element of C is
 * rounded to bf16 once. false, having written nothing the caller relies on, when the kernel
 * cannot run here or its scratch memory cannot be had. */
bool tsi_amx_gemm_bf16(int64_t bsz, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const int64_t sa[3], const uint16_t *b, const int64_t sb[3], uint16_t *c,
                       const int64_t sc[3], const uint16_t *bias);

/* One product in the calling thread (it starts none of its own: attention's block products, each
 * thread its own): C = A B with A [m x k] and B [k x n] bf16, strides {rows, columns} in
 * elements; C float32 (c_f32: the float32 sums as they are) or bf16 (rounded once), also
 * {rows, columns}. ws: tsi_amx_gemm_serial_bytes(m, n, k) bytes of the caller's, 64-byte aligned,
 * where the operands are packed. false, having written nothing, when the kernel cannot run here. */
size_t tsi_amx_gemm_serial_bytes(int64_t m, int64_t n, int64_t k);
bool tsi_amx_gemm_serial(int64_t m, int64_t n, int64_t k, const uint16_t *a, const int64_t sa[2],
                         const uint16_t *b, const int64_t sb[2], void *c, const int64_t sc[2],
                         bool c_f32, void *ws);

/* B [k x n] (strides {rows, columns}) packed once for several products of
 * tsi_amx_gemm_serial_packed, into tsi_amx_pack_b_bytes(k, n) bytes at dst (64-byte aligned). */
size_t tsi_amx_pack_b_bytes(int64_t k, int64_t n);
void tsi_amx_pack_b(int64_t k, int64_t n, const uint16_t *b, const int64_t sb[2], uint16_t *dst);
/* tsi_amx_gemm_serial with B packed before (tsi_amx_pack_b with kp rows, at least n columns):
 * the product takes B's first k <= kp rows and first n columns. ws: tsi_amx_gemm_serial_bytes'
 * worth (its B part unused). */
bool tsi_amx_gemm_serial_packed(int64_t m, int64_t n, int64_t k, const uint16_t *a,
                                const int64_t sa[2], const uint16_t *bp, int64_t kp, void *c,
                                const int64_t sc[2], bool c_f32, void *ws);

/* Products the kernel has run (tests check which path ran). */
uint64_t tsi_amx_gemm_count(void);

#endif /* TS_GEMM_AMX_H */
