/* model_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of the
 * ResNet builders; the 0.1 names they forward to stay exported until 1.0. */
#include "tessera.h"

ts_module *ts_resnet18_new(ts_resnet_config c) { return ts_resnet18(c); }
ts_module *ts_resnet34_new(ts_resnet_config c) { return ts_resnet34(c); }
ts_module *ts_resnet50_new(ts_resnet_config c) { return ts_resnet50(c); }
ts_module *ts_resnet_cifar_new(int depth, ts_resnet_config c) { return ts_resnet_cifar(depth, c); }
ts_module *ts_resnet20_new(ts_resnet_config c) { return ts_resnet20(c); }
