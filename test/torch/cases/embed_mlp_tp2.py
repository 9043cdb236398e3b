# Token embedding (replicated) feeding a tensor-parallel MLP, at TP=2.
import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class EmbedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(6, 4)
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, ids):
        return self.down(nn.functional.silu(self.up(self.tok(ids))))


def loss_fn(model, ids, t):
    return nn.functional.mse_loss(model(ids), t)


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def planproof_case():
    return dict(model_fn=EmbedMLP, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([1, 5, 0]), "t": torch.randn(3, 4)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
