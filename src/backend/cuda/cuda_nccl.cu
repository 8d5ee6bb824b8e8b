/* cuda_nccl.cu — NCCL broadcast and reduce over a set of devices for data parallel
 * (src/parallel/transport_nccl.c), with one cached communicator per device set. Compiles to
 * nothing in a CUDA build without NCCL (the C side then never calls it). */
#ifdef TS_HAVE_NCCL

#include <nccl.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nccl.h"
#include "backend/nccl_dtype.h"

namespace {

/* The communicators of one device set: comms[r] is rank r, on devices[r]. */
struct CommSet {
    std::vector<int> devices;
    std::vector<ncclComm_t> comms;
};

/* Guards the cache and every use of a communicator: NCCL calls on one communicator from two
 * threads at once are not allowed. The sets are never destroyed (see cuda_nccl.h). */
std::mutex g_mu;
std::vector<CommSet *> g_sets;

bool nccl_ok(ncclResult_t r, const char *op, const char *what) {
    if (r == ncclSuccess) return true;
    tsi_error_set(TS_ERR_CUDA, "%s: %s failed: %s", op, what, ncclGetErrorString(r));
    return false;
}

/* The cached set for these devices, made on first use; NULL with an error set on failure. Called
 * with g_mu held. */
CommSet *comms_for(const char *op, const int *devices, int n) {
    for (CommSet *s : g_sets)
        if (s->devices.size() == (size_t)n &&
            std::equal(s->devices.begin(), s->devices.end(), devices))
            return s;
    CommSet *s = new (std::nothrow) CommSet;
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for NCCL", op), nullptr;
    s->devices.assign(devices, devices + n);
    s->comms.assign((size_t)n, nullptr);
    /* ncclCommInitAll switches devices as it goes: the caller's current device is put back */
    int current = -1;
    bool have_current = cudaGetDevice(&current) == cudaSuccess;
    bool ok = nccl_ok(ncclCommInitAll(s->comms.data(), n, devices), op, "ncclCommInitAll");
    if (have_current) cudaSetDevice(current);
    if (!ok) {
        delete s;
        return nullptr;
    }
    g_sets.push_back(s);
    return s;
}

/* Tensors per NCCL group: every tensor adds one operation per rank, and very large groups only
 * cost memory inside NCCL without making the launch any faster. */
constexpr int kTensorsPerGroup = 256;

/* Runs launch(r, i, type, comm, stream) for every rank r and tensor i with elements, in groups of
 * kTensorsPerGroup tensors. */
template <typename Launch>
bool run_groups(const char *op, const int *devices, int n_devices, const int64_t *counts,
                const ts_dtype *dtypes, int n_tensors, const char *what, Launch launch) {
    for (int i = 0; i < n_tensors; i++) {
        ncclDataType_t t = ncclFloat32;
        if (!tsi_nccl_dtype(dtypes[i], &t))
            return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: NCCL cannot carry %s tensors", op,
                                 ts_dtype_name(dtypes[i])),
                   false;
    }
    std::lock_guard<std::mutex> hold(g_mu);
    CommSet *set = comms_for(op, devices, n_devices);
    if (!set) return false;
    for (int first = 0; first < n_tensors; first += kTensorsPerGroup) {
        const int last =
            first + kTensorsPerGroup < n_tensors ? first + kTensorsPerGroup : n_tensors;
        if (!nccl_ok(ncclGroupStart(), op, "ncclGroupStart")) return false;
        bool ok = true;
        for (int i = first; i < last && ok; i++) {
            if (counts[i] == 0) continue;
            ncclDataType_t type = ncclFloat32; /* checked above */
            tsi_nccl_dtype(dtypes[i], &type);
            for (int r = 0; r < n_devices && ok; r++)
                ok = nccl_ok(launch(r, i, type, set->comms[(size_t)r], tsc_stream(devices[r])), op,
                             what);
        }
        /* the group is closed even after a failed enqueue, so NCCL's group state stays sane */
        ok = nccl_ok(ncclGroupEnd(), op, "ncclGroupEnd") && ok;
        if (!ok) return false;
    }
    return true;
}

} // namespace

extern "C" bool tsc_nccl_supports(ts_dtype dt) {
    ncclDataType_t t = ncclFloat32;
    /* data parallel sums with ncclSum: bool (uint8 on the wire) would not stay 0 / 1 */
    return dt != TS_BOOL && tsi_nccl_dtype(dt, &t);
}

extern "C" bool tsc_nccl_broadcast(const char *op, const int *devices, int n_devices,
                                   void *const *bufs, const int64_t *counts, const ts_dtype *dtypes,
                                   int n_tensors) {
    return run_groups(op, devices, n_devices, counts, dtypes, n_tensors, "ncclBroadcast",
                      [&](int r, int i, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
                          /* the root sends its buffer (in place); the others receive into theirs */
                          void *buf = bufs[(size_t)r * n_tensors + i];
                          const void *send = r == 0 ? buf : bufs[i];
                          return ncclBroadcast(send, buf, (size_t)counts[i], type, 0, comm, s);
                      });
}

extern "C" bool tsc_nccl_reduce_sum(const char *op, const int *devices, int n_devices,
                                    void *const *bufs, void *const *sums, const int64_t *counts,
                                    const ts_dtype *dtypes, int n_tensors) {
    return run_groups(op, devices, n_devices, counts, dtypes, n_tensors, "ncclReduce",
                      [&](int r, int i, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
                          /* only the root's receive buffer is used */
                          void *recv = r == 0 ? sums[i] : nullptr;
                          return ncclReduce(bufs[(size_t)r * n_tensors + i], recv,
                                            (size_t)counts[i], type, ncclSum, 0, comm, s);
                      });
}

#endif /* TS_HAVE_NCCL */
