#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Training on the mlap2p backend beside Gloo.

  * DDP, a small MLP and a small CNN, the same seed and data on mlap2p and on
    Gloo for --steps steps: the final parameters agree to fp32 tolerance.
  * DDP with bf16 gradients (bf16_compress_hook; Gloo has no bf16): the
    loss falls to a fraction of its start, as the fp32 run's does.
  * FSDP (_all_gather_base, _reduce_scatter_base; Gloo has neither): torch
    1.13's FSDP when it can run (it refuses a CPU-only torch), and the same
    sharded training by hand: the loss falls and the result equals DDP's.

    /usr/bin/python3 python/tests/torch_train.py --nprocs 2 [--steps 200]
"""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import common  # noqa: E402

STEPS = int(os.environ.get("MLAP2P_TORCH_STEPS", "200"))


def mlp():
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64),
                         nn.Tanh(), nn.Linear(64, 4))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 4))


def batches(kind, rank, steps):
    """A learnable task: targets from a fixed random teacher, data per rank."""
    g = torch.Generator().manual_seed(7)
    shape = (16,) if kind == "mlp" else (1, 8, 8)
    teacher = torch.randn(int(torch.tensor(shape).prod()), 4, generator=g)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(8, *shape, generator=g)
        yield x, torch.tanh(x.reshape(8, -1) @ teacher / teacher.shape[0] ** 0.5)


def train(model, kind, rank, steps, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5)
    losses = []
    t0 = time.perf_counter()
    for x, y in batches(kind, rank, steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, (time.perf_counter() - t0) / steps


def first_last(losses, k=10):
    """Mean loss of the first and last k steps, over every rank."""
    t = torch.tensor([sum(losses[:k]) / k, sum(losses[-k:]) / k],
                     dtype=torch.float64)
    dist.all_reduce(t)
    t /= dist.get_world_size()
    return t[0].item(), t[1].item()


def main(rank, n, args):
    c = common.Checks(rank)
    steps = 40 if args.quick else STEPS
    gloo = dist.new_group(backend="gloo",
                          timeout=datetime.timedelta(seconds=args.timeout))
    fp32, models = {}, {}
    for kind, make in [("mlp", mlp), ("cnn", cnn)]:
        torch.manual_seed(0)
        m1 = make()
        torch.manual_seed(0)
        m2 = make()
        a = DDP(m1)  # the default group: mlap2p
        b = DDP(m2, process_group=gloo)
        la, ta = train(a, kind, rank, steps)
        fp32[kind] = la
        models[kind] = m1
        lb, tb = train(b, kind, rank, steps)
        worst = 0.0
        for (name, p), q in zip(m1.named_parameters(), m2.parameters()):
            worst = max(worst, (p - q).abs().max().item())
            c.ok(torch.allclose(p, q, rtol=1e-5, atol=1e-6),
                 f"{kind} {name}: mlap2p and Gloo differ by "
                 f"{(p - q).abs().max().item()}")
        # and every rank holds the same parameters
        for p in m1.parameters():
            ref = p.detach().clone()
            dist.broadcast(ref, 0)
            c.ok(torch.equal(ref, p.detach()), f"{kind}: ranks differ")
        f0, f1 = first_last(la)
        # The CNN learns the teacher more slowly in 200 steps.
        c.ok(f1 < (0.5 if kind == "mlp" else 0.9) * f0,
             f"{kind}: loss {f0:.4f} -> {f1:.4f} did not fall")
        c.say(f"DDP {kind}, {steps} steps: max |mlap2p - Gloo| = {worst:.2e};"
              f" loss {f0:.4f} -> {f1:.4f}; step {ta * 1e3:.2f} ms (Gloo"
              f" {tb * 1e3:.2f} ms)")

    # bf16 gradients
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    torch.manual_seed(0)
    m = mlp()
    d = DDP(m)
    d.register_comm_hook(None, default_hooks.bf16_compress_hook)
    lbf, _ = train(d, "mlp", rank, steps)
    f0, f1 = first_last(lbf)
    c.ok(f1 < 0.7 * f0, f"bf16 DDP: loss {f0:.4f} -> {f1:.4f} did not fall")
    _, ref1 = first_last(fp32["mlp"])
    c.ok(abs(f1 - ref1) < 0.25 * ref1 + 1e-3,
         f"bf16 DDP final loss {f1:.4f} far from fp32's {ref1:.4f}")
    c.say(f"DDP mlp, bf16 gradients: loss {f0:.4f} -> {f1:.4f} (fp32:"
          f" {ref1:.4f})")

    fsdp(c, rank, n, steps, models["mlp"])
    dist.barrier()


def fsdp(c, rank, n, steps, ddp_model):
    """torch 1.13's FSDP where it runs, else its collectives by hand.

    1.13's FSDP refuses a CPU-only torch ("FSDP does not support CPU only
    execution": it needs CUDA streams), whatever the backend.  What it asks
    of the backend is _all_gather_base of the flat parameter's shards and
    _reduce_scatter_base of the flat gradient, which Gloo lacks; the same
    training, sharded that way by hand, must equal DDP's.
    """
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        torch.manual_seed(0)
        f = FSDP(mlp())
        lf, _ = train(f, "mlp", rank, steps)
        f0, f1 = first_last(lf)
        c.ok(f1 < 0.7 * f0, f"FSDP: loss {f0:.4f} -> {f1:.4f} did not fall")
        c.say(f"FSDP mlp, {steps} steps: loss {f0:.4f} -> {f1:.4f}")
    except (RuntimeError, AssertionError) as e:
        if rank == 0:
            print(f"ok - # SKIP torch FSDP: {str(e).splitlines()[0]}",
                  flush=True)
    torch.manual_seed(0)
    m = mlp()
    params = list(m.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    pad = (-flat.numel()) % n
    shard = torch.cat([flat, flat.new_zeros(pad)]).chunk(n)[rank].clone()
    buf = torch.zeros_like(shard)
    full = torch.empty(shard.numel() * n)
    losses = []

    def unshard():
        dist._all_gather_base(full, shard)
        off = 0
        for p in params:
            p.data.copy_(full[off:off + p.numel()].view_as(p))
            off += p.numel()

    for x, y in batches("mlp", rank, steps):
        unshard()
        m.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        losses.append(loss.item())
        g = torch.cat([p.grad.reshape(-1) for p in params] +
                      [flat.new_zeros(pad)])
        gs = torch.empty_like(shard)
        dist._reduce_scatter_base(gs, g, op=dist.ReduceOp.AVG)
        buf.mul_(0.5).add_(gs)  # SGD, momentum 0.5, as train() does
        shard.add_(buf, alpha=-0.05)
    unshard()
    f0, f1 = first_last(losses)
    c.ok(f1 < 0.7 * f0, f"sharded: loss {f0:.4f} -> {f1:.4f} did not fall")
    worst = max((p - q).abs().max().item()
                for p, q in zip(params, ddp_model.parameters()))
    c.ok(worst <= 1e-5, f"sharded training differs from DDP by {worst}")
    c.say(f"sharded (FSDP's _all_gather_base + _reduce_scatter_base AVG),"
          f" mlp {steps} steps: loss {f0:.4f} -> {f1:.4f}, max |sharded -"
          f" DDP| = {worst:.2e}")


if __name__ == "__main__":
    sys.exit(common.run(main, common.parse(__doc__)))
