# gpt2_dp2_tp2 with a seeded bug in the hand-written data parallelism: the learned
# position table's gradient is left local (never averaged over dp), so the ranks'
# position tables drift apart after the first step.
import functools

import gpt2_dp2_tp2 as base
from gpt2_dp2_tp2 import GPT, loss_fn, parallelize  # noqa: F401


def planproof_case():
    case = base.planproof_case()
    case["grad_sync"] = functools.partial(base.grad_sync, kept_local=("wpe.weight",))
    return case
