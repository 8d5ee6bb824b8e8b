/* data_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of
 * datasets, transforms and the sampler; the 0.1 names they forward to stay exported until 1.0. */
#include "tessera.h"

ts_dataset *ts_tensor_dataset_new(ts_tensor *x, ts_tensor *y) { return ts_tensor_dataset(x, y); }
ts_dataset *ts_idx_dataset_new(const char *images_path, const char *labels_path) {
    return ts_idx_dataset(images_path, labels_path);
}
ts_dataset *ts_mnist_new(const char *dir, ts_data_split split) { return ts_mnist(dir, split); }
ts_dataset *ts_cifar10_new(const char *dir, ts_data_split split) { return ts_cifar10(dir, split); }
ts_dataset *ts_csv_dataset_new(const char *path, ts_csv_opts o) { return ts_csv_dataset(path, o); }
ts_dataset *ts_text_dataset_new(const char *path, ts_data_split split, ts_text_opts o) {
    return ts_text_dataset(path, split, o);
}
ts_dataset *ts_image_folder_new(const char *root) { return ts_image_folder(root); }
ts_transform *ts_to_tensor_new(void) { return ts_to_tensor(); }
ts_transform *ts_normalize_new(int channels, const float *mean, const float *std) {
    return ts_normalize(channels, mean, std);
}
ts_transform *ts_normalize3_new(float m0, float m1, float m2, float s0, float s1, float s2) {
    return ts_normalize3(m0, m1, m2, s0, s1, s2);
}
ts_transform *ts_random_crop_new(int size, int padding) { return ts_random_crop(size, padding); }
ts_transform *ts_random_hflip_new(double p) { return ts_random_hflip(p); }
ts_transform *ts_compose_new(int n, ts_transform *const *ts) { return ts_compose(n, ts); }
ts_sampler *ts_distributed_sampler_new(int64_t dataset_len, ts_distributed_sampler_opts o) {
    return ts_distributed_sampler(dataset_len, o);
}
