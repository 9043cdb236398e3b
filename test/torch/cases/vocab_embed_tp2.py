# A vocabulary-parallel token embedding (DTensor's RowwiseParallel on nn.Embedding: each
# rank holds half of the rows, looks up the ids that fall in its half, zeroes the
# others and all-reduces), before a tensor-parallel MLP, at TP=2.
import torch
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(8, 4)
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, ids):
        return self.down(nn.functional.silu(self.up(self.tok(ids))))


def loss_fn(model, ids, t):
    return ((model(ids) - t) ** 2).sum()


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {
        "tok": RowwiseParallel(input_layouts=Replicate()),
        "up": ColwiseParallel(), "down": RowwiseParallel()})


def planproof_case():
    return dict(model_fn=Model, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([1, 5, 7]), "t": torch.randn(3, 4)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
