# torchtitan_llama3_dp2_tp2_accum2.py with a seeded bug: each microbatch's summed loss is
# divided by its own valid tokens (summed over the batch mesh) -- the count taken inside
# the forward-backward call, as for a step without accumulation -- instead of the valid
# tokens of all the step's microbatches. Every microbatch's loss and gradients are twice
# the share they should be.
from torchtitan_llama3 import case, fsdp_grad_sync, plan_loss_fn


def per_microbatch_count(model, mesh, tokens, labels):
    return plan_loss_fn(model, mesh, tokens, labels)


def planproof_case():
    return dict(case(dp=2, tp=2, heads=2, grad_sync=fsdp_grad_sync, microbatches=2),
                plan_loss_fn=per_microbatch_count)
