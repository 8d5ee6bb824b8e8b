"""torchvision.models.optical_flow.raft: RAFT (raft_large, raft_small) with torchvision's module
and state-dict names. forward(image1, image2, num_flow_updates=12) returns the list of upsampled
flow predictions [N, 2, H, W], one per update. The correlation volume is a batched matmul of the
two feature maps, its pyramid avg_pool2d, its lookup grid_sample (align_corners=True). Unlike
torchvision's (whose coordinate grid is always float32), it runs under .double() too."""
import math

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from .._utils import Conv2dNormActivation, _check_weights
from ._utils import grid_sample, make_coords_grid, upsample_flow

__all__ = ["RAFT", "raft_large", "raft_small"]


class ResidualBlock(nn.Module):
    def __init__(self, in_channels, out_channels, *, norm_layer, stride=1, always_project=False):
        super().__init__()
        self.convnormrelu1 = Conv2dNormActivation(in_channels, out_channels, norm_layer=norm_layer,
                                                  kernel_size=3, stride=stride, bias=True)
        self.convnormrelu2 = Conv2dNormActivation(out_channels, out_channels,
                                                  norm_layer=norm_layer, kernel_size=3, bias=True)
        if stride == 1 and not always_project:
            self.downsample = nn.Identity()
        else:
            self.downsample = Conv2dNormActivation(in_channels, out_channels,
                                                   norm_layer=norm_layer, kernel_size=1,
                                                   stride=stride, bias=True,
                                                   activation_layer=None)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.convnormrelu2(self.convnormrelu1(x))
        return self.relu(self.downsample(x) + y)


class BottleneckBlock(nn.Module):
    def __init__(self, in_channels, out_channels, *, norm_layer, stride=1):
        super().__init__()
        q = out_channels // 4
        self.convnormrelu1 = Conv2dNormActivation(in_channels, q, norm_layer=norm_layer,
                                                  kernel_size=1, bias=True)
        self.convnormrelu2 = Conv2dNormActivation(q, q, norm_layer=norm_layer, kernel_size=3,
                                                  stride=stride, bias=True)
        self.convnormrelu3 = Conv2dNormActivation(q, out_channels, norm_layer=norm_layer,
                                                  kernel_size=1, bias=True)
        self.relu = nn.ReLU(inplace=True)
        if stride == 1:
            self.downsample = nn.Identity()
        else:
            self.downsample = Conv2dNormActivation(in_channels, out_channels,
                                                   norm_layer=norm_layer, kernel_size=1,
                                                   stride=stride, bias=True,
                                                   activation_layer=None)

    def forward(self, x):
        y = self.convnormrelu3(self.convnormrelu2(self.convnormrelu1(x)))
        return self.relu(self.downsample(x) + y)


class FeatureEncoder(nn.Module):
    """the feature / context encoder: downsamples by 8"""

    def __init__(self, *, block=ResidualBlock, layers=(64, 64, 96, 128, 256), strides=(2, 1, 2, 2),
                 norm_layer=nn.BatchNorm2d):
        super().__init__()
        if len(layers) != 5:
            raise ValueError("RAFT FeatureEncoder: expected 5 layers, got %d" % len(layers))
        self.convnormrelu = Conv2dNormActivation(3, layers[0], norm_layer=norm_layer,
                                                 kernel_size=7, stride=strides[0], bias=True)
        self.layer1 = self._make_2_blocks(block, layers[0], layers[1], norm_layer, strides[1])
        self.layer2 = self._make_2_blocks(block, layers[1], layers[2], norm_layer, strides[2])
        self.layer3 = self._make_2_blocks(block, layers[2], layers[3], norm_layer, strides[3])
        self.conv = nn.Conv2d(layers[3], layers[4], kernel_size=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self.output_dim = layers[-1]
        self.downsample_factor = 2 ** sum(1 for s in strides if s == 2)

    @staticmethod
    def _make_2_blocks(block, in_channels, out_channels, norm_layer, first_stride):
        return nn.Sequential(block(in_channels, out_channels, norm_layer=norm_layer,
                                   stride=first_stride),
                             block(out_channels, out_channels, norm_layer=norm_layer, stride=1))

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.convnormrelu(x))))
        return self.conv(x)


class MotionEncoder(nn.Module):
    def __init__(self, *, in_channels_corr, corr_layers=(256, 192), flow_layers=(128, 64),
                 out_channels=128):
        super().__init__()
        if len(flow_layers) != 2 or len(corr_layers) not in (1, 2):
            raise ValueError("RAFT MotionEncoder: flow_layers needs 2 entries and corr_layers 1 "
                             "or 2, got %r and %r" % (flow_layers, corr_layers))
        self.convcorr1 = Conv2dNormActivation(in_channels_corr, corr_layers[0], norm_layer=None,
                                              kernel_size=1)
        if len(corr_layers) == 2:
            self.convcorr2 = Conv2dNormActivation(corr_layers[0], corr_layers[1], norm_layer=None,
                                                  kernel_size=3)
        else:
            self.convcorr2 = nn.Identity()
        self.convflow1 = Conv2dNormActivation(2, flow_layers[0], norm_layer=None, kernel_size=7)
        self.convflow2 = Conv2dNormActivation(flow_layers[0], flow_layers[1], norm_layer=None,
                                              kernel_size=3)
        self.conv = Conv2dNormActivation(corr_layers[-1] + flow_layers[-1], out_channels - 2,
                                         norm_layer=None, kernel_size=3)
        self.out_channels = out_channels

    def forward(self, flow, corr_features):
        corr = self.convcorr2(self.convcorr1(corr_features))
        fl = self.convflow2(self.convflow1(flow))
        return ts.cat([self.conv(ts.cat([corr, fl], dim=1)), flow], dim=1)


class ConvGRU(nn.Module):
    def __init__(self, *, input_size, hidden_size, kernel_size, padding):
        super().__init__()
        c = hidden_size + input_size
        self.convz = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convr = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)
        self.convq = nn.Conv2d(c, hidden_size, kernel_size=kernel_size, padding=padding)

    def forward(self, h, x):
        hx = ts.cat([h, x], dim=1)
        z = ts.sigmoid(self.convz(hx))
        r = ts.sigmoid(self.convr(hx))
        q = ts.tanh(self.convq(ts.cat([r * h, x], dim=1)))
        return (1 - z) * h + z * q


def _pass_through_h(h, _):
    return h


class RecurrentBlock(nn.Module):
    def __init__(self, *, input_size, hidden_size, kernel_size=((1, 5), (5, 1)),
                 padding=((0, 2), (2, 0))):
        super().__init__()
        if len(kernel_size) != len(padding) or len(kernel_size) not in (1, 2):
            raise ValueError("RAFT RecurrentBlock: kernel_size and padding need 1 or 2 entries "
                             "each, got %r and %r" % (kernel_size, padding))
        self.convgru1 = ConvGRU(input_size=input_size, hidden_size=hidden_size,
                                kernel_size=kernel_size[0], padding=padding[0])
        if len(kernel_size) == 2:
            self.convgru2 = ConvGRU(input_size=input_size, hidden_size=hidden_size,
                                    kernel_size=kernel_size[1], padding=padding[1])
        else:
            self.convgru2 = _pass_through_h
        self.hidden_size = hidden_size

    def forward(self, h, x):
        return self.convgru2(self.convgru1(h, x), x)


class FlowHead(nn.Module):
    def __init__(self, *, in_channels, hidden_size):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, hidden_size, 3, padding=1)
        self.conv2 = nn.Conv2d(hidden_size, 2, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.conv2(self.relu(self.conv1(x)))


class UpdateBlock(nn.Module):
    def __init__(self, *, motion_encoder, recurrent_block, flow_head):
        super().__init__()
        self.motion_encoder = motion_encoder
        self.recurrent_block = recurrent_block
        self.flow_head = flow_head
        self.hidden_state_size = recurrent_block.hidden_size

    def forward(self, hidden_state, context, corr_features, flow):
        x = ts.cat([context, self.motion_encoder(flow, corr_features)], dim=1)
        hidden_state = self.recurrent_block(hidden_state, x)
        return hidden_state, self.flow_head(hidden_state)


class MaskPredictor(nn.Module):
    def __init__(self, *, in_channels, hidden_size, multiplier=0.25):
        super().__init__()
        self.convrelu = Conv2dNormActivation(in_channels, hidden_size, norm_layer=None,
                                             kernel_size=3)
        self.conv = nn.Conv2d(hidden_size, 8 * 8 * 9, 1, padding=0)
        self.multiplier = multiplier

    def forward(self, x):
        return self.multiplier * self.conv(self.convrelu(x))


class CorrBlock(nn.Module):
    """the all-pairs correlation pyramid (num_levels levels) and its lookup within radius"""

    def __init__(self, *, num_levels=4, radius=4):
        super().__init__()
        self.num_levels = num_levels
        self.radius = radius
        self.corr_pyramid = []
        self.out_channels = num_levels * (2 * radius + 1) ** 2

    def build_pyramid(self, fmap1, fmap2):
        if tuple(fmap1.shape) != tuple(fmap2.shape):
            raise ValueError("RAFT CorrBlock: feature maps of different shapes %s and %s"
                             % (tuple(fmap1.shape), tuple(fmap2.shape)))
        least = 2 * (2 ** (self.num_levels - 1))
        if any(s < least for s in fmap1.shape[-2:]):
            raise ValueError("RAFT CorrBlock: feature maps %s are too small for %d pyramid levels "
                             "(H and W >= %d, images >= %d)" % (tuple(fmap1.shape[-2:]),
                                                                self.num_levels, least,
                                                                8 * least))
        corr = self._compute_corr_volume(fmap1, fmap2)
        n, h, w, c, _, _ = corr.shape
        corr = corr.reshape(n * h * w, c, h, w)
        self.corr_pyramid = [corr]
        for _ in range(self.num_levels - 1):
            corr = F.avg_pool2d(corr, kernel_size=2, stride=2)
            self.corr_pyramid.append(corr)

    def index_pyramid(self, centroids_coords):
        side = 2 * self.radius + 1
        dtype = centroids_coords.dtype
        d = ts.linspace(-self.radius, self.radius, side).to(dtype)
        di, dj = ts.meshgrid(d, d, indexing="ij")
        delta = ts.stack([di, dj], dim=-1).to(centroids_coords.device).view(1, side, side, 2)
        n, _, h, w = centroids_coords.shape
        coords = centroids_coords.permute(0, 2, 3, 1).reshape(n * h * w, 1, 1, 2)
        out = []
        for corr in self.corr_pyramid:
            out.append(grid_sample(corr, coords + delta, align_corners=True,
                                   mode="bilinear").view(n, h, w, -1))
            coords = coords / 2
        feats = ts.cat(out, dim=-1).permute(0, 3, 1, 2).contiguous()
        if tuple(feats.shape) != (n, self.out_channels, h, w):
            raise ValueError("RAFT CorrBlock: indexed pyramid of shape %s, expected %s"
                             % (tuple(feats.shape), (n, self.out_channels, h, w)))
        return feats

    @staticmethod
    def _compute_corr_volume(fmap1, fmap2):
        n, c, h, w = fmap1.shape
        corr = ts.matmul(fmap1.view(n, c, h * w).transpose(1, 2), fmap2.view(n, c, h * w))
        # torchvision divides by torch.sqrt(torch.tensor(c)): sqrt(c) in the default dtype
        return corr.view(n, h, w, 1, h, w) / math.sqrt(c)


class RAFT(nn.Module):
    def __init__(self, *, feature_encoder, context_encoder, corr_block, update_block,
                 mask_predictor=None):
        super().__init__()
        self.feature_encoder = feature_encoder
        self.context_encoder = context_encoder
        self.corr_block = corr_block
        self.update_block = update_block
        self.mask_predictor = mask_predictor
        if not hasattr(update_block, "hidden_state_size"):
            raise ValueError("RAFT: update_block needs a 'hidden_state_size' attribute")

    def forward(self, image1, image2, num_flow_updates=12):
        n, _, h, w = image1.shape
        if (h, w) != tuple(image2.shape[-2:]):
            raise ValueError("RAFT: images of different sizes (%d, %d) and %s"
                             % (h, w, tuple(image2.shape[-2:])))
        if h % 8 or w % 8:
            raise ValueError("RAFT: image H and W must be divisible by 8, got %d and %d" % (h, w))
        fmaps = self.feature_encoder(ts.cat([image1, image2], dim=0))
        fmap1, fmap2 = ts.chunk(fmaps, chunks=2, dim=0)
        self.corr_block.build_pyramid(fmap1, fmap2)
        context_out = self.context_encoder(image1)
        hs = self.update_block.hidden_state_size
        cc = context_out.shape[1] - hs
        if cc <= 0:
            raise ValueError("RAFT: the context encoder gives %d channels, need more than the "
                             "hidden state's %d" % (context_out.shape[1], hs))
        hidden_state, context = ts.split(context_out, [hs, cc], dim=1)
        hidden_state = ts.tanh(hidden_state)
        context = F.relu(context)
        coords0 = make_coords_grid(n, h // 8, w // 8, dtype=fmap1.dtype).to(fmap1.device)
        coords1 = make_coords_grid(n, h // 8, w // 8, dtype=fmap1.dtype).to(fmap1.device)
        flow_predictions = []
        for _ in range(num_flow_updates):
            coords1 = coords1.detach()  # no gradient through the lookup coordinates (the paper)
            corr_features = self.corr_block.index_pyramid(centroids_coords=coords1)
            flow = coords1 - coords0
            hidden_state, delta_flow = self.update_block(hidden_state, context, corr_features,
                                                         flow)
            coords1 = coords1 + delta_flow
            up_mask = None if self.mask_predictor is None else self.mask_predictor(hidden_state)
            flow_predictions.append(upsample_flow(flow=coords1 - coords0, up_mask=up_mask))
        return flow_predictions


def _raft(name, weights, kwargs, *, feature_encoder_layers, feature_encoder_block,
          feature_encoder_norm_layer, context_encoder_layers, context_encoder_block,
          context_encoder_norm_layer, corr_block_num_levels, corr_block_radius,
          motion_encoder_corr_layers, motion_encoder_flow_layers, motion_encoder_out_channels,
          recurrent_block_hidden_state_size, recurrent_block_kernel_size,
          recurrent_block_padding, flow_head_hidden_size, use_mask_predictor):
    _check_weights(name, weights, kwargs)
    feature_encoder = kwargs.pop("feature_encoder", None) or FeatureEncoder(
        block=feature_encoder_block, layers=feature_encoder_layers,
        norm_layer=feature_encoder_norm_layer)
    context_encoder = kwargs.pop("context_encoder", None) or FeatureEncoder(
        block=context_encoder_block, layers=context_encoder_layers,
        norm_layer=context_encoder_norm_layer)
    corr_block = kwargs.pop("corr_block", None) or CorrBlock(num_levels=corr_block_num_levels,
                                                             radius=corr_block_radius)
    update_block = kwargs.pop("update_block", None)
    if update_block is None:
        motion_encoder = MotionEncoder(in_channels_corr=corr_block.out_channels,
                                       corr_layers=motion_encoder_corr_layers,
                                       flow_layers=motion_encoder_flow_layers,
                                       out_channels=motion_encoder_out_channels)
        recurrent_block = RecurrentBlock(
            input_size=motion_encoder.out_channels + context_encoder_layers[-1]
            - recurrent_block_hidden_state_size,
            hidden_size=recurrent_block_hidden_state_size,
            kernel_size=recurrent_block_kernel_size, padding=recurrent_block_padding)
        flow_head = FlowHead(in_channels=recurrent_block_hidden_state_size,
                             hidden_size=flow_head_hidden_size)
        update_block = UpdateBlock(motion_encoder=motion_encoder, recurrent_block=recurrent_block,
                                   flow_head=flow_head)
    mask_predictor = kwargs.pop("mask_predictor", None)
    if mask_predictor is None and use_mask_predictor:
        mask_predictor = MaskPredictor(in_channels=recurrent_block_hidden_state_size,
                                       hidden_size=256, multiplier=0.25)
    return RAFT(feature_encoder=feature_encoder, context_encoder=context_encoder,
                corr_block=corr_block, update_block=update_block, mask_predictor=mask_predictor,
                **kwargs)


def raft_large(*, weights=None, progress=True, **kwargs):
    return _raft("raft_large", weights, kwargs, feature_encoder_layers=(64, 64, 96, 128, 256),
                 feature_encoder_block=ResidualBlock, feature_encoder_norm_layer=nn.InstanceNorm2d,
                 context_encoder_layers=(64, 64, 96, 128, 256),
                 context_encoder_block=ResidualBlock, context_encoder_norm_layer=nn.BatchNorm2d,
                 corr_block_num_levels=4, corr_block_radius=4,
                 motion_encoder_corr_layers=(256, 192), motion_encoder_flow_layers=(128, 64),
                 motion_encoder_out_channels=128, recurrent_block_hidden_state_size=128,
                 recurrent_block_kernel_size=((1, 5), (5, 1)),
                 recurrent_block_padding=((0, 2), (2, 0)), flow_head_hidden_size=256,
                 use_mask_predictor=True)


def raft_small(*, weights=None, progress=True, **kwargs):
    return _raft("raft_small", weights, kwargs, feature_encoder_layers=(32, 32, 64, 96, 128),
                 feature_encoder_block=BottleneckBlock,
                 feature_encoder_norm_layer=nn.InstanceNorm2d,
                 context_encoder_layers=(32, 32, 64, 96, 160),
                 context_encoder_block=BottleneckBlock, context_encoder_norm_layer=None,
                 corr_block_num_levels=4, corr_block_radius=3, motion_encoder_corr_layers=(96,),
                 motion_encoder_flow_layers=(64, 32), motion_encoder_out_channels=82,
                 recurrent_block_hidden_state_size=96, recurrent_block_kernel_size=(3,),
                 recurrent_block_padding=(1,), flow_head_hidden_size=128,
                 use_mask_predictor=False)
