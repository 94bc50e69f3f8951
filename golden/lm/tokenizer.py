"""The BPE vocabulary of the golden model, trained here on the training split of the corpus.

A byte vocabulary makes most steps of source code trivially predictable (indentation, identifier
tails), which inflates draft acceptance far beyond what real LLMs see; a BPE vocabulary of a few
thousand tokens folds those runs into single tokens. Byte-level pre-tokenization keeps every
input encodable. Files are joined with the end-of-text token.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

__all__ = ["EOT", "train_tokenizer", "load_tokenizer", "encode_texts"]

EOT = "<|endoftext|>"


def train_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != vocab_size:
        raise ValueError(f"the corpus gives only {tok.get_vocab_size()} BPE tokens: "
                         f"accepted vocab_size up to that")
    return tok


def load_tokenizer(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on malformed JSON
        raise ValueError(f"{path} is not a tokenizer file: {exc}") from None


def encode_texts(tok: Tokenizer, texts: list[str]) -> list[int]:
    """All texts as one token stream, each followed by the end-of-text token."""
    eot = tok.token_to_id(EOT)
    out: list[int] = []
    for enc in tok.encode_batch(texts):
        out.extend(enc.ids)
        out.append(eot)
    return out
