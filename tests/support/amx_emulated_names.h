/* amx_emulated_names.h — the names gemm_amx.c's entries (and kern_sdpa_amx.c's) take when a test
 * compiles them against the emulated tiles (TS_AMX_EMULATED, amx_emulator.h), so they link beside
 * the library's own. Define before including the .c files; test_gemm_amx.c #undefs them after,
 * to call the library's kernel as well. */
#ifndef TS_AMX_EMULATED_NAMES_H
#define TS_AMX_EMULATED_NAMES_H

#define TS_AMX_EMULATED            1
#define tsi_amx_gemm_ready         tsi_amx_emu_gemm_ready
#define tsi_amx_gemm_takes         tsi_amx_emu_gemm_takes
#define tsi_amx_gemm_bf16          tsi_amx_emu_gemm_bf16
#define tsi_amx_gemm_count         tsi_amx_emu_gemm_count
#define tsi_amx_gemm_serial        tsi_amx_emu_gemm_serial
#define tsi_amx_gemm_serial_bytes  tsi_amx_emu_gemm_serial_bytes
#define tsi_amx_gemm_serial_packed tsi_amx_emu_gemm_serial_packed
#define tsi_amx_pack_b             tsi_amx_emu_pack_b
#define tsi_amx_pack_b_bytes       tsi_amx_emu_pack_b_bytes
#define tsi_sdpa_amx_takes         tsi_sdpa_amx_emu_takes
#define tsi_sdpa_amx_workspace     tsi_sdpa_amx_emu_workspace
#define tsi_sdpa_amx_forward       tsi_sdpa_amx_emu_forward
#define tsi_sdpa_amx_backward      tsi_sdpa_amx_emu_backward

#endif /* TS_AMX_EMULATED_NAMES_H */
