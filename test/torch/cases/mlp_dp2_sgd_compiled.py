# mlp_dp2_sgd.py with the model torch.compile'd (as torchtitan compiles each block): the
# capture runs compiled modules eagerly and strips the compiled module's `_orig_mod.`
# from parameter names, so the capture is mlp_dp2_sgd.json's (capture_live_step.test).
import torch
from mlp_dp2_sgd import MLP
from mlp_dp2_sgd import planproof_case as plain


def planproof_case():
    return dict(plain(), model_fn=lambda: torch.compile(MLP()))
