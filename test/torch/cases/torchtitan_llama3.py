# torchtitan's own Llama3 model and parallelization (torchtitan 0.3.0), as a planproof
# case: the model built from the debug model's recipe (models.llama3._debugmodel: fused
# QKV, ComplexRoPE with llama scaling, RMSNorm, FlexAttention with torchtitan's
# block-causal document mask, SwiGLU, an untied lm_head) at dims that an element-wise
# proof covers; parallelized by torchtitan's own code -- its Llama3 sharding
# config (set_llama3_sharding_config, sequence parallelism on) applied by
# Module.parallelize on torchtitan's ParallelDims (spmd_backend="full_dtensor"); inputs
# made DTensors by full_dtensor.parallelize_inputs, as the trainer does; the loss
# torchtitan's CrossEntropyLoss (vocabulary-parallel: its _LossParallelCrossEntropy)
# over the valid tokens, summed over the batch mesh as train_step does; AdamW with
# torchtitan's default_adamw settings.
import os
import warnings

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.attention.flex_attention as flex_attention

# What the capture on the CPU needs from FlexAttention: torchtitan compiles flex_attention
# and create_block_mask (torch.compile); the trace runs them eagerly -- the same
# higher-order op is traced either way. And FlexAttention refuses CPU inputs that
# require grad at its Python entry (its fused kernels have no CPU backward); the trace
# runs its reference implementation, forward and backward, and planproof translates the
# op itself (docs/torch.md).
# (Set before torchtitan is imported: it compiles them at import.)
os.environ["TORCHDYNAMO_DISABLE"] = "1"
torch._dynamo.config.disable = True
torch._dynamo.config.error_on_nested_fx_trace = False
flex_attention._validate_device = lambda query, key, value: None
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")

import torchtitan.distributed.parallel_dims as parallel_dims_module  # noqa: E402
import torchtitan.models.llama3 as llama3
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torchtitan.components.loss import IGNORE_INDEX, CrossEntropyLoss
from torchtitan.components.optimizer import OptimizersContainer, default_adamw
from torchtitan.distributed import ParallelDims, full_dtensor
from torchtitan.distributed import utils as dist_utils
from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
from torchtitan.models.llama3 import Llama3Model
from torchtitan.models.llama3.sharding import set_llama3_sharding_config

DIM, LAYERS, VOCAB, SEQ, HIDDEN = 8, 1, 16, 4, 8


# Built outside the traced step (when the model is built, in the process that traces
# it), like the trainer's, so that the trace holds them as constants; for the
# single-device batch and each rank's batch shard.
MASKS, BATCHES = {}, set()


def model_fn(heads, sp=True):
    config = Llama3Model.Config(
        dim=DIM, vocab_size=VOCAB,
        tok_embeddings=Embedding.Config(num_embeddings=VOCAB, embedding_dim=DIM,
                                        param_init=llama3._EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=DIM, param_init=llama3._NORM_INIT),
        lm_head=Linear.Config(in_features=DIM, out_features=VOCAB,
                              param_init=llama3._output_linear_init(DIM)),
        layers=llama3._build_llama3_layers(
            fuse_qkv=True, n_layers=LAYERS, dim=DIM, n_heads=heads, hidden_dim=HIDDEN,
            rope=ComplexRoPE.Config(dim=DIM // heads, max_seq_len=64, theta=500000,
                                    scaling="llama"),
            attn_backend="flex"))
    set_llama3_sharding_config(config, enable_sp=sp)
    torch.manual_seed(0)
    return attention_masks_of(config.build())


# The attention masks, built before the step from the batch's positions as torchtitan's
# trainer builds them (Decoder.get_attention_masks: causal and within each document).
# The positions are one document per sequence; the proof covers inputs of that document
# structure (the mask is evaluated at them).
def attention_masks(model, tokens):
    return MASKS[tuple(tokens.shape)]


def loss_fn(model, tokens, labels):
    valid = (labels != IGNORE_INDEX).sum()
    pred = model(tokens, attention_masks=attention_masks(model, tokens))
    loss, _ = CrossEntropyLoss(CrossEntropyLoss.Config())(pred, labels, valid)
    return loss


def parallelize(dp, tp):
    def fn(model, mesh):
        parallel_dims_module.device_type = "cpu"  # (torchtitan's default without a GPU: cuda)
        dims = ParallelDims(dp_replicate=1, dp_shard=dp, cp=1, tp=tp, pp=1, ep=1,
                            world_size=dp * tp, spmd_backend="full_dtensor")
        dims.build_mesh()
        model.parallelize(dims)
        model.parallel_dims = dims
        return model
    return fn


def plan_loss_fn(model, mesh, tokens, labels, batch=None, over_mesh=True):
    # The trainer's valid tokens (of all microbatches: `batch`), over the batch mesh.
    valid = ((labels if batch is None else batch["labels"]) != IGNORE_INDEX).sum()
    if over_mesh and model.parallel_dims.dp_enabled:
        valid = dist_utils.dist_sum_tensor(valid, model.parallel_dims.get_mesh("batch"))
    masks = attention_masks(model, tokens)
    tokens, labels, extra = full_dtensor.parallelize_inputs(
        model.parallel_dims, tokens, labels, {"attention_masks": masks})
    pred = model(tokens, **extra)
    loss, _ = CrossEntropyLoss(CrossEntropyLoss.Config())(pred, labels, valid)
    return loss


def fsdp_grad_sync(grads, mesh):
    """FSDP's gradient reduction, which planproof.torch does not trace (docs/torch.md):
    FSDP2 reduce-scatters each rank's *local* gradient over dp_shard whatever its
    DTensor placements say, summing (torchtitan divides the loss by the global token
    count instead); modelled as that sum, held replicated over dp_shard."""
    out = {}
    for name, g in grads.items():
        dims = list(g.device_mesh.mesh_dim_names)
        local = funcol.all_reduce(g.to_local(), "sum", (g.device_mesh, dims.index("dp_shard")))
        out[name] = DTensor.from_local(local, g.device_mesh,
                                       [Replicate() if d == "dp_shard" else p
                                        for d, p in zip(dims, g.placements)],
                                       run_check=False, shape=g.shape, stride=g.stride())
    return out


def adamw(params):
    return torch.optim.AdamW(params, foreach=False,
                             **default_adamw().param_groups[0].optimizer_kwargs)


def trainer_adamw(params):
    """AdamW as torchtitan's trainer builds it: default_adamw's settings and the
    container's default implementation ("fused": one `_fused_adamw_` op)."""
    impl = OptimizersContainer._build_impl_kwargs(OptimizersContainer.Config())
    return torch.optim.AdamW(params, **impl, **default_adamw().param_groups[0].optimizer_kwargs)


def attention_masks_of(model):
    """The attention masks of every batch size the case uses, built once the model is
    (see MASKS)."""
    for batch in BATCHES:
        if (batch, SEQ) not in MASKS:
            positions = torch.arange(SEQ).expand(batch, -1)
            MASKS[(batch, SEQ)] = model.get_attention_masks(positions)
    return model


def case(dp, tp, heads, grad_sync=None, optimizer=adamw, sp=True, build=None,
         model="Llama3 (debug model recipe", microbatches=1):
    """The case on a dp_shard x tp mesh; `build(heads, sp)` makes the model (default:
    torchtitan's Llama3, model_fn), `model` names it in the description; with
    `microbatches`, each rank's batch is that many sequences, one per microbatch, its
    gradients accumulated as torchtitan's train_step accumulates them (plan_loss_fn
    then counts the valid tokens of every microbatch, as train_step does)."""
    rows = dp * microbatches
    BATCHES.update({rows, microbatches, 1})
    g = torch.Generator().manual_seed(1)
    data = {"tokens": torch.randint(0, VOCAB, (rows, SEQ), generator=g),
            "labels": torch.randint(0, VOCAB, (rows, SEQ), generator=g)}
    build = build or model_fn
    out = dict(model_fn=lambda: build(heads, sp), loss_fn=loss_fn, plan_loss_fn=plan_loss_fn,
               optimizer=optimizer, inputs=data, parallelize=parallelize(dp, tp),
               description=f"torchtitan 0.3.0 {model}, dim {DIM}), "
                           f"dp_shard={dp} tp={tp} " +
                           ("with" if sp else "without") + " sequence parallelism" +
                           (f", {microbatches} microbatches" if microbatches > 1 else ""))
    if microbatches > 1:
        out.update(microbatches=microbatches)
    if dp == 1:
        return dict(out, mesh_shape=(tp,), mesh_dim_names=("tp",))
    return dict(out, mesh_shape=(dp, tp), mesh_dim_names=("dp_shard", "tp"),
                input_placements={n: [Shard(0), Replicate()] for n in data},
                loss_placements=[Partial("sum"), Replicate()], grad_sync=grad_sync)
