#!/usr/bin/env python3
# peers.py: paged-bench peers: FlashInfer's paged attention run on a zero-copy view of a paged pool, outputs compared.
# SPDX-License-Identifier: MIT
"""For each decode and prefill shape of paged-bench (bf16, block 16), starts its own pagedd,
fills a pool with fresh random keys and values over a random permutation of its blocks, runs
paged's DECODE or PREFILL through the daemon and checks it against a float32 reference (torch,
GQA, scale 1/sqrt(D), causal for prefill). Where FlashInfer imports and CUDA is present, runs
FlashInfer's paged wrappers (decode on CUDA cores and on tensor cores, prefill) on
torch.from_dlpack of Pool.layer(0), the pool's own memory, checks their outputs against paged's
and times them with CUDA events. A mismatch anywhere fails the run (exit status 1).

The shapes come from paged-bench (--shapes FILE, which paged-bench peers writes with its own
kernel times, or PAGED_BENCH --list-shapes): the one list lives in tools/bench/shapes.c.
Exit status: 0 when every check passed, 1 on a mismatch or failure, 2 for bad usage, 77 when
the paged package (or torch) cannot be imported.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

SKIP = 77           # the paged package or torch cannot be imported: nothing was measured
RTOL = 1.0 / 64     # bf16 tolerance: 4 units in the last place of an 8-bit mantissa
WORKSPACE_BYTES = 128 << 20
APPEND_TOKENS = 8192  # the most tokens of one sequence per APPEND request

try:
    import torch
    import paged
    from paged.daemon import Daemon
except ImportError as e:    # reported by main(), which exits SKIP
    IMPORT_ERROR = str(e)
else:
    IMPORT_ERROR = None


def parse(argv):
    """Returns the options of argv."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", help="the shapes as paged-bench writes them (JSON), with paged's times")
    p.add_argument("--paged-bench", help="the paged-bench whose --list-shapes gives the shapes when --shapes "
                   "is not given (default: the one next to this script, or in the build tree)")
    p.add_argument("--quick", action="store_true", help="paged-bench's --quick shapes (with --paged-bench)")
    p.add_argument("--pagedd", default="pagedd", help="the pagedd program (default: pagedd on the PATH)")
    p.add_argument("--backend", choices=["cpu", "cuda"],
                   help="pagedd's backend (default: cuda when torch sees a CUDA device, else cpu)")
    p.add_argument("--runs", type=int, default=100, help="timed runs per FlashInfer path (default 100)")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs before them (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random data (default 1)")
    p.add_argument("--json", help="also write the rows to this file as JSON")
    p.add_argument("--rows", help="write the rows to this file as tab-separated lines, for paged-bench")
    p.add_argument("--no-table", action="store_true", help="print no table (paged-bench prints its own)")
    p.add_argument("--perturb-reference", action="store_true",
                   default=os.environ.get("PAGED_PEERS_PERTURB", "") not in ("", "0"),
                   help="use a wrong softmax scale in the reference, so that the check must fail "
                   "(for the tests; also $PAGED_PEERS_PERTURB=1)")
    a = p.parse_args(argv)
    if a.runs < 1 or a.warmup < 0 or a.runs > 100000 or a.warmup > 100000:
        p.error("--runs must be at least 1 and --warmup at least 0 (at most 100000)")
    return a


def find_paged_bench():
    """Returns the paged-bench next to this script (installed), or the build tree's; None when neither is."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "paged-bench"), os.path.join(here, os.pardir, "paged-bench")):
        if os.access(path, os.X_OK):
            return path
    return None


def load_shapes(opts):
    """Returns paged-bench's shape document: --shapes, else what --paged-bench --list-shapes prints."""
    if opts.shapes:
        with open(opts.shapes, encoding="utf-8") as f:
            return json.load(f)
    bench = opts.paged_bench or find_paged_bench()
    if bench is None:
        raise SystemExit("peers.py: no paged-bench found: give --shapes FILE or --paged-bench PATH")
    argv = [bench, "--list-shapes"] + (["--quick"] if opts.quick else [])
    if opts.backend:
        argv.append("--backend=" + opts.backend)
    return json.loads(subprocess.run(argv, check=True, stdout=subprocess.PIPE, timeout=60).stdout)


def flashinfer_status(backend):
    """Returns (module, version, why): FlashInfer when it imports and a CUDA device serves it,
    else None, None and why not."""
    try:
        import flashinfer
    except Exception as e:      # ImportError, or an error of its own import on a machine without CUDA
        return None, None, "FlashInfer is not installed (%s): the FlashInfer columns are n/a" % e
    version = getattr(flashinfer, "__version__", "unknown")
    if backend != "cuda" or not torch.cuda.is_available():
        return None, version, "no CUDA device (the cpu backend): the FlashInfer columns are n/a"
    return flashinfer, version, None


def close_enough(got, want, what):
    """Compares got with want (float32 tensors of one shape, the last dimension a head's row of D):
    each element within RTOL of its value plus RTOL of its row's root mean square. The row's,
    not the whole output's: a causal prefill's first rows average a few values and are far
    larger than its last ones, so one scale for all would hold the first rows to a fraction
    of a unit in their last place. Returns (ok, error), error the largest |got - want| over
    (|want| + row rms), in units of RTOL's scale."""
    got = got.float().cpu()
    want = want.float().cpu()
    if got.shape != want.shape:
        raise RuntimeError("%s: shape %s, expected %s" % (what, tuple(got.shape), tuple(want.shape)))
    if not torch.isfinite(got).all():
        return False, math.inf
    rms = want.pow(2).mean(dim=-1, keepdim=True).sqrt().clamp_min(1e-30)
    err = ((got - want).abs() / (want.abs() + rms)).max().item()
    return err <= RTOL, err


def reference(s, q, keys, values, scale):
    """Returns the float32 attention of shape s: q [rows, hq, D] (decode: a row per sequence;
    prefill: qlen rows per sequence), keys and values [seqs, ctx, hkv, D], GQA, causal for
    prefill (a query row sees the cached tokens and the new ones up to its own)."""
    hq, hkv, d = s["hq"], s["hkv"], s["D"]
    g = hq // hkv
    qlen = s["qlen"] if s["op"] == "prefill" else 1
    ctx = s["ctx"]
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    step = max(1, min(qlen, (1 << 26) // (hq * ctx)))   # query rows of one einsum: logits of 256 MiB at most
    for b in range(s["seqs"]):
        k = keys[b].float()                 # [ctx, hkv, D]
        v = values[b].float()
        for r0 in range(0, qlen, step):
            r1 = min(qlen, r0 + step)
            qs = q[b * qlen + r0:b * qlen + r1].float().view(r1 - r0, hkv, g, d)
            logits = torch.einsum("rhgd,nhd->rhgn", qs, k) * scale
            if s["op"] == "prefill":
                pos = torch.arange(ctx - qlen + r0, ctx - qlen + r1, device=q.device).view(-1, 1, 1, 1)
                logits = logits.masked_fill(torch.arange(ctx, device=q.device) > pos, -math.inf)
            p = torch.softmax(logits, dim=-1)
            out[b * qlen + r0:b * qlen + r1] = torch.einsum("rhgn,nhd->rhgd", p, v).reshape(r1 - r0, hq, d)
    return out


class Case:
    """One shape laid out in a pool of its own: fresh random keys, values and queries, block
    tables over a random permutation of the pool's blocks."""

    def __init__(self, client, s, index, device, gen, dgen):
        """Creates the pool (its blocks all held), appends the keys and values and draws the
        queries: the permutation from gen (host), the data from dgen (on device)."""
        self.s = s
        self.device = device
        b, ctx, hkv, d = s["seqs"], s["ctx"], s["hkv"], s["D"]
        self.per_seq = (ctx + s["B"] - 1) // s["B"]
        nblocks = b * self.per_seq
        self.name = "peers-%d" % index
        self.pool = client.create_pool(self.name, num_layers=1, num_kv_heads=hkv, head_dim=d, block_size=s["B"],
                                       dtype="bf16", num_blocks=nblocks)
        ids = self.pool.alloc(nblocks)
        perm = torch.randperm(nblocks, generator=gen).tolist()
        blocks = [ids[i] for i in perm]
        self.tables = [blocks[i * self.per_seq:(i + 1) * self.per_seq] for i in range(b)]
        self.keys = torch.empty(b, ctx, hkv, d, dtype=torch.bfloat16, device=device)
        self.values = torch.empty_like(self.keys)
        for i in range(b):
            for t0 in range(0, ctx, APPEND_TOKENS):
                t1 = min(ctx, t0 + APPEND_TOKENS)
                self.keys[i, t0:t1] = torch.randn(t1 - t0, hkv, d, generator=dgen, device=device)
                self.values[i, t0:t1] = torch.randn(t1 - t0, hkv, d, generator=dgen, device=device)
                slots = [self.tables[i][t // s["B"]] * s["B"] + t % s["B"] for t in range(t0, t1)]
                self.pool.append(0, self.keys[i, t0:t1], self.values[i, t0:t1], slots)
        rows = b * (s["qlen"] if s["op"] == "prefill" else 1)
        self.q = torch.randn(rows, s["hq"], d, generator=dgen, device=device).to(torch.bfloat16)
        self.lens = [ctx] * b
        self.kview, self.vview = self.pool.layer(0)
        self.k = torch.from_dlpack(self.kview)
        self.v = torch.from_dlpack(self.vview)

    def check_views(self):
        """Asserts the views are the pool's memory (no copy) in FlashInfer's HND layout, and that
        the blocks the tables name hold the appended keys and values, bit for bit."""
        s = self.s
        if self.k.data_ptr() != self.kview.address or self.v.data_ptr() != self.vview.address:
            raise RuntimeError("torch.from_dlpack copied the pool's layer view")
        want = (len(self.tables) * self.per_seq, s["hkv"], s["B"], s["D"])
        if tuple(self.k.shape) != want or self.k.dtype != torch.bfloat16:
            raise RuntimeError("the layer view is %s %s, not HND %s bf16" % (tuple(self.k.shape), self.k.dtype, want))
        for i, table in enumerate(self.tables):
            idx = torch.tensor(table, device=self.k.device)
            for view, mine in ((self.k, self.keys), (self.v, self.values)):
                got = view[idx].permute(0, 2, 1, 3).reshape(-1, s["hkv"], s["D"])[:s["ctx"]]
                if not torch.equal(got.to(mine.device), mine[i]):
                    raise RuntimeError("sequence %d: the view's blocks do not hold the appended data" % i)

    def paged_out(self):
        """Returns paged's output through the daemon (DECODE or PREFILL), as a torch tensor."""
        s = self.s
        if s["op"] == "decode":
            out = self.pool.decode(0, self.q, self.tables, self.lens)
        else:
            indptr = [i * s["qlen"] for i in range(s["seqs"] + 1)]
            out = self.pool.prefill(0, self.q, indptr, self.tables, self.lens)
        return torch.from_dlpack(out).clone()

    def flashinfer_args(self):
        """Returns FlashInfer's indptr, indices and last_page_len (int32, on the device) from the tables."""
        s = self.s
        dev = self.k.device
        indptr = torch.arange(0, s["seqs"] + 1, dtype=torch.int32, device=dev) * self.per_seq
        indices = torch.tensor([x for t in self.tables for x in t], dtype=torch.int32, device=dev)
        last = torch.full((s["seqs"],), s["ctx"] - (self.per_seq - 1) * s["B"], dtype=torch.int32, device=dev)
        return indptr, indices, last

    def close(self, client):
        """Frees the blocks and destroys the pool."""
        self.k = self.v = self.kview = self.vview = None
        self.pool.free([x for t in self.tables for x in t])
        self.pool.detach()
        client.destroy_pool(self.name)


def time_cuda(fn, runs, warmup):
    """Returns the median of runs CUDA-event times of fn() in µs, after warmup untimed calls. The
    runs are queued back to back behind a sleep kernel that covers the host's queueing (where
    torch has one), so the host's launch cost stays out of the figure."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    host_s = time.perf_counter() - t0
    events = [torch.cuda.Event(enable_timing=True) for _ in range(runs + 1)]
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(min(2.0, 2.0 * host_s * runs + 1e-3) * 2e9))   # cycles at about 2 GHz
    events[0].record()
    for i in range(runs):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(runs))


def run_path(make, plan, case, opts):
    """Builds a wrapper (make()), plans it (plan(w)) and runs it once on the pool's views, then
    times it; returns (out, µs, None), or (None, None, why) when FlashInfer refuses the
    configuration (plan raises: a group size it has no kernel for, say). plan() stays out of
    the timing."""
    try:
        w = make()
        plan(w)
    except Exception as e:      # FlashInfer's refusals come as RuntimeError or its own types
        return None, None, str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    out = torch.empty_like(case.q)
    w.run(case.q, (case.k, case.v), out=out)
    torch.cuda.synchronize()
    first = out.clone()
    return first, time_cuda(lambda: w.run(case.q, (case.k, case.v), out=out), opts.runs, opts.warmup), None


def run_flashinfer(fi, case, opts, ws):
    """Runs FlashInfer's paths of the case on the pool's views: {path: (out, µs, why not)}."""
    s = case.s
    indptr, indices, last = case.flashinfer_args()
    bf16 = torch.bfloat16
    if s["op"] == "decode":
        res = {}
        for path, tc in (("cuda_core", False), ("tensor_core", True)):
            res[path] = run_path(
                lambda tc=tc: fi.BatchDecodeWithPagedKVCacheWrapper(ws, "HND", use_tensor_cores=tc),
                lambda w: w.plan(indptr, indices, last, s["hq"], s["hkv"], s["D"], s["B"],
                                 q_data_type=bf16, kv_data_type=bf16),
                case, opts)
        return res
    qo = torch.arange(0, s["seqs"] + 1, dtype=torch.int32, device=case.k.device) * s["qlen"]
    return {"prefill": run_path(
        lambda: fi.BatchPrefillWithPagedKVCacheWrapper(ws, "HND"),
        lambda w: w.plan(qo, indptr, indices, last, s["hq"], s["hkv"], s["D"], s["B"], causal=True,
                         q_data_type=bf16, kv_data_type=bf16),
        case, opts)}


def measure(opts, doc, client, fi, device):
    """Runs every bf16 shape of doc; returns (rows, ok). Each row holds the shape, paged's
    figures from doc, the checks' errors and FlashInfer's times (None: n/a)."""
    gen = torch.Generator().manual_seed(opts.seed)
    dgen = torch.Generator(device=device).manual_seed(opts.seed + 1)
    ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda") if fi is not None else None
    rows, ok = [], True
    for index, s in enumerate(doc["shapes"]):
        if s.get("dtype", "bf16") != "bf16" or s["op"] not in ("decode", "prefill"):
            continue
        case = Case(client, s, index, device, gen, dgen)
        try:
            case.check_views()
            mine = case.paged_out()
            scale = 1.0 / math.sqrt(s["D"]) * (0.5 if opts.perturb_reference else 1.0)
            ref_ok, ref_err = close_enough(mine, reference(s, case.q, case.keys, case.values, scale),
                                           "%s: paged against the reference" % s["name"])
            row = {"op": s["op"], "index": s.get("index", index), "shape": s["name"], "head_dim": s["D"],
                   "ref_ok": ref_ok, "ref_err": ref_err,
                   "fi_ok": None, "fi_err": None, "fi_cuda_core_us": None, "fi_tensor_core_us": None,
                   "fi_us": None, "paged_us": s.get("paged_us"), "bytes": s.get("bytes"), "flops": s.get("flops")}
            if not ref_ok:
                print("peers: %s %s D%d: paged differs from the float32 reference (error %.3g, tolerance %.3g)"
                      % (s["op"], s["name"], s["D"], ref_err, RTOL), file=sys.stderr)
                ok = False
            if fi is not None:
                for path, (out, us, why) in run_flashinfer(fi, case, opts, ws).items():
                    if out is None:
                        print("peers: %s %s D%d: FlashInfer %s not run: %s" % (s["op"], s["name"], s["D"], path, why))
                        continue
                    good, err = close_enough(out, mine, "%s: FlashInfer %s against paged" % (s["name"], path))
                    row["fi_err"] = max(row["fi_err"] or 0.0, err)
                    row["fi_ok"] = (row["fi_ok"] is not False) and good
                    if not good:
                        print("peers: %s %s D%d: FlashInfer %s differs from paged (error %.3g, tolerance %.3g)"
                              % (s["op"], s["name"], s["D"], path, err, RTOL), file=sys.stderr)
                        ok = False
                    row["fi_us" if path == "prefill" else "fi_%s_us" % path] = us
                times = [row[k] for k in ("fi_cuda_core_us", "fi_tensor_core_us") if row[k] is not None]
                if s["op"] == "decode" and times:
                    row["fi_us"] = min(times)
            rows.append(row)
        finally:
            case.close(client)
    return rows, ok


def fmt(x, prec=1):
    """Returns x with prec decimals, or n/a for None."""
    return "n/a" if x is None else "%.*f" % (prec, x)


def print_table(rows, doc):
    """Prints one row per shape: FlashInfer's times, paged's, and paged's share of the read ceiling."""
    read = doc.get("read_gbps")
    head = ("shape", "FI CUDA-core us", "FI tensor-core us", "FI best us", "paged us", "paged % read",
            "paged/FI time", "vs reference")
    print("  ".join("%-26s" % h if i == 0 else "%17s" % h for i, h in enumerate(head)))
    for r in rows:
        paged_us, fi_us = r["paged_us"], r["fi_us"]
        pct = 100.0 * r["bytes"] / (paged_us * 1e3) / read if paged_us and read and r.get("bytes") else None
        cells = ("%s %s D%d" % (r["op"], r["shape"], r["head_dim"]), fmt(r["fi_cuda_core_us"]),
                 fmt(r["fi_tensor_core_us"]), fmt(fi_us), fmt(paged_us), fmt(pct),
                 fmt(paged_us / fi_us if paged_us and fi_us else None, 2),
                 "ok" if r["ref_ok"] else "DIFFERS")
        print("  ".join("%-26s" % c if i == 0 else "%17s" % c for i, c in enumerate(cells)))


def main(argv):
    """Runs the comparison; returns the exit status."""
    opts = parse(argv)
    if IMPORT_ERROR is not None:
        print("peers: the paged package (or torch) cannot be imported (%s): nothing to compare" % IMPORT_ERROR)
        return SKIP
    doc = load_shapes(opts)
    backend = opts.backend or doc.get("backend") or ("cuda" if torch.cuda.is_available() else "cpu")
    fi, version, why = flashinfer_status(backend)
    if fi is not None:
        fi_line = ("FlashInfer %s on the pool's own memory (torch.from_dlpack of Pool.layer, zero copy), HND, plan "
                   "excluded: median of %d CUDA-event times after %d warm-up runs, queued back to back, "
                   "the same inputs every run (not rotated)" % (version, opts.runs, opts.warmup))
    else:
        fi_line = why
    print("peers: %s" % fi_line, flush=True)
    device = "cuda" if backend == "cuda" else "cpu"
    shapes = [s for s in doc["shapes"] if s.get("dtype", "bf16") == "bf16"]
    q_bytes = max([2 * s["seqs"] * (s["qlen"] if s["op"] == "prefill" else 1) * s["hq"] * s["D"] for s in shapes]
                  + [0])
    kv_bytes = max([2 * min(s["ctx"], APPEND_TOKENS) * s["hkv"] * s["D"] for s in shapes] + [0])
    arena = 2 * q_bytes + 2 * kv_bytes + (64 << 20)
    with Daemon(pagedd=opts.pagedd, backend=backend) as d, \
            paged.connect(d.socket, name="peers", data_arena_size=arena) as client:
        rows, ok = measure(opts, doc, client, fi, device)
    for r in rows:
        print("peers: %s %s D%d: paged against the float32 reference: %s (error %.2g of tolerance %.2g)%s" % (
            r["op"], r["shape"], r["head_dim"], "ok" if r["ref_ok"] else "DIFFERS", r["ref_err"], RTOL,
            "" if r["fi_ok"] is None else "; FlashInfer against paged: %s (error %.2g)" % (
                "ok" if r["fi_ok"] else "DIFFERS", r["fi_err"])))
    if not opts.no_table:
        print_table(rows, doc)
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as f:
            json.dump({"flashinfer": version, "why_not": why, "runs": opts.runs, "warmup": opts.warmup,
                       "tolerance": RTOL, "ok": ok, "rows": rows}, f, indent=1)
    if opts.rows:
        with open(opts.rows, "w", encoding="utf-8") as f:
            f.write("# %s\n" % fi_line)
            for r in rows:
                f.write("\t".join([r["op"], str(r["index"]), r["shape"], fmt(r["fi_cuda_core_us"], 3),
                                   fmt(r["fi_tensor_core_us"], 3),
                                   fmt(r["fi_us"], 3), "%.3g" % r["ref_err"], "ok" if r["ref_ok"] else "DIFFERS",
                                   "n/a" if r["fi_ok"] is None else "%.3g" % r["fi_err"],
                                   "n/a" if r["fi_ok"] is None else "ok" if r["fi_ok"] else "DIFFERS"]) + "\n")
    print("peers: %d shapes, every check %s" % (len(rows), "passed" if ok else "did NOT pass"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
