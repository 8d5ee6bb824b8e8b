/* tessera/data.h — datasets, transforms and the data loader (included by tessera.h). */
#ifndef TESSERA_DATA_H
#define TESSERA_DATA_H

/* ==================================================================== datasets */
/* One sample: x and y are cpu tensors; the receiver owns one reference to each (ts_release). */
typedef struct ts_sample {
    ts_tensor *x, *y;
} ts_sample;

/* A dataset is a length and an item-by-index function. get must be thread-safe (the loader calls
 * it from its workers); it returns TS_OK or an error status with ts_error set. */
typedef struct ts_dataset_ops {
    int64_t (*len)(void *ctx);
    ts_status (*get)(void *ctx, int64_t index, ts_sample *out);
    void (*free)(void *ctx); /* may be NULL */
    /* optional: samples that change with the epoch (random text windows); the loader calls it
     * instead of get, with the epoch it is making */
    ts_status (*get_epoch)(void *ctx, int64_t index, int64_t epoch, ts_sample *out);
} ts_dataset_ops;
typedef struct ts_dataset ts_dataset;

/* On failure (NULL, error set) ops->free(ctx) has already been called: ctx never leaks. */
TS_API ts_dataset *ts_dataset_new(const ts_dataset_ops *ops, void *ctx);
TS_API int64_t ts_dataset_len(ts_dataset *d); /* -1 on error */
TS_API ts_status ts_dataset_get(ts_dataset *d, int64_t index,
                                ts_sample *out); /* index in [0, len) */
/* The sample as the loader makes it in `epoch` (ops->get_epoch, else get) */
TS_API ts_status ts_dataset_get_epoch(ts_dataset *d, int64_t index, int64_t epoch, ts_sample *out);
TS_API void ts_dataset_free(ts_dataset *d); /* NULL-safe */
/* number of classes when the dataset knows it (MNIST 10, image folder: subfolders), else 0 */
TS_API int64_t ts_dataset_num_classes(ts_dataset *d);
TS_API void ts_dataset_set_num_classes(ts_dataset *d, int64_t n);

typedef enum ts_data_split { TS_SPLIT_TRAIN = 0, TS_SPLIT_TEST } ts_data_split;

/* Samples are the rows (first dim) of x and y (y may be NULL: y becomes an empty i64 tensor).
 * The dataset keeps its own references. */
TS_API ts_dataset *ts_tensor_dataset_new(ts_tensor *x, ts_tensor *y);
/* IDX files (plain or .gz): images u8 [N, H, W] -> x u8 [H, W, 1] (HWC), labels u8 [N] -> y i64
 * 0-dim */
TS_API ts_dataset *ts_idx_dataset_new(const char *images_path, const char *labels_path);
/* MNIST / Fashion-MNIST folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; dir NULL means
 * Debian's /usr/share/datasets/fashion-mnist. Labels must be < 10. */
TS_API ts_dataset *ts_mnist_new(const char *dir, ts_data_split split);
/* CIFAR-10 binary batches (3,073-byte records): data_batch_1..5.bin / test_batch.bin in dir or in
 * dir/cifar-10-batches-bin; x u8 [32, 32, 3] (HWC), y i64 0-dim */
TS_API ts_dataset *ts_cifar10_new(const char *dir, ts_data_split split);
typedef struct ts_csv_opts {
    int target_column; /* 0-based index of the target column (a zeroed opts: column 0); -1 = last */
    const char *target_name; /* or by header name (overrides target_column) */
    bool no_header;          /* default: the first line is a header when it is not numeric */
    bool regression;         /* target as f32 (default: class index i64, values must be ints) */
    char delimiter;          /* 0 -> ',' */
} ts_csv_opts;
/* numeric columns -> x f32 [features], y i64 0-dim (or f32 [1] for regression) */
TS_API ts_dataset *ts_csv_dataset_new(const char *path, ts_csv_opts o);
/* Byte-level language modelling: the bytes of a text file, or of every regular file under a folder
 * (sorted paths; symbolic links, hidden names and binary files — any NUL byte — skipped),
 * concatenated. A sample is x = bytes[o, o + context) and y = bytes[o + 1, o + context + 1), both
 * i64 [context] (values 0..255; num_classes 256). TS_SPLIT_TRAIN takes the first 1 - val_fraction
 * of the bytes in windows o = i * context + shift, the shift in [0, context) drawn per (seed,
 * epoch, i) (ts_transform_uniform, k = 0): every epoch sees other windows. TS_SPLIT_TEST is the
 * rest in fixed windows o = i * context. */
typedef struct ts_text_opts {
    int64_t context;     /* bytes per window; 0 -> 256 */
    double val_fraction; /* 0 -> 0.1 */
    uint64_t seed;       /* the training windows' offsets */
} ts_text_opts;
TS_API ts_dataset *ts_text_dataset_new(const char *path, ts_data_split split, ts_text_opts o);
/* root/<class>/<image>: classes are the sorted subfolder names; x u8 [H, W, C]. Available when
 * built with an image library (stb); else TS_ERR_UNSUPPORTED. */
TS_API ts_dataset *ts_image_folder_new(const char *root);

/* =================================================================== transforms */
/* Randomness of a transform comes from Philox keyed by (seed, epoch, sample index), so a sample's
 * augmentation does not depend on the number of workers. ts_transform_uniform gives the k-th
 * uniform number in [0, 1) of that key. */
typedef struct ts_transform_ctx {
    uint64_t seed;
    int64_t epoch, index;
} ts_transform_ctx;
/* Layout (k >= 0): one Philox-4x32-10 block (src/backend/philox.h) under key seed with counter
 * {(uint32)index, (uint32)(index >> 32), (uint32)epoch, (uint32)k}; u = (((uint64)word1 << 32 |
 * word0) >> 11) * 2^-53. The loader's shuffle reads k = 0xFFFFFFFF, which no transform reaches. */
TS_API double ts_transform_uniform(const ts_transform_ctx *c, int k);

/* apply: takes x (the callee releases or returns it) and returns the transformed sample x (a new
 * reference), or NULL with an error set. Runs on loader worker threads. */
typedef ts_tensor *(*ts_transform_fn)(ts_tensor *x, const ts_transform_ctx *c, void *user);
typedef struct ts_transform ts_transform;
/* fn runs inside a scope of its own (its temporaries die after it): return an op's result with
 * ts_retain. The transform owns user (free_user(user) on free, also when the call fails). */
TS_API ts_transform *ts_transform_new(ts_transform_fn fn, void *user, void (*free_user)(void *));
/* Like fn: takes a reference to x (ts_retain it to keep your own) and returns a reference the
 * caller holds (not in a scope), or NULL with an error set. */
TS_API ts_tensor *ts_transform_apply(ts_transform *t, ts_tensor *x, const ts_transform_ctx *c);
TS_API void ts_transform_free(ts_transform *t); /* NULL-safe; frees composed children */
/* u8 HWC -> f32 CHW / 255 (other dtypes: converted to f32, layout kept) */
TS_API ts_transform *ts_to_tensor_new(void);
/* per channel (dim 0 of CHW): (x - mean[c]) / std[c] */
TS_API ts_transform *ts_normalize_new(int channels, const float *mean, const float *std);
TS_API ts_transform *ts_normalize3_new(float m0, float m1, float m2, float s0, float s1, float s2);
/* on CHW or HWC-u8 images: pad by `padding` zeros each side, then crop size x size at random */
TS_API ts_transform *ts_random_crop_new(int size, int padding);
TS_API ts_transform *ts_random_hflip_new(double p);
/* applies each in order; takes ownership of the given transforms (also when it fails). Child i
 * draws with seed + i * 0x9E3779B97F4A7C15, so a crop and a flip in one compose are independent.
 * The built-ins work on cpu tensors. */
TS_API ts_transform *ts_compose_new(int n, ts_transform *const *ts);

/* =================================================================== samplers */
/* PyTorch's DistributedSampler: the seeded permutation of the epoch (the loader's own shuffle for
 * the same seed and epoch, or 0..n-1 with no_shuffle) padded with its first indices to a multiple
 * of num_replicas (or cut to one with drop_last); replica r takes positions r, r + W, r + 2W...
 * num_replicas 0 means the world size and this process's rank (ts_dist_*). */
typedef struct ts_distributed_sampler_opts {
    int num_replicas; /* 0: ts_dist_world_size(), and rank = ts_dist_rank() */
    int rank;
    bool no_shuffle; /* PyTorch's shuffle=False */
    uint64_t seed;
    bool drop_last;
} ts_distributed_sampler_opts;
typedef struct ts_sampler ts_sampler;
TS_API ts_sampler *ts_distributed_sampler_new(int64_t dataset_len, ts_distributed_sampler_opts o);
TS_API int64_t ts_sampler_len(ts_sampler *s); /* indices per epoch for this replica */
TS_API ts_status ts_sampler_set_epoch(ts_sampler *s, int64_t epoch);
/* this replica's indices of the current epoch into out (room for ts_sampler_len) */
TS_API ts_status ts_sampler_indices(ts_sampler *s, int64_t *out);
TS_API void ts_sampler_free(ts_sampler *s); /* NULL-safe */

/* ===================================================================== loader */
typedef struct ts_loader_opts {
    int batch_size; /* 0 -> 1 */
    bool shuffle;   /* a permutation from Philox keyed by (seed, epoch) */
    bool drop_last;
    int workers;  /* 0: batches are made on the calling thread */
    int prefetch; /* batches ready ahead per worker; 0 -> 2 */
    bool pin_memory;
    ts_device device;        /* TS_DEVICE_DEFAULT (0): leave batches on the cpu; else copy there */
    uint64_t seed;           /* shuffle and transforms */
    ts_transform *transform; /* applied to x of each sample; the loader takes ownership */
    /* which indices an epoch visits, in order (shuffle must then be false, as PyTorch); the loader
     * sets its epoch at each epoch's start. Not owned: free it after the loader. */
    ts_sampler *sampler;
} ts_loader_opts;

typedef struct ts_loader ts_loader;
/* A batch: x stacked on a new first dim, y likewise. Both belong to the loader and stay valid until
 * the next ts_loader_next / ts_loader_free (ts_retain to keep them longer). */
typedef struct ts_batch {
    ts_tensor *x, *y;
    int64_t index; /* batch number within the epoch */
    int64_t epoch;
} ts_batch;

/* The loader does not own the dataset (free it after the loader). It calls the dataset's get and
 * the transform inside a scope of its own, on its worker threads (workers > 0): a get built from
 * ops hands over ts_retain(result). On failure it frees o.transform too. */
TS_API ts_loader *ts_loader_new(ts_dataset *d, ts_loader_opts o);
/* Next batch of the current epoch: true, or false at the end of the epoch (the next call starts
 * the next epoch) or on error (ts_error() set, e.g. a worker's error with its message). The same
 * batches arrive in the same order whatever the number of workers. */
TS_API bool ts_loader_next(ts_loader *l, ts_batch *b);
TS_API int64_t ts_loader_num_batches(ts_loader *l); /* per epoch */
/* Start at this epoch (resume); stops the current epoch cleanly if one is running. */
TS_API ts_status ts_loader_set_epoch(ts_loader *l, int64_t epoch);
TS_API int64_t ts_loader_epoch(ts_loader *l);
/* Start at batch `batch` of epoch `epoch` (a resume mid-epoch): the epoch's order is the same, the
 * batches before it are skipped without being made. */
TS_API ts_status ts_loader_set_position(ts_loader *l, int64_t epoch, int64_t batch);
TS_API void ts_loader_free(ts_loader *l); /* stops workers cleanly, also mid-epoch; NULL-safe */

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_dataset *ts_tensor_dataset(ts_tensor *x, ts_tensor *y);
TS_API ts_dataset *ts_idx_dataset(const char *images_path, const char *labels_path);
TS_API ts_dataset *ts_mnist(const char *dir, ts_data_split split);
TS_API ts_dataset *ts_cifar10(const char *dir, ts_data_split split);
TS_API ts_dataset *ts_csv_dataset(const char *path, ts_csv_opts o);
TS_API ts_dataset *ts_text_dataset(const char *path, ts_data_split split, ts_text_opts o);
TS_API ts_dataset *ts_image_folder(const char *root);
TS_API ts_transform *ts_to_tensor(void);
TS_API ts_transform *ts_normalize(int channels, const float *mean, const float *std);
TS_API ts_transform *ts_normalize3(float m0, float m1, float m2, float s0, float s1, float s2);
TS_API ts_transform *ts_random_crop(int size, int padding);
TS_API ts_transform *ts_random_hflip(double p);
TS_API ts_transform *ts_compose(int n, ts_transform *const *ts);
TS_API ts_sampler *ts_distributed_sampler(int64_t dataset_len, ts_distributed_sampler_opts o);

#endif /* TESSERA_DATA_H */
