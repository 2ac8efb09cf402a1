"""A tiny real PyTorch training loop instrumented with one line. Run by test_e2e.py with
/usr/bin/python3 (Debian's python3-torch) under LD_PRELOAD."""
import argparse

import torch

import traintime
import traintime.torch


def main(steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)  # wraps optimizer.step afterwards
    traintime.torch.instrument(model, opt)
    for _ in range(steps):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    print("ok", traintime.enabled())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="?", default=4)
    main(ap.parse_args().steps)
