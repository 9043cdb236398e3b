# lit configuration for planproof: IR round-trips and verifier tests of the dialects
# (planproof-opt), and CLI behaviour (planproof), checked with FileCheck.
import os
import subprocess

import lit.formats

config.name = "planproof"
# External shell, so RUN lines may use `$?` to check exact exit statuses.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "unit", "corpus", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.planproof_obj_root, "test")

path = os.pathsep.join([config.planproof_tools_dir, config.llvm_tools_dir,
                        "/usr/lib/llvm-22/bin", config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
config.substitutions.append(("%specs", os.path.join(config.planproof_src_root, "verify-specs")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "CLI", "Inputs")))

# Slow tests (each over a minute on 2 cores, whose purpose a faster test also serves at a
# smaller size) say `REQUIRES: slow`: `make test` leaves them out (UNSUPPORTED), `make
# test-slow` runs them (PLANPROOF_SLOW_TESTS=1).
if os.environ.get("PLANPROOF_SLOW_TESTS") == "1":
    config.available_features.add("slow")

# Python with the test tools from PyPI (jsonschema, the SARIF schema), set up by
# `make pytools` (a dependency of `make test`) in the build folder.
import sys
config.substitutions.append(("%python", sys.executable))
# %at SPEC NAME: LINE:COL of the plan op defining %NAME (test/at.py), for FileCheck -DAT=...
config.substitutions.append(("%at", sys.executable + " " + os.path.join(config.test_source_root, "at.py")))
config.substitutions.append(("%pytools", os.path.join(config.planproof_obj_root, "pytools", "bin", "python")))
config.substitutions.append(("%docs", os.path.join(config.planproof_src_root, "docs")))
config.substitutions.append(("%planproof_src", config.planproof_src_root))
config.substitutions.append(("%planproof_obj", config.planproof_obj_root))
config.substitutions.append(("%planproof_bin", os.path.join(config.planproof_tools_dir, "planproof")))

# planproof.torch's live captures need PyTorch, in the virtual environment `make
# torchenv` sets up (PLANPROOF_TORCHENV); tests that capture say `REQUIRES: torch`.
# Checked-in captures (test/torch/cases/*.json) are verified without it.
torchenv = os.environ.get("PLANPROOF_TORCHENV",
                          os.path.expanduser("~/.cache/planproof/torchenv-2.15"))
torchpy = os.path.join(torchenv, "bin", "python")
# One probe for the three (importing torch takes seconds): it prints the features found.
_probe = """
import importlib
found = []
for feature, modules in (("torch", ["torch"]),
                         ("megatron", ["megatron.core.tensor_parallel"]),
                         ("torchtitan", ["torchtitan.models.llama3", "torchtitan.components.loss"])):
    if feature != "torch" and "torch" not in found:
        break
    try:
        for m in modules:
            importlib.import_module(m)
        found.append(feature)
    except Exception:
        pass
print(" ".join(found))
"""
try:
    _found = subprocess.run([torchpy, "-c", _probe], capture_output=True, text=True,
                            timeout=300).stdout.split()
except (OSError, subprocess.TimeoutExpired):
    _found = []
for _feature in _found:
    config.available_features.add(_feature)
if "torch" not in _found:
    lit_config.note("planproof.torch live captures skipped: no PyTorch in " + torchenv)
config.substitutions.append(("%torchpy", "env PYTHONPATH=" +
                             os.path.join(config.planproof_src_root, "python") + " PLANPROOF=" +
                             os.path.join(config.planproof_tools_dir, "planproof") + " " + torchpy))

# planproof.xla's live captures need JAX, in the virtual environment `make jaxenv` sets
# up (PLANPROOF_JAXENV); tests that capture say `REQUIRES: jax`. The checked-in dumps
# (test/xla/cases/*.hlo) are imported and verified without it.
jaxenv = os.environ.get("PLANPROOF_JAXENV", os.path.expanduser("~/.cache/planproof/jaxenv-0.10"))
jaxpy = os.path.join(jaxenv, "bin", "python")
try:
    if subprocess.run([jaxpy, "-c", "import jax"], capture_output=True,
                      timeout=300).returncode == 0:
        config.available_features.add("jax")
    else:
        lit_config.note("planproof.xla live captures skipped: no JAX in " + jaxenv)
except (OSError, subprocess.TimeoutExpired):
    lit_config.note("planproof.xla live captures skipped: no JAX in " + jaxenv)
config.substitutions.append(("%jaxpy", "env PYTHONPATH=" +
                             os.path.join(config.planproof_src_root, "python") + " PLANPROOF=" +
                             os.path.join(config.planproof_tools_dir, "planproof") + " " + jaxpy))

# The CUDA replay backend: `cuda-built` when this build has it, `cuda-gpu` when a GPU
# answers (the NCCL smoke test passes). Tests that need one say `REQUIRES: cuda-gpu`
# and are reported UNSUPPORTED (skipped) elsewhere, with the reason printed here.
import subprocess
if config.planproof_cuda == "ON":
    config.available_features.add("cuda-built")
try:
    smoke = subprocess.run([os.path.join(config.planproof_tools_dir, "planproof"), "replay",
                            "--nccl-smoke"], capture_output=True, text=True, timeout=120)
    if smoke.returncode == 0:
        config.available_features.add("cuda-gpu")
    else:
        lit_config.note("CUDA tests are skipped: " + (smoke.stdout + smoke.stderr).strip().splitlines()[-1])
except (OSError, subprocess.TimeoutExpired) as e:
    lit_config.note("CUDA tests are skipped: " + str(e))

# Headless Chromium (Debian's chromium, scripts/install-deps.sh) renders the HTML reports
# in test/CLI/html_report.test; where it is missing those checks are UNSUPPORTED.
import shutil
if shutil.which("chromium"):
    config.available_features.add("chromium")
    config.substitutions.append(("%chromium", shutil.which("chromium") +
                                 " --headless --no-sandbox --disable-gpu --hide-scrollbars"))
else:
    lit_config.note("HTML rendering checks are skipped: no chromium")
