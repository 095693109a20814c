"""The byte format of the Mooncake tensor calls (put_tensor, get_tensor):
a 40-byte header, then the tensor's bytes in C order. The header is
Mooncake's TensorMetadata: int32 dtype, int32 ndim, int64 shape[4] (-1
past ndim), little-endian. Imports torch; only those calls load it."""

from __future__ import annotations

import struct

import torch

_HEADER = struct.Struct("<ii4q")

# Codes of the dtypes a tensor object may hold.
_CODES = {torch.float32: 1, torch.float64: 2, torch.int8: 3, torch.uint8: 4, torch.int16: 5,
          torch.int32: 7, torch.int64: 9, torch.bool: 11, torch.float16: 12, torch.bfloat16: 13}
_DTYPES = {v: k for k, v in _CODES.items()}


def encode(t) -> bytearray:
    """The header and the bytes of a CPU tensor of at most 4 dimensions."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{type(t).__name__} is not a torch.Tensor")
    if t.device.type != "cpu" or t.dtype not in _CODES or t.dim() > 4 or t.numel() == 0:
        raise ValueError(f"tensor on {t.device}, {t.dtype}, shape {tuple(t.shape)}: want a non-empty CPU tensor of at most 4 dimensions")
    t = t.contiguous()
    shape = list(t.shape) + [-1] * (4 - t.dim())
    n = t.numel() * t.element_size()
    out = bytearray(_HEADER.size + n)
    _HEADER.pack_into(out, 0, _CODES[t.dtype], t.dim(), *shape)
    out[_HEADER.size:] = memoryview(t.reshape(-1).view(torch.uint8).numpy())
    return out


def decode(data, copy: bool = True):
    """The tensor of encode's bytes, or None when they are not one (a short
    or inconsistent header, an unknown dtype, a size that does not match
    the shape). copy=False returns a tensor viewing data."""
    mv = memoryview(data).cast("B")
    if len(mv) <= _HEADER.size:
        return None
    code, ndim, *shape = _HEADER.unpack_from(mv, 0)
    dtype = _DTYPES.get(code)
    if dtype is None or not 0 <= ndim <= 4 or any(d < 0 for d in shape[:ndim]):
        return None
    shape = shape[:ndim]
    numel = 1
    for d in shape:
        numel *= d
    size = numel * torch.empty((), dtype=dtype).element_size()
    if size != len(mv) - _HEADER.size or size == 0:
        return None
    body = mv[_HEADER.size:]
    raw = torch.frombuffer(bytearray(body) if copy else body, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)
