"""torch.grid_sampler / grid_sampler_2d / grid_sampler_3d / affine_grid_generator: the integer-
coded forms of nn.functional.grid_sample and affine_grid (nn/functional_grid.py)."""

__all__ = ["grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator"]


_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADS = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler (modes as ints: 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros,
    1 border, 2 reflection): F.grid_sample"""
    from .nn.functional_grid import grid_sample
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ValueError("grid_sampler(): interpolation_mode and padding_mode must be 0, 1 or 2")
    return grid_sample(input, grid, _GRID_MODES[interpolation_mode], _GRID_PADS[padding_mode],
                       bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.ndim != 4:
        raise RuntimeError("grid_sampler_2d(): expected 4-D input, got %d-D" % input.ndim)
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.ndim != 5:
        raise RuntimeError("grid_sampler_3d(): expected 5-D input, got %d-D" % input.ndim)
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta, size, align_corners):
    from .nn.functional_grid import affine_grid
    return affine_grid(theta, size, align_corners)
