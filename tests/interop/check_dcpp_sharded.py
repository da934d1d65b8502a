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
from torch.distributed.tensor import DTensor, Shard, Replicate
from rank_exit import leave, watch_for_hang
watch_for_hang()

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
# Targets made from local shards (torch.chunk's split, as Shard(0) uses), not distribute_tensor:
# PyTorch 2.14's Gloo scatters and gathers no bfloat16 ("Invalid scalar type"), so nothing here
# communicates tensors but dcp.load itself; each rank checks its own shard.
def sharded_zeros(like):
    local = torch.zeros_like(like).chunk(world, dim=0)[rank].clone()
    return DTensor.from_local(local, mesh, [Shard(0)], run_check=False, shape=like.shape,
                              stride=like.stride())
target = {"model": {k: sharded_zeros(v) for k, v in expected.items()},
          "replicated": DTensor.from_local(torch.zeros(5), mesh, [Replicate()], run_check=False),
          "step": 0}
dcp.load(target, checkpoint_id=path)

failures = 0
for key, want in expected.items():
    got = target["model"][key].to_local()
    want = want.chunk(world, dim=0)[rank]
    same = torch.equal(got, want) if key != "e" else torch.allclose(got, want, rtol=0, atol=1e-12)
    failures += not same
    print(("ok   " if same else "FAIL ") + f"model.{key} (rank {rank}'s rows)")
rep_ok = torch.equal(target["replicated"].to_local(), torch.linspace(0, 1, 5)) and target["step"] == 11
failures += not rep_ok
print(("ok   " if rep_ok else "FAIL ") + f"replicated, step (rank {rank})")
# No closing collective and no teardown: each rank reports its own values and exits with its own
# status (the launcher fails if any rank does; rank_exit.py says why).
print(f"torch {torch.__version__}, rank {rank} of {world}: " +
      ("all values equal" if failures == 0 else f"{failures} FAILURES"), flush=True)
leave(failures)
