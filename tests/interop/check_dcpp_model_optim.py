"""Python resumes a libtorch model and Adam saved by dcpp, with DCP's set_state_dict.

The checkpoint (written by `dcpp_state_dict_tests "[.interop]"`) holds {"model", "optim", "x",
"y"} for nn.Sequential(Linear(4, 8), ReLU(), Linear(8, 2)) and Adam(lr=1e-2, betas=(0.9, 0.99),
weight_decay=0.01) after 3 libtorch steps, and expected.json the losses of the next two libtorch
steps. Python builds the model with another initialisation and Adam with other options, loads
with dcp.load into get_state_dict's target, applies set_state_dict, trains two steps and compares.

  run.sh tests/interop/check_dcpp_model_optim.py build-sd/state-dict-interop
"""
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

root = sys.argv[1]
with open(os.path.join(root, "expected.json")) as f:
    expected = json.load(f)["next_losses"]

torch.manual_seed(999)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.5)
msd, osd = get_state_dict(model, opt)
sd = {"model": msd, "optim": osd, "x": torch.zeros(16, 4), "y": torch.zeros(16, 2)}
dcp.load(sd, checkpoint_id=os.path.join(root, "checkpoint"))
set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])

group = opt.param_groups[0]
ok = group["lr"] == 1e-2 and tuple(group["betas"]) == (0.9, 0.99) and group["weight_decay"] == 0.01
print(f"options  lr={group['lr']} betas={group['betas']} weight_decay={group['weight_decay']}: "
      + ("ok" if ok else "WRONG"))
step = opt.state[model[0].weight]["step"]
print(f"step     {step!r}: " + ("ok" if float(step) == 3.0 else "WRONG"))
ok = ok and float(step) == 3.0
x, y = sd["x"], sd["y"]
for i in range(2):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    diff = abs(float(loss) - expected[i])
    good = diff < 1e-5
    ok = ok and good
    print(f"loss {i}   python {float(loss):.9f}  libtorch {expected[i]:.9f}  |diff| {diff:.2e}: "
          + ("ok" if good else "WRONG"))
    loss.backward()
    opt.step()
print(f"torch {torch.__version__}: " + ("libtorch's model and Adam resume in Python with the same losses" if ok else "FAILED"))
sys.exit(0 if ok else 1)
