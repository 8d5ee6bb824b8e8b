"""tessera.nn.SyncBatchNorm — torch.nn.SyncBatchNorm. In one process (no process group, or a world
of one rank) batch statistics over the whole batch are the local ones, so it computes exactly as
BatchNorm (the C batch_norm, forward and backward). Across several processes the statistics and
their gradients must be all-reduced inside the op (PyTorch's batch_norm_gather_stats and
batch_norm_backward_reduce); Tessera has no such C op yet, so training with world_size > 1 raises
NotImplementedError instead of normalising by local statistics (a wrong number). Evaluation uses
the running statistics and works at any world size. convert_sync_batchnorm swaps every BatchNorm
of a model for a SyncBatchNorm that shares its parameters and buffers."""
from .layers import _BatchNorm


def _world_size(process_group):
    from .. import distributed as dist
    if not dist.is_initialized():
        return 1
    return dist.get_world_size(process_group)


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
        if self.training and _world_size(self.process_group) > 1:
            raise NotImplementedError(
                "SyncBatchNorm: training across %d processes needs batch statistics all-reduced "
                "inside the op, which Tessera does not have yet; use BatchNorm (local "
                "statistics) or one process" % _world_size(self.process_group))
        return super().forward(input)

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
