# torchtitan's Qwen3 (torchtitan_qwen3_dp2_tp2.py) with its token embedding tied to the
# lm_head, on tp=2: one parameter with two uses, sharded by vocabulary for both, its
# gradient the sum of both uses' (tied_case).
from torchtitan_qwen3_dp2_tp2 import tied_case


def planproof_case():
    return tied_case(dp=1)
