"""Writes the model_optim_adam_resume fixture: the training run of ../shared/tools/pytorch-ref/
make_fixtures.py's model_optim_adam, saved so the next-loss computation cannot touch it.

make_fixtures.py computes next_losses with an optimizer whose state tensors are shared with the
saved state dict (Optimizer.load_state_dict keeps tensors that need no conversion), so
model_optim_adam holds Adam's state after 5 steps next to the model after 3. Here the state dict is
deep-copied before the next losses are computed. The run is the same (same seed, same steps): the
script checks that its model, data and next_losses equal model_optim_adam's.

  run.sh tests/interop/make_model_optim_adam_resume.py tests/fixtures/pytorch-2.6
"""
import copy, json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict

out = sys.argv[1]
torch.manual_seed(1234)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.01)
x = torch.randn(16, 4); y = torch.randn(16, 2)
for _ in range(3):
    opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(x), y); loss.backward(); opt.step()
msd, osd = get_state_dict(model, opt)
sd = copy.deepcopy({"model": msd, "optim": osd, "x": x, "y": y})

m2 = copy.deepcopy(model)
o2 = torch.optim.Adam(m2.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.01)
o2.load_state_dict(copy.deepcopy(opt.state_dict()))
losses = []
for _ in range(2):
    o2.zero_grad(); l = torch.nn.functional.mse_loss(m2(x), y); losses.append(float(l)); l.backward(); o2.step()

# The same run as model_optim_adam: equal model, data and next losses.
original = os.path.join(out, "model_optim_adam")
check = {"model": {k: torch.zeros_like(v) for k, v in msd.items()}, "x": torch.zeros_like(x), "y": torch.zeros_like(y)}
dcp.load(check, checkpoint_id=original)
for k, v in check["model"].items():
    assert torch.equal(v, sd["model"][k]), k
assert torch.equal(check["x"], x) and torch.equal(check["y"], y)
with open(original + ".manifest.json") as f:
    assert json.load(f)["next_losses"] == losses, "next_losses differ from model_optim_adam's"

path = os.path.join(out, "model_optim_adam_resume")
dcp.save(sd, checkpoint_id=path)
manifest = {"written_by": f"torch {torch.__version__} torch.distributed.checkpoint.save",
            "world_size": 1, "made_by": "tests/interop/make_model_optim_adam_resume.py",
            "step": float(sd["optim"]["state"]["0.weight"]["step"]), "next_losses": losses}
with open(path + ".manifest.json", "w") as f:
    json.dump(manifest, f, indent=1)
print("wrote", path, "step", manifest["step"], "next_losses", losses)
