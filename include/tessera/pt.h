/* tessera/pt.h — PyTorch checkpoints (.pt / .pth, torch.save's zip format) read from C. */
#ifndef TESSERA_PT_H
#define TESSERA_PT_H

#include "tessera.h"

/* Reads every tensor of a checkpoint written by torch.save (PyTorch 1.6+'s zip format, stored or
 * deflated entries; zip64 too), named by its path in the pickled object: "fc.weight" for a
 * state_dict, "model.fc.weight" / "optimizer.state.0.exp_avg" for a nested dict (int keys and
 * list or tuple indices as numbers), "" for a file that holds one tensor. Values that are not
 * tensors (numbers, strings, None...) are skipped. Each tensor keeps its dtype (float32/64/16,
 * bfloat16, int8/16/32/64, uint8/16/32/64, bool), shape, strides and storage offset: views of one
 * storage come out as their own contiguous values, each storage read once; the same tensor
 * object under two names is one ts_tensor in both entries. Tensors land on dev.
 *
 * The pickle is read as torch.load(weights_only=True) does: only PyTorch's allow-list of
 * globals (tensor rebuilders, storages, dtypes, OrderedDict, Size, device...) resolves; any other
 * global (os.system, a module's class, NumPy arrays) is TS_ERR_UNSUPPORTED with PyTorch's
 * "Unsupported global: GLOBAL ..." message, and nothing in the file is run. So are quantized,
 * sparse and complex tensors and the legacy (pre-1.6) format. A malformed or lying file (a
 * storage entry shorter or longer than the pickle claims, a view past its storage, a truncated
 * zip, a pickle past the limits of src/io/pickle_read.h) is TS_ERR_FORMAT naming the file; more
 * than TS_MAX_DIMS dims is TS_ERR_UNSUPPORTED. Nothing is added to out on failure; on success
 * the tensors are appended to out (a name already there is replaced, as by ts_tensor_list_add). */
TS_API ts_status ts_load_pt(const char *path, ts_device dev, ts_tensor_list *out);
/* The same from memory ("<memory>" in messages; used by the fuzzer). */
TS_API ts_status ts_load_pt_parse(const void *data, size_t size, ts_device dev,
                                  ts_tensor_list *out);

#endif /* TESSERA_PT_H */
