# A small LM at TP=2 (Colwise/Rowwise MLP) with F.cross_entropy(label_smoothing=0.1):
# PyTorch's smoothing term masks the ignored label (`labels == -100`, no label in the
# domain the proof covers) and counts the others (all of them).
import torch
import torch.nn.functional as F
from loss_parallel_tp2 import LM, V
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


def loss_fn(model, ids, labels):
    return F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1), label_smoothing=0.1)


def parallelize(model, mesh):
    return parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def planproof_case():
    torch.manual_seed(0)
    return dict(model_fn=LM, loss_fn=loss_fn,
                inputs={"ids": torch.tensor([[1, 5, 0, 7], [3, 2, 6, 4]]),
                        "labels": torch.tensor([[5, 0, 7, 2], [2, 6, 4, 1]])},
                mesh_shape=(2,), mesh_dim_names=("tp",), parallelize=parallelize)
