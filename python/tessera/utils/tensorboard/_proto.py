"""Protocol-buffer encoding of TensorBoard's messages, by hand (no protobuf package).

Messages are built as bytes in field-number order with proto3's rule that a field holding its
default value (0, "", empty) is left out, so the bytes match what protobuf's own serializer (and
therefore PyTorch's SummaryWriter) writes. Field numbers are those of tensorflow/core/util/
event.proto, tensorflow/core/framework/{summary,tensor,tensor_shape}.proto and
tensorboard/plugins/hparams/{api,plugin_data}.proto. The record framing around each Event (length
and CRC-32C) is the C library's (ts_event_file_write).
"""
import math
import struct

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


def varint(v):
    """An unsigned varint; a negative int64 is its ten-byte two's complement, as protobuf's."""
    v = int(v)
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _key(field, wire):
    return varint(field << 3 | wire)


def f_varint(field, v, always=False):
    """int32/int64/enum/bool field (left out when 0 unless `always`, i.e. inside a oneof)."""
    v = int(v)
    return _key(field, _VARINT) + varint(v) if (v or always) else b""


def f_double(field, v, always=False):
    b = struct.pack("<d", float(v))
    # -0.0 is not the default: proto3 leaves out a field whose bits are all zero
    return _key(field, _FIXED64) + b if (always or b != bytes(8)) else b""


def _f32_bytes(v):
    """v rounded to float32; past its range an infinity of the same sign (as C's conversion)."""
    v = float(v)
    try:
        return struct.pack("<f", v)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, v))


def f_float(field, v, always=False):
    b = _f32_bytes(v)
    return _key(field, _FIXED32) + b if (always or b != b"\0\0\0\0") else b""


def f_bytes(field, data, always=False):
    """string/bytes/message field; an empty one is left out unless `always` (a set submessage or
    a oneof member)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _key(field, _LEN) + varint(len(data)) + data if (data or always) else b""


def f_packed_doubles(field, values):
    if not values:
        return b""
    return f_bytes(field, struct.pack("<%dd" % len(values), *values))


def f_packed_floats(field, values):
    if not values:
        return b""
    return f_bytes(field, b"".join(_f32_bytes(v) for v in values))


# ---------------------------------------------------------------- tensorflow messages
DT_FLOAT, DT_DOUBLE, DT_STRING = 1, 2, 7


def event(wall_time, step=None, file_version=None, summary=None, session_log=None):
    """Event: wall_time 1, step 2, file_version 3 (oneof), summary 5 (oneof), session_log 7."""
    out = f_double(1, wall_time)
    if step is not None:
        out += f_varint(2, step)
    if file_version is not None:
        out += f_bytes(3, file_version, always=True)
    if summary is not None:
        out += f_bytes(5, summary, always=True)
    if session_log is not None:
        out += f_bytes(7, session_log, always=True)
    return out


SESSION_START = 1


def session_log(status):
    return f_varint(1, status)


def summary(*values):
    """Summary: repeated Value value = 1 (each an encoded Summary.Value)."""
    return b"".join(f_bytes(1, v, always=True) for v in values)


def summary_value(tag, simple_value=None, image=None, histo=None, tensor=None, metadata=None):
    """Summary.Value: tag 1, simple_value 2, image 4, histo 5, tensor 8 (a oneof), metadata 9."""
    out = f_bytes(1, tag)
    if simple_value is not None:
        out += f_float(2, simple_value, always=True)
    if image is not None:
        out += f_bytes(4, image, always=True)
    if histo is not None:
        out += f_bytes(5, histo, always=True)
    if tensor is not None:
        out += f_bytes(8, tensor, always=True)
    if metadata is not None:
        out += f_bytes(9, metadata, always=True)
    return out


def summary_metadata(plugin_name, content=b""):
    """SummaryMetadata{plugin_data 1: PluginData{plugin_name 1, content 2}}."""
    return f_bytes(1, f_bytes(1, plugin_name) + f_bytes(2, content), always=True)


def image(height, width, colorspace, encoded):
    """Summary.Image: height 1, width 2, colorspace 3, encoded_image_string 4."""
    return f_varint(1, height) + f_varint(2, width) + f_varint(3, colorspace) + f_bytes(4, encoded)


def histogram(mn, mx, num, sum_, sum_squares, bucket_limit, bucket):
    """HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7."""
    return (f_double(1, mn) + f_double(2, mx) + f_double(3, num) + f_double(4, sum_) +
            f_double(5, sum_squares) + f_packed_doubles(6, bucket_limit) +
            f_packed_doubles(7, bucket))


def tensor_shape(dims):
    """TensorShapeProto{dim 2: Dim{size 1}}."""
    return b"".join(f_bytes(2, f_varint(1, d), always=True) for d in dims)


def tensor(dtype, shape=None, float_val=None, double_val=None, string_val=None):
    """TensorProto: dtype 1, tensor_shape 2, float_val 5, double_val 6, string_val 8."""
    out = f_varint(1, dtype)
    if shape is not None:
        out += f_bytes(2, tensor_shape(shape), always=True)
    if float_val:
        out += f_packed_floats(5, float_val)
    if double_val:
        out += f_packed_doubles(6, double_val)
    for s in string_val or ():
        out += f_bytes(8, s, always=True)
    return out


# ---------------------------------------------------------------- google.protobuf.Value
def pb_value(number=None, string=None, boolean=None):
    """google.protobuf.Value: number_value 2, string_value 3, bool_value 4 (a oneof)."""
    if number is not None:
        return f_double(2, number, always=True)
    if string is not None:
        return f_bytes(3, string, always=True)
    return f_varint(4, boolean, always=True)


def pb_list_value(values):
    """google.protobuf.ListValue{values 1}."""
    return b"".join(f_bytes(1, v, always=True) for v in values)
