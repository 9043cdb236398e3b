# A loss masked by a validity range, (labels >= 0) & (labels < V), on a batch that holds
# the ignored label, with ce_ignored_labels_dp2.py's plan (each rank over its own count,
# the gradients averaged): `labels >= 0` is the kept column (every class passes, -100
# does not) and `labels < V` holds on every label, so the mask counts the kept tokens
# and the mean of means is violated at the division. HI=7: a range whose end splits the
# classes, which the capture does not cover (inconclusive at the comparison).
import os

import torch.nn.functional as F

import ce_ignored_labels_dp2 as bug
from ce_ignored_labels_dp2 import V

HI = int(os.environ.get("HI", V))


def loss_fn(model, ids, labels):
    valid = ((labels >= 0) & (labels < HI)).reshape(-1).float()
    nll = F.cross_entropy(model(ids).reshape(-1, V), labels.reshape(-1), reduction="none")
    return (nll * valid).sum() / valid.sum()


def planproof_case():
    return dict(bug.planproof_case(), loss_fn=loss_fn)
