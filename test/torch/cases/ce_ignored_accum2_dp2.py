# ce_ignored_labels_dp2_global.py with gradient accumulation: each data-parallel rank runs
# its batch shard as 2 microbatches (`microbatches=2`), and each microbatch's summed loss
# is divided by the labelled tokens of the whole global batch -- `labels != -100` counted
# over the rank's whole batch and all-reduced over dp, Hugging Face's
# `num_items_in_batch` -- so the pieces add up to the single-device mean over the
# labelled tokens, wherever the ignored labels fall.
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard

from ce_ignored_labels_dp2 import LM, V, loss_fn
from ce_ignored_labels_dp2_global import sum_grads

LABELS = torch.tensor([[5, -100, 7, 2], [-100, -100, 4, 1], [3, 3, -100, 0], [6, 1, 2, -100]])


def plan_loss_fn(model, mesh, ids, labels, batch):
    tokens = funcol.all_reduce((batch["labels"] != -100).sum(), "sum", mesh)
    logits = model(ids).reshape(-1, V)
    return F.cross_entropy(logits, labels.reshape(-1), reduction="sum") / tokens


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn, microbatches=2,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4], [0, 1, 2, 3], [7, 6, 5, 4]]),
                        "labels": LABELS},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=sum_grads, loss_placements=[Partial("sum")])
