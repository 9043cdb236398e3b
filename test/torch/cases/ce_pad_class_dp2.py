# Labels padded with a class (PAD = 0, a padding token's id passed as cross_entropy's
# `ignore_index`, as Hugging Face models do with `pad_token_id`): cross_entropy skips the
# tokens labelled PAD and divides by the others' count. A data-parallel plan that takes
# each rank's mean over its own counted tokens and averages the gradients is a mean of
# means: wrong whenever the ranks hold different numbers of padded tokens (1 and 2 here).
# The capture models the skipped tokens through the labels' one-hot column of PAD,
# whichever labels the batch holds, so this is violated where a rank divides by its own
# count. The fix: ce_pad_class_dp2_global.py. (The model: ce_ignored_labels_dp2.py's.)
import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch.distributed.tensor import Partial, Shard

from ce_ignored_labels_dp2 import LM, V

PAD = 0


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1), ignore_index=PAD)


def avg_grads(grads, mesh):
    return {n: funcol.all_reduce(g, "avg", mesh) for n, g in grads.items()}


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [0, 0, 4, 1]])},
                input_placements={"ids": [Shard(0)], "labels": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=avg_grads, loss_placements=[Partial("avg")])
