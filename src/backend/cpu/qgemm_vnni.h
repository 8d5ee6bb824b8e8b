/* qgemm_vnni.h — the AVX512-VNNI int8 GEMM of kern_qlinear.c (u8 activations x s8 weights,
 * int32 sums with vpdpbusd). */
#ifndef TS_QGEMM_VNNI_H
#define TS_QGEMM_VNNI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/quant_args.h"

/* The int8 GEMM's kernels, each exact (the same int32 sums): the portable loop of kern_qlinear.c,
 * AVX2 (vpmaddubsw with the activations split in 7 + 1 bits: qgemm_avx2.c), AVX-VNNI (vpdpbusd ymm:
 * qgemm_avx2.c) and AVX512-VNNI (this file). The last three read the panels below. */
typedef enum tsi_qgemm_kind {
    TSI_QGEMM_PORTABLE,
    TSI_QGEMM_AVX2,
    TSI_QGEMM_AVXVNNI,
    TSI_QGEMM_AVX512VNNI
} tsi_qgemm_kind;
/* The best kind the CPU has within the ISA in use (TS_CPU_ISA: avx512 for AVX512-VNNI, avx2 or
 * more for the 256-bit ones) and within tsi_qgemm_kind_cap. */
tsi_qgemm_kind tsi_qgemm_kind_get(void);
const char *tsi_qgemm_kind_name(tsi_qgemm_kind kind); /* "portable", "avx2", "avxvnni", ... */
/* Tests and benches: the highest kind allowed (the ISA cap cannot tell AVX2 from AVX-VNNI);
 * TSI_QGEMM_AVX512VNNI by default. */
extern atomic_int tsi_qgemm_kind_cap;
/* Whether the AVX512-VNNI kernel may run: tsi_qgemm_kind_get() is TSI_QGEMM_AVX512VNNI */
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
/* the same with the 256-bit kernels (qgemm_avx2.c): AVX-VNNI when avxvnni, else AVX2; blocks of a
 * panel (16 columns) by 6 rows (AVX-VNNI) or 4 (AVX2) */
void tsi_qgemm_256_run(bool avxvnni, const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp,
                       int64_t kp, int32_t x_zp, const int64_t *xsum, const int64_t *wsum,
                       tsi_qgemm_epilogue epi);
/* the kernel of kind (not TSI_QGEMM_PORTABLE) */
void tsi_qgemm_run(tsi_qgemm_kind kind, const ts_qlinear_args *a, const uint8_t *xp,
                   const int8_t *wp, int64_t kp, int32_t x_zp, const int64_t *xsum,
                   const int64_t *wsum, tsi_qgemm_epilogue epi);

#endif /* TS_QGEMM_VNNI_H */
