# torchtitan_qwen3_dp2_tp2_trainer.py with a seeded bug: the valid tokens of the step's
# microbatches are counted on each rank but not summed over the batch mesh (train_step's
# dist_sum_tensor left out), so every rank divides its summed loss by its own count --
# the logged loss is twice the reference's; clipping and AdamW hide most of it in the
# update.
from torchtitan_llama3 import plan_loss_fn
from torchtitan_qwen3_dp2_tp2_trainer import planproof_case as trainer


def local_count_loss_fn(model, mesh, tokens, labels, batch):
    return plan_loss_fn(model, mesh, tokens, labels, batch, over_mesh=False)


def planproof_case():
    return dict(trainer(), plan_loss_fn=local_count_loss_fn)
