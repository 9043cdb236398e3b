# Vocabulary-parallel output projection (ColwiseParallel, output Shard(-1), DTensor kept)
# with torch.distributed.tensor.parallel.loss_parallel() around F.cross_entropy (mean).
# The loss function leaves the context before the capture runs the backward: the capture
# keeps it open through the backward, as PyTorch requires (`loss.backward()` inside it).
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               loss_parallel, parallelize_module)

V, D = 8, 4


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.up = nn.Linear(D, 8, bias=False)
        self.down = nn.Linear(8, D, bias=False)
        self.out = nn.Linear(D, V, bias=False)

    def forward(self, ids):
        h = self.tok(ids)
        h = h + self.down(F.silu(self.up(h)))
        return self.out(h)


def loss_fn(model, ids, labels):
    logits = model(ids)
    if isinstance(logits, DTensor):
        with loss_parallel():
            return F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1))
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1))


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {
        "up": ColwiseParallel(), "down": RowwiseParallel(),
        "out": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)})


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [2, 6, 4, 1]])},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
