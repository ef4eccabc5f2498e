"""safetensors files (docs/bert-notes.md §7.4), read and written by minibert itself.

Every file minibert writes records a sha256 of its tensors in the header's `__metadata__` (key
`minibert_sha256`; transformers ignores it), and loading checks it and that every weight is
finite: flipped bytes or a NaN are an error naming the file and the tensor, not a model that
quietly answers junk. `verify=False` (`--no-verify` on the command line) loads anyway. The
header is validated against the file (bounded length, every tensor's bytes inside the file,
no gaps or overlaps) before anything is allocated. Nothing here unpickles: `pytorch_model.bin` /
`.pt` files are refused by name and by their first bytes.

    save_tensors_atomic(tensors, path, metadata=None); load_tensors(path) -> (tensors, metadata)
    tensor_digest(tensors) -> str; check_finite(tensors, where); read_safetensors_header(path)
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from minibert.io.atomic import atomic_write, write_bytes_synced
from minibert.io.jsonfile import parse_json

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# safetensors dtype strings <-> NumPy (docs/bert-notes.md §7.4.6); BF16 and float8 have no NumPy dtype
ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
             "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
             "U8": np.uint8, "BOOL": np.bool_, "C64": np.complex64}
_ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
MAX_HEADER_BYTES = 100_000_000
DIGEST_KEY = "minibert_sha256"  # __metadata__ key: sha256 of the tensors (tensor_digest)
NO_VERIFY_HINT = "to load it anyway, pass --no-verify (verify=False in Python)"


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes, read a MiB at a time (a checkpoint's tensor files, a corpus)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def tensor_digest(tensors: dict[str, np.ndarray]) -> str:
    """sha256 over every tensor's name, dtype, shape and little-endian bytes, in name order:
    the same for a dict and for the file it was saved to, whatever the file's layout."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))
        h.update(f"{name}|{a.dtype.str}|{list(a.shape)}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_tensors_atomic(tensors: dict[str, np.ndarray], path: str | Path,
                        metadata: dict[str, str] | None = None, digest: bool = True) -> Path:
    """Write a safetensors file atomically. metadata is a flat str -> str map; with `digest`
    it also records tensor_digest(tensors) under `minibert_sha256`, checked on load."""
    metadata = dict(metadata or {})
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"safetensors metadata must map str to str, got {k!r}: {v!r}")
    arrays = {}
    for name, a in tensors.items():
        a = np.asarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))  # safetensors is little-endian
        if a.dtype.type not in ST_DTYPES.values():
            raise ValueError(f"tensor {name!r} has dtype {a.dtype}, which safetensors cannot store")
        arrays[name] = np.ascontiguousarray(a)
    if digest:
        metadata[DIGEST_KEY] = tensor_digest(arrays)
    data = serialize_safetensors(arrays, metadata)
    return atomic_write(path, lambda tmp: write_bytes_synced(tmp, data))


def serialize_safetensors(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    """The bytes of a safetensors file (docs/bert-notes.md §7.4): 8-byte little-endian header length, the JSON
    header padded with spaces to a multiple of 8, then every tensor's bytes back to back.

    Written here rather than by the safetensors package for two reasons: the package orders the
    metadata keys through a randomised hash map, so the same tensors gave different bytes from
    run to run (a resumed run could not be compared byte for byte), and it reports a full disk as
    its own error type instead of an OSError naming the file. Tensors are laid out largest
    item size first, then by name, as the package does, so every tensor stays aligned."""
    names = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name in names:
        a = arrays[name]
        header[name] = {"dtype": _ST_NAMES[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return b"".join([len(text).to_bytes(8, "little"), text, *(arrays[n].tobytes() for n in names)])


def check_finite(tensors: dict[str, np.ndarray], where) -> None:
    """ValueError naming the first tensor (in name order) that holds a NaN or an infinity."""
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            bad = int(a.size - np.isfinite(a).sum())
            raise ValueError(f"{where}: tensor {name!r} holds {bad} NaN/inf value(s) of {a.size}; the weights are "
                             f"corrupt or come from a diverged run; {NO_VERIFY_HINT}")


def refuse_pickle(path: Path, head: bytes = b"") -> None:
    """Raise if `path` is (by name or by its first bytes) a pickle or a torch.save zip."""
    is_pickle = head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")
    if path.suffix.lower() in PICKLE_SUFFIXES or is_pickle or head[:4] == b"PK\x03\x04":
        raise ValueError(f"{path} looks like a PyTorch pickle/zip file; minibert never unpickles "
                         f"(loading a pickle can run arbitrary code). Convert it to safetensors, e.g. "
                         f"transformers' model.save_pretrained(dir, safe_serialization=True), "
                         f"and load model.safetensors")


def read_safetensors_header(path: str | Path) -> tuple[dict, int]:
    """Validate a safetensors file's layout (docs/bert-notes.md §7.4) and return (header dict, data start).
    Every problem raises ValueError naming the file; nothing is handed on unchecked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"safetensors file {path} does not exist")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if path.suffix.lower() in PICKLE_SUFFIXES:
            refuse_pickle(path)
        if len(head) < 8:
            raise ValueError(f"{path} is truncated: {size} bytes, too short for the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            refuse_pickle(path, head)  # a pickle/zip start reads as an absurd header length
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: header length {n} exceeds the safetensors limit {MAX_HEADER_BYTES} "
                             f"(not a safetensors file, or corrupt)")
        if 8 + n > size:
            raise ValueError(f"{path} is truncated: header says {n} header bytes but the file has only {size} bytes")
        raw = f.read(n)
    try:
        text = raw.decode("utf-8")
        if not text.startswith("{"):
            raise ValueError("header does not start with '{'")
        header = parse_json(text, "header")
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: corrupt safetensors header (not valid JSON): {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: corrupt safetensors header: expected a JSON object")
    _check_entries(path, header, size - 8 - n)
    return header, 8 + n


def _check_entries(path, header, buffer_len):
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError(f"{path}: __metadata__ must be a flat string -> string map")
    spans = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
            raise ValueError(f"{path}: tensor {name!r} entry needs dtype, shape and data_offsets, got {e!r}")
        if not isinstance(e["dtype"], str) or e["dtype"] not in ST_DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {e['dtype']!r}, which minibert cannot read "
                             f"(supported: {sorted(ST_DTYPES)})")
        shape, offs = e["shape"], e["data_offsets"]
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)):
            raise ValueError(f"{path}: tensor {name!r} has a bad shape {shape!r} or data_offsets {offs!r}")
        nbytes = math.prod(shape) * np.dtype(ST_DTYPES[e["dtype"]]).itemsize
        if offs[1] - offs[0] != nbytes:
            raise ValueError(f"{path}: tensor {name!r} spans {offs} ({offs[1] - offs[0]} bytes) but shape "
                             f"{shape} x {e['dtype']} needs {nbytes} bytes")
        spans.append((offs[0], offs[1], name))
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise ValueError(f"{path}: tensor {name!r} starts at byte {begin}, expected {pos} "
                             f"(gap or overlap in the data buffer)")
        pos = end
    if pos != buffer_len:
        what = "truncated" if pos > buffer_len else "corrupt"
        raise ValueError(f"{path} is {what}: the header describes {pos} data bytes but the file holds {buffer_len}")


def load_tensors(path: str | Path, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read a safetensors file -> (tensors, metadata). Validates the layout first (see
    read_safetensors_header), then reads with the safetensors package; with `verify`, a file
    that records a tensor digest (every file minibert writes) must match it."""
    header, _ = read_safetensors_header(path)
    try:
        tensors = load_file(str(path))
    except Exception as e:  # layout was checked above; this is only a last line of defence
        raise ValueError(f"{path}: safetensors could not read the file: {e}") from None
    metadata = dict(header.get("__metadata__", {}))
    if verify and DIGEST_KEY in metadata and tensor_digest(tensors) != metadata[DIGEST_KEY]:
        raise ValueError(f"{path} is corrupt: its tensors do not match the sha256 recorded when it was "
                         f"written (bytes changed on disk or in a copy); {NO_VERIFY_HINT}")
    return tensors, metadata


# ---------------------------------------------------------------------------------------------
# config.json
