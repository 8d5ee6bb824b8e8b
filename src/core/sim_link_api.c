/* sim_link_api.c — the public side of the simulated host link (tessera/sim_link.h): checked
 * arguments, TS_SIM_LINK's parser and the statistics; the model itself is
 * src/backend/sim/sim_link.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "backend/sim/sim_backend.h"
#include "backend/sim/sim_link.h"
#include "core/internal.h"

/* The public setters' bodies, without tsi_init: start-up (tsi_sim_link_init_env, inside tsi_init's
 * once) calls them too, and tsi_init there would wait for itself. */
static ts_status set_link(double bw, double lat) {
    if (bw == 0 && lat == 0) {
        tsi_sim_link_set_params(0, 0);
        return TS_OK;
    }
    if (!(bw > 0) || !isfinite(bw))
        return tsi_error_set(
            TS_ERR_ARG, "sim_set_link: bandwidth_bytes_per_s must be > 0 and finite (got %g)", bw);
    if (!(lat >= 0) || !isfinite(lat))
        return tsi_error_set(TS_ERR_ARG, "sim_set_link: latency_s must be >= 0 and finite (got %g)",
                             lat);
    tsi_sim_link_set_params(bw, lat);
    return TS_OK;
}

ts_status ts_sim_set_link(double bw, double lat) {
    tsi_init();
    return set_link(bw, lat);
}

bool ts_sim_link_get(double *bw, double *lat) {
    tsi_init();
    return tsi_sim_link_params(bw, lat);
}

/* "<number><unit>" with one of units[i] (scale[i]); false when malformed */
static bool parse_quantity(const char *s, size_t len, const char *const *units, const double *scale,
                           int n_units, double *out) {
    char buf[64];
    while (len && (*s == ' ' || *s == '\t')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    if (!len || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || errno || !isfinite(v) || v < 0) return false;
    while (*end == ' ') end++;
    for (int i = 0; i < n_units; i++)
        if (!strcmp(end, units[i])) {
            *out = scale[i] < 1 ? v / (1 / scale[i]) : v * scale[i]; /* 5us: 5e-6 exactly */
            return isfinite(*out);
        }
    return false;
}

static ts_status set_link_str(const char *spec, const char *what) {
    if (!what) what = "TS_SIM_LINK";
    if (!spec || !*spec || !strcmp(spec, "off") || !strcmp(spec, "0")) return set_link(0, 0);
    static const char *const bw_units[] = {"B/s",  "KB/s",  "MB/s",  "GB/s",
                                           "TB/s", "KiB/s", "MiB/s", "GiB/s"};
    static const double bw_scale[] = {1, 1e3, 1e6, 1e9, 1e12, 1024.0, 1048576.0, 1073741824.0};
    static const char *const lat_units[] = {"s", "ms", "us", "ns"};
    static const double lat_scale[] = {1, 1e-3, 1e-6, 1e-9};
    const char *comma = strchr(spec, ',');
    const size_t bw_len = comma ? (size_t)(comma - spec) : strlen(spec);
    double bw = 0, lat = 0;
    if (!parse_quantity(spec, bw_len, bw_units, bw_scale, 8, &bw) || bw <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s='%s': the bandwidth must be a positive number with a unit "
                             "(B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s), e.g. "
                             "16GB/s,5us",
                             what, spec);
    if (comma && !parse_quantity(comma + 1, strlen(comma + 1), lat_units, lat_scale, 4, &lat))
        return tsi_error_set(TS_ERR_ARG,
                             "%s='%s': the latency after the comma must be a number >= 0 with a "
                             "unit (s, ms, us, ns), e.g. 16GB/s,5us",
                             what, spec);
    return set_link(bw, lat);
}

ts_status ts_sim_set_link_str(const char *spec, const char *what) {
    tsi_init();
    return set_link_str(spec, what);
}

ts_status ts_sim_link_from_env(void) {
    tsi_env_reload(TSI_ENV_SIM_LINK);
    return ts_sim_set_link_str(tsi_env(TSI_ENV_SIM_LINK), NULL);
}

void tsi_sim_link_init_env(void) {
    const char *v = tsi_env(TSI_ENV_SIM_LINK);
    if (!v) return;
    if (set_link_str(v, NULL) != TS_OK) { /* reported here, not left pending for the caller */
        fprintf(stderr, "tessera: %s; the sim link stays off\n", ts_error_message());
        ts_error_clear();
    }
}

static bool index_ok(const char *op, int index, bool all_ok) {
    if ((all_ok && index == -1) || (index >= 0 && index < tsi_sim_backend_count())) return true;
    tsi_error_set(TS_ERR_DEVICE, "%s: sim:%d is not a configured sim device (%d configured)", op,
                  index, tsi_sim_backend_count());
    return false;
}

ts_status ts_sim_link_stats_get(int index, ts_sim_link_stats *out) {
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "sim_link_stats_get: out is NULL");
    if (!index_ok("sim_link_stats_get", index, false)) return ts_error();
    tsi_sim_link_stats_read(index, out);
    return TS_OK;
}

ts_status ts_sim_link_reset_stats(int index) {
    tsi_init();
    if (!index_ok("sim_link_reset_stats", index, true)) return ts_error();
    tsi_sim_link_stats_clear(index);
    return TS_OK;
}

ts_status ts_sim_link_wait(int index) {
    tsi_init();
    if (!index_ok("sim_link_wait", index, true)) return ts_error();
    for (int i = 0; i < TS_SIM_MAX_DEVICES; i++)
        if (index == -1 || i == index) tsi_sim_link_sync(i);
    return TS_OK;
}
