"""tessera.nn.SyncBatchNorm — torch.nn.SyncBatchNorm. In training with a process group of more
than one rank, the batch statistics span every rank's batch: the C op ts_sync_batch_norm gathers
each rank's per-channel mean, variance and count, normalises with the combined ones, updates the
running statistics with the global mean and unbiased variance, and in backward all-reduces the sums
the input's gradient needs (PyTorch's batch_norm_gather_stats_with_counts and
batch_norm_backward_reduce), so every rank gets its rows' share of the gradient of BatchNorm over
the whole batch; ranks may hold different batch sizes. In one process (no process group, or a
world of one) it is BatchNorm (the C batch_norm), and evaluation uses the running statistics at
any world size. convert_sync_batchnorm swaps every BatchNorm of a model for a SyncBatchNorm that
shares its parameters and buffers."""
from .. import _C
from .layers import _BatchNorm


def _world_size(process_group):
    from .. import distributed as dist
    if not dist.is_initialized():
        return 1
    return dist.get_world_size(process_group)  # a subgroup raises NotImplementedError


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over N-D inputs (2D or more) whose batch statistics span the process group"""
    _dims = (2, 3, 4, 5)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_group = process_group

    def forward(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if not (self.training and _world_size(self.process_group) > 1):
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            _C._nn_add_(self.num_batches_tracked, 1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        keep = self.track_running_stats
        return _C._sync_batch_norm(input, self.running_mean if keep else None,
                                   self.running_var if keep else None, self.weight, self.bias,
                                   factor, self.eps)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every _BatchNorm (BatchNorm1d/2d/3d) replaced by a SyncBatchNorm holding the
        same parameters and buffers (the model is changed in place; the new root is returned)"""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out
