/* tessera/cuda.h — CUDA devices, streams and events (via tessera.h). Every function works in a
 * build without CUDA and on machines without a GPU: counts are 0 and the rest give TS_ERR_DEVICE
 * or TS_ERR_UNSUPPORTED with a message saying why. */
#ifndef TESSERA_CUDA_H
#define TESSERA_CUDA_H

/* ------------------------------------------------------------------ devices */
typedef struct ts_cuda_props {
    char name[256];                 /* "NVIDIA H100 80GB HBM3" */
    size_t total_memory;            /* bytes */
    int multiprocessor_count;       /* SMs */
    int major, minor;               /* compute capability: 9.0 on Hopper */
    int max_threads_per_block;      /* 1024 */
    int warp_size;                  /* 32 */
    size_t shared_memory_per_block; /* bytes a block may use by default */
    int l2_cache_size;              /* bytes */
    int pci_bus_id, pci_device_id;
} ts_cuda_props;

/* Devices the CUDA runtime reports (honours CUDA_VISIBLE_DEVICES); 0 without CUDA. Same as
 * ts_device_count(TS_CUDA). */
TS_API int ts_cuda_device_count(void);
TS_API ts_status ts_cuda_get_properties(int device, ts_cuda_props *out);
/* The calling thread's current device: what ts_cuda(-1) and the device string "cuda" mean, and
 * where streams and events are made by default. Each thread starts on device 0. */
TS_API ts_status ts_cuda_set_device(int device);
TS_API int ts_cuda_current_device(void); /* -1 and TS_ERR_DEVICE when CUDA is not available */
/* Waits until every stream of the device has finished its work; device -1: the current device. */
TS_API ts_status ts_cuda_synchronize(int device);

/* ------------------------------------------------------------------ streams
 * Kernels and copies run asynchronously, in order, on the calling thread's current stream of
 * their device: the legacy default stream until ts_cuda_set_stream selects another. Reading a
 * result on the host (ts_item, ts_copy_to_host, ts_to(t, ts_cpu())) waits for it. As with
 * PyTorch's streams, ordering the work that reads and writes a tensor on several streams is the
 * user's job (ts_cuda_stream_wait_event). The caching allocator knows the streams current when a
 * tensor's memory was allocated and when it was released: memory reused from another stream is
 * handed out only after that stream waited for their work (an event, no host wait). A tensor used
 * on any other stream must be recorded on it with ts_record_stream, or its memory may be reused
 * while that stream still reads or writes it. */
typedef struct ts_cuda_stream ts_cuda_stream;
typedef struct ts_cuda_event ts_cuda_event;

/* A new stream on device (-1: the current one) that does not synchronise with the legacy default
 * stream. Streams are pooled: ts_cuda_stream_free hands it back for reuse. NULL + error. */
TS_API ts_cuda_stream *ts_cuda_stream_new(int device);
/* Frees a stream from ts_cuda_stream_new (its queued work still runs). The default streams and
 * NULL are accepted and ignored. Every thread whose current stream it is (on its device) goes back
 * to the default stream. */
TS_API ts_status ts_cuda_stream_free(ts_cuda_stream *s);
/* The legacy default stream of device (-1: current). */
TS_API ts_cuda_stream *ts_cuda_default_stream(int device);
/* Makes s the calling thread's current stream on s's device; other threads and devices keep
 * theirs. NULL: every device of the calling thread back to its default stream. */
TS_API ts_status ts_cuda_set_stream(ts_cuda_stream *s);
TS_API ts_cuda_stream *ts_cuda_current_stream(int device); /* never NULL when CUDA is available */
TS_API int ts_cuda_stream_device(ts_cuda_stream *s);       /* -1 for NULL */
TS_API ts_status ts_cuda_stream_synchronize(ts_cuda_stream *s);
/* True when all work queued on s has finished (false also on error). */
TS_API bool ts_cuda_stream_query(ts_cuda_stream *s);
/* Work queued on s from now on waits until e's recorded work is done (no host wait). */
TS_API ts_status ts_cuda_stream_wait_event(ts_cuda_stream *s, ts_cuda_event *e);
/* The cudaStream_t, for launching one's own kernels in order with Tessera's. */
TS_API void *ts_cuda_stream_handle(ts_cuda_stream *s);
/* PyTorch's Tensor.record_stream: the memory of cuda tensor t (its storage, for a view) is also
 * used by the work queued on stream s, so once t is freed it is not handed out again before the
 * reusing stream waited for s's work. For a tensor made on one stream and used on another: the
 * allocator itself only knows the streams current at allocation and release. TS_ERR_ARG for NULL
 * arguments or a tensor not on a cuda device. */
TS_API ts_status ts_record_stream(ts_tensor *t, ts_cuda_stream *s);

/* ------------------------------------------------------------------ events */
/* An event; with timing, ts_cuda_event_elapsed_ms can measure between two of them. It belongs to
 * the device of the first stream it is recorded on. */
TS_API ts_cuda_event *ts_cuda_event_new(bool enable_timing);
/* Captures the work queued on s so far (NULL: the current stream of the current device). */
TS_API ts_status ts_cuda_event_record(ts_cuda_event *e, ts_cuda_stream *s);
TS_API ts_status ts_cuda_event_synchronize(ts_cuda_event *e); /* waits for the captured work */
TS_API bool ts_cuda_event_query(ts_cuda_event *e); /* true when it is done (or never recorded) */
/* Milliseconds between two recorded timing events of one device; waits for `end` first. */
TS_API ts_status ts_cuda_event_elapsed_ms(ts_cuda_event *start, ts_cuda_event *end, float *ms);
TS_API void ts_cuda_event_free(ts_cuda_event *e); /* NULL is fine */

/* ------------------------------------------------------------------ pinned host memory
 * ts_pin_memory(t) and ts_opts.pin_memory allocate page-locked memory (cudaHostAlloc) from a
 * caching allocator of its own when CUDA is available; ts_to_async(pinned, cuda) then copies
 * asynchronously on the current stream, overlapping with compute, and records an event right
 * after the copy: the pinned block is handed out again only once that event has fired (not when
 * the whole stream is idle). Without CUDA "pinned" is only a flag. Statistics of that cache
 * (live_tensors is 0); ts_empty_cache(ts_cpu()) releases it. */
TS_API ts_status ts_cuda_pinned_memory_stats(ts_mem_stats *out);

/* ------------------------------------------------------------------ TF32 (cudacompute)
 * float32 matmuls and convolutions on CUDA use TF32 tensor cores only when this is on (products of
 * 10-bit mantissas: about 1e-3 relative error, several times the speed). Off by default, like
 * torch.backends.cuda.matmul.allow_tf32; f16/bf16 always use tensor cores. Process-wide; available
 * (and harmless) in builds without CUDA. */
TS_API void ts_cuda_set_allow_tf32(bool allow);
TS_API bool ts_cuda_allow_tf32(void);

#endif /* TESSERA_CUDA_H */
