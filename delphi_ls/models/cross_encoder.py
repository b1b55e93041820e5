"""Any ONNX cross-encoder (query, passage) -> relevance logit, from a folder.

The folder holds ``model.onnx`` and ``tokenizer.json``; inputs are the usual
``input_ids``/``attention_mask`` (+ ``token_type_ids`` if the graph takes them).
A folder with ``identity.json`` (the shipped model has one) is checked on load like
the embedder: the weights' sha256 and one probe logit must match what training
recorded, or the model refuses to serve.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .embedders import ModelIdentity, file_sha256

SHIPPED_CROSS_ENCODER = Path(__file__).parent / "data" / "cross-encoder"


class CrossEncoder:
    def __init__(self, folder: Path, max_tokens: int = 256) -> None:
        import onnxruntime as ort

        model = folder / "model.onnx"
        if not model.is_file() or not (folder / "tokenizer.json").is_file():
            raise FileNotFoundError(f"{folder} must hold model.onnx and tokenizer.json")
        recorded = json.loads((folder / "identity.json").read_text()) if (folder / "identity.json").is_file() else None
        sha = file_sha256(model)
        if recorded and recorded["weights_sha256"] != sha:
            raise ValueError(f"{model} has sha256 {sha[:12]}, its identity.json records "
                             f"{recorded['weights_sha256'][:12]}: not the model that was trained")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = min(4, os.cpu_count() or 1)
        self.session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=int(recorded.get("max_tokens", max_tokens)) if recorded else max_tokens)
        self.tokenizer.enable_padding()
        self.identity = ModelIdentity(recorded["name"] if recorded else folder.name, 1, sha)
        if recorded and "probe" in recorded:
            p = recorded["probe"]
            got = float(self.score(p["query"], [p["passage"]])[0])
            if abs(got - p["logit"]) > 0.05:
                raise ValueError(f"{model}: probe logit {got:.4f} != recorded {p['logit']:.4f}")

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
