"""Any ONNX cross-encoder (query, passage) -> relevance logit, from a folder.

The folder holds ``model.onnx`` and ``tokenizer.json``; inputs are the usual
``input_ids``/``attention_mask`` (+ ``token_type_ids`` if the graph takes them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .embedders import ModelIdentity, file_sha256


class CrossEncoder:
    def __init__(self, folder: Path, max_tokens: int = 256) -> None:
        import onnxruntime as ort

        model = folder / "model.onnx"
        if not model.is_file() or not (folder / "tokenizer.json").is_file():
            raise FileNotFoundError(f"{folder} must hold model.onnx and tokenizer.json")
        self.session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding()
        self.identity = ModelIdentity(folder.name, 1, file_sha256(model))

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        encs = self.tokenizer.encode_batch([(query, p) for p in passages])
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64)}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encs], dtype=np.int64)
        logits = np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        return logits.reshape(len(passages), -1)[:, -1]

    def warm(self) -> None:
        self.score("warm up", ["def f(): pass"])
