# Megatron-LM's loss: the cross-entropy of every token (reduction="none"), times a loss
# mask, summed and divided by the mask's sum. This data-parallel plan divides each
# rank's sum by its own mask's sum and averages the gradients: a mean of means, wrong
# whenever the ranks keep different numbers of tokens (3 and 2 here) -- the bug
# Megatron's `calculate_per_token_loss` fixes. The fix: per_token_loss_dp2_global.py.
# MASK=input: the mask a float input of the step (Megatron's `loss_mask`, which its data
# loader makes); MASK=ge: `labels >= 0`; by default `labels != -100`.
import os

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard

from ce_ignored_labels_dp2 import LM, V

MASK = os.environ.get("MASK", "ne")


def token_losses(logits, labels):
    """Each token's cross-entropy, [B * S]: 0 where its label is -100."""
    return F.cross_entropy(logits.reshape(-1, V).float(), labels.reshape(-1), reduction="none")


def loss_mask(labels, mask):
    if MASK == "input":
        return mask.reshape(-1)
    kept = labels >= 0 if MASK == "ge" else labels != -100
    return kept.reshape(-1).float()


def masked_sum(model, ids, labels, mask):
    return (token_losses(model(ids), labels) * loss_mask(labels, mask)).sum()


def loss_fn(model, ids, labels, mask):
    return masked_sum(model, ids, labels, mask) / loss_mask(labels, mask).sum()


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    labels = torch.tensor([[5, -100, 7, 2], [-100, -100, 4, 1]])
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]), "labels": labels,
                        "mask": (labels != -100).float()},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)], "mask": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=avg_grads, loss_placements=[Partial("avg")])
