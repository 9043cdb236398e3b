# masked_dp2_adamw.py with gradient accumulation: each data-parallel rank runs its batch
# shard as 2 microbatches, one forward and backward each, the gradients accumulating
# (`microbatches=2`), then the gradients are summed over dp and AdamW steps. Each
# microbatch's loss is its labelled tokens' summed loss over the labelled tokens of the
# whole global batch -- counted over every microbatch and all-reduced over dp before
# the loop, as torchtitan's trainer counts its global_valid_tokens -- so the pieces add
# up to the single-device loss and gradients.
import torch
import torch.distributed._functional_collectives as funcol
from masked_dp2_adamw import MLP, loss_fn, sum_grads, token_losses
from torch.distributed.tensor import Partial, Shard


def plan_loss_fn(model, mesh, x, t, mask, batch):
    tokens = funcol.all_reduce(batch["mask"].sum(), "sum", mesh)
    return token_losses(model, x, t, mask).sum() / tokens


def planproof_case():
    g = torch.Generator().manual_seed(3)
    return dict(model_fn=MLP, loss_fn=loss_fn, plan_loss_fn=plan_loss_fn, microbatches=2,
                inputs={"x": torch.randn(8, 4, generator=g), "t": torch.randn(8, 4, generator=g),
                        "mask": torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0])},
                input_placements={"x": [Shard(0)], "t": [Shard(0)], "mask": [Shard(0)]},
                mesh_shape=(2,), mesh_dim_names=("dp",), parallelize=lambda m, mesh: m,
                grad_sync=sum_grads, loss_placements=[Partial("sum")],
                optimizer=lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1,
                                                       foreach=False))
