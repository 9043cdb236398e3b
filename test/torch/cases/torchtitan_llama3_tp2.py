# torchtitan's Llama3 with tensor and sequence parallelism at TP=2, forward, backward and
# an AdamW step, everything torchtitan's own code (torchtitan_llama3.py).
from torchtitan_llama3 import case


def planproof_case():
    return case(dp=1, tp=2, heads=2)
