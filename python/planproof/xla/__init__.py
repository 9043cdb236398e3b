"""planproof.xla: capture what XLA's SPMD partitioner does to a JAX training step.

`capture(case, folder)` compiles the case's jitted step for a mesh of virtual CPU
devices with XLA's dump flags, and copies the two text HLO modules around the
`spmd-partitioning` pass -- the whole program with its shardings, and the per-device
program -- to `folder`. `planproof import-xla BEFORE AFTER` turns them into a spec
(docs/xla.md). The flags must be set before jax is imported, so the capture runs in a
fresh process (`python -m planproof.xla`).
"""
