"""Tokenizer, tiny model, save/load, and the fast offline failure of hub loading."""

from __future__ import annotations

import time

import pytest
import torch

from stddial_book.rl.model import PAD, VOCAB, CharCodec, load, load_hub_model, make_tokenizer, save, tiny_model
from stddial_book.rl.tasks import EOS


def test_codec_and_tokenizer_agree() -> None:
    codec, tok = CharCodec(), make_tokenizer()
    text = "57+68=521" + EOS
    ids = codec.encode(text)
    assert ids == tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 10 and ids[-1] == VOCAB.index(EOS)
    assert codec.decode(ids + [codec.pad_id, 3]) == text
    assert tok.decode(ids) == text and tok.eos_token == EOS and tok.pad_token == PAD


def test_codec_rejects_foreign_characters() -> None:
    with pytest.raises(ValueError, match="not in the task's vocabulary"):
        CharCodec().encode("1*2=")


def test_tiny_model_size_and_seed() -> None:
    model = tiny_model()
    n = sum(p.numel() for p in model.parameters())
    assert 1.0e6 < n < 1.1e6
    assert model.config.tie_word_embeddings
    again = tiny_model()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    with pytest.raises(ValueError, match="divisible"):
        tiny_model(hidden_size=130)


def test_save_load_round_trip(tmp_path) -> None:
    model, tok = tiny_model(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), make_tokenizer()
    path = save(model, tok, tmp_path / "ckpt")
    assert (path / "model.safetensors").exists()
    model2, tok2 = load(path)
    ids = torch.tensor([CharCodec().encode("12+34=")])
    model.eval(), model2.eval()
    torch.testing.assert_close(model(ids).logits, model2(ids).logits)
    assert tok2("12+34=", add_special_tokens=False)["input_ids"] == ids[0].tolist()
    with pytest.raises(ValueError, match="no model.safetensors"):
        load(tmp_path)


def test_hub_loading_fails_fast_offline(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="not in the local cache and HF_HUB_OFFLINE is set"):
        load_hub_model("Qwen/Qwen2.5-0.5B-Instruct")
    assert time.perf_counter() - start < 10.0


def test_hub_loading_accepts_a_local_directory(tmp_path) -> None:
    model = tiny_model(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    save(model, make_tokenizer(), tmp_path)
    loaded, tok = load_hub_model(str(tmp_path))
    assert loaded.config.hidden_size == 32 and tok.eos_token == EOS
