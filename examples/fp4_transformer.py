"""End to end: a small decoder-only transformer (random init, bf16) with every
nn.Linear swapped for vstack.nn.FP4Linear; output agreement with bf16 and
tokens/s against bf16 (decode with a static KV cache under CUDA graphs, and prefill).

Usage: PYTHONPATH=python python3 examples/fp4_transformer.py [--layers 4] [--dim 4096] [--formats nvfp4,mxfp4,nf4]

Agreement is reported twice: against the bf16 model (kernel error + quantisation
error), and against a bf16 model whose weights are the FP4 weights decoded
(kernel error alone; it should sit at bf16 rounding level).
"""

import argparse
import copy
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

import vstack.fp4 as fp4
import vstack.nn as vnn


class Block(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.ln1, self.ln2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def _split(self, t):  # [B, T, d] -> [B, h, T, hd]
        B, T, _ = t.shape
        return t.view(B, T, self.h, self.hd).transpose(1, 2)

    def forward(self, x, cache=None, pos=None, mask=None):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = self._split(q), self._split(k), self._split(v)
        if cache is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # one decode step: write k, v at pos, attend over the masked cache
            ck, cv = cache
            ck.index_copy_(2, pos, k)
            cv.index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, ck, cv, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
        g, u = self.gate_up(self.ln2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Model(nn.Module):
    def __init__(self, vocab, d, heads, ffn, layers, max_seq):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.ln = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.max_seq = max_seq

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.emb(tokens) + self.pos(torch.arange(T, device=tokens.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))

    def step(self, tok, pos, caches):
        """tok [B, 1], pos: long tensor [1]; static shapes, so the step can be graph-captured."""
        mask = (torch.arange(self.max_seq, device=tok.device) <= pos).view(1, 1, 1, -1)
        x = self.emb(tok) + self.pos(pos).view(1, 1, -1)
        for b, c in zip(self.blocks, caches):
            x = b(x, c, pos, mask)
        return self.head(self.ln(x))


def decode_tokens_per_s(model, B, steps, d, heads, layers):
    dev, dt = "cuda", torch.bfloat16
    S = model.max_seq
    caches = [(torch.zeros(B, heads, S, d // heads, device=dev, dtype=dt),
               torch.zeros(B, heads, S, d // heads, device=dev, dtype=dt)) for _ in range(layers)]
    tok = torch.randint(0, model.emb.num_embeddings, (B, 1), device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                model.step(tok, pos, caches)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            logits = model.step(tok, pos, caches)
        times = []
        for rep in range(3):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for t in range(steps):
                pos.fill_(t)
                g.replay()
                tok.copy_(logits[:, -1].argmax(-1, keepdim=True))
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
    return B * steps / statistics.median(times)


def prefill_tokens_per_s(model, B, T, vocab):
    tok = torch.randint(0, vocab, (B, T), device="cuda")
    with torch.no_grad():
        for _ in range(2):
            model(tok)
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            model(tok)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
    return B * T / statistics.median(times)


def agreement(ref, out):
    ref, out = ref.float(), out.float()
    rel = ((out - ref).norm() / ref.norm()).item()
    cos = F.cosine_similarity(out.flatten(1), ref.flatten(1), dim=-1).mean().item()
    top1 = (out.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return rel, cos, top1


def dequantized_copy(base, fp4_model):
    """bf16 model whose Linear weights are the FP4 model's weights, decoded."""
    m = copy.deepcopy(base)
    lin = {n: mod for n, mod in m.named_modules() if isinstance(mod, nn.Linear)}
    for n, mod in fp4_model.named_modules():
        if isinstance(mod, vnn.FP4Linear):
            lin[n].weight.data.copy_(fp4.dequantize(mod.weight_fp4(), torch.bfloat16))
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--max-seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--formats", default="nvfp4,mxfp4,nf4")
    a = ap.parse_args()
    torch.manual_seed(0)
    with torch.device("cuda"):  # initialise on the GPU: CPU init of ~1B parameters takes long
        base = Model(a.vocab, a.dim, a.heads, a.ffn, a.layers, a.max_seq).to(torch.bfloat16).eval()
    nparam = sum(p.numel() for p in base.parameters())
    print(f"model: {a.layers} layers, d={a.dim}, ffn={a.ffn}, vocab={a.vocab}, {nparam / 1e6:.0f}M params "
          f"on {torch.cuda.get_device_name(0)}", flush=True)
    tok = torch.randint(0, a.vocab, (4, 128), device="cuda")
    with torch.no_grad():
        ref = base(tok)
    rows = [("bf16", None, decode_tokens_per_s(base, 1, a.steps, a.dim, a.heads, a.layers),
             decode_tokens_per_s(base, 16, a.steps, a.dim, a.heads, a.layers),
             prefill_tokens_per_s(base, 8, a.max_seq, a.vocab))]
    for fmt in a.formats.split(","):
        m = vnn.swap_linears(copy.deepcopy(base), fmt)
        with torch.no_grad():
            out = m(tok)
            out_dq = dequantized_copy(base, m)(tok)
        agree = agreement(ref, out) + agreement(out_dq, out)
        rows.append((fmt, agree, decode_tokens_per_s(m, 1, a.steps, a.dim, a.heads, a.layers),
                     decode_tokens_per_s(m, 16, a.steps, a.dim, a.heads, a.layers),
                     prefill_tokens_per_s(m, 8, a.max_seq, a.vocab)))
        del m
        torch.cuda.empty_cache()
    print("| weights | vs bf16: rel err / cos / top-1 | vs decoded-bf16: rel err / top-1 | decode B=1 tok/s | "
          "decode B=16 tok/s | prefill 8x512 tok/s |")
    print("|---|---|---|---|---|---|")
    b1, b16, pf = rows[0][2], rows[0][3], rows[0][4]
    for name, ag, d1, d16, p in rows:
        agtxt = "-" if ag is None else f"{ag[0]:.4f} / {ag[1]:.5f} / {100 * ag[2]:.1f}%"
        dqtxt = "-" if ag is None else f"{ag[3]:.2e} / {100 * ag[5]:.1f}%"
        print(f"| {name} | {agtxt} | {dqtxt} | {d1:.0f} (x{d1 / b1:.2f}) | {d16:.0f} (x{d16 / b16:.2f}) | "
              f"{p:.0f} (x{p / pf:.2f}) |", flush=True)


if __name__ == "__main__":
    main()
