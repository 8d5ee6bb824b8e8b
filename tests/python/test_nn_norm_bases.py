"""PyTorch's private norm base classes under tessera.nn.modules (torch.nn.modules.batchnorm.
_BatchNorm, .instancenorm._InstanceNorm, _NormBase) and their hierarchy: InstanceNorm is a
_NormBase but no _BatchNorm, as in PyTorch, so code that fuses or converts every BatchNorm
(timm's efficientvim, freeze_batch_norm_2d, SyncBatchNorm.convert_sync_batchnorm) skips it."""
import tessera.nn as nn
from tessera.nn import modules


def test_private_norm_bases_resolve():
    bn = modules.batchnorm._BatchNorm
    inorm = modules.instancenorm._InstanceNorm
    base = modules.batchnorm._NormBase
    for m in (nn.BatchNorm1d(3), nn.BatchNorm2d(3), nn.BatchNorm3d(3), nn.SyncBatchNorm(3)):
        assert isinstance(m, bn) and isinstance(m, base) and not isinstance(m, inorm)
    for m in (nn.InstanceNorm1d(3), nn.InstanceNorm2d(3, affine=True), nn.InstanceNorm3d(3)):
        assert isinstance(m, inorm) and isinstance(m, base) and not isinstance(m, bn)


def test_convert_sync_batchnorm_skips_instance_norm():
    model = nn.Sequential(nn.InstanceNorm2d(2, affine=True), nn.BatchNorm2d(2))
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert type(out[0]) is nn.InstanceNorm2d
    assert type(out[1]) is nn.SyncBatchNorm


def test_instance_norm_keeps_its_state_and_forward():
    m = nn.InstanceNorm2d(2, affine=True, track_running_stats=True)
    assert sorted(dict(m.named_parameters())) == ["bias", "weight"]
    assert sorted(dict(m.named_buffers())) == ["num_batches_tracked", "running_mean",
                                               "running_var"]
    import tessera
    x = tessera.arange(16.0).reshape(1, 2, 2, 4)
    y = m(x)  # each channel normalised over its own 8 values: mean 0
    assert abs(float(y[0, 0].sum())) < 1e-5 and abs(float(y[0, 1].sum())) < 1e-5


def test_other_private_names_stay_errors():
    try:
        modules.conv._ConvNd
    except AttributeError as e:
        assert "_ConvNd" in str(e)
    else:
        raise AssertionError("_ConvNd resolved")


def test_layer_and_rms_norm_reset_parameters():
    """PyTorch's LayerNorm / RMSNorm.reset_parameters (timm's efficientvim calls it on its
    LayerNorm2d): the weight back to 1, the bias to 0; without affine a no-op"""
    import tessera
    ln = nn.LayerNorm(4)
    rms = nn.RMSNorm(4)
    with tessera.no_grad():
        for p in (ln.weight, ln.bias, rms.weight):
            p.copy_(tessera.arange(4.0) + 5)
    ln.reset_parameters()
    rms.reset_parameters()
    assert ln.weight.tolist() == [1.0] * 4 and ln.bias.tolist() == [0.0] * 4
    assert rms.weight.tolist() == [1.0] * 4
    nn.LayerNorm(4, elementwise_affine=False).reset_parameters()
    nn.LayerNorm(4, bias=False).reset_parameters()
    nn.RMSNorm(4, elementwise_affine=False).reset_parameters()
