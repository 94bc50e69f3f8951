"""The bundled prompts resolve on this machine's corpus; a broken prompt file names the problem.
Greedy speculative decoding reproduces autoregressive decoding on every bundled prompt, on the
float and on the integer path."""

import json

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.golden.lm.checkpoint import load_checkpoint
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.decoding.decode import FloatEngine, decode_ar, decode_speculative
from edgexpert.golden.integer.int_model import quantize_model
from edgexpert.golden.lm.prompts import (PROMPT_TOKENS, PromptError, load_prompts, prompts_file,
                                      read_prompt_file, text_prompts)
from edgexpert.golden.lm.tokenizer import EOT


@pytest.fixture(scope="module")
def setting():
    ckpt = load_checkpoint()
    corpus = load_corpus()
    return ckpt, corpus, load_prompts(corpus, ckpt.tokenizer)


def test_bundled_prompts(setting):
    _, _, prompts = setting
    assert len(prompts) == 8 and all(len(p) == PROMPT_TOKENS for p in prompts)


@pytest.mark.parametrize("change, message", [
    (lambda s: s[0].update(sha256="0" * 64), "differs from the file the prompts were chosen from"),
    (lambda s: s[0].update(file="os.py"), "which is not a held-out file"),
    (lambda s: s[0].update(start=10**7), "are outside"),
    (lambda s: s[0].pop("length"), "must have exactly the keys"),
])
def test_broken_prompt_files(setting, tmp_path, change, message):
    ckpt, corpus, _ = setting
    specs = json.loads(prompts_file().read_text())
    change(specs)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(specs))
    with pytest.raises(PromptError, match=message):
        load_prompts(corpus, ckpt.tokenizer, path)


@pytest.mark.parametrize("path", ["int", "float"])
def test_lossless_on_every_bundled_prompt(setting, path):
    ckpt, _, prompts = setting
    config = load_config(overrides=["decode.max_new_tokens=32"]).decode
    engine = quantize_model(ckpt.model) if path == "int" else FloatEngine(ckpt.model)
    eot = ckpt.tokenizer.token_to_id(EOT)
    for prompt in prompts:
        ar = decode_ar(engine, prompt, config, eot)
        sd = decode_speculative(engine, prompt, config, eot)
        assert sd.tokens == ar.tokens
        assert sd.steps < ar.steps  # the draft tree does get accepted


def test_a_prompt_file_splits_on_separator_lines_only(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_bytes("def f(x):\n    return x\n---\nclass A:\r\n--- not a separator\r\n---\n\u00e9t\u00e9\n".encode())
    assert read_prompt_file(path) == ["def f(x):\n    return x", "class A:\r\n--- not a separator",
                                      "\u00e9t\u00e9"]


def test_a_prompt_file_that_is_not_utf8_or_missing_is_one_clear_error(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(PromptError, match=r"latin1.txt is not UTF-8 text: byte 3"):
        read_prompt_file(path)
    with pytest.raises(PromptError, match="cannot read prompt file"):
        read_prompt_file(tmp_path / "none.txt")


def test_own_prompts_are_tokenized_and_bounded_by_the_context(setting):
    ckpt, _, _ = setting
    ids = text_prompts(["def f(x):"], ckpt.tokenizer, 10)[0]
    assert ckpt.tokenizer.decode(ids) == "def f(x):"
    with pytest.raises(PromptError, match=r"prompt 2 is empty: accepted 1\.\.10 tokens"):
        text_prompts(["x", ""], ckpt.tokenizer, 10)
    with pytest.raises(PromptError, match=r"prompt 1 has \d+ tokens: accepted 1\.\.3 \(the context"):
        text_prompts(["def f(x): return x + 1"], ckpt.tokenizer, 3)
