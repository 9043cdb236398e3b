# Every translation rule in one single-device step (a one-rank mesh): the capture's
# numeric cross-check (--check-numerics) replays the translated step against PyTorch.
import torch
from torch import nn

# Fixed numbers: the tests that use this case (capture_live.test) are reproducible.
torch.manual_seed(0)


class Zoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6) * 0.5)
        self.b = nn.Parameter(torch.randn(6) * 0.1)
        self.g = nn.Parameter(torch.rand(6) + 0.5)
        self.q = nn.Parameter(torch.randn(2, 3, 4) * 0.5)

    def forward(self, x):
        h = torch.addmm(self.b, x.abs(), self.w)                # addmm, abs (of data)
        h = nn.functional.silu(h) + nn.functional.gelu(h) * 0.5  # silu, gelu, mul.Scalar
        h = h - h.mean(dim=-1, keepdim=True)                    # mean.dim, sub
        r = torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5)  # rsqrt, pow-free rms
        h = h * r * self.g                                      # broadcasting
        p = torch.softmax(h, dim=-1)                            # _softmax
        lp = torch.log_softmax(h, dim=-1)                       # _log_softmax
        s = torch.bmm(self.q, self.q.transpose(1, 2))           # bmm, transpose
        s = s.permute(0, 2, 1).reshape(2, 9).sum(dim=1)         # permute, reshape, sum
        e = torch.exp(-h.pow(2)) / 3                            # neg, pow, exp, div.Scalar
        z = torch.sqrt(self.g) + torch.reciprocal(self.g) + torch.log(self.g)
        z = z + torch.tanh(h[:1]).sum(0) * torch.sigmoid(h[1:2]).sum(0)  # tanh, sigmoid
        z = z + torch.erf(h[2:3]).sum(0)                        # erf
        return (p * lp).sum() + e.mean() + s.sum() * 0.1 + z.sum()


def loss_fn(model, x):
    return model(x)


def planproof_case():
    return dict(model_fn=Zoo, loss_fn=loss_fn, inputs={"x": torch.randn(3, 4)},
                mesh_shape=(1,), mesh_dim_names=("one",), parallelize=lambda m, mesh: m)
