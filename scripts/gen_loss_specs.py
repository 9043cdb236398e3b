#!/usr/bin/env python3
"""Generates verify-specs/loss/: token-mean cross-entropy over the *global* batch with
symbolic 0/1 ignore masks, under data x context parallelism (tokens split over both
axes) with gradient accumulation over microbatches, and the seeded normalization bugs.

Reference: loss = sum_t mask[t] * ce_t / sum_t mask[t] over all 16 tokens, its gradient
w.r.t. the output projection, and one SGD step. The mask is an f32 input with
`ref.bound = 2`: every element is 0 or 1, so proofs hold for every ignore pattern and the
counterexamples are ignore patterns.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specgen  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "verify-specs", "loss")

T, H, V = 24, 4, 3          # global tokens, hidden, vocabulary
DP, CP, M = 2, 2, 3         # data ranks, context ranks, microbatches per rank
TL = T // (DP * CP)         # tokens per rank
TM = TL // M                # tokens per microbatch

REF = f"""  func.func @reference(%x: tensor<{T}x{H}xf32> {{ref.name = "x"}},
                       %w: tensor<{H}x{V}xf32> {{ref.name = "w"}},
                       %labels: tensor<{T}x{V}xf32> {{ref.name = "labels"}},
                       %mask: tensor<{T}xf32> {{ref.name = "mask", ref.bound = 2 : i64}})
      -> (tensor<f32> {{ref.name = "loss"}}, tensor<{H}x{V}xf32> {{ref.name = "w_next"}})
      attributes {{ref.reference}} {{
    %logits = ref.matmul %x, %w contract(1, 0) : tensor<{T}x{H}xf32>, tensor<{H}x{V}xf32>
    %loss_sum = ref.cross_entropy_sum %logits, %labels, %mask : tensor<{T}x{V}xf32>, tensor<{T}xf32>
    // The global count of non-ignored tokens, and the token mean over the global batch.
    %tokens = ref.reduce_sum %mask dims [0] {{ref.role = "loss-normalization"}} : tensor<{T}xf32>
    %loss = ref.div %loss_sum, %tokens {{ref.role = "loss-normalization"}} : tensor<f32>
    %dw = ref.grad %loss wrt %w : tensor<f32>, tensor<{H}x{V}xf32> -> tensor<{H}x{V}xf32>
    %w_next = ref.sgd_update %w, %dw lr 0.1 : tensor<{H}x{V}xf32>
    return %loss, %w_next : tensor<f32>, tensor<{H}x{V}xf32>
  }}

  dist.mesh @mesh axes = ["dp", "cp"] shape = [{DP}, {CP}]

"""


def plan(bug=None):
    tok_axes = '["dp"]' if bug == "count_dp_only" else '["dp", "cp"]'
    lines = [
        f"""  func.func @plan(%x: tensor<{TL}x{H}xf32> {{dist.value = "x", dist.layout = #dist.layout<[(dp, cp), _]>}},
                  %w: tensor<{H}x{V}xf32> {{dist.value = "w", dist.layout = #dist.layout<[_, _]>}},
                  %labels: tensor<{TL}x{V}xf32> {{dist.value = "labels", dist.layout = #dist.layout<[(dp, cp), _]>}},
                  %mask: tensor<{TL}xf32> {{dist.value = "mask", dist.layout = #dist.layout<[(dp, cp)]>}})
      -> (tensor<f32> {{dist.value = "loss", dist.layout = #dist.layout<[]>}},
          tensor<{H}x{V}xf32> {{dist.value = "w_next", dist.layout = #dist.layout<[_, _]>}})
      attributes {{dist.mesh = @mesh}} {{""",
    ]
    if bug != "mean_per_microbatch":
        lines += [
            "    // The global token count first (every rank, every microbatch divides by it).",
            f"    %tokens_local = ref.reduce_sum %mask dims [0] : tensor<{TL}xf32>",
            f"    %tokens = dist.all_reduce %tokens_local over {tok_axes} \"sum\" : tensor<f32> -> tensor<f32>",
        ]
    for k in range(M):
        lines += [
            f"    // Microbatch {k}: tokens [{k * TM}, {(k + 1) * TM}) of this rank's {TL}.",
            f"    %x_{k} = ref.slice %x offsets [{k * TM}, 0] sizes [{TM}, {H}] : tensor<{TL}x{H}xf32>",
            f"    %labels_{k} = ref.slice %labels offsets [{k * TM}, 0] sizes [{TM}, {V}] : tensor<{TL}x{V}xf32>",
            f"    %mask_{k} = ref.slice %mask offsets [{k * TM}] sizes [{TM}] : tensor<{TL}xf32>",
            f"    %logits_{k} = ref.matmul %x_{k}, %w contract(1, 0) : tensor<{TM}x{H}xf32>, tensor<{H}x{V}xf32>",
        ]
        if bug == "mean_per_microbatch":
            lines += [
                f"    %ce_{k} = ref.cross_entropy %logits_{k}, %labels_{k}, %mask_{k} : tensor<{TM}x{V}xf32>, tensor<{TM}xf32>",
                f"    %part_{k} = ref.scale %ce_{k} by {1.0 / M!r} : tensor<f32>",
            ]
        else:
            lines += [
                f"    %sum_{k} = ref.cross_entropy_sum %logits_{k}, %labels_{k}, %mask_{k} : tensor<{TM}x{V}xf32>, tensor<{TM}xf32>",
                f"    %part_{k} = ref.div %sum_{k}, %tokens : tensor<f32>",
            ]
        lines.append(f"    %g_{k} = ref.grad %part_{k} wrt %w : tensor<f32>, tensor<{H}x{V}xf32> -> tensor<{H}x{V}xf32>")
    lines.append("    %loss_1 = ref.add %part_0, %part_1 : tensor<f32>")
    lines.append(f"    %acc_1 = ref.add %g_0, %g_1 : tensor<{H}x{V}xf32>")
    for k in range(2, M):
        lines.append(f"    %loss_{k} = ref.add %loss_{k - 1}, %part_{k} : tensor<f32>")
        lines.append(f"    %acc_{k} = ref.add %acc_{k - 1}, %g_{k} : tensor<{H}x{V}xf32>")
    lines.append(f"    %loss_local = ref.scale %loss_{M - 1} by 1.0 : tensor<f32>")
    acc = f"%acc_{M - 1}"
    if bug == "rescale_accumulated":
        lines.append(f"    %acc = ref.scale {acc} by {1.0 / M!r} : tensor<{H}x{V}xf32>")
        acc = "%acc"
    kind = '"avg"' if bug in ("dp_average_on_top", "mean_per_microbatch") else '"sum"'
    loss_kind = '"avg"' if bug == "mean_per_microbatch" else '"sum"'
    lines += [
        f"    %loss = dist.all_reduce %loss_local over [\"dp\", \"cp\"] {loss_kind} : tensor<f32> -> tensor<f32>",
        f"    %dw = dist.all_reduce {acc} over [\"dp\", \"cp\"] {kind} : tensor<{H}x{V}xf32> -> tensor<{H}x{V}xf32>",
        f"    %w_next = ref.sgd_update %w, %dw lr 0.1 : tensor<{H}x{V}xf32>",
        f"    return %loss, %w_next : tensor<f32>, tensor<{H}x{V}xf32>",
        "  }",
    ]
    return "\n".join(lines) + "\n"


def write(name, comment, expect, body):
    specgen.write(OUT, "gen_loss_specs.py", name, comment, expect, body)


def main():
    specgen.reset(OUT)

    def bug(at):
        return {"verdict": "violated", "kind": "loss-normalization", "at": at}

    write("dpcp_grad_accum.mlir", f"""
Token-mean cross-entropy over the global batch of {T} tokens, split over data (dp={DP}) and
context (cp={CP}) ranks, each rank running {M} gradient-accumulation microbatches of {TM}
tokens. The global count of non-ignored tokens is all-reduced over both token axes
first; each microbatch's summed loss is divided by it, its gradient accumulated, and the
accumulated gradient all-reduced with "sum" (no further averaging). Masks are symbolic
0/1 values: verified for every ignore pattern.""", {"verdict": "verified"}, REF + plan())
    write("dpcp_grad_accum_mean_per_microbatch.mlir", f"""
BUG: each microbatch takes the token mean over its own tokens, divided by the number of
microbatches, and ranks average: a mean of means, wrong whenever microbatches hold
different numbers of non-ignored tokens.""", bug("%ce_0"), REF + plan("mean_per_microbatch"))
    write("dpcp_grad_accum_count_dp_only.mlir", """
BUG: the token count is all-reduced over the data axis only, though the context axis
splits the tokens too: each rank divides by the count of its data-parallel slice.""",
          bug("%part_0"), REF + plan("count_dp_only"))
    write("dpcp_grad_accum_dp_average_on_top.mlir", """
BUG: the gradients are averaged over the data and context ranks although the loss is
already normalized by the global token count: the update is 1/(dp*cp) of the reference's.""",
          bug("%dw"), REF + plan("dp_average_on_top"))
    write("dpcp_grad_accum_rescale_accumulated.mlir", f"""
BUG: the accumulated gradient is divided by the number of microbatches ({M}) although
every microbatch's loss is already normalized by the global token count.""",
          bug("%acc"), REF + plan("rescale_accumulated"))


if __name__ == "__main__":
    sys.exit(main())
