/* env_config.h — every environment variable the library reads, in one table, read once.
 *
 * The table below is the one list of them: each entry's id (TSI_ENV_<ID>), its name and what it
 * does (docs/ARCHITECTURE.md, "Environment variables", shows the same list to users; the ctest
 * entry env_table checks that the two agree and that no file of src/ calls getenv itself, except
 * backend/cpu/omp_wait.c, which re-executes the process for libgomp before anything else runs).
 *
 * The values are read together, once, at the first call into the library (ts_* initialisation)
 * or the first tsi_env() before it; each consumer parses its own variable's value from this
 * snapshot. A program that changes its environment afterwards does not change Tessera's
 * behaviour, except through tsi_env_reload() (tests that try several values in one process). */
#ifndef TS_BACKEND_ENV_CONFIG_H
#define TS_BACKEND_ENV_CONFIG_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(id, name, what it does) */
#define TSI_ENV_TABLE(X)                                                                           \
    X(SIM_DEVICES, "TS_SIM_DEVICES", "create sim:0..N-1 at start-up")                              \
    X(SIM_CAPACITY, "TS_SIM_CAPACITY", "capacity of each sim device (k/M/G suffixes)")             \
    X(SIM_LINK, "TS_SIM_LINK", "model a host link for sim devices (16GB/s,5us)")                   \
    X(LOG_PLACEMENT, "TS_LOG_PLACEMENT", "log every op with its device to stderr")                 \
    X(NUM_THREADS, "TS_NUM_THREADS", "CPU kernel threads (OpenMP and OpenBLAS)")                   \
    X(FAULT_ALLOC, "TS_FAULT_ALLOC", "fail the N-th allocation from start-up (0: count only)")     \
    X(SYNC_DEBUG, "TS_SYNC_DEBUG", "report or refuse implicit host-device synchronisations")       \
    X(OOM_SNAPSHOT, "TS_OOM_SNAPSHOT", "write a memory snapshot when an allocation fails")         \
    X(REPORT_LEAKS, "TS_REPORT_LEAKS", "report tensors alive at exit")                             \
    X(DETECT_ANOMALY, "TS_DETECT_ANOMALY", "anomaly mode: name the node whose gradient is bad")    \
    X(CPU_ISA, "TS_CPU_ISA", "cap the vector ISA of the CPU kernels (and oneDNN's)")               \
    X(GEMM, "TS_GEMM", "force one float32 GEMM provider")                                          \
    X(GEMM_SMALL, "TS_GEMM_SMALL", "off: no small-batch linear-layer GEMMs")                       \
    X(GEMV, "TS_GEMV", "off: no float32 matrix-vector kernel")                                     \
    X(AMX_GEMM, "TS_AMX_GEMM", "Tessera's AMX bf16 GEMM: on, all or off")                          \
    X(CONV, "TS_CONV", "force the convolution provider (dnnl or builtin)")                         \
    X(CONV_NHWC, "TS_CONV_NHWC", "channels_last convolutions: keep or blocked")                    \
    X(CONV_OWN, "TS_CONV_OWN", "blocked inference: which of Tessera's own kernels run")            \
    X(QCONV, "TS_QCONV", "int8 convolution route: dnnl or own; nchw: no channels_last")            \
    X(ONNX_BLOCKED, "TS_ONNX_BLOCKED", "0: no blocked rewrite; nchw: blocked, not channels_last")  \
    X(ONNX_FUSE_QMATMUL, "TS_ONNX_FUSE_QMATMUL", "0: MatMulInteger, Cast, Mul left unfused")       \
    X(ONNX_MAX_NODE_ELEMENTS, "TS_ONNX_MAX_NODE_ELEMENTS", "cap on one ONNX node's elements")      \
    X(ONNX_MAX_LOOP_ITERATIONS, "TS_ONNX_MAX_LOOP_ITERATIONS", "cap on ONNX Loop iterations")      \
    X(CUDA_SYNC, "TS_CUDA_SYNC", "wait after every CUDA kernel")                                   \
    X(CUDA_CONV_NHWC, "TS_CUDA_CONV_NHWC", "0: CUDA channels_last convolutions through copies")    \
    X(CUDA_SDPA_TC, "TS_CUDA_SDPA_TC", "0: CUDA attention without the tensor-core kernels")        \
    X(CUDA_TEST_PROBE_ERROR, "TS_CUDA_TEST_PROBE_ERROR", "test hook: a CUDA start-up error")       \
    X(CUDA_TEST_CUDNN_DECLINE, "TS_CUDA_TEST_CUDNN_DECLINE", "test hook: cuDNN declines first")    \
    X(CUDA_QLINEAR_LT, "TS_CUDA_QLINEAR_LT", "test hook: require: cuBLASLt takes int8 shapes")     \
    X(CUDA_TEST_CONV_NHWC_COPY, "TS_CUDA_TEST_CONV_NHWC_COPY", "test hook: NHWC through copies")   \
    X(DIST_TIMEOUT, "TS_DIST_TIMEOUT", "seconds a collective may take (600)")                      \
    X(DDP_OVERLAP, "TS_DDP_OVERLAP", "DDP: overlap reductions with backward (0 or 1)")             \
    X(ONEDNN_MAX_CPU_ISA, "ONEDNN_MAX_CPU_ISA", "oneDNN's own ISA cap, honoured")                  \
    X(OMPI_COMM_WORLD_SIZE, "OMPI_COMM_WORLD_SIZE", "launcher: world size (Open MPI)")             \
    X(OMPI_COMM_WORLD_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK", "launcher: local rank")            \
    X(OMPI_COMM_WORLD_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE", "launcher: local size")            \
    X(PMI_RANK, "PMI_RANK", "launcher: rank (hydra)")                                              \
    X(PMI_SIZE, "PMI_SIZE", "launcher: world size (hydra)")                                        \
    X(PMIX_RANK, "PMIX_RANK", "launcher: rank (PMIx)")                                             \
    X(SLURM_PROCID, "SLURM_PROCID", "launcher: rank (Slurm)")                                      \
    X(SLURM_NTASKS, "SLURM_NTASKS", "launcher: the allocation's tasks (Slurm)")                    \
    X(SLURM_STEP_NUM_TASKS, "SLURM_STEP_NUM_TASKS", "launcher: the job step's tasks (Slurm)")      \
    X(SLURM_LOCALID, "SLURM_LOCALID", "launcher: local rank (Slurm)")                              \
    X(MPI_LOCALRANKID, "MPI_LOCALRANKID", "launcher: local rank (hydra)")                          \
    X(MPI_LOCALNRANKS, "MPI_LOCALNRANKS", "launcher: local size (hydra)")

typedef enum tsi_env_id {
#define TSI_ENV_ID(id, name, doc) TSI_ENV_##id,
    TSI_ENV_TABLE(TSI_ENV_ID)
#undef TSI_ENV_ID
        TSI_ENV_COUNT
} tsi_env_id;

/* The variable's value in the snapshot; NULL when it is unset or empty. */
const char *tsi_env(tsi_env_id id);
/* Set (non-empty) and not "0". */
bool tsi_env_on(tsi_env_id id);
/* Set and equal to s. */
bool tsi_env_is(tsi_env_id id, const char *s);
/* The value as a whole decimal number (leading/trailing junk: not a number); fallback when unset,
 * empty or not a number. */
long tsi_env_long(tsi_env_id id, long fallback);
/* The name ("TS_GEMM"), for messages. */
const char *tsi_env_name(tsi_env_id id);
/* Reads the variable again (TSI_ENV_COUNT: every one): ts_sim_link_from_env, and tests that
 * setenv/unsetenv between cases in one thread. A consumer that caches its parse (the ONNX caps,
 * the GEMM provider, the ISA cap) keeps what it read at its first use. */
void tsi_env_reload(tsi_env_id id);

#ifdef __cplusplus
}
#endif

#endif /* TS_BACKEND_ENV_CONFIG_H */
