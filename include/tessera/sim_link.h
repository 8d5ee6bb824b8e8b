/* tessera/sim_link.h — a simulated host link for sim devices (issue 55 part 6): copies between the
 * host and a sim device take modelled time (latency + bytes / bandwidth), so that the overlap of an
 * offload or streaming schedule can be measured on a machine without a GPU.
 *
 * Off by default: sim copies are plain memcpy and nothing waits. With a link set (ts_sim_set_link,
 * or TS_SIM_LINK=16GB/s,5us in the environment, read once at start-up), each sim device has one
 * link with a copy engine per direction, and:
 *   - a synchronous copy (ts_to between cpu and sim) first waits for the device's queued copies
 *     (stream order), then occupies its direction's engine for its modelled time and returns when
 *     that has passed;
 *   - ts_to_async from a pinned, contiguous cpu tensor to a sim device is queued on the
 *     host-to-device engine and returns at once (the bytes are in place already: results are
 *     bit-identical with and without the link); the first op that takes the new tensor as an input,
 *     ts_sim_link_wait and a device synchronisation block until its modelled copy has finished;
 *   - copies between sim devices (peer copies) are not charged.
 * Per device, the link counts the bytes and copies each way, the time its engines were busy and
 * the time the host (compute) spent waiting for them. */
#ifndef TESSERA_SIM_LINK_H
#define TESSERA_SIM_LINK_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bandwidth in bytes per second (> 0, finite), latency in seconds (>= 0, finite); both 0: the link
 * off. Applies to every sim device from the next copy on; TS_ERR_ARG naming the argument. */
TS_API ts_status ts_sim_set_link(double bandwidth_bytes_per_s, double latency_s);
/* The same from a string as TS_SIM_LINK takes: "BANDWIDTH,LATENCY", bandwidth a number with
 * B/s, KB/s, MB/s, GB/s, TB/s (powers of 1000) or KiB/s, MiB/s, GiB/s; latency a number with s, ms,
 * us or ns (",LATENCY" may be left out: 0). "off", "0" or "": the link off. `what` names the source
 * in errors (NULL: "TS_SIM_LINK"). */
TS_API ts_status ts_sim_set_link_str(const char *spec, const char *what);
/* Re-reads TS_SIM_LINK (unset: the link off); what start-up does (it prints a malformed value's
 * error to stderr and leaves the link off). */
TS_API ts_status ts_sim_link_from_env(void);
/* The current model; false when the link is off (both outputs 0). Either pointer may be NULL. */
TS_API bool ts_sim_link_get(double *bandwidth_bytes_per_s, double *latency_s);

typedef struct ts_sim_link_stats {
    uint64_t bytes_h2d, bytes_d2h;   /* bytes moved each way */
    uint64_t copies_h2d, copies_d2h; /* copies each way (asynchronous ones included) */
    uint64_t async_copies;           /* of those, queued by ts_to_async */
    int64_t busy_ns;                 /* modelled time the engines were busy (both directions) */
    int64_t wait_ns;                 /* time the host waited for the link (copies and syncs) */
} ts_sim_link_stats;
/* Counters of sim:index since start-up or the last reset; TS_ERR_DEVICE for a bad index. */
TS_API ts_status ts_sim_link_stats_get(int index, ts_sim_link_stats *out);
/* index -1: every device. */
TS_API ts_status ts_sim_link_reset_stats(int index);
/* Blocks until every copy queued on sim:index's link has finished (its modelled time); the wait
 * counts in wait_ns. index -1: every device. */
TS_API ts_status ts_sim_link_wait(int index);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_SIM_LINK_H */
