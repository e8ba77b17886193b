# prompts.py: the demo's shared system prompt and its workers' questions, which the tests check too.
# SPDX-License-Identifier: MIT
"""One system prompt every worker shares (its turn is the prefix published to pagedd) and one
question per worker, each with a word its greedy answer is expected to contain (the tests'
check that the model writes sensible English)."""

SYSTEM = ("You are a helpful assistant. You answer questions about science, geography and history "
          "correctly, in one or two short sentences of plain English.")

QUESTIONS = [
    ("What is the capital of France?", "Paris"),
    ("Which planet is known as the red planet?", "Mars"),
    ("What gas do plants absorb from the air?", "carbon"),
    ("Which ocean is the largest on Earth?", "Pacific"),
]
