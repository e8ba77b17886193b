# generate.py: greedy generation over a model and an attention backend: prefill, then decode steps.
# SPDX-License-Identifier: MIT
""":class:`Generator` drives :class:`paged.llama.model.Llama` with one attention backend: a
step of new tokens of several sequences gives the logits of each sequence's last token, and
:meth:`Generator.greedy` decodes sequences together, one token each per step, until each says
a stop token or has its number of new tokens."""


class Generator:
    """A model and the attention backend of its sequences."""

    def __init__(self, model, attention):
        """Takes the Llama model and an attention backend (PagedAttention or LocalAttention)."""
        self.model, self.attention, self.ops = model, attention, model.ops

    def step(self, seqs, tokens):
        """Adds tokens[i] (token ids) to seqs[i] through the model; returns the logits
        [len(seqs), vocab] of each sequence's last new token, as an array of the ops."""
        positions = self.attention.begin(seqs, tokens)
        flat = [t for toks in tokens for t in toks]
        rows, end = [], 0
        for toks in tokens:
            end += len(toks)
            rows.append(end - 1)
        ops = self.ops
        return self.model.forward(ops.asarray(flat, "i64"), ops.asarray(positions, "i64"), self.attention,
                                  ops.asarray(rows, "i64"))

    def prefill(self, seq, tokens):
        """Adds the prompt tokens to seq; returns the logits [vocab] of its last token."""
        return self.step([seq], [list(tokens)])[0]

    def greedy(self, seqs, logits, max_new, stop_ids=(), on_token=None, on_logits=None):
        """Decodes seqs together from logits [len(seqs), vocab] (each one's last logits): picks the
        most likely token, calls on_token(i, token) and on_logits(i, logits row), and feeds it
        back, until sequence i said a token of stop_ids (kept, not fed back) or has max_new new
        tokens. Returns the new tokens of each sequence (lists)."""
        out = [[] for _ in seqs]
        live = list(range(len(seqs)))
        for _ in range(max_new):
            picks = self.ops.argmax(logits)
            feed = []
            for j, i in enumerate(live):
                out[i].append(picks[j])
                if on_logits is not None:
                    on_logits(i, logits[j])
                if on_token is not None:
                    on_token(i, picks[j])
                if picks[j] not in stop_ids and len(out[i]) < max_new:
                    feed.append(i)
            live = feed
            if not live:
                break
            logits = self.step([seqs[i] for i in live], [[out[i][-1]] for i in live])
        return out
