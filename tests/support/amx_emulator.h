/* amx_emulator.h — the AMX tile instructions that src/backend/cpu/gemm_amx.c uses, in plain C, so
 * that kernel's packing, blocking, threading and rounding run and are tested on hosts without AMX
 * (tests/test_gemm_amx.c compiles gemm_amx.c with TS_AMX_EMULATED, which includes this after
 * <immintrin.h>). Each macro replaces the intrinsic of the same name, with the semantics of the
 * Intel SDM (palette 1: eight tiles of at most 16 rows x 64 bytes):
 *   ldtilecfg   the 64-byte configuration (palette, per tile colsb and rows)
 *   tilezero    the configured rows x colsb of a tile set to 0
 *   tileloadd   row r of the tile from base + r * stride (colsb bytes a row)
 *   tilestored  the converse
 *   tdpbf16ps   C[m][n] += sum over k < A.colsb / 4 of A[m][2k] B[k][2n] + A[m][2k+1] B[k][2n+1],
 *               products of bf16 numbers in float32 (exact), sums rounded in float32
 *   tilerelease the configuration dropped
 * and checks of what hardware would fault on or leave undefined: a tile used with no configuration
 * in this thread, a tile index past 7, a stride shorter than a row, shapes that do not fit
 * (A.colsb / 4 != B.rows, A.rows != C.rows, B.colsb != C.colsb), a palette other than 1. Each
 * such use counts in amx_emu_faults(), which the test requires to stay 0. The tile state is per
 * thread, as the hardware's is. */
#ifndef TS_AMX_EMULATOR_H
#define TS_AMX_EMULATOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct amx_emu_tile {
    uint8_t rows;
    uint16_t colsb;
    unsigned char data[16][64];
} amx_emu_tile;

static _Thread_local amx_emu_tile amx_emu_tiles[8];
static _Thread_local bool amx_emu_configured;
static atomic_int amx_emu_fault_count;
static atomic_long amx_emu_dp_count; /* tdpbf16ps executed, all threads */

static inline int amx_emu_faults(void) { return atomic_load(&amx_emu_fault_count); }
static inline long amx_emu_dps(void) { return atomic_load(&amx_emu_dp_count); }

static inline bool amx_emu_usable(int t) {
    if (t < 0 || t > 7 || !amx_emu_configured) {
        atomic_fetch_add(&amx_emu_fault_count, 1);
        return false;
    }
    return true;
}

static inline void amx_emu_loadconfig(const void *cfg) {
    const unsigned char *c = (const unsigned char *)cfg;
    if (c[0] != 1) { /* palette 1 is the only one with tiles */
        atomic_fetch_add(&amx_emu_fault_count, 1);
        return;
    }
    memset(amx_emu_tiles, 0, sizeof amx_emu_tiles);
    for (int t = 0; t < 8; t++) {
        uint16_t colsb;
        memcpy(&colsb, c + 16 + 2 * t, 2);
        const uint8_t rows = c[48 + t];
        if (colsb > 64 || rows > 16 || (colsb % 4) != 0) atomic_fetch_add(&amx_emu_fault_count, 1);
        amx_emu_tiles[t].colsb = colsb > 64 ? 64 : colsb;
        amx_emu_tiles[t].rows = rows > 16 ? 16 : rows;
    }
    amx_emu_configured = true;
}

static inline void amx_emu_release(void) {
    memset(amx_emu_tiles, 0, sizeof amx_emu_tiles);
    amx_emu_configured = false;
}

static inline void amx_emu_zero(int t) {
    if (!amx_emu_usable(t)) return;
    memset(amx_emu_tiles[t].data, 0, sizeof amx_emu_tiles[t].data);
}

static inline void amx_emu_loadd(int t, const void *base, long stride) {
    if (!amx_emu_usable(t)) return;
    amx_emu_tile *d = &amx_emu_tiles[t];
    if (stride < d->colsb) atomic_fetch_add(&amx_emu_fault_count, 1);
    for (int r = 0; r < d->rows; r++)
        memcpy(d->data[r], (const unsigned char *)base + (long)r * stride, d->colsb);
}

static inline void amx_emu_stored(int t, void *base, long stride) {
    if (!amx_emu_usable(t)) return;
    const amx_emu_tile *s = &amx_emu_tiles[t];
    if (stride < s->colsb) atomic_fetch_add(&amx_emu_fault_count, 1);
    for (int r = 0; r < s->rows; r++)
        memcpy((unsigned char *)base + (long)r * stride, s->data[r], s->colsb);
}

static inline float amx_emu_bf16(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline void amx_emu_dpbf16ps(int tc, int ta, int tb) {
    if (!amx_emu_usable(tc) || !amx_emu_usable(ta) || !amx_emu_usable(tb)) return;
    amx_emu_tile *c = &amx_emu_tiles[tc];
    const amx_emu_tile *a = &amx_emu_tiles[ta], *b = &amx_emu_tiles[tb];
    if (a->colsb / 4 != b->rows || a->rows != c->rows || b->colsb != c->colsb || tc == ta ||
        tc == tb || ta == tb)
        atomic_fetch_add(&amx_emu_fault_count, 1);
    for (int m = 0; m < c->rows; m++)
        for (int n = 0; n < c->colsb / 4; n++) {
            float acc;
            memcpy(&acc, c->data[m] + 4 * n, 4);
            for (int k = 0; k < a->colsb / 4 && k < b->rows; k++) {
                acc += amx_emu_bf16(a->data[m] + 4 * k + 2) * amx_emu_bf16(b->data[k] + 4 * n + 2);
                acc += amx_emu_bf16(a->data[m] + 4 * k) * amx_emu_bf16(b->data[k] + 4 * n);
            }
            memcpy(c->data[m] + 4 * n, &acc, 4);
        }
    atomic_fetch_add(&amx_emu_dp_count, 1);
}

#undef _tile_loadconfig
#undef _tile_release
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#define _tile_loadconfig(cfg)         amx_emu_loadconfig(cfg)
#define _tile_release()               amx_emu_release()
#define _tile_zero(t)                 amx_emu_zero(t)
#define _tile_loadd(t, base, stride)  amx_emu_loadd(t, base, stride)
#define _tile_stored(t, base, stride) amx_emu_stored(t, base, stride)
#define _tile_dpbf16ps(c, a, b)       amx_emu_dpbf16ps(c, a, b)

#endif /* TS_AMX_EMULATOR_H */
