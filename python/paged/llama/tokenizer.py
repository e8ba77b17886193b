# tokenizer.py: the model's byte-level BPE tokenizer and chat template, built from its GGUF metadata.
# SPDX-License-Identifier: MIT
"""A :class:`Tokenizer` made from a GGUF file's ``tokenizer.ggml.*`` fields with the
``tokenizers`` package: a byte-level BPE over ``tokens`` and ``merges``, digits split one by
one before the GPT-2 pre-tokenizing regex (llama.cpp's "smollm" pre-tokenizer), the control
tokens (``token_type`` 3, such as ``<|im_start|>``) matched whole in text, and the file's
``tokenizer.chat_template`` rendered with jinja2 as Hugging Face renders it (a sandbox,
``trim_blocks`` and ``lstrip_blocks``)."""

from .weights import field

CONTROL = 3  # llama.cpp's token type of a control token


class Tokenizer:
    """Text to token ids and back, and chat messages to a prompt."""

    def __init__(self, reader):
        """Builds the tokenizer from the GGUF reader's metadata; raises ImportError naming the
        package when tokenizers or jinja2 is missing, ValueError for a model other than gpt2."""
        try:
            import jinja2.sandbox
            from tokenizers import AddedToken, Tokenizer as HfTokenizer, decoders, models, pre_tokenizers
        except ImportError as e:
            raise ImportError("paged.llama needs the tokenizers and jinja2 packages: %s" % e) from e
        model = field(reader, "tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError("reader: expected a gpt2 (byte-level BPE) tokenizer, got %r" % (model,))
        tokens = field(reader, "tokenizer.ggml.tokens")
        types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
        merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
        self.tokens = tokens
        self.tok = HfTokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
        self.tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        self.tok.decoder = decoders.ByteLevel()
        self.special = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == CONTROL}
        self.tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in self.special])
        self.bos_id = field(reader, "tokenizer.ggml.bos_token_id")
        self.eos_id = field(reader, "tokenizer.ggml.eos_token_id")
        # A chat turn ends with <|im_end|> (the eos); a model that ends its text says <|endoftext|>.
        self.stop_ids = {i for i in (self.eos_id, self.special.get("<|im_end|>"),
                                     self.special.get("<|endoftext|>")) if i is not None}
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        source = field(reader, "tokenizer.chat_template")
        self.template = env.from_string(source) if source else None

    def encode(self, text):
        """Returns the token ids of text (a list of ints); control tokens in it are matched whole.
        No BOS is added: the chat template starts with its own <|im_start|>."""
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids, skip_special=False):
        """Returns the text of the token ids (control tokens dropped when skip_special)."""
        return self.tok.decode(list(ids), skip_special_tokens=skip_special)

    def chat(self, messages, add_generation_prompt=True):
        """Returns the prompt text of messages (dicts of "role" and "content") rendered by the
        file's chat template, ending with the assistant's turn opened when add_generation_prompt;
        raises ValueError when the file carries no template."""
        if self.template is None:
            raise ValueError("the GGUF file carries no tokenizer.chat_template")
        return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=self.tokens[self.bos_id] if self.bos_id is not None else "",
                                    eos_token=self.tokens[self.eos_id] if self.eos_id is not None else "")

    def chat_ids(self, system, question):
        """Returns (prompt ids, prefix ids): the token ids of the chat of one system and one user
        message with the assistant's turn opened, and those of the system turn alone, which is
        their common prefix for every question (raises ValueError when it is not)."""
        prompt = self.encode(self.chat([{"role": "system", "content": system},
                                        {"role": "user", "content": question}]))
        prefix = self.encode(self.chat([{"role": "system", "content": system}], add_generation_prompt=False))
        if prompt[:len(prefix)] != prefix:
            raise ValueError("system: its turn does not tokenize to a prefix of the chat")
        return prompt, prefix
