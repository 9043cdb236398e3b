"""planproof: a verifier of the parallel plans of distributed training.

`planproof.torch` captures a PyTorch training step (single-device and parallelized with
DTensor) as a spec that the `planproof` command verifies.
"""
