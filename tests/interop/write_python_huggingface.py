"""PyTorch writes Hugging Face directories with HuggingFaceStorageWriter, holding the tensors of
tests/reshard/worker's hf-* modes (so dcpp's `reshard_worker hf-load` checks every element):

    OUT/single     one file (no mapping), one process
    OUT/mapped     fqn_to_index_mapping over 2 files, one process
    OUT/dist       save_distributed=True, enable_consolidation=True, run on 2 ranks (-n 2) with
                   DTensors sharded by rows and by columns: consolidated files in OUT/dist, each
                   rank's shard files in OUT/dist/sharded. Floating tensors only: PyTorch 2.14's
                   consolidation fails on integer ones (torch.finfo of int64 in
                   _consolidate_hf_safetensors._parse_input_metadata), so "model.i" is left out

usage (repository root, reference environment):
    write_python_huggingface.py OUT single|mapped
    run -n 2 -- write_python_huggingface.py OUT dist
"""
import os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import HuggingFaceStorageWriter

out, kind = sys.argv[1], sys.argv[2]
tensors = {
    "w": torch.arange(13 * 7, dtype=torch.float32).reshape(13, 7).div(7),
    "e": torch.arange(9 * 10, dtype=torch.float64).reshape(9, 10).div(3),
    "i": torch.arange(11, dtype=torch.int64).mul(3),
    "b": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
}
replicated = torch.linspace(0, 1, 5)

if kind in ("single", "mapped"):
    state = {"model": dict(tensors), "replicated": replicated}
    mapping = None
    if kind == "mapped":
        mapping = {"model.w": 1, "model.i": 1, "model.e": 2, "model.b": 2, "replicated": 2}
    dcp.save(state, storage_writer=HuggingFaceStorageWriter(os.path.join(out, kind),
                                                            fqn_to_index_mapping=mapping))
    print(f"torch {torch.__version__}: wrote {kind} in {sorted(os.listdir(os.path.join(out, kind)))}")
else:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, Replicate
    from rank_exit import leave, watch_for_hang
    watch_for_hang()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=os.environ["DCPP_REF_INIT"], rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    dims = {"w": 0, "e": 1, "b": 1}
    tensors.pop("i")
    # Each rank's torch.chunk piece, as Shard(d) places it (Gloo cannot scatter bfloat16, so no
    # distribute_tensor).
    def sharded(v, d):
        local = torch.chunk(v, world, dim=d)[rank].contiguous()
        return DTensor.from_local(local, mesh, [Shard(d)], run_check=False, shape=v.shape, stride=v.stride())
    state = {"model": {k: sharded(v, dims[k]) for k, v in tensors.items()},
             "replicated": DTensor.from_local(replicated, mesh, [Replicate()], run_check=False)}
    dcp.save(state, storage_writer=HuggingFaceStorageWriter(
        os.path.join(out, "dist"), save_distributed=True, enable_consolidation=True))
    # dcp.save ends in a collective after rank 0 consolidated: the files are there. No closing
    # collective and no teardown (rank_exit.py says why).
    if rank == 0:
        print(f"torch {torch.__version__}, {world} ranks: wrote dist: {sorted(os.listdir(os.path.join(out, 'dist')))}, "
              f"sharded: {sorted(os.listdir(os.path.join(out, 'dist', 'sharded')))}")
    leave(0)
