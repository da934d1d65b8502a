"""Checks `dcpp convert` output against real PyTorch, and writes PyTorch's own conversions for dcpp.

usage (from the repository root, in the reference environment):
    run.sh tests/interop/check_cli_conversions.py OUT FIXTURES

OUT holds what tests/interop/cli_conversions.sh made with dcpp:
    OUT/dcpp/<name>.pt             dcpp convert FIXTURES/<name> --to torch-save
    OUT/dcpp/from_pt               dcpp convert FIXTURES/torch_save_state_dict.pt --to dcp
    OUT/dcpp/<name>.safetensors    dcpp convert FIXTURES/<name> --to safetensors
    OUT/dcpp/sharded.safetensors.index.json   the same, sharded (--max-shard-size)
Checks, each printed as "ok   ..." or "FAIL ...":
  - torch.load (weights_only, PyTorch 2.6's default) of dcpp's torch-save file equals, bit for bit
    and type for type, what PyTorch's own dcp_to_torch_save makes of the same checkpoint;
  - PyTorch reads dcpp's DCP conversion of a torch.save file (dcp_to_torch_save, and dcp.load in
    place) and it equals torch.load of the original;
  - dcpp's safetensors files: the header format (8-byte length, JSON, dtype/shape/data_offsets,
    contiguous data, __metadata__ of strings), and every tensor equal to PyTorch's flattening of the
    checkpoint (with the `safetensors` package when the environment has it).
Writes, for dcpp to read back (cli_conversions.sh):
    OUT/python/<name>.pt     PyTorch's dcp_to_torch_save of FIXTURES/<name>
    OUT/python/from_pt       PyTorch's torch_save_to_dcp of FIXTURES/torch_save_state_dict.pt
"""

import json
import os
import struct
import sys

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp

out, fixtures = sys.argv[1], sys.argv[2]
failures = 0


def report(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += 0 if ok else 1


def same(a, b, where=""):
    """Equal in type, structure and bits; returns the first difference, or None."""
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        if a.numel() and not torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                                         b.contiguous().reshape(-1).view(torch.uint8)):
            return f"{where}: values differ"
        return None
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{where}: keys {list(a.keys())} vs {list(b.keys())}"
        for k in a:
            d = same(a[k], b[k], f"{where}.{k}" if where else str(k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{where}.{i}")
            if d:
                return d
        return None
    return None if a == b or (a != a and b != b) else f"{where}: {a!r} vs {b!r}"


def python_reference(checkpoint, name):
    path = os.path.join(out, "python", name + ".pt")
    dcp_to_torch_save(checkpoint, path)
    return torch.load(path, weights_only=False)


os.makedirs(os.path.join(out, "python"), exist_ok=True)
names = ["single_rank_mixed", "model_optim_adam", "two_rank_sharded"]
references = {}
for name in names:
    references[name] = python_reference(os.path.join(fixtures, name), name)
    ours = torch.load(os.path.join(out, "dcpp", name + ".pt"))  # weights_only=True in 2.6
    d = same(references[name], ours)
    report(d is None, f"torch.load(dcpp torch-save {name}) == dcp_to_torch_save: {d or 'equal'}")

original = torch.load(os.path.join(fixtures, "torch_save_state_dict.pt"))
converted = python_reference(os.path.join(out, "dcpp", "from_pt"), "dcpp_from_pt")
d = same(original, converted)
report(d is None, f"dcp_to_torch_save(dcpp --to dcp of torch_save_state_dict.pt) == torch.load: {d or 'equal'}")
in_place = {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else
                {kk: torch.zeros_like(vv) for kk, vv in v.items()} if isinstance(v, dict) else v)
            for k, v in original.items()}
dcp.load(in_place, checkpoint_id=os.path.join(out, "dcpp", "from_pt"))
d = same(original, in_place)
report(d is None, f"dcp.load in place of dcpp --to dcp output == torch.load: {d or 'equal'}")
torch_save_to_dcp(os.path.join(fixtures, "torch_save_state_dict.pt"),
                  os.path.join(out, "python", "from_pt"))

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
          "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """The tensors of one file by plain struct + json, checking the format as it goes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, "header not padded to 8 bytes"
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "__metadata__ values must be strings"
    body = data[8 + n:]
    spans = sorted((info["data_offsets"], key) for key, info in header.items())
    end = 0
    tensors = {}
    for (begin, stop), key in spans:
        assert begin == end, f"{key}: data not contiguous"
        info = header[key]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(bytearray(body[begin:stop]), dtype=dtype) if stop > begin else \
            torch.empty(0, dtype=dtype)
        tensors[key] = t.reshape(info["shape"])
        end = stop
    assert end == len(body), "data does not end the file"
    return tensors, meta


try:
    from safetensors.torch import load_file
except ImportError:
    load_file = None
print("safetensors package:", "present" if load_file else "absent (header checked with json + struct)")

flat, _ = flatten_state_dict(references["single_rank_mixed"])
expected = {k: v for k, v in flat.items() if isinstance(v, torch.Tensor)}
for label, files in [("single file", ["single_rank_mixed.safetensors"]), ("sharded", None)]:
    if files is None:
        with open(os.path.join(out, "dcpp", "sharded.safetensors.index.json")) as f:
            index = json.load(f)
        files = sorted(set(index["weight_map"].values()))
        report(index["metadata"]["total_size"] == sum(v.numel() * v.element_size() for v in expected.values()),
               f"safetensors index total_size, {len(files)} shards")
    got = {}
    for name in files:
        tensors, meta = read_safetensors(os.path.join(out, "dcpp", name))
        report(meta.get("format") == "pt", f"safetensors {name}: __metadata__ format pt")
        if load_file is not None:
            loaded = load_file(os.path.join(out, "dcpp", name))
            d = same(dict(sorted(tensors.items())), dict(sorted(loaded.items())))
            report(d is None, f"safetensors.torch.load_file({name}) == header parse: {d or 'equal'}")
        got.update(tensors)
    d = same(dict(sorted(expected.items())), dict(sorted(got.items())))
    report(d is None, f"safetensors ({label}) tensors == PyTorch's flattened checkpoint: {d or 'equal'}")

print(f"torch {torch.__version__}: failures: {failures}")
sys.exit(1 if failures else 0)
