/* qgemm_vnni.h — the AVX512-VNNI int8 GEMM of kern_qlinear.c (u8 activations x s8 weights,
 * int32 sums with vpdpbusd). */
#ifndef TS_QGEMM_VNNI_H
#define TS_QGEMM_VNNI_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/quant_args.h"

/* Whether the kernel may run: the CPU has AVX512-VNNI and the ISA in use (TS_CPU_ISA) is avx512 */
bool tsi_qgemm_vnni_available(void);
/* w [n, k] int8 into panels of 16 columns: panel p, step s (k / 4), column c, byte b at
 * wp[(p * kp / 4 + s) * 64 + c * 4 + b]; columns past n and k past k are 0. wp: round_up(n, 16) *
 * kp bytes, kp = round_up(k, 4). */
void tsi_qgemm_vnni_pack_w(const int8_t *w, int64_t n, int64_t k, int8_t *wp);
/* the same panels from w's column c, element i read as the byte w[c * sn + i * sk] xor flip
 * (a [k, n] weight: sn 1, sk n; uint8 bytes moved down by 128: flip 0x80) */
void tsi_qgemm_vnni_pack_w_strided(const uint8_t *w, int64_t sn, int64_t sk, uint8_t flip,
                                   int64_t n, int64_t k, int8_t *wp);
/* Rows m0 .. m0 + mr by columns [n0, n0 + nn): row r's raw sums at raw + r * ld, x_zp the
 * activations' zero point, xsum[r] row m0 + r's byte sum */
typedef void (*tsi_qgemm_epilogue)(const ts_qlinear_args *a, int64_t m0, int64_t mr, int64_t n0,
                                   int64_t nn, const int32_t *raw, int64_t ld, int32_t x_zp,
                                   const int64_t *xsum, const int64_t *wsum);
/* raw sums of xp (m rows of kp unsigned bytes, zero padded; xsum[m] each row's sum) by the panels
 * wp, handed to epi for each block of up to 8 rows and 48 columns */
void tsi_qgemm_vnni_run(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp, int64_t kp,
                        int32_t x_zp, const int64_t *xsum, const int64_t *wsum,
                        tsi_qgemm_epilogue epi);

#endif /* TS_QGEMM_VNNI_H */
