"""Every libtorch optimizer dcpp knows, both ways between libtorch and this Python's PyTorch.

  optimizers.py check DIR   libtorch -> Python. DIR/<case>/ holds what
                            `dcpp_state_dict_tests "[.optimizer_interop_write]"` wrote: checkpoint/
                            ({"model", "optim", "x", "y"} from dcpp's get_state_dict after 3 libtorch
                            steps) and expected.json (the next 2 libtorch losses, and the param group
                            dcpp wrote). Python builds the model with another initialisation and the
                            optimizer with another lr, loads with dcp.load into get_state_dict's
                            target (strict: a key of this PyTorch's optimizer that the checkpoint
                            lacks fails), set_state_dict, checks every option and trains 2 steps.
                            Then it resumes once more from the whole checkpoint loaded without a
                            target (_load_state_dict_from_keys), so set_state_dict and the
                            optimizer's load_state_dict also see the keys this PyTorch does not have
                            (a newer PyTorch's), and must accept them and train the same.
  optimizers.py write DIR   Python -> libtorch. Trains the same model with each optimizer for 3 steps,
                            saves with dcp.save(get_state_dict(...)) into DIR/<case>/checkpoint and
                            the next 2 losses and the param group into DIR/<case>/expected.json, for
                            `dcpp_state_dict_tests "[.optimizer_interop_read]"`. With a PyTorch whose
                            Adam has decoupled_weight_decay (2.14, not 2.6), also Adam with it True, which
                            libtorch resumes as AdamW.

The model is nn.Sequential(Linear(4, 8), ReLU(), Linear(8, 2)), MSE loss on 16 samples; every step
goes through a closure (LBFGS needs one; the others call it once and return its loss). Exit 0 when
every loss matches within 1e-5 and every option is equal.
"""
import inspect, json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

O = torch.optim
HAS_DECOUPLED = "decoupled_weight_decay" in inspect.signature(O.Adam.__init__).parameters

# name -> (make(params, lr), lr of the saved run, libtorch's optimizer). The options are those of
# tests/state_dict/optimizer_interop_test.cpp's cases.
CASES = {
    "sgd": (lambda p, lr: O.SGD(p, lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-3), 0.05, "SGD"),
    "adam": (lambda p, lr: O.Adam(p, lr=lr, betas=(0.9, 0.99), weight_decay=0.01, amsgrad=True), 0.01, "Adam"),
    "adamw": (lambda p, lr: O.AdamW(p, lr=lr, betas=(0.85, 0.995), weight_decay=0.05), 0.01, "AdamW"),
    "adagrad": (lambda p, lr: O.Adagrad(p, lr=lr, lr_decay=0.01, weight_decay=0.01,
                                        initial_accumulator_value=0.1), 0.05, "Adagrad"),
    "rmsprop": (lambda p, lr: O.RMSprop(p, lr=lr, alpha=0.9, momentum=0.5, centered=True,
                                        weight_decay=0.01), 0.01, "RMSprop"),
    "lbfgs": (lambda p, lr: O.LBFGS(p, lr=lr, max_iter=4, history_size=3), 0.1, "LBFGS"),
}
if HAS_DECOUPLED:
    CASES["adam_decoupled"] = (lambda p, lr: O.Adam(p, lr=lr, betas=(0.9, 0.99), weight_decay=0.05,
                                                    decoupled_weight_decay=True), 0.01, "AdamW")
OTHER_LR = 0.5
failures = 0


def report(good, text):
    global failures
    failures += 0 if good else 1
    print(text + (": ok" if good else ": WRONG"))


def model_of(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def data():
    torch.manual_seed(7)
    return torch.randn(16, 4), torch.randn(16, 2)


def step(model, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss
    return float(opt.step(closure))


def fresh(name):
    """The receiving side: another initialisation, another lr. LBFGS first trains 3 steps on other
    data, as a resumed LBFGS has state (DCP's lazy init cannot step it: it needs a closure) and its
    history lists then have the checkpoint's lengths (history_size 3, full)."""
    make, _, _ = CASES[name]
    model = model_of(999)
    opt = make(model.parameters(), OTHER_LR)
    if isinstance(opt, O.LBFGS):
        torch.manual_seed(3)
        x, y = torch.randn(16, 4), torch.randn(16, 2)
        for _ in range(3):
            step(model, opt, x, y)
    return model, opt


def lbfgs_workaround(model, opt, osd):
    """Python's set_state_dict cannot load an LBFGS state dict, its own included: LBFGS keeps state
    for its first parameter only, and set_state_dict wants state for every parameter that requires
    grad (2.6: KeyError 'bias'; 2.14: "Missing optimizer state for parameter 'bias'"). An empty
    state for the others, as the optimizer itself has, lets it load."""
    if isinstance(opt, O.LBFGS):
        for fqn, _ in model.named_parameters():
            osd["state"].setdefault(fqn, {})


def same(a, b):
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def check_resume(name, label, model, opt, x, y, expected):
    group = opt.param_groups[0]
    wrong = [k for k in group if k != "params" and not same(group[k], expected["options"].get(k, "absent"))]
    report(not wrong, f"{name:15} {label:9} options {sorted(k for k in group if k != 'params')}"
           + (f" differ at {wrong}" if wrong else ""))
    for i, want in enumerate(expected["next_losses"]):
        loss = step(model, opt, x, y)
        diff = abs(loss - want)
        report(diff < 1e-5, f"{name:15} {label:9} loss {i} python {loss:.9f} libtorch {want:.9f} |diff| {diff:.2e}")


def check(root):
    for name in CASES:
        case_dir = os.path.join(root, name)
        if not os.path.isdir(case_dir):
            continue  # adam_decoupled: written by Python only
        with open(os.path.join(case_dir, "expected.json")) as f:
            expected = json.load(f)
        checkpoint = os.path.join(case_dir, "checkpoint")
        # 1. Strict: dcp.load into get_state_dict's target, then set_state_dict.
        model, opt = fresh(name)
        msd, osd = get_state_dict(model, opt)
        sd = {"model": msd, "optim": osd, "x": torch.zeros(16, 4), "y": torch.zeros(16, 2)}
        dcp.load(sd, checkpoint_id=checkpoint)
        lbfgs_workaround(model, opt, sd["optim"])
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        check_resume(name, "strict", model, opt, sd["x"], sd["y"], expected)
        # 2. Everything the checkpoint holds, newer keys included, through set_state_dict.
        model, opt = fresh(name)
        full = _load_state_dict_from_keys(keys={"model", "optim", "x", "y"}, checkpoint_id=checkpoint)
        saved_keys = [k for k in full["optim"]["param_groups"][0] if k != "params"]
        lbfgs_workaround(model, opt, full["optim"])
        set_state_dict(model, opt, model_state_dict=full["model"], optim_state_dict=full["optim"])
        kept = [k for k in saved_keys if k not in opt.defaults]
        report(all(k in opt.param_groups[0] for k in saved_keys),
               f"{name:15} all keys  set_state_dict took {len(saved_keys)} saved options"
               + (f", {kept} beyond this PyTorch's" if kept else ""))
        check_resume(name, "all keys", model, opt, full["x"], full["y"], expected)


def write(root):
    x, y = data()
    for name, (make, lr, libtorch) in CASES.items():
        model = model_of(0)
        opt = make(model.parameters(), lr)
        for _ in range(3):
            step(model, opt, x, y)
        msd, osd = get_state_dict(model, opt)
        case_dir = os.path.join(root, name)
        os.makedirs(case_dir, exist_ok=True)
        dcp.save({"model": msd, "optim": osd, "x": x, "y": y},
                 checkpoint_id=os.path.join(case_dir, "checkpoint"))
        group = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
        losses = [step(model, opt, x, y) for _ in range(2)]
        with open(os.path.join(case_dir, "expected.json"), "w") as f:
            json.dump({"libtorch": libtorch, "torch": torch.__version__, "next_losses": losses,
                       "options": group}, f, indent=1)
        print(f"{name:15} wrote {list(group)} next losses {losses}")


mode, root = sys.argv[1], sys.argv[2]
if mode == "check":
    check(root)
    print(f"torch {torch.__version__}: " + ("libtorch's optimizers resume in Python with the same losses"
                                           if failures == 0 else f"{failures} FAILED"))
elif mode == "write":
    write(root)
else:
    sys.exit(f"usage: {sys.argv[0]} check|write DIR")
sys.exit(0 if failures == 0 else 1)
