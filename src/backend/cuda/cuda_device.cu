/* cuda_device.cu — the CUDA runtime's devices: start-up probe, properties, error checks, the
 * current device per thread, launch checks, and the public device functions of tessera/cuda.h. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/env_config.h"

/* Written once during library start-up (under tsi_init's pthread_once), read-only afterwards. */
static int g_count;
static char g_reason[320] = "no CUDA device";
static bool g_start_failed; /* a driver answered, but CUDA could not start: not just "no GPU" */
static cudaDeviceProp g_props[TSC_MAX_DEVICES];
static bool g_sync_launches; /* TS_CUDA_SYNC=1 */

/* What the user selected with ts_cuda_set_device: the meaning of "cuda" / ts_cuda(-1). */
static thread_local int tl_user_device;

/* TS_CUDA_TEST_PROBE_ERROR=<cudaError_t number>: the probe behaves as if cudaGetDeviceCount had
 * returned that error, from a driver that is installed (0: as if it reported no device). A test
 * hook: start-up failures are checked without a machine that has them. */
static bool fake_probe_error(cudaError_t *e) {
    const char *v = tsi_env(TSI_ENV_CUDA_TEST_PROBE_ERROR);
    if (!v) return false;
    char *end;
    long code = strtol(v, &end, 10);
    if (*end || code < 0) return false;
    *e = (cudaError_t)code;
    return true;
}

/* Why there is no device, in two classes. Absent (nothing to run on, not an error): the runtime
 * reports no device (cudaErrorNoDevice, CUDA_VISIBLE_DEVICES hiding them all, a count of 0) or no
 * driver is installed at all (cudaErrorInsufficientDriver with a driver version of 0: a machine
 * without a GPU). Failed: any other error, e.g. a driver older than the runtime, a broken
 * installation, a device in use or lost; the message names the error. */
static void probe_failed(cudaError_t e, bool faked, const char *what) {
    int driver = 0;
    if (!faked && e == cudaErrorInsufficientDriver) {
        if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    } else {
        driver = 1;
    }
    if (e == cudaSuccess || e == cudaErrorNoDevice) {
        snprintf(g_reason, sizeof g_reason, "no CUDA device: %s",
                 e == cudaSuccess ? "the runtime reports none" : cudaGetErrorString(e));
    } else if (e == cudaErrorInsufficientDriver && driver == 0) {
        snprintf(g_reason, sizeof g_reason, "no CUDA driver is installed: %s [%s]",
                 cudaGetErrorString(e), cudaGetErrorName(e));
    } else {
        g_start_failed = true;
        snprintf(g_reason, sizeof g_reason, "CUDA failed to start: %s%s [%s]", what,
                 cudaGetErrorString(e), cudaGetErrorName(e));
        /* like PyTorch's "CUDA initialization" warning: a GPU machine that cannot use its GPU
         * should not look like a machine without one */
        fprintf(stderr, "tessera: warning: %s; cuda devices are not available\n", g_reason);
    }
    (void)cudaGetLastError();
    g_count = 0;
}

int tsc_runtime_probe(void) {
    g_sync_launches = tsi_env_on(TSI_ENV_CUDA_SYNC);
    int n = 0;
    cudaError_t e;
    const bool faked = fake_probe_error(&e);
    if (!faked) e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        probe_failed(e, faked, "");
        return 0;
    }
    if (n > TSC_MAX_DEVICES) n = TSC_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        e = cudaGetDeviceProperties(&g_props[i], i);
        if (e != cudaSuccess) {
            char what[64];
            snprintf(what, sizeof what, "reading the properties of device %d: ", i);
            probe_failed(e, false, what);
            return 0;
        }
    }
    g_count = n;
    return n;
}

int tsc_device_count(void) { return g_count; }

const cudaDeviceProp *tsc_props(int index) {
    return index >= 0 && index < g_count ? &g_props[index] : nullptr;
}

bool tsc_check(cudaError_t e, const char *what, int device) {
    if (e == cudaSuccess) return true;
    (void)cudaGetLastError(); /* a non-sticky error must not be reported again by the next check */
    tsi_error_set(TS_ERR_CUDA, "%s: %s [%s] (cuda:%d)", what, cudaGetErrorString(e),
                  cudaGetErrorName(e), device);
    return false;
}

bool tsc_set_device(int index) {
    int cur = -1;
    /* asked rather than cached: user code may call cudaSetDevice behind our back */
    if (cudaGetDevice(&cur) == cudaSuccess && cur == index) return true;
    return tsc_check(cudaSetDevice(index), "cudaSetDevice", index);
}

bool tsc_launch_check(const char *kernel, int device) {
    if (!tsc_check(cudaGetLastError(), kernel, device)) return false;
    if (!g_sync_launches || tsc_graph_capturing(device)) return true; /* no waits in a capture */
    return tsc_check(cudaStreamSynchronize(tsc_stream(device)), kernel, device);
}

unsigned tsc_grid_size(int index, int64_t items, unsigned threads) {
    const cudaDeviceProp *p = tsc_props(index);
    /* enough resident blocks to fill every SM several times over; grid-stride loops do the rest */
    int64_t cap = (int64_t)(p ? p->multiProcessorCount : 80) * 32;
    int64_t need = (items + threads - 1) / threads;
    if (need < 1) need = 1;
    return (unsigned)(need < cap ? need : cap);
}

/* ------------------------------------------------------------------ for the core (cuda_bridge.h)
 */
extern "C" const char *tsc_unavailable_reason(void) { return g_reason; }

extern "C" bool tsc_start_failed(void) { return g_start_failed; }

extern "C" int tsc_current_device(void) { return tl_user_device; }

extern "C" int tsc_runtime_device(void) {
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
        (void)cudaGetLastError();
        d = -1;
    }
    return d;
}

/* ------------------------------------------------------------------ public API helpers */
bool tsc_api_available(const char *op) {
    tsi_init_once();
    if (g_count > 0) return true;
    tsi_error_set(TS_ERR_DEVICE, "%s: CUDA is not available (%s)", op, g_reason);
    return false;
}

bool tsc_api_device(const char *op, int *device) {
    if (!tsc_api_available(op)) return false;
    if (*device == -1) *device = tl_user_device;
    if (*device < 0 || *device >= g_count) {
        tsi_error_set(TS_ERR_DEVICE, "%s: invalid device cuda:%d (%d CUDA device%s)", op, *device,
                      g_count, g_count == 1 ? "" : "s");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ public API: devices */
extern "C" int ts_cuda_device_count(void) {
    tsi_init_once();
    return g_count;
}

extern "C" ts_status ts_cuda_get_properties(int device, ts_cuda_props *out) {
    if (!out) return tsi_error_set(TS_ERR_ARG, "cuda_get_properties: out is NULL");
    if (!tsc_api_device("cuda_get_properties", &device)) return TS_ERR_DEVICE;
    const cudaDeviceProp *p = &g_props[device];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p->name);
    out->total_memory = p->totalGlobalMem;
    out->multiprocessor_count = p->multiProcessorCount;
    out->major = p->major;
    out->minor = p->minor;
    out->max_threads_per_block = p->maxThreadsPerBlock;
    out->warp_size = p->warpSize;
    out->shared_memory_per_block = p->sharedMemPerBlock;
    out->l2_cache_size = p->l2CacheSize;
    out->pci_bus_id = p->pciBusID;
    out->pci_device_id = p->pciDeviceID;
    return TS_OK;
}

extern "C" ts_status ts_cuda_set_device(int device) {
    if (device < 0) { /* -1 means "current" elsewhere; here it selects nothing */
        if (!tsc_api_available("cuda_set_device")) return TS_ERR_DEVICE;
        return tsi_error_set(TS_ERR_DEVICE, "cuda_set_device: invalid device index %d", device);
    }
    if (!tsc_api_device("cuda_set_device", &device)) return TS_ERR_DEVICE;
    if (!tsc_set_device(device)) return TS_ERR_CUDA;
    tl_user_device = device;
    return TS_OK;
}

extern "C" int ts_cuda_current_device(void) {
    if (!tsc_api_available("cuda_current_device")) return -1;
    return tl_user_device;
}

extern "C" ts_status ts_cuda_synchronize(int device) {
    if (!tsc_api_device("cuda_synchronize", &device)) return TS_ERR_DEVICE;
    if (!tsc_set_device(device)) return TS_ERR_CUDA;
    return tsc_check(cudaDeviceSynchronize(), "cuda_synchronize", device) ? TS_OK : TS_ERR_CUDA;
}
