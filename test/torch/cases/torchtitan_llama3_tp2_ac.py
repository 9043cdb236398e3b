# torchtitan_llama3_tp2.py with torchtitan's selective activation checkpointing applied
# to every block after tensor parallelism (SelectiveAC, as the trainer applies its
# default policy: torch's checkpoint_wrapper with a policy saving the matmuls'
# and collectives' outputs). Recomputation changes no value (the blocks draw no random
# numbers), so the capture is torchtitan_llama3_tp2.json's (capture_torchtitan.test).
from torchtitan.distributed.activation_checkpoint import SelectiveAC
from torchtitan_llama3 import case, parallelize


def parallelize_with_ac(dp, tp):
    inner = parallelize(dp, tp)

    def fn(model, mesh):
        model = inner(model, mesh)
        SelectiveAC(SelectiveAC.Config()).apply(model)
        return model
    return fn


def planproof_case():
    return dict(case(dp=1, tp=2, heads=2), parallelize=parallelize_with_ac(1, 2))
