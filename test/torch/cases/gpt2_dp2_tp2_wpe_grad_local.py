# gpt2_dp2_tp2 with a seeded bug in the hand-written data parallelism: the learned
# position table's gradient is left local (never averaged over dp), so the ranks'
# position tables drift apart after the first step.
import torch.distributed._functional_collectives as funcol
from torch.distributed.tensor import DTensor

import gpt2_dp2_tp2 as base
from gpt2_dp2_tp2 import GPT, loss_fn, parallelize  # noqa: F401


def grad_sync(grads, mesh):
    out = {}
    for n, g in grads.items():
        if isinstance(g, DTensor):
            local = funcol.all_reduce(g.to_local(), "avg", (mesh, 0))
            out[n] = DTensor.from_local(local, g.device_mesh, g.placements, run_check=False,
                                        shape=g.shape, stride=g.stride())
        elif n.startswith("wpe"):
            out[n] = g  # forgotten: stays this rank's gradient
        else:
            out[n] = funcol.all_reduce(g, "avg", (mesh, 0))
    return out


def planproof_case():
    case = base.planproof_case()
    case["grad_sync"] = grad_sync
    return case
