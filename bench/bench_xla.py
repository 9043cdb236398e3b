"""XLA captures (test/xla/cases): time of `planproof import-xla` and of `planproof verify`
on the spec it writes, medians over runs, with the spec's size.

    python3 bench/bench_xla.py --runs 3 --out bench/results-xla.md
    python3 bench/bench_xla.py --full --runs 5 --out bench/results-xla-full.md

--full: JAX steps at a real model's sizes (Llama3-8B's hidden size, heads, FFN and
vocabulary, sequences of 2048) on up to 512 devices: the checked-in dumps, and the
Llama block at dp 64 x tp 8 compiled here (needs `make jaxenv`), imported and verified
by the layout engine, with the peak memory of each command.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import PLANPROOF, ROOT, write_results  # noqa: E402

CASES = [
    ("mlp_dp2_tp4", []),
    ("sp_mlp_dp2_tp4", []),
    ("llama_block_dp2_tp4", []),
    ("shard_map_mlp_tp4", ["--reference"]),
]


FULL = [  # (name, case, mesh, devices, environment to compile it; None: checked in)
    ("lm_vocab_full_dp8_tp8", "", "dp=8,tp=8", 64, None),
    ("lm_accum_full_dp2_tp4", "lm_accum_dp2_tp4", "dp=2,tp=4", 8, {"ACCUM_FULL": "1"}),
    ("lm_accum_split_full_dp2_tp4", "lm_accum_dp2_tp4", "dp=2,tp=4", 8,
     {"ACCUM_FULL": "1", "MB_SPLIT": "1"}),
    ("scan_layers_full_dp2_tp4", "scan_layers_dp2_tp4", "dp=2,tp=4", 8, {"SCAN_FULL": "1"}),
    ("llama_block_full_dp2_tp4", "llama_block_dp2_tp4", "dp=2,tp=4", 8, {"LLAMA_FULL": "2x4"}),
    ("llama_block_full_dp8_tp8", "", "dp=8,tp=8", 64, None),
    ("llama_block_full_gqa_dp8_tp8", "", "dp=8,tp=8", 64, None),
    ("llama_block_full_sp_dp8_tp8", "llama_block_dp2_tp4", "dp=8,tp=8", 64,
     {"LLAMA_FULL": "8x8", "LLAMA_SP": "1"}),
    ("llama_block_full_dp64_tp8", "llama_block_dp2_tp4", "dp=64,tp=8", 512, {"LLAMA_FULL": "64x8"}),
]


def timed(cmd):
    """Wall seconds and peak MiB of `cmd` (under /usr/bin/time), and its stdout."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 3):
        raise RuntimeError(" ".join(cmd) + ": " + p.stderr[-2000:])
    return wall, int(p.stderr.strip().splitlines()[-1]) / 1024, p.stdout


# What the cases are, written under the table (kept here so that a rerun keeps it).
FULL_NOTES = """JAX steps at a real model's sizes, as XLA partitions them on this machine
(`planproof.xla`, JAX 0.10.2 on virtual CPU devices; rows with a compile time are
compiled by the benchmark from the case file and its environment, the others are the
checked-in dumps):

- `lm_vocab_full_dp8_tp8`: the language-model step with its table and head split by
  vocabulary (16,384 tokens, vocabulary 128256, hidden 4096), 64 devices;
- `lm_accum_full_dp2_tp4` (`ACCUM_FULL=1`): gradient accumulation over 4 microbatches
  of token ids (4 x 2048 tokens each; XLA's scan unrolled, every rank gathering each
  microbatch's ids); `lm_accum_split_full_dp2_tp4` (`MB_SPLIT=1` too): each
  microbatch's rows split over dp, the ids exchanged two microbatches at a time;
- `scan_layers_full_dp2_tp4` (`SCAN_FULL=1`): 32 stacked layers of hidden 4096 and
  FFN 14336 run by `jax.lax.scan` (the while loop unrolled, 1,924 plan ops);
- `llama_block_full_*` (`LLAMA_FULL=DPxTP`): the Llama block at Llama3-8B's sizes
  (hidden 4096, 32 heads, FFN 14336, vocabulary 128256, sequences of 2048, causal
  mask, AdamW, every weight over dp and tp) on 8, 64 and 512 devices;
  `llama_block_full_sp_dp8_tp8` (`LLAMA_SP=1` too) splits each sequence over tp as
  well: each rank's causal mask covers its chunk of queries, the query offset per
  partition; `llama_block_full_gqa_dp8_tp8` (`LLAMA_KV=8`, checked in) has Llama3-8B's
  grouped-query attention, 8 key/value heads for its 32 query heads (`jnp.repeat`):
  each tp rank holds one key/value head and the four query heads that read it.

Medians of 5 runs; peak memory the largest of any import or verify. The layout engine
proves each in well under a second -- XLA's plan at its real degree, not a stand-in.
The element engine answers inconclusive on each (the scalar operations at these
shapes are past its budget), as it must."""


def full(a):
    folder = os.path.join(ROOT, "test", "xla", "cases")
    tmp = tempfile.mkdtemp()
    rows = []
    for name, case, mesh, devices, env in FULL:
        where, compile_s = folder, ""
        if env is not None:
            where = tmp
            t0 = time.perf_counter()
            p = subprocess.run([os.path.join(ROOT, "scripts", "planproof-xla"),
                                os.path.join(folder, case + ".py"), "--devices",
                                str(devices), "--name", name, "--out-dir", tmp],
                               env=dict(os.environ, **env), capture_output=True, text=True)
            if p.returncode != 0:
                rows.append(f"| {name} | {devices} | not compiled: {p.stderr.strip()[-200:]} |")
                continue
            compile_s = f"{time.perf_counter() - t0:.1f}"
        spec = os.path.join(tmp, name + ".json")
        imports, verifies, peaks = [], [], []
        verdict = ""
        for _ in range(a.runs):
            w, m, _ = timed([PLANPROOF, "import-xla", os.path.join(where, name + ".before.hlo"),
                             os.path.join(where, name + ".after.hlo"), "--mesh", mesh, "-o", spec])
            imports.append(w)
            peaks.append(m)
            w, m, out = timed([PLANPROOF, "verify", "--engine", "layout", "--format", "json", spec])
            verifies.append(w)
            peaks.append(m)
            verdict = json.loads(out)["verdict"]
        _, _, out = timed([PLANPROOF, "verify", "--format", "json", spec])
        element = json.loads(out)["verdict"]
        hlo = sum(1 for line in open(os.path.join(where, name + ".after.hlo")) if " = " in line)
        d = json.load(open(spec))
        rows.append(f"| {name} | {devices} | {hlo} | {len(d['plan']['ops'])} | {compile_s} | "
                    f"{statistics.median(imports):.2f} | {verdict} | {statistics.median(verifies):.3f} | "
                    f"{max(peaks):.0f} | {element} |")
    text = ("| case | devices | HLO instructions after partitioning | plan ops | JAX compile and "
            "dump s | import-xla s | layout engine | verify wall s | peak MiB | element engine |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    if a.out:
        write_results(a.out, "python3 bench/bench_xla.py --full --runs %d --out %s" % (a.runs, a.out),
                      text + "\n" + FULL_NOTES + "\n")
    print(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--full", action="store_true")
    a = ap.parse_args()
    if a.full:
        return full(a)
    rows = []
    folder = os.path.join(ROOT, "test", "xla", "cases")
    tmp = tempfile.mkdtemp()
    for name, extra in CASES:
        cmd = [PLANPROOF, "import-xla", os.path.join(folder, name + ".before.hlo"),
               os.path.join(folder, name + ".after.hlo"), "--mesh", "dp=2,tp=4",
               "-o", os.path.join(tmp, name + ".json")]
        if extra:
            cmd += ["--reference", os.path.join(folder, name + ".reference.hlo")]
        imports, verifies, engine = [], [], []
        verdict = ""
        for _ in range(a.runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            imports.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            p = subprocess.run([PLANPROOF, "verify", "--format", "json",
                                os.path.join(tmp, name + ".json")], capture_output=True, text=True)
            verifies.append(time.perf_counter() - t0)
            r = json.loads(p.stdout)
            verdict = r["verdict"]
            engine.append(r["stats"]["milliseconds"] / 1000)
        spec = json.load(open(os.path.join(tmp, name + ".json")))
        hlo = sum(1 for line in open(os.path.join(folder, name + ".after.hlo")) if " = " in line)
        rows.append(f"| {name} | {hlo} | {len(spec['reference']['ops'])} | {len(spec['plan']['ops'])} | "
                    f"{verdict} | {statistics.median(imports):.3f} | {statistics.median(engine):.2f} | "
                    f"{statistics.median(verifies):.2f} |")
    text = ("| case | HLO instructions after partitioning | reference ops | plan ops | verdict | "
            "import-xla s | engine s | verify wall s |\n|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    if a.out:
        write_results(a.out, "python3 bench/bench_xla.py --runs %d --out %s" % (a.runs, a.out), text)
    print(text)


if __name__ == "__main__":
    main()
