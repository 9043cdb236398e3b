# A language-model head: embedding, a tensor-parallel MLP, a replicated output
# projection and cross-entropy over the vocabulary, at TP=2.
import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(6, 4)
        self.up = nn.Linear(4, 8, bias=False)
        self.down = nn.Linear(8, 4, bias=False)
        self.out = nn.Linear(4, 6, bias=False)

    def forward(self, ids):
        h = self.tok(ids)
        return self.out(h + self.down(nn.functional.silu(self.up(h))))


def loss_fn(model, ids, labels):
    return nn.functional.cross_entropy(model(ids), labels)


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def planproof_case():
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([1, 5, 0]), "labels": torch.tensor([5, 0, 2])},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
