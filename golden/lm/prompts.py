"""The bundled held-out prompts.

The project ships no text of the standard library: golden/prompts.json names, for each prompt, a
held-out corpus file (with the SHA-256 of its content), a token offset and a length; the prompt
is read from this machine's stdlib and tokenized with the checkpoint's vocabulary. A different
stdlib is reported, never silently replaced.

`select_prompts` made the file: from the held-out files with at least 3 x PROMPT_TOKENS tokens,
in the order of the SHA-256 of their paths, the first N; each prompt starts at the first line
start after a third of the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ...contracts.errors import InputError
from .corpus import Corpus

__all__ = ["PROMPT_TOKENS", "PROMPT_SEPARATOR", "PromptError", "prompts_file", "select_prompts",
           "load_prompts", "read_prompt_file", "text_prompts"]

PROMPT_TOKENS = 96
#: a line holding only this separates the prompts of a plain-text prompt file
PROMPT_SEPARATOR = "---"


class PromptError(InputError):
    """The prompt file is malformed or does not match this machine's corpus."""


def prompts_file() -> Path:
    return Path(__file__).resolve().parents[1] / "prompts.json"


def select_prompts(corpus: Corpus, tokenizer, count: int) -> list[dict]:
    newline = set(tokenizer.encode("\n").ids)
    chosen = []
    for f in sorted((f for f in corpus.files if f.heldout),
                    key=lambda f: hashlib.sha256(f.path.encode()).hexdigest()):
        ids = tokenizer.encode((corpus.root / f.path).read_text(encoding="utf-8")).ids
        if len(ids) < 3 * PROMPT_TOKENS:
            continue
        start = len(ids) // 3
        # begin after a token that ends a line, so the prompt starts at a line start
        while start < len(ids) - PROMPT_TOKENS and not (
                ids[start - 1] in newline or tokenizer.id_to_token(ids[start - 1]).endswith("Ċ")):
            start += 1
        chosen.append({"file": f.path, "sha256": f.sha256, "start": start, "length": PROMPT_TOKENS})
        if len(chosen) == count:
            break
    return chosen


def load_prompts(corpus: Corpus, tokenizer, path: Path | None = None) -> list[list[int]]:
    """Token lists of the prompts in `path` (default: the bundled file)."""
    path = Path(path) if path is not None else prompts_file()
    try:
        specs = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PromptError(f"cannot read prompts {path}: {exc}") from None
    if not isinstance(specs, list) or not specs:
        raise PromptError(f"{path} must hold a non-empty list of prompts")
    files = {f.path: f for f in corpus.files}
    prompts = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or set(spec) != {"file", "sha256", "start", "length"}:
            raise PromptError(f"{path}: prompt {i} must have exactly the keys file, sha256, start, length")
        f = files.get(spec["file"])
        if f is None or not f.heldout:
            raise PromptError(f"{path}: prompt {i} names {spec['file']!r}, which is not a held-out "
                              f"file of the corpus at {corpus.root}")
        if f.sha256 != spec["sha256"]:
            raise PromptError(f"{path}: prompt {i}: {spec['file']} differs from the file the prompts "
                              "were chosen from (another Python standard library?)")
        ids = tokenizer.encode((corpus.root / f.path).read_text(encoding="utf-8")).ids
        start, length = spec["start"], spec["length"]
        if not (isinstance(start, int) and isinstance(length, int) and 0 <= start
                and 1 <= length and start + length <= len(ids)):
            raise PromptError(f"{path}: prompt {i}: tokens {start}..{start}+{length} are outside "
                              f"0..{len(ids)}")
        prompts.append(ids[start:start + length])
    return prompts


def read_prompt_file(path: str | Path) -> list[str]:
    """The prompts of a UTF-8 text file, separated by lines holding only `---` (each prompt keeps
    its own line breaks; the line break before a separator belongs to it)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise PromptError(f"cannot read prompt file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PromptError(f"prompt file {path} is not UTF-8 text: byte {exc.start} "
                          f"({exc.object[exc.start:exc.start + 1]!r}) cannot be decoded") from None
    prompts, lines = [], []
    for line in text.splitlines(keepends=True):
        if line.rstrip("\r\n") == PROMPT_SEPARATOR:
            prompts.append(_without_last_line_break("".join(lines)))
            lines = []
        else:
            lines.append(line)
    prompts.append(_without_last_line_break("".join(lines)))
    return prompts


def _without_last_line_break(text: str) -> str:
    return text.removesuffix("\n").removesuffix("\r")


def text_prompts(texts: list[str], tokenizer, max_tokens: int) -> list[list[int]]:
    """The user's prompts tokenized with the checkpoint's vocabulary; an empty prompt or one of
    more than `max_tokens` tokens (the context left after the requested tokens) is refused."""
    prompts = []
    for i, text in enumerate(texts, 1):
        ids = tokenizer.encode(text).ids
        if not ids:
            raise PromptError(f"prompt {i} is empty: accepted 1..{max_tokens} tokens")
        if len(ids) > max_tokens:
            raise PromptError(f"prompt {i} has {len(ids)} tokens: accepted 1..{max_tokens} (the "
                              "context, model.max_seq_len, minus decode.max_new_tokens and the "
                              "draft tree's decode.max_depth)")
        prompts.append(ids)
    return prompts
