#!/usr/bin/env python3
"""CPU throughput of the numeric replay (issue 5):

1. the parametric TP=8 MLP of verify-specs/json at growing sizes, fp32 and bf16;
2. the 2-layer Llama-style block of the realistic-size case (scripts/gen_llama_block.py:
   GQA attention, SwiGLU, DP=2 x TP=8 with sequence parallelism, 16 ranks), scaled down
   until it fits the CPU replay's work limit (the realistic size itself, hidden 4096 and
   sequence 2048, is ~1.2e13 scalar operations: a GPU job, bench/gpu_check.sh), on the
   CPU backend and on the emulated kernel backend.

Reports the median wall time over --runs runs, peak memory, the scalar operations of one
replay (four reference runs for the error model plus the plan on every rank) and the
throughput.

    python3 bench/bench_replay.py --runs 3 --part mlp --baseline OLD/planproof --out bench/results-replay.md
    python3 bench/bench_replay.py --runs 3 --part llama --out bench/results-replay-llama.md
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import PLANPROOF, ROOT, write_results  # noqa: E402

SPEC = os.path.join(ROOT, "verify-specs", "json", "mlp_tp8_parametric.json")
SIZES = [(64, 256, 1024), (128, 512, 2048), (256, 1024, 2048)]


def work(B, H, F, tp=8):
    # matmuls dominate: forward 2 * B*H*F, backward 4 * B*H*F; the reference runs four
    # times (fp64, storage precision, reversed and pairwise sums), the plan once (its ranks together
    # do the reference's work).
    return 5 * 6 * B * H * F


# (hidden, heads, kv heads, head width, ffn, sequence, vocabulary); batch 2.
LLAMA = [(64, 16, 8, 4, 224, 16, 256), (128, 16, 8, 8, 448, 64, 512),
         (256, 16, 8, 16, 896, 128, 1024), (512, 32, 8, 16, 1792, 256, 2048)]


def llama_work(H, nh, nkv, d, F, S, V, layers=2, B=2):
    T = B * S
    macs = layers * (T * (2 * H * nh * d + 2 * H * nkv * d + 3 * H * F) + 2 * B * nh * S * S * d)
    return 5 * (macs + T * H * V)


def llama_rows(runs):
    import resource  # noqa: F401  (peak RSS comes from /usr/bin/time)
    rows = ["| hidden | heads (kv) x width | FFN | seq | vocab | backend | verdict | median wall s | peak MiB | scalar ops | Gops/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    spec = "/tmp/planproof-bench-llama.mlir"
    for H, nh, nkv, d, F, S, V in LLAMA:
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_llama_block.py"), spec,
                        "--layers", "2", "--batch", "2", "--seq", str(S), "--dp", "2", "--tp", "8",
                        "--sp", "--hidden", str(H), "--heads", str(nh), "--kv-heads", str(nkv),
                        "--head-dim", str(d), "--ffn", str(F), "--vocab", str(V)], check=True)
        for backend in ("cpu", "emulated"):
            times, peaks, verdict = [], [], "?"
            for _ in range(runs):
                t0 = time.perf_counter()
                p = subprocess.run(["/usr/bin/time", "-f", "%M", PLANPROOF, "replay", spec, "--dtype",
                                    "bf16", "--backend", backend], capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                peaks.append(int(p.stderr.strip().splitlines()[-1]) / 1024)
                verdict = {0: "within tolerance", 1: "diverged"}.get(p.returncode, f"exit {p.returncode}")
                if p.returncode == 3:
                    verdict = "refused: past the 2e10 work limit"
                    break
            med = statistics.median(times)
            w = llama_work(H, nh, nkv, d, F, S, V)
            if verdict.startswith("refused"):
                rows.append(f"| {H} | {nh} ({nkv}) x {d} | {F} | {S} | {V} | {backend} | {verdict} | - | - | "
                            f"{w:.3g} | - |")
            else:
                rows.append(f"| {H} | {nh} ({nkv}) x {d} | {F} | {S} | {V} | {backend} | {verdict} | {med:.2f} | "
                            f"{max(peaks):.0f} | {w:.3g} | {w / med / 1e9:.2f} |")
            print(rows[-1], flush=True)
    H, nh, nkv, d, F, S, V = 4096, 32, 8, 128, 14336, 2048, 32000
    rows.append(f"| {H} | {nh} ({nkv}) x {d} | {F} | {S} | {V} | any CPU | not run: about "
                f"{llama_work(H, nh, nkv, d, F, S, V):.2g} scalar ops (GPU: bench/gpu_check.sh) | | | | |")
    return rows


def replay_once(binary, B, H, F, dtype):
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "replay", SPEC, "--dtype", dtype,
                        "--shape", f"B={B},H={H},F={F}"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    verdict = {0: "within tolerance", 1: "diverged"}.get(p.returncode, f"exit {p.returncode}")
    return wall, int(p.stderr.strip().splitlines()[-1]) / 1024, verdict


def blas_alone(B, H, F):
    """The same matrix products through the BLAS alone (build/bin/planproof-bench-products)."""
    import json
    out = subprocess.run([os.path.join(ROOT, "build", "bin", "planproof-bench-products"), str(B), str(H),
                          str(F), "8"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def mlp_rows(runs, baseline):
    rows = ["| B x H x F | dtype | verdict | scalar ops | baseline wall s | wall s | speed-up | Gops/s | "
            "peak MiB | BLAS alone: dgemm s | sgemm s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    kernels = []
    for B, H, F in SIZES:
        blas = blas_alone(B, H, F)
        kernels.append((f"{B} x {H} x {F}", blas["kernel_gmacs_per_s"]))
        for dtype in ("fp32", "bf16"):
            now, before, peaks, verdict = [], [], [], "?"
            for _ in range(runs):  # interleaved: the two builds see the same machine load
                wall, peak, verdict = replay_once(PLANPROOF, B, H, F, dtype)
                now.append(wall)
                peaks.append(peak)
                if baseline:
                    before.append(replay_once(baseline, B, H, F, dtype)[0])
            med = statistics.median(now)
            base = f"{statistics.median(before):.2f}" if before else "-"
            ratio = f"{statistics.median(before) / med:.1f}x" if before else "-"
            w = work(B, H, F)
            rows.append(f"| {B} x {H} x {F} | {dtype} | {verdict} | {w:.3g} | {base} | {med:.2f} | {ratio} | "
                        f"{w / med / 1e9:.2f} | {max(peaks):.0f} | {blas['dgemm_seconds']:.2f} | "
                        f"{blas['sgemm_seconds']:.2f} |")
            print(rows[-1], flush=True)
    rows += ["", f"BLAS: {blas['blas']}. Exact kernels of the replay alone (G multiply-adds per second, "
             "one thread, on the forward product B x H times H x F):", ""]
    names = list(kernels[0][1])
    rows.append("| B x H x F | " + " | ".join(names) + " |")
    rows.append("|---" * (len(names) + 1) + "|")
    for size, k in kernels:
        rows.append(f"| {size} | " + " | ".join(f"{k[n]:.1f}" for n in names) + " |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--part", choices=["mlp", "llama"], default="mlp")
    ap.add_argument("--baseline", default=None,
                    help="another planproof binary (an earlier build) to time side by side")
    args = ap.parse_args()
    if args.part == "mlp":
        rows = mlp_rows(args.runs, args.baseline)
    else:
        rows = ["2-layer Llama-style block, DP=2 x TP=8 with SP (16 ranks), batch 2, bf16:", ""]
        rows += llama_rows(args.runs)
    text = "\n".join(rows) + "\n"
    if args.out:
        cmd = f"python3 bench/bench_replay.py --runs {args.runs} --part {args.part}"
        if args.baseline:
            cmd += " --baseline BASELINE"
        write_results(args.out, cmd, text)


if __name__ == "__main__":
    main()
