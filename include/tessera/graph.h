/* graph.h — captured steps: record the device work of a whole step once, replay it with no
 * per-op work (docs/CAPTURE.md). */
#ifndef TESSERA_GRAPH_H
#define TESSERA_GRAPH_H

/* A recorded sequence of a device's kernels and the memory they use. */
typedef struct ts_graph ts_graph;

typedef struct ts_graph_opts {
    int reserved; /* must be 0 */
} ts_graph_opts;

/* Starts recording on this thread every kernel that runs on device dev (cpu, sim:N or cuda:N; on
 * cuda the step becomes one CUDA graph at ts_graph_capture_end, and each replay launches it on the
 * thread's current stream). Kernels are recorded, not run, as a CUDA stream capture does: values
 * computed during the capture are not available until a replay. Returns the graph being recorded
 * (owned by the caller: ts_graph_free), NULL + TS_ERR_STATE when this thread is already
 * capturing or an error is pending. While capturing, on dev:
 *   - every allocation is the graph's and stays so while the graph lives (so do the blocks freed
 *     during the capture): tensors made during the capture keep their memory across replays;
 *   - a host read (ts_item, ts_copy_to_host, a copy to another device) or ts_synchronize is
 *     TS_ERR_STATE naming the op, and breaks the capture;
 *   - values copied in from the host (ts_from_data, scalars the ops make) are recorded as they are
 *     now: a replay writes the same values.
 * Rules (as torch.cuda.graph's): run a few warm-up steps eagerly first (optimizer state, the
 * lazily made buffers); feed new data by ts_copy_ into tensors made before the capture; keep
 * every tensor the step reads (parameters, inputs) alive while the graph lives. */
TS_API ts_graph *ts_graph_capture_begin(ts_device dev, ts_graph_opts o);
/* Ends this thread's capture. TS_OK: the graph can be replayed. Otherwise the error that broke the
 * capture (the first one raised while capturing, still pending) and the graph can only be freed. */
TS_API ts_status ts_graph_capture_end(void);
/* Runs the recorded kernels in order: no dispatch, checks, autograd or allocation (cuda: one
 * cudaGraphLaunch, asynchronous like any kernel; read the outputs as usual). */
TS_API ts_status ts_graph_replay(ts_graph *g);
/* Frees the graph and gives its memory back (tensors made during the capture that are still
 * alive keep theirs until they are released). NULL is fine. */
TS_API void ts_graph_free(ts_graph *g);
/* Kernels recorded (0 for NULL) */
TS_API int64_t ts_graph_kernel_count(const ts_graph *g);
/* Whether this thread is capturing */
TS_API bool ts_graph_is_capturing(void);

#endif /* TESSERA_GRAPH_H */
