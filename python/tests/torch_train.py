#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Training on the mlap2p backend, against Gloo and a one-process reference.

Every run starts from seed 0 and trains on fixed data (rank r's batches come
from a generator seeded 100 + r), SGD with momentum, one CPU thread.  Each
run is checked against a reference that one process computes on its own,
with no communication at all: every rank's gradient on every rank's batch,
averaged the way the run's communication averages them, then the same
optimizer step.  On 2 ranks the sum of two values does not depend on the
order of the reduction, so the references must match bit for bit; on more
ranks, to a tolerance (fp32, or bf16's for the bf16 run).

  * DDP, an MLP and a small CNN, on mlap2p and on Gloo: final parameters
    equal to each other and to the reference; every rank holds the same.
  * DDP with bf16 gradients (mlap2p_torch.hooks.bf16_allreduce_hook:
    torch's bf16_compress_hook under a name DDP does not refuse without
    CUDA; Gloo has no bf16): equal to a reference that rounds each rank's
    gradient to bf16, divides it by n and sums in bf16; the loss halves.
  * FSDP's collectives by hand, ZeRO-3 style (the flat parameter sharded
    over the ranks, _all_gather_base before each forward,
    _reduce_scatter_base AVG of the flat gradient, each rank stepping its
    own shard; Gloo has neither call): equal to the same sharded update
    computed in one process, and to DDP's result to fp32 tolerance.
    torch 1.13's own FSDP cannot run here; see fsdp_refusal() for why.

    /usr/bin/python3 python/tests/torch_train.py --nprocs 2 [--quick]
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
LR, MOMENTUM, BATCH = 0.05, 0.5, 8


def mlp():
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64),
                         nn.Tanh(), nn.Linear(64, 4))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 4))


MODELS = {"mlp": mlp, "cnn": cnn}


def batches(kind, rank, steps):
    """A learnable task: targets from a fixed random teacher, data per rank."""
    g = torch.Generator().manual_seed(7)
    shape = (16,) if kind == "mlp" else (1, 8, 8)
    teacher = torch.randn(int(torch.tensor(shape).prod()), 4, generator=g)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(BATCH, *shape, generator=g)
        yield x, torch.tanh(x.reshape(BATCH, -1) @ teacher /
                            teacher.shape[0] ** 0.5)


def fresh(kind):
    torch.manual_seed(0)
    return MODELS[kind]()


def sgd(params):
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def train(model, kind, rank, steps):
    """Train a DDP model on this rank's batches: losses, mean step time."""
    opt = sgd(model.parameters())
    losses = []
    t0 = time.perf_counter()
    for x, y in batches(kind, rank, steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, (time.perf_counter() - t0) / steps


def rank_grads(m, xy):
    """Every rank's gradient (one list of tensors per rank) and loss."""
    out, losses = [], []
    for x, y in xy:
        m.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        out.append([p.grad.detach().clone() for p in m.parameters()])
        losses.append(loss.item())
    return out, losses


def mean_fp32(grads, n):
    """DDP's average: each rank's gradient times 1/n, summed in rank order."""
    return [sum(g[i] * (1.0 / n) for g in grads) for i in range(len(grads[0]))]


def mean_bf16(grads, n):
    """bf16_allreduce_hook's: to bf16, divided by n, summed in bf16, to fp32."""
    out = []
    for i in range(len(grads[0])):
        s = None
        for g in grads:
            b = g[i].to(torch.bfloat16).div_(n)
            s = b if s is None else s + b
        out.append(s.float())
    return out


def reference(kind, n, steps, mean):
    """DDP on n ranks computed in one process: final model, per-rank losses."""
    m = fresh(kind)
    opt = sgd(m.parameters())
    losses = [[] for _ in range(n)]
    for xy in zip(*[batches(kind, r, steps) for r in range(n)]):
        grads, ls = rank_grads(m, xy)
        for p, g in zip(m.parameters(), mean(grads, n)):
            p.grad.copy_(g)
        opt.step()
        for r in range(n):
            losses[r].append(ls[r])
    return m, losses


def mean_loss(losses, k=10):
    """Mean loss over the first and the last k steps."""
    return sum(losses[:k]) / k, sum(losses[-k:]) / k


class Compare:
    """Parameters against a reference: bitwise on 2 ranks, else to rtol."""

    def __init__(self, c, n):
        self.c, self.n = c, n

    def __call__(self, got, want, what, rtol):
        worst = 0.0
        for (name, p), q in zip(got, want):
            p, q = p.detach(), q.detach()
            d = (p - q).abs().max().item()
            worst = max(worst, d)
            if self.n <= 2:
                good = torch.equal(p, q)
            else:
                good = torch.allclose(p, q, rtol=rtol, atol=rtol)
            self.c.ok(good, f"{what}: {name} differs by {d:.3e}")
        return worst


def same_on_every_rank(c, params, what):
    for name, p in params:
        ref = p.detach().clone()
        dist.broadcast(ref, 0)
        c.ok(torch.equal(ref, p.detach()), f"{what}: {name} differs from"
             " rank 0's")


def main(rank, n, args):
    c = common.Checks(rank)
    cmp = Compare(c, n)
    steps = 60 if args.quick else STEPS
    gloo = dist.new_group(backend="gloo",
                          timeout=datetime.timedelta(seconds=args.timeout))
    fp32 = {}
    for kind in MODELS:
        a = fresh(kind)
        b = fresh(kind)
        la, ta = train(DDP(a), kind, rank, steps)   # the default group: mlap2p
        lb, tb = train(DDP(b, process_group=gloo), kind, rank, steps)
        ref, rl = reference(kind, n, steps, mean_fp32)
        fp32[kind] = ref
        wg = cmp(a.named_parameters(), b.parameters(),
                 f"DDP {kind}, mlap2p against Gloo", 1e-5)
        wr = cmp(a.named_parameters(), ref.parameters(),
                 f"DDP {kind}, mlap2p against the reference", 1e-5)
        # The losses each rank saw are the reference's for that rank.
        c.ok(la == rl[rank] or n > 2,
             f"DDP {kind}: losses differ from the reference's")
        same_on_every_rank(c, a.named_parameters(), f"DDP {kind}")
        f0, f1 = mean_loss(rl[0])
        c.say(f"DDP {kind}, {steps} steps: |mlap2p - Gloo| <= {wg:.1e},"
              f" |mlap2p - reference| <= {wr:.1e}; loss {f0:.4f} -> {f1:.4f};"
              f" step {ta * 1e3:.2f} ms (Gloo {tb * 1e3:.2f} ms)")
    bf16(c, cmp, rank, n, steps, fp32["mlp"])
    sharded(c, rank, n, steps, fp32["mlp"])
    reason = fsdp_refusal()
    if rank == 0:
        print(f"ok - # SKIP torch.distributed.fsdp itself: {reason}",
              flush=True)
    dist.barrier()


def bf16(c, cmp, rank, n, steps, fp32_ref):
    from mlap2p_torch.hooks import bf16_allreduce_hook
    m = fresh("mlp")
    d = DDP(m)
    d.register_comm_hook(None, bf16_allreduce_hook)
    lbf, _ = train(d, "mlp", rank, steps)
    ref, rl = reference("mlp", n, steps, mean_bf16)
    w = cmp(m.named_parameters(), ref.parameters(),
            "DDP mlp bf16 gradients, mlap2p against the reference", 1e-2)
    c.ok(lbf == rl[rank] or n > 2,
         "DDP mlp bf16: losses differ from the reference's")
    same_on_every_rank(c, m.named_parameters(), "DDP mlp bf16")
    # Training converges: the fixed data make this a fact about the
    # reference (and so about the backend, equal to it above).
    f0, f1 = mean_loss(rl[0])
    c.ok(f1 < 0.5 * f0, f"bf16 DDP: loss {f0:.4f} -> {f1:.4f} did not halve")
    # and the rounding happened: bf16 gradients are not fp32's.
    wf = max((p - q).abs().max().item()
             for p, q in zip(m.parameters(), fp32_ref.parameters()))
    c.ok(wf > 0, "DDP mlp bf16: parameters equal fp32 training's")
    c.say(f"DDP mlp, bf16 gradients (bf16_allreduce_hook), {steps} steps:"
          f" |mlap2p - reference| <= {w:.1e}, |bf16 - fp32| = {wf:.1e};"
          f" loss {f0:.4f} -> {f1:.4f}")


class Shards:
    """A model's parameters as one flat vector in n equal shards (padded to
    a multiple of 8 * n elements, so the padding path runs), the optimizer
    state per shard: what FSDP's FlatParameter with FULL_SHARD keeps."""

    def __init__(self, model, n):
        self.model, self.n = model, n
        self.params = list(model.parameters())
        self.numel = sum(p.numel() for p in self.params)
        self.size = -(-self.numel // (8 * n)) * 8
        flat = self.flat([p.detach() for p in self.params])
        self.shard = [s.clone() for s in flat.chunk(n)]
        self.buf = [None] * n

    def flat(self, ts):
        pad = self.size * self.n - self.numel
        return torch.cat([t.reshape(-1) for t in ts] + [ts[0].new_zeros(pad)])

    def load(self, full):
        off = 0
        for p in self.params:
            p.data.copy_(full[off:off + p.numel()].view_as(p))
            off += p.numel()

    def step(self, r, g):
        """torch.optim.SGD's momentum step on shard r with gradient g."""
        if self.buf[r] is None:
            self.buf[r] = g.clone()
        else:
            self.buf[r].mul_(MOMENTUM).add_(g)
        self.shard[r].add_(self.buf[r], alpha=-LR)


def sharded(c, rank, n, steps, ddp_ref):
    """ZeRO-3 by hand on mlap2p, against the same computed in one process."""
    run = Shards(fresh("mlp"), n)
    full = torch.empty(run.size * n)
    losses = []
    for x, y in batches("mlp", rank, steps):
        dist._all_gather_base(full, run.shard[rank])
        run.load(full)
        run.model.zero_grad()
        loss = nn.functional.mse_loss(run.model(x), y)
        loss.backward()
        losses.append(loss.item())
        g = run.flat([p.grad for p in run.params])
        gs = torch.empty(run.size)
        dist._reduce_scatter_base(gs, g, op=dist.ReduceOp.AVG)
        run.step(rank, gs)
    dist._all_gather_base(full, run.shard[rank])
    run.load(full)

    ref = Shards(fresh("mlp"), n)
    rl = []
    for xy in zip(*[batches("mlp", r, steps) for r in range(n)]):
        ref.load(torch.cat(ref.shard))
        grads, ls = rank_grads(ref.model, xy)
        rl.append(ls[rank])
        flat = [ref.flat(gr).chunk(n) for gr in grads]
        for r in range(n):
            ref.step(r, sum(f[r] * (1.0 / n) for f in flat))
    ref.load(torch.cat(ref.shard))

    names = [nm for nm, _ in run.model.named_parameters()]
    w = Compare(c, n)(zip(names, run.params), ref.params,
                      "sharded mlp against the one-process sharded run", 1e-5)
    c.ok(losses == rl or n > 2, "sharded: losses differ from the reference's")
    # Same arithmetic as DDP's, but on shards rather than per tensor: on
    # 2 ranks it has come out bitwise equal; a few ulps would be allowed.
    wd = max((p - q).abs().max().item()
             for p, q in zip(run.params, ddp_ref.parameters()))
    c.ok(wd <= 1e-5, f"sharded training differs from DDP's by {wd:.3e}")
    f0, f1 = mean_loss(rl)
    c.say(f"sharded (FSDP's _all_gather_base + _reduce_scatter_base AVG),"
          f" mlp {steps} steps: |mlap2p - reference| <= {w:.1e}, |sharded -"
          f" DDP| <= {wd:.1e}; loss {f0:.4f} -> {f1:.4f}")


def fsdp_refusal():
    """Why torch 1.13's FullyShardedDataParallel cannot run on this torch.

    1. Debian 12's python3-torch 1.13.1 on Python 3.11: importing
       torch.distributed.fsdp fails.  fsdp/flat_param.py imports
       torch.distributed._shard, whose sharded_tensor/metadata.py declares
       ``tensor_properties: TensorProperties = field(default=
       TensorProperties())`` in a dataclass; TensorProperties is itself a
       dataclass with eq=True, so unhashable, and Python 3.11's dataclasses
       refuse an unhashable default ("mutable default ... use
       default_factory").  torch 1.13 supports Python up to 3.10.
    2. Past that (Python <= 3.10), FSDP needs CUDA whatever the backend:
       FullyShardedDataParallel.__init__ takes its compute device from
       torch.cuda.current_device() (_get_compute_device), which a CPU-only
       torch refuses ("Torch not compiled with CUDA enabled"); the first
       forward's _lazy_init raises "FSDP does not support CPU only
       execution"; and unshard, reshard and the post-backward reduction run
       on torch.cuda.Stream()s with torch.cuda.Event()s and record_stream.
       CPU support came in later torch releases.

    Returns the first refusal met here, as a line.
    """
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except Exception as e:  # 1.
        return (f"import torch.distributed.fsdp fails on Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}: "
                f"{type(e).__name__}: {str(e).splitlines()[0]}")
    try:
        f = FSDP(mlp())
        f(torch.zeros(1, 16))
    except Exception as e:  # 2.
        return (f"FSDP on a CPU-only torch: {type(e).__name__}: "
                f"{str(e).splitlines()[0]}")
    raise AssertionError("torch's FSDP ran: make the test train with it")


if __name__ == "__main__":
    sys.exit(common.run(main, common.parse(__doc__)))
