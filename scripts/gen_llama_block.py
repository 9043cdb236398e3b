#!/usr/bin/env python3
"""A multi-layer Llama-style block (batch x sequence tokens) under data, tensor and
sequence parallelism, for the benchmark of issue 3 and as a spec:

    python3 scripts/gen_llama_block.py --layers 2 --batch 2 --seq 2 --dp 2 --tp 2 --sp OUT.mlir

Reference: L decoder layers (RMSNorm, rotary causal attention per sequence, SwiGLU MLP,
residuals), final norm, LM head, token-mean cross-entropy over all tokens. Plan: the batch
split over dp, Megatron TP inside each layer, sequence parallelism (tokens split over tp
outside the TP regions), vocabulary-parallel cross-entropy; the loss numerator and token
count are all-reduced over dp.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from irbuilder import Func, module, plan_func, reference_func, ttype  # noqa: E402


# The attention score scale (1/sqrt(head width) in real models; 0.5 in the catalogue).
SCORE_SCALE = [0.5]


def lay(*dims):
    return f"#dist.layout<[{', '.join(dims)}]>"


def weights(L, H, nh, nkv, d, F):
    ws = []
    for l in range(L):
        ws += [(f"w_norm1_{l}", [H]), (f"w_q_{l}", [H, nh * d]), (f"w_k_{l}", [H, nkv * d]),
               (f"w_v_{l}", [H, nkv * d]), (f"w_o_{l}", [nh * d, H]), (f"w_norm2_{l}", [H]),
               (f"w_gate_{l}", [H, F]), (f"w_up_{l}", [H, F]), (f"w_down_{l}", [F, H])]
    return ws


def attention(f, l, x_norm, Bl, S, n_q, n_kv, d, kv_split):
    """x_norm: [Bl*S, H] (all tokens of the local sequences). Returns ctx [Bl*S, n_q*d]."""
    p = f"l{l}_"
    for w, n in (("q", n_q), ("k", n_kv), ("v", n_kv)):
        f.matmul(p + w, x_norm, f"w_{w}_{l}")
        f.reshape(p + w + "4", p + w, [Bl, S, n, d])
        f.transpose(p + w + "t", p + w + "4", [0, 2, 1, 3])
        f.reshape(p + w + "h", p + w + "t", [Bl * n, S, d])
    f.rotary(p + "q_rot", p + "qh", "cos", "sin")
    f.rotary(p + "k_rot", p + "kh", "cos", "sin")
    k, v = p + "k_rot", p + "vh"
    if n_kv != n_q:
        rep = n_q // n_kv
        for src, name in ((k, "kf"), (v, "vf")):
            f.reshape(p + name + "4", src, [Bl * n_kv, S, d])
            f.broadcast(p + name + "b", p + name + "4", [0, 2, 3], [Bl * n_kv, rep, S, d])
            f.reshape(p + name, p + name + "b", [Bl * n_q, S, d])
        k, v = p + "kf", p + "vf"
    f.batch_matmul(p + "scores", p + "q_rot", k, 2, 2)
    f.scale(p + "scores_s", p + "scores", SCORE_SCALE[0])
    f.unary("causal_softmax", p + "probs", p + "scores_s")
    f.batch_matmul(p + "ctx", p + "probs", v, 2, 1)
    f.reshape(p + "ctx4", p + "ctx", [Bl, n_q, S, d])
    f.transpose(p + "ctx_t", p + "ctx4", [0, 2, 1, 3])
    return f.reshape(p + "ctx_flat", p + "ctx_t", [Bl * S, n_q * d])


def block(f, c, Bl, dp_axes, tp, sp, bug=None):
    """Emits the layers and the loss into f (reference when tp == 1 and not dp)."""
    L, S, H, nh, nkv, d, F, V = (c[k] for k in "L S H nh nkv d F V".split())
    nq_l, nkv_l = nh // tp, max(1, nkv // tp)
    x = "x"
    for l in range(L):
        p = f"l{l}_"
        if sp:
            f.rms_norm(p + "h1_local", x, f"w_norm1_{l}")
            f.all_gather(p + "h1", p + "h1_local", ["tp"], 0)
        else:
            f.rms_norm(p + "h1", x, f"w_norm1_{l}")
        ctx = attention(f, l, p + "h1", Bl, S, nq_l, nkv_l, d, True)
        f.matmul(p + "attn_p" if tp > 1 else p + "attn", ctx, f"w_o_{l}")
        if tp > 1:
            if sp:
                f.reduce_scatter(p + "attn", p + "attn_p", ["tp"], 0, "sum")
            else:
                f.all_reduce(p + "attn", p + "attn_p", ["tp"], "sum")
        f.binary("add", p + "x2", x, p + "attn")
        if sp:
            f.rms_norm(p + "h2_local", p + "x2", f"w_norm2_{l}")
            f.all_gather(p + "h2", p + "h2_local", ["tp"], 0)
        else:
            f.rms_norm(p + "h2", p + "x2", f"w_norm2_{l}")
        f.matmul(p + "gate", p + "h2", f"w_gate_{l}")
        f.matmul(p + "up", p + "h2", f"w_up_{l}")
        f.unary("silu", p + "gate_act", p + "gate")
        f.binary("mul", p + "act", p + "gate_act", p + "up")
        f.matmul(p + "mlp_p" if tp > 1 else p + "mlp", p + "act", f"w_down_{l}")
        if tp > 1:
            if sp:
                f.reduce_scatter(p + "mlp", p + "mlp_p", ["tp"], 0, "sum")
            else:
                f.all_reduce(p + "mlp", p + "mlp_p", ["tp"], "sum")
        f.binary("add", p + "x3", p + "x2", p + "mlp")
        x = p + "x3"
    if sp:
        f.rms_norm("hf_local", x, "w_normf")
        f.all_gather("hf", "hf_local", ["tp"], 0)
    else:
        f.rms_norm("hf", x, "w_normf")
    f.matmul("logits", "hf", "w_lm")
    T, Vl = f.shapes["logits"]
    vt = ["tp"] if tp > 1 else []
    f.reduce("reduce_max", "row_max_local" if vt else "row_max", "logits", [1])
    if vt:
        f.all_reduce("row_max", "row_max_local", vt, "max")
    f.broadcast("row_max_b", "row_max", [0], [T, Vl])
    f.binary("sub", "shifted", "logits", "row_max_b")
    f.unary("exp", "exps", "shifted")
    f.reduce("reduce_sum", "sum_exp_local" if vt else "sum_exp", "exps", [1])
    if vt:
        f.all_reduce("sum_exp", "sum_exp_local", vt, "sum")
    f.unary("log", "log_sum", "sum_exp")
    f.binary("add", "lse", "row_max", "log_sum")
    f.binary("mul", "label_logits", "labels", "logits")
    f.reduce("reduce_sum", "picked_local" if vt else "picked", "label_logits", [1])
    if vt:
        f.all_reduce("picked", "picked_local", vt, "sum")
    f.binary("sub", "token_loss", "lse", "picked")
    f.binary("mul", "masked_loss", "mask", "token_loss")
    f.reduce("reduce_sum", "loss_sum_local" if dp_axes else "loss_sum", "masked_loss", [0])
    f.reduce("reduce_sum", "tokens_local" if dp_axes else "tokens", "mask", [0])
    if dp_axes:
        f.all_reduce("loss_sum", "loss_sum_local", dp_axes, "sum")
        if bug == "local_token_count":
            f.comment("BUG: the loss is normalized by this rank's token count only.")
            return f.binary("div", "loss", "loss_sum", "tokens_local")
        f.all_reduce("tokens", "tokens_local", dp_axes, "sum")
    return f.binary("div", "loss", "loss_sum", "tokens")


def generate(c, dp, tp, sp, bug=None, expect=None):
    L, B, S, H, nh, nkv, d, F, V = (c[k] for k in "L B S H nh nkv d F V".split())
    T = B * S
    ins = [("x", [T, H])] + weights(L, H, nh, nkv, d, F) + [
        ("w_normf", [H]), ("w_lm", [H, V]), ("labels", [T, V]), ("mask", [T]),
        ("cos", [S, d]), ("sin", [S, d])]
    r = Func()
    for n, s in ins:
        r.arg(n, s)
    block(r, c, B, [], 1, False)
    ref = reference_func(r, ins, [("loss", "loss")])

    mesh = {}
    if dp > 1:
        mesh["dp"] = dp
    mesh["tp"] = tp
    f = Func(mesh)
    Bl = B // dp
    dpx = ["dp"] if dp > 1 else []
    tok = ("(dp, tp)" if dp > 1 else "tp") if sp else ("dp" if dp > 1 else "_")
    tok_all = "dp" if dp > 1 else "_"
    col, row, rep1 = lay("_", "tp"), lay("tp", "_"), lay("_")
    pins = []

    def add(n, layout, shape):
        pins.append((n, n, layout, shape))
        f.arg(n, shape)
    add("x", lay(tok, "_"), [T // dp // (tp if sp else 1), H])
    for n, s in weights(L, H, nh, nkv, d, F):
        kind = n.rsplit("_", 1)[0]
        if kind in ("w_norm1", "w_norm2"):
            add(n, rep1, s)
        elif kind in ("w_q", "w_k", "w_v", "w_gate", "w_up"):
            add(n, col, [s[0], s[1] // tp])
        else:
            add(n, row, [s[0] // tp, s[1]])
    add("w_normf", rep1, [H])
    add("w_lm", col, [H, V // tp])
    add("labels", lay(tok_all, "tp"), [T // dp, V // tp])
    add("mask", lay(tok_all), [T // dp])
    add("cos", lay("_", "_"), [S, d])
    add("sin", lay("_", "_"), [S, d])
    block(f, c, Bl, dpx, tp, sp, bug)
    plan = plan_func(f, mesh, pins, [("loss", "loss", lay())])
    header = (f"// GENERATED by scripts/gen_llama_block.py: {L}-layer Llama-style block, batch {B} x "
              f"sequence {S},\n// dp={dp} tp={tp}{' with sequence parallelism' if sp else ''}.\n")
    return module(header, expect or {"verdict": "verified"}, ref, plan)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--sp", action="store_true")
    # Model sizes (defaults: the small block of the catalogue). A Llama-3-8B-shaped block:
    # --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --vocab 32000.
    ap.add_argument("--hidden", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4)
    ap.add_argument("--score-scale", type=float, default=None,
                    help="attention score scale (default 0.5 at head width 2, else 1/sqrt(width))")
    ap.add_argument("--catalogue", action="store_true",
                    help="write the block specs of verify-specs/transformer/ into OUT (a folder)")
    a = ap.parse_args()
    c = dict(L=a.layers, B=a.batch, S=a.seq, H=a.hidden, nh=a.heads, nkv=a.kv_heads, d=a.head_dim,
             F=a.ffn, V=a.vocab)
    SCORE_SCALE[0] = a.score_scale if a.score_scale is not None else (
        0.5 if a.head_dim == 2 else 1.0 / a.head_dim ** 0.5)
    if a.catalogue:
        c2 = dict(c, L=2, B=2, S=2)
        with open(os.path.join(a.out, "llama2_dp2_tp2_sp.mlir"), "w") as fh:
            fh.write(generate(c2, 2, 2, True))
        with open(os.path.join(a.out, "llama2_dp2_tp2_sp_local_token_count.mlir"), "w") as fh:
            fh.write(generate(c2, 2, 2, True, "local_token_count",
                              {"verdict": "violated", "kind": "reduction", "at": "%loss"})
                     .replace("// GENERATED", "// BUG: the loss is divided by the rank's own count of "
                              "non-ignored tokens, not the global count.\n// GENERATED", 1))
        return
    with open(a.out, "w") as fh:
        fh.write(generate(c, a.dp, a.tp, a.sp))


if __name__ == "__main__":
    main()
