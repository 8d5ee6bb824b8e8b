/* sim_backend.h — simulated devices: host memory with per-device accounting and capacity. */
#ifndef TS_SIM_BACKEND_H
#define TS_SIM_BACKEND_H

#include <stddef.h>

struct ts_backend;

#define TS_SIM_MAX_DEVICES 64

/* Registers the sim backend (0 devices until configured); idempotent. Reads no environment. */
void tsi_sim_backend_init(void);
/* Sets the number of sim devices and the capacity of each (0 = unlimited). Returns 0, or -1 when
 * count < 0 or count > TS_SIM_MAX_DEVICES. Bytes already raw-allocated stay accounted. */
int tsi_sim_backend_configure(int count, size_t capacity);
int tsi_sim_backend_count(void);
/* Bytes currently raw-allocated on sim:index (segments, not tensors); 0 for a bad index. */
size_t tsi_sim_backend_used(int index);
/* Sets be->matmul_bgrad to sim's (sim_matmul_bgrad.c: the cpu kernels, the composition's order). */
void tsi_sim_install_bgrad(struct ts_backend *be);
/* Sets be->matmul_bias_act to sim's (sim_matmul_bias_act.c: the cpu kernels in the composition's
 * order). */
void tsi_sim_install_bias_act(struct ts_backend *be);
/* Sets be->matmul_dact_bgrad to sim's (sim_matmul_dact_bgrad.c: the cpu kernels, the composed
 * backward's order). */
void tsi_sim_install_dact_bgrad(struct ts_backend *be);

#endif /* TS_SIM_BACKEND_H */
