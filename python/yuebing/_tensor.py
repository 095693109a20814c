"""The byte format of the Mooncake tensor calls (put_tensor, get_tensor and
their tensor-parallel forms): Mooncake's TensorMetadata, then the tensor's
bytes in C order, so an object written by either store's bindings reads
back in the other.

The header is the one Mooncake's bindings write since 0.3.11
(mooncake-integration/integration_utils.h), 304 bytes, little-endian, the
C structs' natural alignment leaving no padding:

    TensorObjectHeader (40): u32 magic 0x4d4f4f4e, u16 version 1,
        u16 header_size 304, i32 dtype, i32 ndim, u32 layout_kind
        (0 full, 1 shard), u32 reserved_flags, u64 data_offset (304),
        u64 data_bytes
    TensorLayoutMetadata (264): i64 global_shape[8], i64 local_shape[8]
        (-1 past ndim), u32 axis_count, u32 reserved0, then 4 LayoutAxis
        (32 each): i32 kind (DP 0, TP 1, EP 2, PP 3), i32 axis_index,
        i32 shard_rank, i32 shard_count, i32 split_dim, i32 reserved0,
        i64 reserved1 (the shard's extent along split_dim)

The tensor is local_shape. Releases before 0.3.11 wrote a 40-byte header
(dtype, ndim, shape[4]) that current Mooncake no longer reads; neither do
we. The header functions need no torch; encode and decode import it."""

from __future__ import annotations

import struct

MAGIC = 0x4D4F4F4E
VERSION = 1
MAX_DIMS = 8
MAX_AXES = 4
LAYOUT_FULL, LAYOUT_SHARD = 0, 1
AXIS_DP, AXIS_TP, AXIS_EP, AXIS_PP, AXIS_RESERVED = range(5)

_OBJECT = struct.Struct("<IHHiiIIQQ")
_AXIS = struct.Struct("<iiiiiiq")
_LAYOUT = struct.Struct(f"<{MAX_DIMS}q{MAX_DIMS}qII")
HEADER_SIZE = _OBJECT.size + _LAYOUT.size + MAX_AXES * _AXIS.size  # 304

# Mooncake's TensorDtype: its code -> (torch's name, element size).
DTYPES = {0: ("float32", 4), 1: ("float64", 8), 2: ("int8", 1), 3: ("uint8", 1), 4: ("int16", 2),
          5: ("uint16", 2), 6: ("int32", 4), 7: ("uint32", 4), 8: ("int64", 8), 9: ("uint64", 8),
          10: ("bool", 1), 11: ("float16", 2), 12: ("bfloat16", 2), 13: ("float8_e4m3fn", 1),
          14: ("float8_e5m2", 1)}
_CODES = {name: code for code, (name, _) in DTYPES.items()}


class Header:
    """One parsed (or to be packed) TensorMetadata. ``axes`` holds
    (kind, axis_index, shard_rank, shard_count, split_dim, reserved0,
    reserved1) tuples."""

    __slots__ = ("dtype", "ndim", "layout_kind", "data_bytes", "global_shape", "local_shape", "axes")

    def __init__(self, dtype: int, global_shape, local_shape=None, layout_kind: int = LAYOUT_FULL,
                 axes=(), data_bytes: int | None = None):
        self.dtype = dtype
        self.global_shape = [int(d) for d in global_shape]
        self.local_shape = [int(d) for d in (local_shape if local_shape is not None else global_shape)]
        self.ndim = len(self.global_shape)
        self.layout_kind = layout_kind
        self.axes = [tuple(a) for a in axes]
        self.data_bytes = self.expected_bytes() if data_bytes is None else data_bytes

    def expected_bytes(self) -> int | None:
        """Bytes of a tensor of local_shape, None for an unknown dtype or
        a negative dimension."""
        size = DTYPES.get(self.dtype, (None, None))[1]
        if size is None or any(d < 0 for d in self.local_shape):
            return None
        n = size
        for d in self.local_shape:
            n *= d
        return n

    def pack(self) -> bytes:
        if self.ndim > MAX_DIMS or len(self.local_shape) != self.ndim or len(self.axes) > MAX_AXES:
            raise ValueError(f"{self.ndim} dimensions, {len(self.axes)} axes: at most {MAX_DIMS} and {MAX_AXES}")
        pad = [-1] * (MAX_DIMS - self.ndim)
        out = bytearray(HEADER_SIZE)
        _OBJECT.pack_into(out, 0, MAGIC, VERSION, HEADER_SIZE, self.dtype, self.ndim, self.layout_kind, 0,
                          HEADER_SIZE, self.data_bytes)
        _LAYOUT.pack_into(out, _OBJECT.size, *(self.global_shape + pad), *(self.local_shape + pad),
                          len(self.axes), 0)
        off = _OBJECT.size + _LAYOUT.size
        for a in self.axes:
            _AXIS.pack_into(out, off, *a)
            off += _AXIS.size
        return bytes(out)


def parse(data) -> Header | None:
    """The header of an object of total length len(data) (only the first
    HEADER_SIZE bytes are read), or None where Mooncake's
    ValidateTensorMetadata refuses it: wrong magic, version or size, an
    unknown dtype or layout, dimensions that are negative or set past
    ndim, axes out of range, or a data length that does not match
    local_shape."""
    mv = memoryview(data).cast("B")
    if len(mv) < HEADER_SIZE:
        return None
    magic, version, hsize, dtype, ndim, kind, _, offset, nbytes = _OBJECT.unpack_from(mv, 0)
    if magic != MAGIC or version != VERSION or hsize != HEADER_SIZE or dtype not in DTYPES:
        return None
    if not 0 <= ndim <= MAX_DIMS or kind > LAYOUT_SHARD:
        return None
    layout = _LAYOUT.unpack_from(mv, _OBJECT.size)
    gshape, lshape, count = list(layout[:MAX_DIMS]), list(layout[MAX_DIMS:2 * MAX_DIMS]), layout[2 * MAX_DIMS]
    if count > MAX_AXES or not HEADER_SIZE <= offset <= len(mv) or nbytes != len(mv) - offset:
        return None
    if any(d < 0 for d in gshape[:ndim] + lshape[:ndim]) or any(d != -1 for d in gshape[ndim:] + lshape[ndim:]):
        return None
    axes = [_AXIS.unpack_from(mv, _OBJECT.size + _LAYOUT.size + i * _AXIS.size) for i in range(count)]
    for k, _, rank, n, split, _, _ in axes:
        if not AXIS_DP <= k <= AXIS_RESERVED or n <= 0 or not 0 <= rank < n or not -1 <= split < ndim:
            return None
    h = Header(dtype, gshape[:ndim], lshape[:ndim], kind, axes, nbytes)
    if h.expected_bytes() != nbytes or offset != HEADER_SIZE:
        # A data_offset past the header is valid in Mooncake's format but
        # no writer makes one; refusing it keeps reads to one layout.
        return None
    return h


def tp_shard(dim: int, rank: int, count: int) -> tuple[int, int]:
    """(start, length) of rank's shard of a dimension of dim split into
    count equal parts (Mooncake's calculate_shard_range)."""
    return dim * rank // count, dim * (rank + 1) // count - dim * rank // count


# -- with torch ---------------------------------------------------------------

def _torch():
    import torch
    return torch


def code_of(dtype) -> int | None:
    """Mooncake's dtype code of a torch dtype, None for one it has not."""
    return _CODES.get(str(dtype).removeprefix("torch."))


def encode(t, header: Header | None = None) -> bytearray:
    """The header and bytes of tensor t (any device: it is copied to host
    memory, as Mooncake's bindings copy a device tensor). header, when
    given, describes t as a shard; by default t is a whole tensor."""
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{type(t).__name__} is not a torch.Tensor")
    code = code_of(t.dtype)
    if code is None or t.dim() > MAX_DIMS:
        raise ValueError(f"tensor {t.dtype}, shape {tuple(t.shape)}: want one of Mooncake's dtypes and at most "
                         f"{MAX_DIMS} dimensions")
    t = t.detach().to("cpu").contiguous()
    if header is None:
        header = Header(code, list(t.shape))
    head = header.pack()
    n = t.numel() * t.element_size()
    if header.data_bytes != n:
        raise ValueError(f"header says {header.data_bytes} bytes, the tensor has {n}")
    out = bytearray(HEADER_SIZE + n)
    out[:HEADER_SIZE] = head
    if n:
        out[HEADER_SIZE:] = memoryview(t.reshape(-1).view(torch.uint8).numpy())
    return out


def shards(t, tp_size: int, split_dim: int) -> list[bytearray]:
    """The tp_size shards of t along split_dim, each encoded with its
    shard header (Mooncake's put_tensor_with_tp): only equal shards, as
    Mooncake makes them, so the dimension must divide by tp_size."""
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{type(t).__name__} is not a torch.Tensor")
    code = code_of(t.dtype)
    shape = list(t.shape)
    if code is None or not 0 <= split_dim < len(shape) or tp_size <= 0 or shape[split_dim] % tp_size:
        raise ValueError(f"tensor {t.dtype} {tuple(shape)} split {tp_size} ways along {split_dim}: "
                         "want a dimension that divides equally")
    out = []
    for rank in range(tp_size):
        start, size = tp_shard(shape[split_dim], rank, tp_size)
        part = t.narrow(split_dim, start, size)
        local = list(part.shape)
        h = Header(code, shape, local, LAYOUT_SHARD, [(AXIS_TP, 0, rank, tp_size, split_dim, 0, local[split_dim])])
        out.append(encode(part, h))
    return out


def decode(data, copy: bool = True):
    """The tensor of an object's bytes (its local shape), or None when
    they are not one Mooncake's bindings would read, or its dtype is one
    this torch lacks. copy=False returns a tensor viewing data."""
    h = parse(data)
    if h is None:
        return None
    torch = _torch()
    dtype = getattr(torch, DTYPES[h.dtype][0], None)
    if dtype is None:
        return None
    if h.data_bytes == 0:
        return torch.empty(h.local_shape, dtype=dtype)
    body = memoryview(data).cast("B")[HEADER_SIZE:HEADER_SIZE + h.data_bytes]
    raw = torch.frombuffer(bytearray(body) if copy else body, dtype=torch.uint8)
    return raw.view(dtype).reshape(h.local_shape)
