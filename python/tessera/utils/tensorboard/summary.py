"""Summary messages (encoded bytes) for SummaryWriter, with the values, tags and layouts of
torch.utils.tensorboard.summary: scalar, histogram, image, text, hparams."""
import math

import tessera

from . import _proto as pb
from ._png import encode_png


def _numpy():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _as_tensor(x, fn, arg):
    """x (a Tensor, numpy array, number or nested list) as a detached cpu Tensor; Python numbers
    become float64 (they are doubles: float32 would round them)."""
    if isinstance(x, tessera.Tensor):
        return x.detach().to("cpu")
    np = _numpy()
    if np is not None and isinstance(x, (np.ndarray, np.generic)):
        return tessera.as_tensor(np.ascontiguousarray(x))
    try:
        return tessera.tensor(x, dtype=tessera.float64)
    except Exception as e:
        raise TypeError(f"{fn}: {arg} must be a Tensor, a numpy array or numbers, "
                        f"not {type(x).__name__}") from e


def scalar_value(x, fn="add_scalar"):
    """A Python float from a number or a one-element Tensor / array (PyTorch's squeeze rule)."""
    if isinstance(x, (int, float, bool)):
        return float(x)
    t = _as_tensor(x, fn, "scalar_value")
    if t.numel() != 1:
        raise ValueError(f"{fn}: scalar_value must have one element, got shape {tuple(t.shape)}")
    return float(t.reshape(-1)[0].item())


def scalar(tag, value, new_style=False, double_precision=False):
    v = scalar_value(value)
    if not new_style:
        return pb.summary(pb.summary_value(tag, simple_value=v))
    if double_precision:
        tensor = pb.tensor(pb.DT_DOUBLE, double_val=[v])
    else:
        tensor = pb.tensor(pb.DT_FLOAT, float_val=[v])
    return pb.summary(pb.summary_value(tag, tensor=tensor,
                                       metadata=pb.summary_metadata("scalars")))


# ---------------------------------------------------------------- histograms
def default_bins():
    """TensorBoard's default bucket edges (generate_testdata.py): +-1e-12 * 1.1**k up to 1e20, and
    0; the same float arithmetic as PyTorch's writer, so the edges are bit-identical."""
    v, pos, neg = 1e-12, [], []
    while v < 1e20:
        pos.append(v)
        neg.append(-v)
        v *= 1.1
    return neg[::-1] + [0] + pos


def _edges(bins, lo, hi, fn):
    if isinstance(bins, int) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"{fn}: bins must be positive, got {bins}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"{fn}: autodetected range of [{lo}, {hi}] is not finite")
        if lo == hi:  # numpy.histogram's rule
            lo, hi = lo - 0.5, hi + 0.5
        step = (hi - lo) / bins  # numpy.linspace's arithmetic, so the edges match bit for bit
        return tessera.tensor([i * step + lo for i in range(bins)] + [hi], dtype=tessera.float64)
    if isinstance(bins, str):
        raise ValueError(f"{fn}: bins must be 'tensorflow', a bin count or a sequence of edges; "
                         f"'{bins}' needs numpy.histogram_bin_edges (pass the edges instead)")
    e = _as_tensor(bins, fn, "bins").to(tessera.float64).reshape(-1)
    if e.numel() < 2:
        raise ValueError(f"{fn}: bins needs at least two edges")
    if bool((e[1:] < e[:-1]).any()):
        raise ValueError(f"{fn}: bins must increase monotonically")
    return e


def histogram_counts(values, bins, max_bins=None, fn="add_histogram"):
    """(min, max, num, sum, sum_squares, bucket_limit, bucket) as PyTorch's make_histogram: counts
    as numpy.histogram (each bin [e_i, e_i+1), the last one closed; values outside or NaN left
    out), optionally merged down to max_bins, then trimmed to the non-empty range with one empty
    bucket kept in front; bucket_limit holds each kept bucket's right edge. Sums are float64."""
    x = _as_tensor(values, fn, "values").to(tessera.float64).reshape(-1)
    n = x.numel()
    if n == 0:
        raise ValueError(f"{fn}: the input has no element")
    mn, mx = float(x.min().item()), float(x.max().item())
    e = default_bins_tensor() if isinstance(bins, str) and bins == "tensorflow" else _edges(
        bins, mn, mx, fn)
    nb = e.numel() - 1
    idx = tessera.searchsorted(e, x, right=True) - 1
    keep = (x >= e[0]) & (x <= e[-1])  # NaN fails both
    counts = tessera.bincount(idx[keep].clamp(max=nb - 1), minlength=nb).tolist()
    limits = e.tolist()
    if max_bins is not None and nb > max_bins:
        sub = nb // max_bins
        if nb % sub:
            counts = counts + [0] * (sub - nb % sub)
        counts = [sum(counts[i:i + sub]) for i in range(0, len(counts), sub)]
        limits = limits[:-1:sub][:len(counts)] + [limits[-1]]
    nonzero = [i for i, c in enumerate(counts) if c > 0]
    if not nonzero:
        raise ValueError(f"{fn}: no value falls inside the bins")
    start, end = nonzero[0], nonzero[-1] + 1
    counts = counts[start - 1:end] if start > 0 else [0] + counts[:end]
    limits = limits[start:end + 1]
    return (mn, mx, float(n), float(x.sum().item()), float((x * x).sum().item()),
            [float(v) for v in limits], [float(c) for c in counts])


_DEFAULT_BINS = None


def default_bins_tensor():
    global _DEFAULT_BINS
    if _DEFAULT_BINS is None:
        _DEFAULT_BINS = tessera.tensor(default_bins(), dtype=tessera.float64)
    return _DEFAULT_BINS


def histogram(tag, values, bins, max_bins=None):
    return pb.summary(pb.summary_value(tag, histo=pb.histogram(
        *histogram_counts(values, bins, max_bins))))


def histogram_raw(tag, mn, mx, num, sum_, sum_squares, bucket_limits, bucket_counts):
    if len(bucket_limits) != len(bucket_counts):
        raise ValueError("add_histogram_raw: len(bucket_limits) != len(bucket_counts)")
    return pb.summary(pb.summary_value(tag, histo=pb.histogram(
        mn, mx, num, sum_, sum_squares, [float(v) for v in bucket_limits],
        [float(v) for v in bucket_counts])))


# ---------------------------------------------------------------- images
def _make_grid(t, ncols=8):
    """[N, C, H, W] (C 1 or 3) -> [3, H*rows, W*cols], zeros where no image falls (PyTorch's)."""
    if t.shape[1] == 1:
        t = t.expand(t.shape[0], 3, t.shape[2], t.shape[3])
    if t.dim() != 4 or t.shape[1] != 3:
        raise ValueError("add_images: images must have 1 or 3 channels")
    n, _, h, w = t.shape
    ncols = min(n, ncols)
    nrows = (n + ncols - 1) // ncols
    canvas = tessera.zeros(3, h * nrows, w * ncols, dtype=t.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = t[i]
    return canvas


def _to_hwc(t, dataformats, fn):
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW"):
        raise ValueError(f"{fn}: dataformats '{dataformats}' must be distinct letters of NCHW")
    if t.dim() != len(fmt):
        raise ValueError(f"{fn}: the image has {t.dim()} dims but dataformats is '{dataformats}'")
    if len(fmt) == 4:
        return _make_grid(t.permute(*[fmt.index(c) for c in "NCHW"])).permute(1, 2, 0)
    if len(fmt) == 3:
        if "N" in fmt:
            raise ValueError(f"{fn}: dataformats '{dataformats}' needs C, H and W")
        t = t.permute(*[fmt.index(c) for c in "HWC"])
        if t.shape[2] == 1:
            t = t.expand(t.shape[0], t.shape[1], 3)
        return t
    if len(fmt) == 2 and set(fmt) == set("HW"):
        t = t.permute(*[fmt.index(c) for c in "HW"])
        return t.unsqueeze(2).expand(t.shape[0], t.shape[1], 3)
    raise ValueError(f"{fn}: dataformats '{dataformats}' is not CHW, HWC, HW, NCHW or the like")


def image(tag, img, dataformats="CHW", fn="add_image"):
    """Summary{Value{tag, image: Image{height, width, colorspace, PNG}}}: uint8 values as they are,
    other dtypes taken as [0, 1] and scaled by 255, clipped to [0, 255] and truncated (PyTorch's
    astype(uint8)); one channel is repeated to RGB, as PyTorch does."""
    t = _as_tensor(img, fn, "img_tensor")
    hwc = _to_hwc(t, dataformats, fn)
    if hwc.dtype != tessera.uint8:
        hwc = (hwc.to(tessera.float32) * 255.0).clamp(0, 255).to(tessera.uint8)
    h, w, c = hwc.shape
    if c not in (3, 4):
        raise ValueError(f"{fn}: an image needs 1, 3 or 4 channels, got {c}")
    px = bytes(hwc.contiguous().reshape(-1).tolist())
    return pb.summary(pb.summary_value(tag, image=pb.image(h, w, c, encode_png(px, h, w, c))))


# ---------------------------------------------------------------- text
def text(tag, text_string):
    """The text plugin's summary: tag + '/text_summary', a DT_STRING tensor of shape [1]."""
    tensor = pb.tensor(pb.DT_STRING, shape=[1], string_val=[text_string.encode("utf-8")])
    return pb.summary(pb.summary_value(tag + "/text_summary", tensor=tensor,
                                       metadata=pb.summary_metadata("text")))


# ---------------------------------------------------------------- hparams
_HP_PLUGIN = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_INFO_TAG = "_hparams_/session_start_info"
SESSION_END_INFO_TAG = "_hparams_/session_end_info"
_DATA_TYPE_STRING, _DATA_TYPE_BOOL, _DATA_TYPE_FLOAT64 = 1, 2, 3
_STATUS_SUCCESS = 1


def _hp_summary(tag, field, message):
    # HParamsPluginData: version 1 (0, left out), experiment 2, session_start_info 3,
    # session_end_info 4 (a oneof)
    content = pb.f_bytes(field, message, always=True)
    return pb.summary(pb.summary_value(tag, metadata=pb.summary_metadata(_HP_PLUGIN, content)))


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The three summaries of PyTorch's summary.hparams: experiment, session start, session end."""
    if hparam_domain_discrete is None:
        hparam_domain_discrete = {}
    if not isinstance(hparam_domain_discrete, dict):
        raise TypeError("add_hparams: hparam_domain_discrete should be a dictionary")
    for k, v in hparam_domain_discrete.items():
        if (k not in hparam_dict or not isinstance(v, list) or
                not all(isinstance(d, type(hparam_dict[k])) for d in v)):
            raise TypeError(f"add_hparams: hparam_domain_discrete[{k}] should be a list of the "
                            f"type of hparam_dict[{k}]")
    infos, entries = [], []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, tessera.Tensor):
            v = float(v.reshape(-1)[0].item())
        # bool is an int: it is stored as a number, as PyTorch's isinstance order does
        if isinstance(v, (int, float)):
            value, dtype, kind = pb.pb_value(number=v), _DATA_TYPE_FLOAT64, "number"
        elif isinstance(v, str):
            value, dtype, kind = pb.pb_value(string=v), _DATA_TYPE_STRING, "string"
        else:
            raise ValueError("add_hparams: value should be one of int, float, str, bool, or "
                             f"Tensor; {k} is {type(v).__name__}")
        # SessionStartInfo.hparams is map<string, Value>: entries {key 1, value 2}
        entries.append(pb.f_bytes(1, pb.f_bytes(1, k) + pb.f_bytes(2, value, always=True),
                                  always=True))
        # HParamInfo: name 1, type 4, domain_discrete 5 (ListValue)
        info = pb.f_bytes(1, k) + pb.f_varint(4, dtype)
        if k in hparam_domain_discrete:
            items = [pb.pb_value(**{kind: d}) for d in hparam_domain_discrete[k]]
            info += pb.f_bytes(5, pb.pb_list_value(items), always=True)
        infos.append(info)
    # Experiment: hparam_infos 4, metric_infos 5 (MetricInfo{name 1: MetricName{tag 2}})
    experiment = b"".join(pb.f_bytes(4, i, always=True) for i in infos)
    experiment += b"".join(pb.f_bytes(5, pb.f_bytes(1, pb.f_bytes(2, k), always=True),
                                      always=True) for k in metric_dict)
    exp = _hp_summary(EXPERIMENT_TAG, 2, experiment)
    ssi = _hp_summary(SESSION_START_INFO_TAG, 3, b"".join(entries))
    sei = _hp_summary(SESSION_END_INFO_TAG, 4, pb.f_varint(1, _STATUS_SUCCESS))
    return exp, ssi, sei


# ---------------------------------------------------------------- PR curves
def _flat_list(x, fn, arg, float_dtype=None):
    t = _as_tensor(x, fn, arg)
    if float_dtype is not None:
        t = t.to(float_dtype)
    return t.reshape(-1).tolist()


def pr_curve_data(labels, predictions, num_thresholds=127, weights=None, fn="add_pr_curve"):
    """The [6, num_thresholds] rows tp, fp, tn, fn, precision, recall of TensorBoard's pr_curve
    plugin, as PyTorch's compute_curve: a prediction p lands in bucket floor(p * (T - 1)) (the
    product in the predictions' float precision), buckets outside [0, T - 1] left out, counts
    weighted by the labels (and weights), then cumulated from the top threshold down."""
    T = int(num_thresholds)
    if T < 2:
        raise ValueError(f"{fn}: num_thresholds must be at least 2, got {T}")
    p = _as_tensor(predictions, fn, "predictions")
    if p.dtype != tessera.float64:
        p = p.to(tessera.float32)
    idx = (p.reshape(-1) * (T - 1)).floor().tolist()
    lab = _flat_list(labels, fn, "labels", tessera.float64)
    if len(lab) != len(idx):
        raise ValueError(f"{fn}: labels and predictions have {len(lab)} and {len(idx)} elements")
    if weights is None:
        w = [1.0] * len(idx)
    elif isinstance(weights, (int, float)):
        w = [float(weights)] * len(idx)
    else:
        w = _flat_list(weights, fn, "weights", tessera.float64)
        if len(w) != len(idx):
            raise ValueError(f"{fn}: weights must have one value per prediction")
    tp_b, fp_b = [0.0] * T, [0.0] * T
    for k, y, wt in zip(idx, lab, w):
        if not (0 <= k <= T - 1):  # NaN and the values outside [0, 1] are left out
            continue
        k = int(k)
        tp_b[k] += y * wt
        fp_b[k] += (1.0 - y) * wt
    tp, fp = [0.0] * T, [0.0] * T
    acc_tp = acc_fp = 0.0
    for i in range(T - 1, -1, -1):
        acc_tp += tp_b[i]
        acc_fp += fp_b[i]
        tp[i], fp[i] = acc_tp, acc_fp
    tn = [fp[0] - v for v in fp]
    fn_ = [tp[0] - v for v in tp]
    precision = [a / max(1e-7, a + b) for a, b in zip(tp, fp)]
    recall = [a / max(1e-7, a + b) for a, b in zip(tp, fn_)]
    return [tp, fp, tn, fn_, precision, recall]


def _pr_summary(tag, data, num_thresholds):
    # PrCurvePluginData: version 1 (0, left out), num_thresholds 2
    meta = pb.summary_metadata("pr_curves", pb.f_varint(2, num_thresholds))
    flat = [v for row in data for v in row]
    tensor = pb.tensor(pb.DT_FLOAT, shape=[len(data), len(data[0])], float_val=flat)
    return pb.summary(pb.summary_value(tag, tensor=tensor, metadata=meta))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    num_thresholds = min(int(num_thresholds), 127)  # PyTorch's cap
    return _pr_summary(tag, pr_curve_data(labels, predictions, num_thresholds, weights),
                       num_thresholds)


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127, weights=None):
    num_thresholds = min(int(num_thresholds), 127)
    rows = [_flat_list(r, "add_pr_curve_raw", name, tessera.float64)
            for r, name in ((tp, "true_positive_counts"), (fp, "false_positive_counts"),
                            (tn, "true_negative_counts"), (fn, "false_negative_counts"),
                            (precision, "precision"), (recall, "recall"))]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("add_pr_curve_raw: the six rows must have one length")
    return _pr_summary(tag, rows, num_thresholds)
