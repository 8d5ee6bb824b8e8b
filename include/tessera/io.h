/* tessera/io.h — safetensors and NumPy .npy files, training checkpoints (included by tessera.h). */
#ifndef TESSERA_IO_H
#define TESSERA_IO_H

/* Writes tensors in the safetensors format (names as given; metadata may be NULL, otherwise
 * pairs of strings meta[0]=key, meta[1]=value, ... n_meta pairs). The write is atomic: a temporary
 * file in the same folder, fsync, rename, fsync of the folder. */
TS_API ts_status ts_safetensors_save(const char *path, const ts_tensor_list *tensors,
                                     const char *const *meta, int n_meta);
/* Reads and validates a safetensors file (header <= 100 MB, offsets contiguous from 0 to the end of
 * the file, sizes = numel x dtype size, no duplicates, overflow-checked); tensors land on dev.
 * Malformed files give TS_ERR_FORMAT with a precise message. */
TS_API ts_status ts_safetensors_load(const char *path, ts_device dev, ts_tensor_list *out);
/* The same from memory (used by the fuzzer). */
TS_API ts_status ts_safetensors_parse(const void *data, size_t size, ts_device dev,
                                      ts_tensor_list *out);
/* Metadata value of a loaded file's "__metadata__" (NULL when absent); malloc'ed. */
TS_API char *ts_safetensors_metadata(const char *path, const char *key);

/* NumPy .npy files (format versions 1.0, 2.0 and 3.0), for exchanging single arrays with Python.
 * Loading reads NumPy's float32 '<f4', float64 '<f8', float16 '<f2', int64 '<i8', int32 '<i4',
 * uint8 '|u1' and bool '|b1' in either byte order ('>' data is byte-swapped), C or Fortran order
 * (made contiguous), 0-dim and empty arrays; the tensor lands on dev. A malformed or lying file
 * (bad magic or version, a header that is not the dict np.save writes, a shape that overflows,
 * data shorter or longer than the shape, bool bytes other than 0/1) is TS_ERR_FORMAT naming the
 * file; other NumPy dtypes (int8, complex, structured, ml_dtypes' bfloat16 '<V2'...) are
 * TS_ERR_UNSUPPORTED; more than TS_MAX_DIMS dims is TS_ERR_SHAPE. */
TS_API ts_tensor *ts_npy_load(const char *path, ts_device dev);
/* The same from memory ("<memory>" in messages; used by the fuzzer). */
TS_API ts_tensor *ts_npy_parse(const void *data, size_t size, ts_device dev);
/* Writes t (any device, any layout) as np.save would, byte for byte: a version 1.0 header (2.0
 * only if it passed 65535 bytes) padded with spaces and '\n' to a multiple of 64 bytes, native
 * byte order, C order. The write is atomic (temporary file, fsync, rename). bfloat16 has no NumPy
 * dtype: TS_ERR_DTYPE (save ts_to_dtype(t, TS_F32) instead). */
TS_API ts_status ts_npy_save(const char *path, ts_tensor *t);

/* Module weights with PyTorch's names (module.state_dict()). */
TS_API ts_status ts_module_save(ts_module *m, const char *path);
TS_API ts_status ts_module_load(ts_module *m, const char *path, bool strict);

/* A training checkpoint: model ("model.<name>"), optimizer state ("optim.<name>"), grad scaler
 * state ("scaler.<name>", PyTorch's GradScaler keys), step and RNG state, in one safetensors file;
 * loads into a model on any device. optim and scaler may be NULL. Loading checks the whole file
 * and stages every value before the model changes: it changes model, optimizer and scaler
 * together or not at all. A file without scaler state leaves the given scaler as it is (a float32
 * run can resume with mixed precision from the scaler's defaults); scaler state in the file is
 * ignored when no scaler is given. */
typedef struct ts_checkpoint_parts {
    ts_module *model;
    ts_optim *optim;
    ts_grad_scaler *scaler;
    int64_t step; /* saved; set by a successful load */
    /* optional (0: not saved; 0 after loading a file without it): batches in an epoch, so a run
     * resumed mid-epoch can check it splits the data as the saved one did */
    int64_t epoch_batches;
} ts_checkpoint_parts;
TS_API ts_status ts_checkpoint_save_parts(const char *path, const ts_checkpoint_parts *p);
TS_API ts_status ts_checkpoint_load_parts(const char *path, ts_checkpoint_parts *p);
/* The same without a scaler. */
TS_API ts_status ts_checkpoint_save(const char *path, ts_module *m, ts_optim *opt, int64_t step);
TS_API ts_status ts_checkpoint_load(const char *path, ts_module *m, ts_optim *opt, int64_t *step);

#endif /* TESSERA_IO_H */
