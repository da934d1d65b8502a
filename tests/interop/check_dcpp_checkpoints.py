"""Loads what dcpp wrote with Python's torch.distributed.checkpoint and checks every value.

usage (from the repository root, with the reference environment of ../shared/tools/pytorch-ref):
    build/tests/dcpp_interop_writer build/interop
    ../shared/tools/pytorch-ref/run.sh tests/interop/check_dcpp_checkpoints.py build/interop
Exit status 0 when every value equals what tests/interop/write_checkpoints.cpp wrote.
"""
import sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

root = sys.argv[1]
failures = 0

def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += 0 if cond else 1

def pattern(dtype):
    base = torch.arange(35, dtype=torch.float64).reshape(7, 5)
    if dtype == torch.bool:
        return base.remainder(2) == 0
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    return base.to(dtype)

dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex32,
          torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.bool]
inner = {"w": torch.ones(2, 2) * 3, "tag": "deep"}
expected = {
    "tensors": {str(d).replace("torch.", ""): pattern(d) for d in dtypes},
    "shapes": {"noncontig": torch.arange(12.0).reshape(3, 4).t(), "empty": torch.zeros(0, 3),
               "scalar": torch.tensor(3.5),
               "column_view": torch.arange(20.0).reshape(4, 5)[:, 1:3]},
    "nested": {"deep": inner},
    "list_of_tensors": [torch.zeros(2), torch.ones(3)],
    "groups": [inner],
    "step": 7, "lr": 0.1, "name": "abc", "flag": True, "nothing": None, "betas": (0.9, 0.999),
    "history": [1, 2, 3], "layer.0.weight": torch.full((2,), 5.0),
}

def same(a, b):
    if isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a.view(torch.uint8) if a.numel() and a.dtype == torch.complex32 else a,
                                b.view(torch.uint8) if b.numel() and b.dtype == torch.complex32 else b))
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b

def compare(loaded, want, prefix=""):
    for key, value in want.items():
        name = prefix + key
        if isinstance(value, dict):
            compare(loaded.get(key, {}), value, name + ".")
        else:
            check(same(loaded.get(key), value), name)

path = root + "/all_types"
# 1. Without a target, as dcp's _load_state_dict_from_keys does. (PyTorch 2.6 loads nothing when
#    no keys are given, contrary to its docstring: name them all.)
compare(_load_state_dict_from_keys(keys=set(expected), checkpoint_id=path), expected, "from_keys: ")

# 2. In place into preallocated tensors, as dcp.load does.
def zeros_like(value):
    if isinstance(value, torch.Tensor):
        return torch.zeros_like(value)
    if isinstance(value, dict):
        return {k: zeros_like(v) for k, v in value.items()}
    if isinstance(value, list):
        return [zeros_like(v) for v in value]
    return None
target = zeros_like(expected)
dcp.load(target, checkpoint_id=path)
compare(target, expected, "dcp.load: ")

print(f"torch {torch.__version__}: {'all values equal' if failures == 0 else str(failures) + ' FAILURES'}")
sys.exit(1 if failures else 0)
