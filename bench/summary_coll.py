#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/summary_coll.py DIR: the collectives' table and targets (issue 14)
from bench/run's files in DIR.

Every figure is the median over the repeats in DIR of that program's
figure (each probe's own figure is the best of its internal repeats, as
bench/summary.py's); ratios compare figures of this one run only.  Time
is the mean per call of the slowest rank everywhere.  busbw uses
nccl-tests' factors for every library alike.
"""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
N = 2   # make bench runs 2 ranks
TESTS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce",
         "alltoall"]
FACTOR = {"allreduce": 2.0 * (N - 1) / N, "allgather": (N - 1.0) / N,
          "reducescatter": (N - 1.0) / N, "alltoall": (N - 1.0) / N,
          "broadcast": 1.0, "reduce": 1.0}


def files(pattern):
    return sorted(glob.glob(os.path.join(d, pattern)))


def median(v):
    v = sorted(v)
    if not v:
        return None
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


def grab(pattern, key):
    vals = []
    for f in files(pattern):
        for line in open(f):
            if line.startswith(key + " "):
                vals.append(float(line.split()[1]))
    return vals


def perf(prefix):
    """(test, bytes) -> {time_us: [..], inplace_time_us: [..], wrong: n}"""
    out = {}
    for f in files(prefix + ".*.json"):
        try:
            rows = json.load(open(f))["results"]
        except (ValueError, KeyError):
            continue
        for r in rows:
            k = (r["test"], r["bytes"])
            e = out.setdefault(k, {"t": [], "ip": [], "wrong": 0})
            e["t"].append(r["time_us"])
            if r.get("inplace_time_us") is not None:
                e["ip"].append(r["inplace_time_us"])
            e["wrong"] += r["wrong"]
    return out


def lines(pattern):
    """mpi_coll / gloo_coll lines: (test, bytes) -> [usec, ...]"""
    out = {}
    for f in files(pattern):
        for line in open(f):
            p = line.split()
            if len(p) == 4 and p[0] in TESTS:
                out.setdefault((p[0], int(p[1])), []).append(float(p[3]))
    return out


def human(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def bw(nbytes, us):
    return nbytes / us / 1e3 if us else 0


un = {t: perf("coll-" + t) for t in TESTS}
reg = perf("coll-allreduce-reg")
mpi_def = lines("mpicoll.*.txt")
mpi_m = lines("mpicoll-m.*.txt")
gloo = lines("gloo.*.txt")
pp = grab("coll-pingpong.*.txt", "pingpong_ns")
r1 = grab("reduce1copy.*.txt", "reduce1copy_gbps")
r1nt = grab("reduce1copy.*.txt", "reduce1copy_nt_gbps")
ring = {}
for f in files("ring2copy-ar.*.txt"):
    m = re.match(r".*ring2copy-ar\.(\w+)\.(\d+)\.txt", f)
    for v in grab(os.path.basename(f), "ring2copy_gbps"):
        ring.setdefault(m.group(2), []).append(v)
# per repeat the best chunk size, then the median over repeats
ring_best = median([max(v) for v in ring.values()])
# per repeat the better store kind
single = median([max(a, b) for a, b in zip(r1, r1nt)] if r1nt else r1)
verdicts = []


def verdict(name, ok):
    verdicts.append((name, ok))
    return "met" if ok else "NOT met"


def mpi_best(k):
    a, b = median(mpi_def.get(k, [])), median(mpi_m.get(k, []))
    c = [x for x in (a, b) if x]
    return (min(c) if c else None), a, b


def g(x, fmt="%9.2f"):
    return fmt % x if x else "%9s" % "-"


print("# make bench: collectives, 2 ranks, fp32 sum (median of %d repeats;"
      " ratios within this run)" % max(len(files("coll-pingpong.*.txt")), 1))
print()
print("## Limits and baselines")
if pp:
    print("cache-line ping-pong, one-way:          %8.1f ns" % median(pp))


def probe_size(pattern):
    for f in files(pattern):
        for line in open(f):
            m = re.search(r" of (\d+) bytes", line)
            if m:
                return int(m.group(1))
    return 0


if single:
    print("single-copy reduction probe, %6d KiB: %8.2f GB/s"
          " (each rank reads N, writes N; plain %s, streaming %s)" %
          (probe_size("reduce1copy.*.txt") >> 10, single,
           g(median(r1), "%.2f"), g(median(r1nt), "%.2f")))
if ring_best:
    print("two-copy FIFO ring all-reduce, %4d KiB: %7.2f GB/s"
          " (best of its chunk sizes)" %
          (probe_size("ring2copy-ar.*.txt") >> 10, ring_best))
if not (mpi_def or mpi_m):
    print("Open MPI: no results (not installed? make bench-deps)")
if not gloo:
    print("Gloo: no results (torch missing? make bench-deps)")
print()



def gloo_vs(e, t):
    """mlap2p's time to set beside Gloo's: torch's all_reduce has one
    buffer, so the in-place call's; the other collectives' out of place."""
    if not e:
        return None
    if t == "allreduce" and e["ip"]:
        return median(e["ip"])
    return median(e["t"])


for t in TESTS:
    sizes = sorted({b for (_, b) in un[t]} | {b for (tt, b) in mpi_def if tt == t})
    if not sizes:
        continue
    print("## %s (busbw GB/s = bytes / time x %.2f; OMPI/ml, Gloo/ml:"
          " their time / mlap2p's, > 1 where mlap2p is faster)" % (t, FACTOR[t]))
    print("%10s | %9s %9s %9s | %9s %9s %9s | %9s | %8s %8s | %8s %8s%s" % (
        "bytes", "mlap2p us", "in place", "busbw", "OMPI us", "OMPI -m",
        "busbw", "Gloo us", "OMPI/ml", "Gloo/ml", "#wrong", "",
        " | -R us    -R busbw" if t == "allreduce" else ""))
    for b in sizes:
        e = un[t].get((t, b))
        mt = median(e["t"]) if e else None
        mip = median(e["ip"]) if e and e["ip"] else None
        best, a, m = mpi_best((t, b))
        gl = median(gloo.get((t, b), []))
        extra = ""
        if t == "allreduce":
            er = reg.get((t, b))
            rt = median(er["t"]) if er else None
            extra = " | %s %s" % (g(rt), g(rt and bw(b, rt) * FACTOR[t]))
        print("%10d | %s %s %s | %s %s %s | %s | %s %s | %8s %8s%s" % (
            b, g(mt), g(mip), g(mt and bw(b, mt) * FACTOR[t]), g(a), g(m),
            g(best and bw(b, best) * FACTOR[t]), g(gl, "%9.1f"),
            g(mt and best and best / mt, "%8.2f"),
            g(gl and gloo_vs(e, t) and gl / gloo_vs(e, t), "%8.1f"),
            e["wrong"] if e else "-", "", extra))
    print()

print("## Targets (issue 14)")
ar = un["allreduce"]
sizes = sorted(b for (_, b) in ar)
t8 = median(ar[("allreduce", 8)]["t"]) if ("allreduce", 8) in ar else None
if t8:
    best, _, _ = mpi_best(("allreduce", 8))
    if best:
        print("8 B all-reduce %.3f us vs Open MPI %.3f us: %.2fx (target: faster): %s" %
              (t8, best, t8 / best, verdict("8 B vs Open MPI", t8 < best)))
    if pp:
        lim = 2 * median(pp) / 1e3
        print("8 B all-reduce %.3f us vs 2x the ping-pong's one-way %.3f us: %.2fx"
              " (target <= 1x): %s" % (t8, lim, t8 / lim,
                                       verdict("8 B vs ping-pong", t8 <= lim)))
if sizes and (mpi_def or mpi_m):
    worst = None
    slower = []
    for b in sizes:
        best, _, _ = mpi_best(("allreduce", b))
        mt = median(ar[("allreduce", b)]["t"])
        if best and mt:
            r = mt / best
            if r >= 1:
                slower.append(b)
            if worst is None or r > worst[0]:
                worst = (r, b)
    if worst:
        print("all-reduce vs Open MPI's best (default or -m), %d sizes: slowest"
              " ratio %.2fx at %d B; %d sizes not faster%s (target: all faster): %s" %
              (len(sizes), worst[0], worst[1], len(slower),
               (" (" + ", ".join(str(b) for b in slower[:8]) +
                (", ..." if len(slower) > 8 else "") + ")") if slower else "",
               verdict("every size vs Open MPI", not slower)))
if sizes and gloo:
    worst = None
    for b in sizes:
        gl = median(gloo.get(("allreduce", b), []))
        mt = gloo_vs(ar[("allreduce", b)], "allreduce")
        if gl and mt and (worst is None or gl / mt < worst[0]):
            worst = (gl / mt, b)
    if worst:
        print("all-reduce in place (as torch's, one buffer) vs Gloo: least"
              " speed-up %.1fx at %d B (target >= 10x): %s" %
              (worst[0], worst[1], verdict("10x Gloo", worst[0] >= 10)))
big = max(sizes) if sizes else 0
if big and ring_best:
    x = bw(big, median(ar[("allreduce", big)]["t"])) * FACTOR["allreduce"]
    print("%s all-reduce, unregistered: busbw %.2f GB/s = %.2fx the two-copy"
          " ring's %.2f (target >= 0.9x): %s" %
          (human(big), x, x / ring_best, ring_best,
           verdict("64 MiB vs two-copy ring", x >= 0.9 * ring_best)))
if big and single and ("allreduce", big) in reg:
    x = bw(big, median(reg[("allreduce", big)]["t"])) * FACTOR["allreduce"]
    print("%s all-reduce, registered (-R): busbw %.2f GB/s = %.2fx the"
          " single-copy probe's %.2f (target >= 0.75x): %s" %
          (human(big), x, x / single, single,
           verdict("64 MiB -R vs single copy", x >= 0.75 * single)))
for t in ("allgather", "reducescatter", "broadcast"):
    tb = sorted(b for (_, b) in un[t])
    if not tb:
        continue
    b = tb[-1]
    best, _, _ = mpi_best((t, b))
    if not best:
        continue
    # MPI_Bcast has one buffer: the like of it is the in-place broadcast
    # (ncclBcast's); the others compare out of place with out of place.
    e = un[t][(t, b)]
    ip = t == "broadcast" and e["ip"]
    x = bw(b, median(e["ip"] if ip else e["t"])) * FACTOR[t]
    y = bw(b, best) * FACTOR[t]
    print("%s %s%s: busbw %.2f GB/s vs Open MPI's %.2f: %.2fx (target >= 1x): %s" %
          (human(b), t, " in place (as MPI_Bcast)" if ip else "", x, y,
           x / y, verdict("64 MiB %s" % t, x >= y)))
wrong = sum(e["wrong"] for t in TESTS for e in un[t].values()) + \
    sum(e["wrong"] for e in reg.values())
if any(un.values()):
    print("#wrong over every collective, size and repeat: %d" % wrong)
print()
print("collectives verdict: %d of %d targets met" %
      (sum(ok for _, ok in verdicts), len(verdicts)))
