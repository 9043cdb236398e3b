import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)

    def forward(self, x):
        return self.down(torch.atan(self.up(x)))


def loss_fn(model, x, t):
    return nn.functional.mse_loss(model(x), t)


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=MLP, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, 4), "t": torch.randn(2, 4)},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
