"""Nichani, Lee & Bietti (2024): associative memories, factual recall, sequential learning, the Thm 10 construction."""
