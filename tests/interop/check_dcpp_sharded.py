"""Loads, on 2 ranks with DTensor targets, a checkpoint dcpp saved from 3 ranks with uneven row
shards and a replicated tensor (tests/reshard/worker/reshard_worker.cpp, layout "uneven").

usage (repository root, reference environment):
    build/tools/dcpp-launch -n 3 -- build/tests/dcpp_reshard_worker save build/interop/sharded uneven
    ../shared/tools/pytorch-ref/run.sh -n 2 tests/interop/check_dcpp_sharded.py build/interop/sharded
"""
import os, sys, warnings
warnings.filterwarnings("ignore")
import torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard, Replicate

path = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["DCPP_REF_INIT"], rank=rank, world_size=world)
mesh = init_device_mesh("cpu", (world,))

expected = {
    "w": torch.arange(13 * 7, dtype=torch.float32).reshape(13, 7).div(7),
    "e": torch.arange(9 * 10, dtype=torch.float64).reshape(9, 10).sin(),
    "i": torch.arange(11, dtype=torch.int64).mul(3),
    "b": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
}
target = {"model": {k: distribute_tensor(torch.zeros_like(v), mesh, [Shard(0)]) for k, v in expected.items()},
          "replicated": distribute_tensor(torch.zeros(5), mesh, [Replicate()]), "step": 0}
dcp.load(target, checkpoint_id=path)

failures = 0
for key, want in expected.items():
    got = target["model"][key].full_tensor()
    same = torch.equal(got, want) if key != "e" else torch.allclose(got, want, rtol=0, atol=1e-12)
    failures += not same
    if rank == 0:
        print(("ok   " if same else "FAIL ") + "model." + key)
rep_ok = torch.equal(target["replicated"].full_tensor(), torch.linspace(0, 1, 5)) and target["step"] == 11
failures += not rep_ok
if rank == 0:
    print(("ok   " if rep_ok else "FAIL ") + "replicated, step")
    print(f"torch {torch.__version__}, {world} ranks: " + ("all values equal" if failures == 0 else f"{failures} FAILURES"))
dist.barrier(); dist.destroy_process_group()
sys.exit(1 if failures else 0)
