/* sim_link.h — the simulated host link (sim_link.c) as the sim backend, the transfers and the
 * op front ends use it (internal; the public side is tessera/sim_link.h). */
#ifndef TS_SIM_LINK_INTERNAL_H
#define TS_SIM_LINK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A link is set (ts_sim_set_link); and how many asynchronous copies may still be in flight. */
extern atomic_bool tsi_sim_link_on;
extern atomic_int tsi_sim_link_pending;

/* Copies n bytes (always) and, with the link on, charges the copy to sim:index's engine of that
 * direction after the device's queued copies, returning when its modelled end has passed. False
 * when the link is off (the bytes are copied all the same). */
bool tsi_sim_link_copy(int index, void *dst, const void *src, size_t n, bool h2d);
/* Queues a host-to-device copy to the storage with uid dst_uid: the bytes are copied now, the
 * modelled time runs on the engine while the caller goes on. False (nothing copied) when the link
 * is off. */
bool tsi_sim_link_copy_async(int index, uint64_t dst_uid, void *dst, const void *src, size_t n);
/* The same device-to-host (an offloaded optimizer's gradients): dst_uid is the host storage's, and
 * nothing waits for it but tsi_sim_link_wait_uid, a synchronous copy and a device sync. */
bool tsi_sim_link_copy_async_d2h(int index, uint64_t dst_uid, void *dst, const void *src, size_t n);
/* Waits for the queued copies into the storage with that uid / for all of sim:index's. */
void tsi_sim_link_wait_uid(int index, uint64_t uid);
void tsi_sim_link_sync(int index);
/* start-up: TS_SIM_LINK, a malformed value reported on stderr (core/sim_link_api.c) */
void tsi_sim_link_init_env(void);
/* For the public API (core/sim_link_api.c), arguments checked there: bandwidth 0 turns the link
 * off once every queued copy has finished; the parameters; sim:index's statistics read and
 * cleared (-1: every device's). */
struct ts_sim_link_stats;
void tsi_sim_link_set_params(double bandwidth_bytes_per_s, double latency_s);
bool tsi_sim_link_params(double *bandwidth_bytes_per_s, double *latency_s);
void tsi_sim_link_stats_read(int index, struct ts_sim_link_stats *out);
void tsi_sim_link_stats_clear(int index);

/* An op takes storage `s` as an input: with copies in flight, wait for the ones writing it. */
#define TSI_SIM_LINK_USE(dev, uid)                                                                 \
    do {                                                                                           \
        if (atomic_load_explicit(&tsi_sim_link_pending, memory_order_relaxed) > 0 &&               \
            (dev).type == TS_SIM)                                                                  \
            tsi_sim_link_wait_uid((dev).index, (uid));                                             \
    } while (0)

#endif /* TS_SIM_LINK_INTERNAL_H */
