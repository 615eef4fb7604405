"""stddial_book.core.transformers_compat: the dtype keyword each transformers release takes."""

from __future__ import annotations

import pytest
import torch

from stddial_book.core.transformers_compat import dtype_argument


@pytest.mark.parametrize(
    "version, keyword",
    [
        ("4.46.0", "torch_dtype"),
        ("4.55.4", "torch_dtype"),
        ("4.56.0", "dtype"),
        ("4.56.2", "dtype"),
        ("5.0.0rc1", "dtype"),
    ],
)
def test_the_keyword_follows_the_release(version, keyword) -> None:
    assert dtype_argument(torch.float32, version) == {keyword: torch.float32}


def test_the_installed_release_loads_a_model_in_the_dtype_asked(tmp_path) -> None:
    """The keyword for the installed transformers is one its loader honours: a tiny model saved in float32 comes
    back in bfloat16 (before 4.56 a ``dtype=`` keyword reached the model's constructor and raised)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1,
    )  # fmt: skip
    transformers.AutoModelForCausalLM.from_config(config, **dtype_argument(torch.float32)).save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, **dtype_argument(torch.bfloat16))
    assert next(loaded.parameters()).dtype == torch.bfloat16
