"""Checkpoints saved without collectives (per-rank `__<rank>.metadata`), with PyTorch 2.14, on 3 ranks.

usage (repository root, reference environment, 3 ranks: tests/interop/per_rank.sh):
    check_per_rank.py load PER_RANK COLLECTIVE
        PER_RANK: dcpp saved it without collectives from 3 ranks (dcpp_reshard_worker save-local,
        layout "chunk": the rows DTensor's Shard(0) gives each rank); COLLECTIVE: the same state
        saved with collectives. dcp.load reads PER_RANK on 3 ranks (each rank only its own
        __<rank>.metadata) into DTensor targets and checks every value exactly: against the
        worker's formulas, and against the collective checkpoint loaded by dcp.load.
    check_per_rank.py save OUT
        Saves OUT/ckpt with dcp.save(use_collectives=False) on 3 ranks: DTensor row shards (one
        rank of "b" empty), a tensor per rank (own_<rank>), a replicated tensor and a value on
        every rank; rank 0 also torch.save's the full values to OUT/ref.pt for dcpp to compare.
"""
import logging, os, sys, warnings
warnings.filterwarnings("ignore")
# dcp.load logs its failed read of `.metadata` (with a traceback) before it falls back to
# `__<rank>.metadata`, as it must for these checkpoints: not a problem, so not shown (it logs on
# the root logger).
logging.getLogger().setLevel(logging.ERROR)
import torch, torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard
from rank_exit import leave, watch_for_hang
watch_for_hang()

mode = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["DCPP_REF_INIT"], rank=rank, world_size=world)
mesh = init_device_mesh("cpu", (world,))
failures = 0


def report(ok, what):
    global failures
    failures += not ok
    print(f"[rank {rank}] " + ("ok   " if ok else "FAIL ") + what, flush=True)


if mode == "load":
    per_rank, collective = sys.argv[2], sys.argv[3]
    assert not os.path.exists(os.path.join(per_rank, ".metadata"))
    assert os.path.exists(os.path.join(per_rank, f"__{rank}.metadata"))
    exact = {  # the worker's formulas that IEEE arithmetic makes the same everywhere
        "w": torch.arange(13 * 7, dtype=torch.float32).reshape(13, 7).div(7),
        "i": torch.arange(11, dtype=torch.int64).mul(3),
    }
    shapes = {"w": ((13, 7), torch.float32), "e": ((9, 10), torch.float64), "i": ((11,), torch.int64)}

    def target():
        # "b" (2 rows on 3 ranks) is left out: rank 2 holds none of it, and dcpp writes no empty
        # shard, so rank 2's own metadata has no "model.b" for dcp.load to find.
        return {"model": {k: distribute_tensor(torch.zeros(s, dtype=d), mesh, [Shard(0)])
                          for k, (s, d) in shapes.items()},
                "replicated": torch.zeros(5), "step": 0}

    loaded, reference = target(), target()
    dcp.load(loaded, checkpoint_id=per_rank)
    dcp.load(reference, checkpoint_id=collective)
    for key in shapes:
        got = loaded["model"][key]
        same_local = torch.equal(got.to_local(), reference["model"][key].to_local())
        report(same_local, f"model.{key}: local shard of {tuple(got.to_local().shape)} equals the "
                           "collective checkpoint's")
        if key in exact:
            report(torch.equal(got.full_tensor(), exact[key]), f"model.{key} equals the formula")
    report(torch.equal(loaded["replicated"], torch.linspace(0, 1, 5)), "replicated")
    report(loaded["step"] == 11, "step")
elif mode == "save":
    out = sys.argv[2]
    full = {
        "w": torch.arange(13 * 7, dtype=torch.float32).reshape(13, 7).div(7),
        "e": torch.arange(9 * 10, dtype=torch.float64).reshape(9, 10).mul(0.25),
        "i": torch.arange(11, dtype=torch.int64).mul(3),
        "b": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
    }
    # src_data_rank=None: every rank cuts its own shard (Gloo cannot scatter bfloat16).
    state = {k: distribute_tensor(v, mesh, [Shard(0)], src_data_rank=None) for k, v in full.items()}
    state[f"own_{rank}"] = torch.arange(4, dtype=torch.float32) + 10 * rank
    state["replicated"] = torch.linspace(0, 1, 5)
    state["step"] = 11
    dcp.save(state, checkpoint_id=os.path.join(out, "ckpt"), use_collectives=False)
    dist.barrier()  # a save without collectives returns before the other ranks' files are there
    if rank == 0:
        ref = dict(full)
        for r in range(world):
            ref[f"own_{r}"] = torch.arange(4, dtype=torch.float32) + 10 * r
        ref["replicated"] = torch.linspace(0, 1, 5)
        ref["step"] = 11
        torch.save(ref, os.path.join(out, "ref.pt"))
        names = sorted(os.listdir(os.path.join(out, "ckpt")))
        report(".metadata" not in names and "__2.metadata" in names, "per-rank files: " + " ".join(names))
else:
    raise SystemExit(f"unknown mode {mode}")

# No closing collective and no teardown: each rank reports and exits with its own status (the
# launcher fails if any rank does; rank_exit.py says why).
print(f"torch {torch.__version__}, rank {rank} of {world}, {mode}: " +
      ("all checks passed" if failures == 0 else f"{failures} FAILURES"), flush=True)
leave(failures)
