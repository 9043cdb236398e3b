# Megatron-core's own tensor-parallel layers (megatron-core 0.16.1): a
# ColumnParallelLinear then a RowParallelLinear (input_is_parallel), on the
# tensor-parallel group that megatron.core.parallel_state builds over the fake process
# group. Their forward and backward collectives are Megatron's autograd Functions
# around the in-place torch.distributed.all_reduce.
import torch
from torch import nn
from torch.distributed.tensor import Shard

IN, HIDDEN = 4, 8


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(IN, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, IN, bias=False)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x)))


class MegatronMLP(nn.Module):
    def __init__(self):
        super().__init__()
        from megatron.core import parallel_state
        from megatron.core.model_parallel_config import ModelParallelConfig
        from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
        if not parallel_state.model_parallel_is_initialized():
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=2,
                                                     create_gloo_process_groups=False)
        config = ModelParallelConfig(tensor_model_parallel_size=2, use_cpu_initialization=True,
                                     params_dtype=torch.float32)
        init = nn.init.zeros_
        self.up = ColumnParallelLinear(IN, HIDDEN, config=config, init_method=init, bias=False,
                                       gather_output=False)
        self.down = RowParallelLinear(HIDDEN, IN, config=config, init_method=init, bias=False,
                                      input_is_parallel=True, skip_bias_add=False)

    def forward(self, x):
        h, _ = self.up(x)
        y, _ = self.down(nn.functional.gelu(h))
        return y


def loss_fn(model, x, t):
    return nn.functional.mse_loss(model(x), t)


def planproof_case():
    return dict(model_fn=MLP, loss_fn=loss_fn,
                inputs={"x": torch.randn(2, IN), "t": torch.randn(2, IN)},
                mesh_shape=(2,), mesh_dim_names=("tp",),
                parallelize=lambda model, mesh: MegatronMLP(),
                param_placements={"up.weight": [Shard(0)], "down.weight": [Shard(1)]})
