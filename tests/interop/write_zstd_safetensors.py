"""Writes, with PyTorch 2.14's own DCP, the item formats dcpp must read (tests/interop/zstd.sh):

    OUT/zstd           FileSystemWriter(_extensions=[ZStandard()]): every item a zstd frame
    OUT/safetensors    FileSystemWriter(serialization_format=SerializationFormat.SAFETENSORS):
                       bytes items raw, then one safetensors blob per data file
    OUT/reference.pt   torch.save of the same state dict, what dcpp compares both against

usage: reference_root.sh run sid -- python3 tests/interop/write_zstd_safetensors.py OUT
Both checkpoints are written with thread_count=2 (two data files, so two blobs). Also prints what
PyTorch's own dcp.load makes of the SAFETENSORS checkpoint (2.14 cannot read it back).
"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._extension import ZStandard
from torch.distributed.checkpoint.filesystem import FileSystemWriter, SerializationFormat

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(14)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


state = {
    "model": {
        "embed.weight": randn(64, 32),
        "layers.0.attn.weight": randn(32, 32, dtype=torch.bfloat16),
        "layers.0.norm.weight": torch.ones(32, dtype=torch.float16),
        "head.bias": torch.zeros(64, dtype=torch.float64),
    },
    "ids": torch.arange(100, dtype=torch.int64),
    "mask": torch.arange(30) % 3 == 0,
    "bytes": torch.arange(256, dtype=torch.uint8),
    "small": torch.tensor([-3, 4, 5], dtype=torch.int8),
    "scalar": torch.tensor(2.5),
    "step": 1234,
    "name": "interop",
    "lr": 0.25,
}

dcp.save(state, storage_writer=FileSystemWriter(os.path.join(out, "zstd"), thread_count=2,
                                                _extensions=[ZStandard()]))
dcp.save(state, storage_writer=FileSystemWriter(os.path.join(out, "safetensors"), thread_count=2,
                                                serialization_format=SerializationFormat.SAFETENSORS))
torch.save(state, os.path.join(out, "reference.pt"))

md = dcp.FileSystemReader(os.path.join(out, "zstd")).read_metadata()
assert all(i.transform_descriptors == ["stream.zstd/1"] for i in md.storage_data.values())
print(f"wrote {out}/zstd ({len(md.storage_data)} zstd items), {out}/safetensors, reference.pt")
try:
    probe = {"ids": torch.zeros(100, dtype=torch.int64)}
    dcp.load(probe, checkpoint_id=os.path.join(out, "safetensors"))
    print("PyTorch's dcp.load reads the SAFETENSORS checkpoint")
except BaseException as error:  # noqa: BLE001 - recorded (CheckpointException), not a failure
    import re
    cause = re.search(r"Unsupported operand \d+", repr(getattr(error, "failures", error)))
    print(f"PyTorch's dcp.load cannot read the SAFETENSORS checkpoint: {type(error).__name__}"
          f" ({cause.group(0) if cause else str(error).splitlines()[0][:120]})")
