# Hugging Face's causal-LM loss (transformers' ForCausalLMLoss): the labels padded on the
# right with the ignored label (-100) and shifted left by one, so each token is scored
# against the next token's label and the last against none; cross_entropy summed over
# the kept labels and divided by their count. This data-parallel plan divides each
# rank's sum by its own count and averages the gradients: a mean of means, wrong
# whenever the ranks hold different numbers of kept labels -- which the shift alone
# makes so (each row loses one) and the -100 in the batch makes differ (SHIFT=slice:
# the older idiom, `labels[..., 1:]` against `logits[..., :-1, :]`). The fix:
# hf_shift_labels_dp2_global.py. PAD=0: a batch without -100.
import os

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard

from ce_ignored_labels_dp2 import LM, V

LABELS = [[5, 3, 7, 2], [0, 6, 4, 1]] if os.environ.get("PAD") == "0" else \
    [[5, -100, 7, 2], [-100, -100, 4, 1]]


def shifted_nll(logits, labels):
    """The summed cross-entropy of each token against the next token's label."""
    if os.environ.get("SHIFT") == "slice":
        logits, shift = logits[..., :-1, :], labels[..., 1:]
    else:
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:]
    return F.cross_entropy(logits.reshape(-1, V).float(), shift.reshape(-1), ignore_index=-100,
                           reduction="sum")


def count(labels):
    return (labels[..., 1:] != -100).sum()


def loss_fn(model, ids, labels):
    return shifted_nll(model(ids), labels) / count(labels)


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor(LABELS)},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=avg_grads, loss_placements=[Partial("avg")])
