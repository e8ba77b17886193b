# demo.py: the model demo: a pagedd, four worker processes sharing a system prompt, answers streamed.
# SPDX-License-Identifier: MIT
"""``python3 -m paged.llama.demo`` (``make demo-model``): loads SmolLM2-135M-Instruct once,
starts pagedd (cpu backend unless --backend), forks one worker per question
(:mod:`paged.llama.worker`), prints each worker's answer as it is generated, prefixed with the
worker's number, then a table of tokens prefilled and adopted per worker and the daemon's view
(``pactl info`` and ``pactl list blocks``) while the workers still hold their blocks."""

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback

from . import load
from . import prompts
from . import worker
from ..daemon import Daemon

LINE = 40   # a worker's pending text is printed once it holds this much (at a word's end)


def parse(argv):
    """Returns the options of argv."""
    p = argparse.ArgumentParser(prog="python3 -m paged.llama.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--pagedd", default="pagedd", help="the pagedd program (default: pagedd on the PATH)")
    p.add_argument("--pactl", default="pactl", help="the pactl program (default: pactl on the PATH)")
    p.add_argument("--backend", default="cpu", choices=["cpu", "cuda"], help="pagedd's backend (default cpu)")
    p.add_argument("--ops", choices=["numpy", "torch"], help="numpy or torch arrays (default: numpy on cpu, "
                                                             "torch on cuda)")
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"], help="the pool's dtype")
    p.add_argument("--max-new", type=int, default=48, help="new tokens per answer at most (default 48)")
    n = len(prompts.QUESTIONS)
    p.add_argument("--workers", type=int, default=n, choices=range(1, n + 1), metavar="N",
                   help="how many workers (1 to %d)" % n)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a worker's wait may take at most")
    a = p.parse_args(argv)
    a.ops = a.ops or ("torch" if a.backend == "cuda" else "numpy")
    a.device = "cuda" if a.backend == "cuda" else "cpu"
    a.system, a.pool, a.block_size, a.timeout_s = prompts.SYSTEM, "smollm2", 16, a.timeout
    a.num_blocks = a.workers * ((256 + a.max_new) // a.block_size + 1) + 8
    return a


def fork_workers(opts, bundle, socket):
    """Forks the workers; returns their pids and the parent's ends of the report and hold pipes."""
    report_r, report_w = os.pipe()
    pub_r, pub_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pids = []
    for i in range(opts.workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd in (report_r, hold_w, pub_r if i == 0 else pub_w):
                    os.close(fd)
                pipes = {"report": report_w, "hold": hold_r, "publish": pub_w if i == 0 else pub_r}
                worker.run(i, opts.workers, bundle, opts, socket, pipes, prompts.QUESTIONS[i][0])
                code = 0
            except BaseException as e:
                worker.Reporter(report_w, i).send("error", msg="%s: %s" % (type(e).__name__, e))
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    for fd in (report_w, pub_r, pub_w, hold_r):
        os.close(fd)
    return pids, report_r, hold_w


class Printer:
    """Prints the workers' text streams line by line, each line prefixed with its worker."""

    def __init__(self):
        """Starts with nothing pending."""
        self.pending = {}

    def add(self, w, text, final=False):
        """Adds worker w's text; prints its complete lines (a newline, or LINE characters at a
        word's end), and the rest too when final."""
        buf = self.pending.get(w, "") + text
        while True:
            nl, sp = buf.find("\n"), buf.rfind(" ")
            if nl >= 0:
                line, buf = buf[:nl], buf[nl + 1:]
            elif len(buf) >= LINE and sp > 0:
                line, buf = buf[:sp], buf[sp + 1:]
            elif final and buf:
                line, buf = buf, ""
            else:
                break
            if line.strip():
                print("  [worker %d] %s" % (w, line.strip()), flush=True)
        self.pending[w] = buf


def collect(report_r, count, deadline):
    """Reads the workers' reports until each is done or failed (or the pipe closes, or the
    deadline passes); prints their text; returns the reports by worker."""
    results = {i: {} for i in range(count)}
    printer, buf, finished = Printer(), b"", set()
    while len(finished) < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([report_r], [], [], left)[0]:
            print("demo: the workers did not finish in time", file=sys.stderr)
            break
        chunk = os.read(report_r, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            r = json.loads(line)
            w, ev = r["w"], r["ev"]
            results[w][ev] = r
            if ev == "prefill" and r["published"]:
                print("  [worker %d] prompt of %d tokens: %d prefilled; published the system turn's first %d"
                      % (w, r["prompt"], r["computed"], r["published"]), flush=True)
            elif ev == "prefill":
                print("  [worker %d] prompt of %d tokens: %d adopted from the published prefix, %d prefilled"
                      % (w, r["prompt"], r["adopted"], r["computed"]), flush=True)
            elif ev == "text":
                printer.add(w, r["s"])
            elif ev in ("done", "error"):
                printer.add(w, "", final=True)
                finished.add(w)
                if ev == "error":
                    print("  [worker %d] failed: %s" % (w, r["msg"]), flush=True)
    return results


def summary(results, opts):
    """Prints the table of tokens per worker; returns True when every worker finished."""
    print("\nworker  question                                   prompt  adopted  prefilled  new  tok/s")
    ok = True
    for i in range(opts.workers):
        r = results[i]
        if "done" not in r:
            ok = False
            print("%6d  %-41s  failed" % (i, prompts.QUESTIONS[i][0][:41]))
            continue
        p, d = r["prefill"], r["done"]
        print("%6d  %-41s  %6d  %7d  %9d  %3d  %5.1f" % (i, prompts.QUESTIONS[i][0][:41], p["prompt"], p["adopted"],
                                                          p["computed"], d["new"], d["new"] / max(d["secs"], 1e-9)))
    return ok


def pactl(opts, socket, *args):
    """Prints pactl's output for args on the daemon at socket."""
    print("\n$ pactl %s" % " ".join(args), flush=True)
    r = subprocess.run([opts.pactl, "-s", socket, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    print(r.stdout.rstrip(), flush=True)


def main(argv=None):
    """Runs the demo; returns 0 when every worker answered, else 1."""
    opts = parse(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    bundle = load()
    print("SmolLM2-135M-Instruct loaded (%d layers, %d query / %d KV heads) in %.1f s; %s arrays, %s backend"
          % (bundle.config.num_layers, bundle.config.num_heads, bundle.config.num_kv_heads,
             time.monotonic() - t0, opts.ops, opts.backend), flush=True)
    print("system prompt: %s\n" % opts.system, flush=True)
    with Daemon(opts.pagedd, opts.backend) as daemon:
        pids, report_r, hold_w = fork_workers(opts, bundle, daemon.socket)
        results = {}
        try:
            results = collect(report_r, opts.workers, time.monotonic() + opts.timeout_s)
            ok = summary(results, opts)
            pactl(opts, daemon.socket, "info", opts.pool)
            pactl(opts, daemon.socket, "list", "blocks", opts.pool)
        finally:
            os.close(hold_w)                     # releases the workers
            os.close(report_r)
            for i, pid in enumerate(pids):
                if not ({"done", "error"} & set(results.get(i, {}))):
                    os.kill(pid, signal.SIGKILL)  # past the deadline: stuck
            statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    ok = ok and all(s == 0 for s in statuses)
    print("\n%s in %.1f s" % ("all workers answered" if ok else "demo FAILED", time.monotonic() - t0))
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
