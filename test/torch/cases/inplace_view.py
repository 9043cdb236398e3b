# An in-place update seen through a view taken before it: `flat` shares `h`'s storage,
# so after `h.mul_(2)` it holds the doubled values. The translation does not model
# storage, so reading `flat` after the update is refused (inconclusive), never guessed.
import torch
from torch import nn


def loss_fn(model, x):
    h = model(x)
    flat = h.view(-1)
    h.mul_(2)
    return flat.sum()


def planproof_case():
    return dict(model_fn=lambda: nn.Linear(4, 4, bias=False), loss_fn=loss_fn,
                inputs={"x": torch.randn(2, 4)}, mesh_shape=(2,), mesh_dim_names=("dp",),
                parallelize=lambda m, mesh: m)
