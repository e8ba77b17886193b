# worker.py: one worker of the model demo: its pool, the shared prefix published or adopted, its answer streamed.
# SPDX-License-Identifier: MIT
"""A demo worker answers one question under the shared system prompt through pagedd. Worker 0
creates the pool, prefills the system turn, publishes its blocks and tells the others through
a pipe (one byte each), then prefills its question; the others wait for that byte (a bounded
wait: no sleeps), attach to the pool, adopt the published blocks and prefill only the rest.
Each then decodes greedily, reporting to the parent as JSON lines on a shared pipe (one write
each, under PIPE_BUF, so lines of several workers never mix): what it prefilled and adopted,
the text as it is generated, and its totals. It keeps its blocks until the parent closes the
hold pipe, so the daemon's view the parent prints shows them shared."""

import json
import os
import select
import time

import paged

from . import create_pool, make_ops, model_from
from .attention import PagedAttention
from .generate import Generator


class Reporter:
    """Writes a worker's reports to the parent's pipe, one JSON line per write."""

    def __init__(self, fd, index):
        """Takes the pipe's write end and the worker's index."""
        self.fd, self.index = fd, index

    def send(self, event, **fields):
        """Writes the event with fields as one line (text is cut so a line stays under PIPE_BUF)."""
        line = json.dumps({"w": self.index, "ev": event, **fields})[:3800] + "\n"
        os.write(self.fd, line.encode())


class TextStream:
    """Turns generated token ids into text pieces, holding back an incomplete UTF-8 character."""

    def __init__(self, tokenizer):
        """Starts with no tokens."""
        self.tok, self.ids, self.sent = tokenizer, [], ""

    def push(self, token):
        """Adds token; returns the text it completes ("" while a character is incomplete)."""
        self.ids.append(token)
        text = self.tok.decode(self.ids, skip_special=True)
        if text.endswith("\ufffd") or len(text) <= len(self.sent):
            return ""
        piece, self.sent = text[len(self.sent):], text
        return piece


def wait_byte(fd, timeout_s, what):
    """Waits up to timeout_s for one byte on fd; returns it; raises TimeoutError or RuntimeError
    (the writer closed the pipe without writing) naming what was awaited."""
    if not select.select([fd], [], [], timeout_s)[0]:
        raise TimeoutError("%s did not come within %g s" % (what, timeout_s))
    got = os.read(fd, 1)
    if not got:
        raise RuntimeError("%s will not come: its writer is gone" % what)
    return got


def run(index, count, bundle, opts, socket, pipes, question):
    """Runs worker index of count: answers question (a string) under opts.system, streaming
    reports to pipes["report"]; worker 0 publishes the system turn and writes a byte per other
    worker to pipes["publish"], the others read one from it. opts has ops, device, pool, dtype,
    num_blocks, block_size, max_new and timeout_s. Returns after the hold pipe closes."""
    rep = Reporter(pipes["report"], index)
    ops = make_ops(opts.ops, opts.device)
    if ops.name == "torch":
        ops.torch.set_num_threads(1)     # several workers share the cores
    model = model_from(bundle, ops)
    tok = bundle.tokenizer
    prompt, prefix = tok.chat_ids(opts.system, question)
    with paged.connect(socket, name="model-w%d" % index) as client:
        if index == 0:
            pool = create_pool(client, opts.pool, bundle.config, opts.num_blocks, opts.block_size, opts.dtype)
        else:
            wait_byte(pipes["publish"], opts.timeout_s, "worker 0's published prefix")
            pool = client.attach_pool(opts.pool)
        gen = Generator(model, PagedAttention(pool, ops, model.scale))
        seq = pool.sequence()
        t0 = time.monotonic()
        if index == 0:
            gen.prefill(seq, prefix)
            seq.publish()
            os.write(pipes["publish"], b"P" * (count - 1))
            adopted = 0
            logits = gen.step([seq], [prompt[len(prefix):]])
        else:
            adopted = seq.adopt_prefix(prompt)
            logits = gen.step([seq], [prompt[adopted:]])
        ops.synchronize()
        t1 = time.monotonic()
        published = len(prefix) // opts.block_size * opts.block_size if index == 0 else 0
        rep.send("prefill", prompt=len(prompt), prefix=len(prefix), adopted=adopted, published=published,
                 computed=len(prompt) - adopted, secs=t1 - t0)
        stream = TextStream(tok)

        def on_token(_, token):
            """Reports the text token completes."""
            piece = stream.push(token)
            if piece:
                rep.send("text", s=piece)

        out = gen.greedy([seq], logits, opts.max_new, tok.stop_ids, on_token=on_token)[0]
        t2 = time.monotonic()
        rep.send("done", new=len(out), secs=t2 - t1, text=stream.sent)
        # The parent shows the daemon's view while every worker still holds its blocks.
        try:
            wait_byte(pipes["hold"], opts.timeout_s, "the parent's release")
        except RuntimeError:
            pass                                  # the pipe closed: released
        seq.close()
        pool.detach()
