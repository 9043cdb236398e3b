# mlp_dp2_sgd.py with AdamW's fused kernel (fused=True: one `_fused_adamw_` op updates
# every parameter and both moments -- torchtitan's default optimizer implementation),
# with amsgrad, after the gradients are averaged over dp.
import torch
from mlp_dp2_sgd import planproof_case as plain


def planproof_case():
    return dict(plain(), optimizer=lambda ps: torch.optim.AdamW(
        ps, lr=0.1, weight_decay=0.1, amsgrad=True, fused=True))
