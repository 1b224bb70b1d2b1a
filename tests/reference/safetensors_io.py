"""A small safetensors reader and writer (numpy only; no safetensors package).

Format: u64 little-endian header size N, N bytes of JSON header
  {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [...],
   "data_offsets": [begin, end]}, ...}
padded with spaces to a multiple of 8, then the raw little-endian tensor data;
offsets are relative to the first byte after the header.
"""

import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U8": np.dtype("u1"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def write(path, tensors, metadata=None):
    """tensors: ordered mapping name -> numpy array (F32/I32/... as its dtype).
    Tensors are laid out in the mapping's order."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"__metadata__ must map str to str, got {k!r}: {v!r}")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name, array in tensors.items():
        if name == "__metadata__":
            raise ValueError("__metadata__ is not a tensor name")
        array = np.asarray(array)
        dtype = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        if dtype not in _NAMES:
            raise TypeError(f"{name}: unsupported dtype {array.dtype}")
        blob = np.ascontiguousarray(array, dtype=dtype).tobytes()
        header[name] = {
            "dtype": _NAMES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read(path):
    """Returns (tensors: dict name -> numpy array, metadata: dict), checking
    that the offsets tile the data section exactly."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header size {n} exceeds file size {len(data)}")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    spans = []
    for name, info in header.items():
        dtype = _DTYPES[info["dtype"]]
        shape = tuple(info["shape"])
        begin, end = info["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * dtype.itemsize or end > len(body) or begin < 0:
            raise ValueError(f"{path}: {name}: bad data_offsets {begin}..{end} for {shape}")
        tensors[name] = np.frombuffer(body, dtype=dtype, count=count, offset=begin).reshape(shape).copy()
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            raise ValueError(f"{path}: data section has a gap or overlap at byte {pos}")
        pos = end
    if pos != len(body):
        raise ValueError(f"{path}: {len(body) - pos} trailing bytes after the last tensor")
    return tensors, metadata
