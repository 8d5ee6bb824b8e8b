"""tessera.vision.models.video — torchvision.models.video: VideoResNet (r3d_18, mc3_18,
r2plus1d_18), S3D, MViT (mvit_v1_b, mvit_v2_s) and the Video Swin Transformer (swin3d_t / s / b)
on [N, C, T, H, W] clips, with torchvision's module and state-dict names (weights=None only)."""
from .mvit import MViT, mvit_v1_b, mvit_v2_s
from .resnet import VideoResNet, mc3_18, r2plus1d_18, r3d_18
from .s3d import S3D, s3d
from .swin_transformer import SwinTransformer3d, swin3d_b, swin3d_s, swin3d_t

__all__ = ["VideoResNet", "r3d_18", "mc3_18", "r2plus1d_18", "S3D", "s3d", "MViT", "mvit_v1_b",
           "mvit_v2_s", "SwinTransformer3d",
           "swin3d_t", "swin3d_s", "swin3d_b"]
