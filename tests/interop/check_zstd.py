"""Loads dcpp's zstd-compressed checkpoints with PyTorch 2.14's dcp.load (tests/interop/zstd.sh).

usage: reference_root.sh run sid -- python3 tests/interop/check_zstd.py WORK FIXTURES_214
WORK/dcpp/<name>   `dcpp convert FIXTURES_214/<name> --to dcp --compress zstd`
Checks, each printed as "ok   ..." or "FAIL ...": every item of dcpp's checkpoints has
transform_descriptors ["stream.zstd/1"]; what _load_state_dict_from_keys reads from them matches
the fixture's manifest (dtype, shape, sum, abs_sum, values); and, where PyTorch can read the
fixture itself (not its own SAFETENSORS format), what _load_state_dict_from_keys and dcp.load in
place read from dcpp's checkpoint equals, bit for bit and type for type, what they read from it.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

work, fixtures = sys.argv[1], sys.argv[2]
failures = 0


def report(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += 0 if ok else 1


def same(a, b, where=""):
    """Equal in type, structure and bits; the first difference, or None."""
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
        if sorted(a.keys()) != sorted(b.keys()):
            return f"{where}: keys {sorted(a.keys())} vs {sorted(b.keys())}"
        for k in a:
            d = same(a[k], b[k], f"{where}.{k}" if where else str(k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} vs {b!r}"


def zeros_like_tree(tree):
    if isinstance(tree, torch.Tensor):
        return torch.zeros_like(tree)
    if isinstance(tree, dict):
        return {k: zeros_like_tree(v) for k, v in tree.items()}
    return tree


def manifest_problem(node, value, where):
    """The first way `value` differs from the fixture's manifest entry `node`, or None."""
    kind = node["type"]
    if kind == "dict":
        if not isinstance(value, dict) or sorted(value) != sorted(node["items"]):
            return f"{where}: keys differ"
        for k, item in node["items"].items():
            p = manifest_problem(item, value[k], f"{where}.{k}" if where else k)
            if p:
                return p
        return None
    if kind == "tensor":
        if not isinstance(value, torch.Tensor) or str(value.dtype) != "torch." + node["dtype"] \
                or list(value.shape) != node["shape"]:
            return f"{where}: not a {node['dtype']}{node['shape']} tensor"
        as_double = value.double()
        if abs(as_double.sum().item() - node["sum"]) > 1e-9 * max(1, abs(node["sum"])) or \
                abs(as_double.abs().sum().item() - node["abs_sum"]) > 1e-9 * max(1, node["abs_sum"]):
            return f"{where}: sums differ from the manifest"
        return None
    if kind in ("list", "tuple"):
        if not isinstance(value, (list, tuple)) or len(value) != len(node["items"]):
            return f"{where}: not a {kind} of {len(node['items'])}"
        for i, (item, v) in enumerate(zip(node["items"], value)):
            p = manifest_problem(item, v, f"{where}[{i}]")
            if p:
                return p
        return None
    if "value" not in node:
        return None  # a kind the manifest describes by type only
    return None if value == node["value"] else f"{where}: {value!r} vs {node['value']!r}"


for name in sorted(os.listdir(os.path.join(work, "dcpp"))):
    ours = os.path.join(work, "dcpp", name)
    md = dcp.FileSystemReader(ours).read_metadata()
    descriptors = {tuple(i.transform_descriptors or ()) for i in md.storage_data.values()}
    report(descriptors == {("stream.zstd/1",)},
           f"{name}: every item of dcpp's checkpoint is stream.zstd/1 ({descriptors})")
    loaded = _load_state_dict_from_keys(checkpoint_id=ours)
    with open(os.path.join(fixtures, name + ".manifest.json")) as f:
        p = manifest_problem(json.load(f)["state_dict"], loaded, "")
    report(p is None, f"{name}: _load_state_dict_from_keys(dcpp zstd) matches the manifest: "
           f"{p or 'equal'}")
    try:
        expected = _load_state_dict_from_keys(checkpoint_id=os.path.join(fixtures, name))
    except (Exception, CheckpointException) as error:  # its own SAFETENSORS format: it cannot
        print(f"note {name}: PyTorch cannot read the fixture itself "
              f"({str(error).strip().splitlines()[-1][:60]}...); checked against its manifest")
        continue
    d = same(expected, loaded)
    report(d is None, f"{name}: _load_state_dict_from_keys(dcpp zstd) == the fixture: "
           f"{d or 'equal'}")
    in_place = zeros_like_tree(expected)
    dcp.load(in_place, checkpoint_id=ours)
    d = same(expected, in_place)
    report(d is None, f"{name}: dcp.load in place (dcpp zstd) == the fixture: {d or 'equal'}")

print(f"check_zstd: {failures} failure(s)")
sys.exit(1 if failures else 0)
