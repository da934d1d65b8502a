"""Checks a Hugging Face directory that dcpp wrote, with the safetensors library (load_file,
safe_open slices) and with PyTorch's own reader (dcp.load with HuggingFaceStorageReader), values
exactly.

usage (repository root, reference environment):
    check_dcpp_huggingface.py DIR worker      the tensors of tests/reshard/worker (hf-* modes)
    check_dcpp_huggingface.py DIR dcp SRC     every tensor of the DCP checkpoint SRC
"""
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import HuggingFaceStorageReader
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys
from safetensors import safe_open
from safetensors.torch import load_file

path, kind = sys.argv[1], sys.argv[2]
if kind == "worker":
    expected = {
        "model.w": torch.arange(13 * 7, dtype=torch.float32).reshape(13, 7).div(7),
        "model.e": torch.arange(9 * 10, dtype=torch.float64).reshape(9, 10).div(3),
        "model.i": torch.arange(11, dtype=torch.int64).mul(3),
        "model.b": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
        "replicated": torch.linspace(0, 1, 5),
    }
else:
    flat, _ = flatten_state_dict(_load_state_dict_from_keys(checkpoint_id=sys.argv[3]))
    expected = {k: v for k, v in flat.items() if isinstance(v, torch.Tensor)}

failures = 0
def check(what, ok):
    global failures
    failures += not ok
    print(("ok   " if ok else "FAIL ") + what)

index = json.load(open(os.path.join(path, "model.safetensors.index.json")))
check("index lists every tensor", sorted(index["weight_map"]) == sorted(expected))
files = sorted(set(index["weight_map"].values()))
check(f"index total_size {index['metadata']['total_size']}",
      index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in expected.values()))

# safetensors' own loader, file by file.
loaded = {}
for name in files:
    part = load_file(os.path.join(path, name))
    for key in part:
        check(f"{key} in {name}, as the index says", index["weight_map"][key] == name)
    loaded.update(part)
for key, want in expected.items():
    got = loaded.get(key)
    check(f"load_file {key} {tuple(want.shape)} {want.dtype}",
          got is not None and got.dtype == want.dtype and torch.equal(got, want))

# safe_open: metadata and a slice of every 2-D tensor (the second half of its columns).
for name in files:
    with safe_open(os.path.join(path, name), framework="pt") as f:
        check(f"{name} __metadata__ format pt", f.metadata().get("format") == "pt")
        for key in f.keys():
            want = expected[key]
            if want.dim() == 2:
                half = want.shape[1] // 2
                check(f"safe_open slice {key}[:, {half}:]", torch.equal(f.get_slice(key)[:, half:], want[:, half:]))

# PyTorch's HuggingFaceStorageReader through dcp.load, into zeros.
target = {key: torch.zeros_like(want) for key, want in expected.items()}
dcp.load(target, storage_reader=HuggingFaceStorageReader(path))
for key, want in expected.items():
    check(f"dcp.load(HuggingFaceStorageReader) {key}", torch.equal(target[key], want))

print(f"torch {torch.__version__}: {len(expected)} tensors in {len(files)} files: " +
      ("all values equal" if failures == 0 else f"{failures} FAILURES"))
sys.exit(1 if failures else 0)
