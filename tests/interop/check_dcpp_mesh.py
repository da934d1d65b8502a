"""Loads, on a 2 x 2 DeviceMesh ("dp", "tp") with DTensor targets, the model that dcpp trained and
saved as Megatron-style tensor parallel x data parallel (tests/parallel/worker, layout tp2dp2):
its column-parallel layer as Shard(0) on "tp", its row-parallel weight as Shard(1), the rest
replicated; every rank's local piece is compared with the whole tensors dcpp wrote beside it.

usage (repository root, reference environment):
    build/tools/dcpp-launch --fork -n 4 -- build/tests/dcpp_train_worker mlp-f64 tp2dp2 save 3 \\
        build/interop/mesh/ckpt build/interop/mesh/result
    ../shared/tools/pytorch-ref/run.sh -n 4 tests/interop/check_dcpp_mesh.py \\
        build/interop/mesh/ckpt/mlp-f64 build/interop/mesh/result/mlp-f64
"""
import os, sys, warnings
warnings.filterwarnings("ignore")
import torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, Replicate
from rank_exit import leave, watch_for_hang
watch_for_hang()

checkpoint, result = sys.argv[1:3]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["DCPP_REF_INIT"], rank=rank, world_size=world)
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
tp = mesh.get_local_rank("tp")
# dcpp's DeviceMesh puts rank r at the row-major coordinates of r, as init_device_mesh does.
assert (mesh.get_local_rank("dp"), tp) == (rank // 2, rank % 2), "mesh order"

shapes = {"0.weight": (16, 6), "0.bias": (16,), "2.weight": (16, 16), "2.bias": (16,),
          "4.weight": (2, 16), "4.bias": (2,)}
split = {"0.weight": 0, "0.bias": 0, "2.weight": 1}  # dimension split over "tp"; others whole

def target(key):
    shape = shapes[key]
    if key not in split:
        return DTensor.from_local(torch.zeros(shape, dtype=torch.float64), mesh,
                                  [Replicate(), Replicate()], run_check=False)
    local = torch.zeros(shape, dtype=torch.float64).chunk(2, dim=split[key])[tp].clone()
    return DTensor.from_local(local, mesh, [Replicate(), Shard(split[key])], run_check=False,
                              shape=torch.Size(shape), stride=torch.zeros(shape).stride())

state = {"model": {k: target(k) for k in shapes}}
dcp.load(state, checkpoint_id=checkpoint)
whole = {"params": {k: torch.zeros(s, dtype=torch.float64) for k, s in shapes.items()}}
dcp.load(whole, checkpoint_id=result)

failures = 0
for key in shapes:
    got = state["model"][key].to_local()
    want = whole["params"][key]
    if key in split:
        want = want.chunk(2, dim=split[key])[tp]
    same = torch.equal(got, want) and whole["params"][key].abs().sum() > 0
    failures += not same
    print(("ok   " if same else "FAIL ") + f"model.{key} (rank {rank}, tp {tp})")
print(f"torch {torch.__version__}, rank {rank} of {world}: " +
      ("all values equal" if failures == 0 else f"{failures} FAILURES"), flush=True)
leave(failures)
