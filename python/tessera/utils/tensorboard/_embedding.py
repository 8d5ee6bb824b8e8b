"""SummaryWriter.add_embedding's files for TensorBoard's projector, laid out as PyTorch writes them:
log_dir/<step:05d>/<tag>/{tensors.tsv, metadata.tsv, sprite.png} and log_dir/projector_config.pbtxt
(the text format of ProjectorConfig, listing every embedding the writer added)."""
import math
import os

import tessera

from ._png import encode_png
from .summary import _as_tensor, _make_grid


def encode_tag(tag):
    """PyTorch's folder name of a tag: %, / and \\ as %25, %2f, %5c."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _pbtxt_string(s):
    """A text-format string literal (protobuf's C escaping of quotes, backslashes, controls)."""
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c in "\"'\\":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ch < 0x20 or ch >= 0x7F:
            out.append("\\%03o" % ch)
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def embedding_info_pbtxt(info):
    """One `embeddings { ... }` block (EmbeddingInfo fields in field-number order)."""
    lines = ["embeddings {", "  tensor_name: " + _pbtxt_string(info["tensor_name"])]
    if "metadata_path" in info:
        lines.append("  metadata_path: " + _pbtxt_string(info["metadata_path"]))
    if "sprite" in info:
        path, dims = info["sprite"]
        lines += ["  sprite {", "    image_path: " + _pbtxt_string(path)]
        lines += ["    single_image_dim: %d" % d for d in dims]
        lines.append("  }")
    lines += ["  tensor_path: " + _pbtxt_string(info["tensor_path"]), "}"]
    return "\n".join(lines) + "\n"


def write_embedding(log_dir, infos, mat, metadata=None, label_img=None, global_step=None,
                    tag="default", metadata_header=None):
    """Writes one embedding's files and rewrites projector_config.pbtxt; appends to infos."""
    fn = "add_embedding"
    m = _as_tensor(mat, fn, "mat")
    if m.dim() != 2:
        raise ValueError(f"{fn}: mat should be 2D, where mat.size(0) is the number of data points")
    if global_step is None:
        global_step = 0
    subdir = f"{str(global_step).zfill(5)}/{encode_tag(tag)}"
    save_path = os.path.join(log_dir, subdir)
    if os.path.exists(save_path):
        if not os.path.isdir(save_path):
            raise NotADirectoryError(f"{fn}: {save_path} exists, but is a file")
        print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
    else:
        os.makedirs(save_path)
    info = {"tensor_name": f"{tag}:{str(global_step).zfill(5)}",
            "tensor_path": subdir + "/tensors.tsv"}
    if metadata is not None:
        if len(metadata) != m.shape[0]:
            raise ValueError(f"{fn}: #labels should equal with #data points")
        if not metadata_header:
            rows = [str(x) for x in metadata]
        else:
            if len(metadata_header) != len(metadata[0]):
                raise ValueError(f"{fn}: len of header must be equal to the number of columns "
                                 "in metadata")
            rows = ["\t".join(str(e) for e in r) for r in [metadata_header] + list(metadata)]
        with open(os.path.join(save_path, "metadata.tsv"), "wb") as f:
            f.write(("\n".join(rows) + "\n").encode("utf-8"))
        info["metadata_path"] = subdir + "/metadata.tsv"
    if label_img is not None:
        img = _as_tensor(label_img, fn, "label_img")
        if img.dim() != 4 or img.shape[0] != m.shape[0]:
            raise ValueError(f"{fn}: label_img must be [N, C, H, W] with N = mat.size(0)")
        _write_sprite(img, os.path.join(save_path, "sprite.png"))
        info["sprite"] = (subdir + "/sprite.png", [img.shape[3], img.shape[2]])
    with open(os.path.join(save_path, "tensors.tsv"), "wb") as f:
        for row in m.tolist():
            f.write(("\t".join(str(x) for x in row) + "\n").encode("utf-8"))
    infos.append(info)
    with open(os.path.join(log_dir, "projector_config.pbtxt"), "wb") as f:
        f.write("".join(embedding_info_pbtxt(i) for i in infos).encode("utf-8"))


def _write_sprite(img, path):
    """PyTorch's sprite: a grid of ceil(sqrt(N)) columns on a square canvas as wide as the grid,
    values * 255 in float64, clipped, truncated."""
    nrow = math.ceil(img.shape[0] ** 0.5)
    grid = _make_grid(img.to(tessera.float64), ncols=nrow)  # [3, H*rows, W*cols]
    side = grid.shape[2]
    if grid.shape[1] > side:
        raise ValueError("add_embedding: the sprite's images must not be taller than wide")
    canvas = tessera.zeros(3, side, side, dtype=tessera.float64)
    canvas[:, :grid.shape[1], :] = grid
    px = (canvas * 255.0).clamp(0, 255).to(tessera.uint8).permute(1, 2, 0).contiguous()
    with open(path, "wb") as f:
        f.write(encode_png(bytes(px.reshape(-1).tolist()), side, side, 3))
