#!/usr/bin/env python3
"""Semantically hostile inputs for every entry point of planproof, each run and held to
the CLI contract (docs: exit 0 verified, 1 violated, 2 bad input or usage, 3
inconclusive):

  - bad input is exit 2 with `FILE:LINE:COL: error: MESSAGE` on stderr (JSON inputs: the
    message names the JSON path), and with `--format json` a JSON object on stdout with
    "verdict": "error" and "exit_status": 2;
  - never a signal, never exit 3 with "internal error", never a run past its
    --time-limit (a subprocess timeout of time-limit + 15 s; a kill is a failure);
  - never raw control characters (other than \\n and \\t), ESC, C1 controls or Unicode
    bidi controls (U+202A-202E, U+2066-2069) in stdout/stderr, never a line of
    stdout/stderr that starts with a forged diagnostic (`FAKE.mlir:1:1: error: forged`,
    `::error`);
  - JSON and SARIF reports parse as JSON; SARIF artifact URIs are percent-encoded; the
    HTML report holds no raw `<script` from the input; reports show no lines of files
    outside the spec's folder.

Classes (each a list of generators taking a random.Random; sizes, positions and values
vary with the seed):

  int-boundary    boundary integers in JSON specs, MLIR specs, model files, recipes, options
  xla-reduction   XLA reduction computations that are not exactly op(param0, param1)
  hlo-malformed   malformed HLO dumps (comments, num_partitions, device ids, shapes)
  blowup          exponential call DAGs, non-advancing loops, huge layer counts, deep nesting
  not-a-file      FIFOs, devices, directories, file names with control characters
  forged-strings  names and fields with newlines, ESC, bidi controls, forged diagnostics
  loc-file-leak   op locations naming files outside the spec's folder
  npy             hostile .npy inputs for `planproof replay --inputs DIR`
  python-api      the Python binding: deep nesting, invalid UTF-8, inf time limits, fork

Usage:

  # from a lit test (fixed seed, small count, about 30 s on 2 cores; prints
  # `hostile: N inputs, 0 failures`, or lists each failure and exits 1):
  RUN: %pytools %planproof_src/test/hostile/hostile.py --planproof %planproof_bin --build %planproof_obj --seed 1 --count 45 --time-limit 5 | FileCheck %s
  CHECK: hostile: 45 inputs, 0 failures

  # a campaign (markdown table of counts per class, the failures listed after it):
  test/hostile/hostile.py --seed 7 --count 450 --out hostile.md [--keep DIR]

  # one case again (its files kept under DIR):
  test/hostile/hostile.py --seed 7 --case xla-reduction:3 --keep DIR -v

Case i of a run is class i mod 9 (in the order above), the (i div 9)-th of its class; a
case's content depends only on (seed, class, index), so `--case` reproduces it.
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# --------------------------------------------------------------------------------------
# Inputs the generators start from (all in the source tree).

TINY = os.path.join(ROOT, "test", "CLI", "Inputs", "tiny.json")
PARAMETRIC = os.path.join(ROOT, "verify-specs", "json", "mlp_tp8_parametric.json")
MLIR_OK = os.path.join(ROOT, "verify-specs", "mlp", "mlp_tp2.mlir")
MLIR_BAD = os.path.join(ROOT, "verify-specs", "mlp", "mlp_tp2_row_allreduce_avg.mlir")
MODEL = os.path.join(ROOT, "verify-specs", "models", "llama3-8b.json")
XLA = os.path.join(ROOT, "test", "xla", "cases")
MLP_BEFORE = os.path.join(XLA, "mlp_dp2_tp4.before.hlo")
MLP_AFTER = os.path.join(XLA, "mlp_dp2_tp4.after.hlo")
LM_BEFORE = os.path.join(XLA, "lm_accum_dp2_tp4.before.hlo")
LM_AFTER = os.path.join(XLA, "lm_accum_dp2_tp4.after.hlo")

BOUNDARY = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63 - 1, 10**30, -2**63, 2**64 + 1]
INT64 = range(-2**63, 2**63)

FORGED_LINE = "FAKE.mlir:1:1: error: forged"
PAYLOADS = [
    "\n" + FORGED_LINE,
    "\n::error file=x::forged",
    "\r\x1b[31mred",
    "\u202eevil",
    "\x1b]0;title\x07",
    "\u2066iso\u2069\u202a",
    "<script>HOSTILE_XSS()</script>",
    " 100% sp%zz",
    "\r\n" + FORGED_LINE,
    "\x00nul",
    "\x85nel\u2028ls",
]


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def write(path, data):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
    return path


def tiny(violated=True):
    d = json.loads(read(TINY))
    if violated:
        d["plan"]["ops"][1]["attrs"]["kind"] = "avg"
        d["expect"] = {"verdict": "violated", "kind": "reduction", "at": "y"}
    return d


def jdump(doc, rng=None):
    """JSON text of doc; the layout (one line or indented) varies with rng."""
    ascii_only = rng is None or rng.random() < 0.5   # else non-ASCII (bidi, C1) raw in the file
    if rng is not None and rng.random() < 0.5:
        return json.dumps(doc, ensure_ascii=ascii_only)
    return json.dumps(doc, indent=1, ensure_ascii=ascii_only)


def shell_quote(s):
    """A shell word for s; control characters and non-ASCII as bash's $'...'."""
    if s and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", s):
        return s
    if all(32 <= ord(c) < 127 for c in s):
        return "'" + s.replace("'", "'\\''") + "'"
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        c = chr(b)
        if c == "'" or c == "\\":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append("\\x%02x" % b)
    return "$'" + "".join(out) + "'"


def show(b, n=400):
    """Printable excerpt of output bytes (escapes what is not printable ASCII)."""
    s = b.decode("utf-8", "surrogateescape") if isinstance(b, bytes) else b
    s = s.strip()
    if len(s) > n:
        s = s[:n] + "..."
    return s.encode("ascii", "backslashreplace").decode().replace("\x1b", "\\x1b") \
        .encode("unicode_escape").decode().replace("\\\\", "\\")


# --------------------------------------------------------------------------------------
# Steps, cases and their checks.

class Step:
    """One command and what the contract wants of it.

    codes: the exit statuses accepted. loc: what an exit 2 must print on stderr:
    'loc' (FILE:LINE:COL: error: ...), 'loc_or_path' (that, or FILE: error: JSON.PATH: ...),
    'error' (any `error:` line). loc_file: the FILE a located error must name (basename).
    path: a JSON path the error must name. fmt: the report format asked for.
    time_limit: the --time-limit passed (the run must end within it + 5 s; the subprocess
    is killed at + 15 s). forbid: strings that must not appear in stdout or stderr.
    then: f(result) -> [Step] to run after this one (a pipeline).
    python: the command is a Python check script (HOSTILE-OK on stdout, exit 0)."""

    def __init__(self, argv, codes, loc=None, loc_file=None, path=None, fmt="text",
                 time_limit=None, timeout=None, mem=None, forbid=(), then=None,
                 python=False, env=None, cwd=None, note="", setup=None, teardown=None):
        self.argv = [str(a).replace("\x00", "") for a in argv]   # (no NUL fits in an argument)
        self.codes = set(codes)
        self.loc, self.loc_file, self.path, self.fmt = loc, loc_file, path, fmt
        self.time_limit = time_limit
        self.timeout = timeout or ((time_limit + 15) if time_limit else 60)
        self.mem, self.forbid, self.then, self.python = mem, list(forbid), then, python
        self.env, self.cwd, self.note = env, cwd, note
        self.setup, self.teardown = setup, teardown

    def command(self):
        s = " ".join(shell_quote(a) for a in self.argv)
        if self.mem:
            s = "prlimit --as=%d -- %s" % (self.mem, s)
        if self.env:
            s = " ".join("%s=%s" % (k, shell_quote(v)) for k, v in self.env.items()) + " " + s
        if self.cwd:
            s = "cd %s && %s" % (shell_quote(self.cwd), s)
        return s


class Result:
    def __init__(self, rc, out, err, elapsed, killed):
        self.rc, self.out, self.err, self.elapsed, self.killed = rc, out, err, elapsed, killed


class Case:
    def __init__(self, cls, variant, desc, steps):
        self.cls, self.variant, self.desc, self.steps = cls, variant, desc, steps
        self.name = ""
        self.dir = ""


BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def bad_chars(text):
    """Raw control, C1 and bidi characters in output text (decoded with
    surrogateescape: undecodable bytes 0x80-0x9f count as raw C1 controls)."""
    found = []
    for ch in text:
        o = ord(ch)
        if (o < 0x20 and ch not in "\n\t") or o == 0x7F or 0x80 <= o <= 0x9F or o in BIDI \
                or 0xDC80 <= o <= 0xDC9F:
            found.append(o if o < 0xDC00 else o - 0xDC00)
    return sorted(set(found))


LOC_RE = re.compile(r"^(.+?):(\d+):(\d+): error: \S")
PATH_RE = re.compile(r"^(.+?): error: [A-Za-z_]\w*(\[\d+\]|\.[A-Za-z_]\w*)*(\[\d+\])?: \S")


def check_located(step, err):
    lines = err.splitlines()
    located = [m for m in (LOC_RE.match(l) for l in lines) if m]
    if step.loc == "error":
        if not any(": error: " in l or l.startswith("error: ") for l in lines):
            return "exit 2 without an `error:` line on stderr"
        return None
    if step.loc in ("loc", "loc_or_path"):
        ok = located
        if not ok and step.loc == "loc_or_path":
            ok = [m for m in (PATH_RE.match(l) for l in lines) if m]
        if not ok:
            return "exit 2 without a `FILE:LINE:COL: error: MESSAGE` line on stderr"
        if step.loc_file:
            want = os.path.basename(step.loc_file)
            if not any(os.path.basename(m.group(1)) == want for m in ok):
                return "exit 2, but no located error names %s (errors at: %s)" % (
                    want, ", ".join(sorted(set(m.group(1) for m in ok))))
    if step.path and not any(step.path in l for l in lines if "error" in l):
        return "exit 2, but no error line names the JSON path %s" % step.path
    return None


def walk(node):
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def check_uri(uri):
    for i, ch in enumerate(uri):
        o = ord(ch)
        if o <= 0x20 or o >= 0x7F:
            return "raw %r" % ch
        if ch == "%" and not re.match(r"%[0-9A-Fa-f]{2}", uri[i:i + 3]):
            return "'%' not followed by two hex digits"
    return None


def check_step(step, res):
    """The contract's failures of one run, as strings."""
    fails = []
    if step.python:
        if res.killed:
            return ["hung: killed after %.0f s" % res.elapsed]
        if res.rc < 0:
            return ["the Python interpreter died of signal %d (%s)" % (
                -res.rc, signal.Signals(-res.rc).name if -res.rc in signal.Signals._value2member_map_ else "?")]
        out = res.out.decode("utf-8", "replace")
        if res.rc != 0 or "HOSTILE-OK" not in out:
            msg = [l for l in (out + res.err.decode("utf-8", "replace")).splitlines()
                   if "HOSTILE-FAIL" in l or "Error" in l or "error" in l]
            return ["exit %d: %s" % (res.rc, show("; ".join(msg[-3:]) or res.err[-300:]))]
        return []
    out = res.out.decode("utf-8", "surrogateescape")
    err = res.err.decode("utf-8", "surrogateescape")
    if res.killed:
        fails.append("ran past its time limit: killed after %.0f s" % res.elapsed)
    elif res.rc < 0:
        name = signal.Signals(-res.rc).name if -res.rc in signal.Signals._value2member_map_ else "?"
        fails.append("killed by signal %d (%s)" % (-res.rc, name))
    else:
        if step.time_limit and res.elapsed > step.time_limit + 5:
            fails.append("ran %.1f s with --time-limit %g" % (res.elapsed, step.time_limit))
        if res.rc not in (0, 1, 2, 3):
            fails.append("exit status %d is outside the contract (0-3)" % res.rc)
        if res.rc == 3 and "internal error" in (out + err):
            fails.append("exit 3 with an internal error")
        if res.rc not in step.codes:
            fails.append("expected exit %s, got %d" % ("/".join(map(str, sorted(step.codes))), res.rc))
        if res.rc == 2 and step.loc:
            f = check_located(step, err)
            if f:
                fails.append(f)
        if "bad_alloc" in err or "MemoryError" in err or "Out of memory" in err:
            fails.append("ran out of memory")
        if step.fmt in ("json", "sarif", "jsondoc") and res.rc in (0, 1, 2, 3) and (
                res.out.strip() or res.rc == 2 and step.fmt == "json"):
            try:
                doc = json.loads(res.out.decode("utf-8"))
            except UnicodeDecodeError as e:
                doc = None
                fails.append("%s: stdout is not UTF-8 (%s)" % (step.fmt, e))
            except ValueError as e:
                doc = None
                fails.append("%s: stdout is not JSON (%s)" % (step.fmt, e))
            if doc is not None and step.fmt == "json" and res.rc == 2:
                if not isinstance(doc, dict) or doc.get("verdict") != "error" or doc.get("exit_status") != 2:
                    fails.append('--format json, exit 2: stdout lacks "verdict": "error", "exit_status": 2')
            if doc is not None and step.fmt == "sarif":
                for node in walk(doc):
                    if isinstance(node, dict) and isinstance(node.get("artifactLocation"), dict):
                        uri = node["artifactLocation"].get("uri", "")
                        bad = check_uri(uri) if isinstance(uri, str) else "not a string"
                        if bad:
                            fails.append("SARIF artifact URI %s is not percent-encoded: %s" % (show(uri, 80), bad))
                            break
                if res.rc == 2:
                    codes = [n.get("exitCode") for n in walk(doc) if isinstance(n, dict) and "exitCode" in n]
                    if codes and 2 not in codes:
                        fails.append("SARIF invocation exitCode %s on exit 2" % codes)
        if step.fmt == "html" and re.search(r"<script[^>]*>\s*HOSTILE_XSS", out, re.I):
            fails.append("HTML report holds a raw <script> from the input")
    for stream, text in (("stdout", out), ("stderr", err)):
        bad = bad_chars(text)
        if bad:
            fails.append("raw control/bidi characters on %s: %s" % (
                stream, " ".join("U+%04X" % o for o in bad[:8])))
        for line in re.split(r"\r\n|\r|\n", text):
            s = line.lstrip(" \t")
            if s.startswith("FAKE.mlir:") or s.startswith("::error"):
                fails.append("a forged diagnostic line on %s: %s" % (stream, show(line, 80)))
                break
        for f in step.forbid:
            if f and f in text:
                fails.append("%s shows %s" % (stream, show(f, 60)))
    return fails


# --------------------------------------------------------------------------------------
# Running.

class Runner:
    def __init__(self, args):
        self.args = args
        self.planproof = args.planproof
        self.opt = args.planproof_opt
        self.tl = args.time_limit

    def run(self, step):
        def limits():
            os.setsid()
            if step.mem:
                resource.setrlimit(resource.RLIMIT_AS, (step.mem, step.mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        env = dict(os.environ)
        env.pop("PLANPROOF_TRACE", None)
        if step.env:
            env.update(step.env)
        if step.setup:
            step.setup()
        t0 = time.time()
        for attempt in range(20):
            try:
                p = subprocess.Popen(step.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=limits, env=env,
                                     cwd=step.cwd)
                break
            except OSError as e:  # the binary rebuilt under us (ETXTBSY, ENOENT): wait
                if attempt == 19:
                    raise
                time.sleep(3)
        killed = False
        try:
            out, err = p.communicate(timeout=step.timeout)
        except subprocess.TimeoutExpired:
            killed = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            out, err = p.communicate()
        elapsed = time.time() - t0
        if step.teardown:
            step.teardown()
        return Result(p.returncode, out, err, elapsed, killed)

    def run_case(self, case):
        fails = []
        queue = list(case.steps)
        runs = 0
        while queue:
            step = queue.pop(0)
            res = self.run(step)
            runs += 1
            f = check_step(step, res)
            if self.args.verbose:
                sys.stdout.write("  [%s] rc=%s %.2fs %s\n" % (case.name, res.rc, res.elapsed,
                                                              show(step.command(), 200)))
            for x in f:
                fails.append((step, res, x))
            if step.then and not res.killed and res.rc is not None and res.rc >= 0:
                queue[0:0] = step.then(res)
        return fails, runs


# --------------------------------------------------------------------------------------
# Context handed to generators.

class Ctx:
    def __init__(self, runner, d):
        self.pp = runner.planproof
        self.opt = runner.opt
        self.tl = runner.tl
        self.args = runner.args
        self.d = d

    def p(self, *parts):
        return os.path.join(self.d, *parts)

    def verify(self, spec, codes, fmt="text", loc=None, extra=(), **kw):
        argv = [self.pp, "verify", spec, "--time-limit", self.tl, "--threads", "1", "--quiet"] + list(extra)
        if fmt != "text":
            argv += ["--format", fmt]
        return Step(argv, codes, loc=loc, fmt=fmt, time_limit=self.tl, **kw)

    def verify_all(self, spec, codes, loc=None, formats=("text", "json", "sarif", "html"), **kw):
        steps = []
        for fmt in formats:
            c = set(codes)
            steps.append(self.verify(spec, c, fmt=fmt, loc=loc, **kw))
        return steps

    def py(self, code, timeout=60):
        """A Python check script, run with the build's test tools' Python and the package
        from the source tree (as test/python/test_api.py is run)."""
        script = write(self.p("check.py"), code)
        env = {"PYTHONPATH": os.path.join(ROOT, "python"), "PLANPROOF_BUILD": self.args.build}
        return Step([self.args.pytools, script], {0}, python=True, env=env, timeout=timeout)

    def import_xla(self, before, after, codes, loc="loc", loc_file=None, extra=(), then=None, **kw):
        argv = [self.pp, "import-xla", before, after, "--time-limit", self.tl, "-o",
                self.p("imported.json")] + list(extra)
        return Step(argv, codes, loc=loc, loc_file=loc_file, time_limit=self.tl, then=then, **kw)


# --------------------------------------------------------------------------------------
# Class 1: boundary integers.

def json_set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def path_str(path):
    s = ""
    for k in path:
        s += "[%d]" % k if isinstance(k, int) else ("." + k if s else k)
    return s


def g_int_json_field(rng, c):
    """A boundary integer in one integer field of a JSON spec."""
    doc = tiny(violated=rng.random() < 0.5)
    base = 1 if doc["plan"]["ops"][1]["attrs"]["kind"] == "avg" else 0
    v = rng.choice(BOUNDARY)
    site = rng.choice(["ref_shape", "mesh_size", "lhs_dim", "rhs_dim", "version", "loc_line",
                       "loc_col", "segments", "slice", "plan_shape", "reduce_dims", "concat_dim",
                       "constant_shape", "transpose_perm"])
    ops = doc["plan"]["ops"]
    if site == "ref_shape":
        path = ["reference", "inputs", rng.randrange(2), "shape", rng.randrange(2)]
        codes = {2}
    elif site == "mesh_size":
        path = ["plan", "mesh", "axes", 0, "size"]
        codes = {2}
    elif site in ("lhs_dim", "rhs_dim"):
        path = ["plan" if rng.random() < 0.5 else "reference", "ops", 0, "attrs", site]
        codes = {2}
    elif site == "version":
        path = ["planproof"]
        codes = {2}
    elif site in ("loc_line", "loc_col"):
        ops[1]["loc"] = {"file": "train.py", "line": 3, "col": 5}
        path = ["plan", "ops", 1, "loc", "line" if site == "loc_line" else "col"]
        codes = {base, 2}
    elif site == "segments":
        doc["plan"]["inputs"][0]["layout"]["dims"][1] = {"axes": "tp", "segments": 2}
        path = ["plan", "inputs", 0, "layout", "dims", 1, "segments"]
        codes = {2}
    elif site == "slice":
        for part in ("reference", "plan"):
            doc[part]["ops"].append({"result": "s", "op": "slice", "operands": ["y"],
                                     "attrs": {"offsets": [0, 0], "sizes": [1, 2]}})
        doc["reference"]["outputs"].append("s")
        doc["plan"]["outputs"].append({"name": "s", "value": "s", "layout": {"dims": [None, None]}})
        part = rng.choice(["reference", "plan"])
        path = [part, "ops", len(doc[part]["ops"]) - 1, "attrs", rng.choice(["offsets", "sizes"]), rng.randrange(2)]
        codes = {2}
    elif site == "plan_shape":
        doc["plan"]["inputs"][0]["shape"] = [2, 2]
        path = ["plan", "inputs", 0, "shape", rng.randrange(2)]
        codes = {2}
    elif site == "reduce_dims":
        for part in ("reference", "plan"):
            doc[part]["ops"].append({"result": "r", "op": "reduce_sum", "operands": ["y"], "attrs": {"dims": [0]}})
        doc["reference"]["outputs"].append("r")
        doc["plan"]["outputs"].append({"name": "r", "value": "r", "layout": {"dims": [None]}})
        part = rng.choice(["reference", "plan"])
        path = [part, "ops", len(doc[part]["ops"]) - 1, "attrs", "dims", 0]
        codes = {2}
    elif site == "concat_dim":
        for part in ("reference", "plan"):
            doc[part]["ops"].append({"result": "cc", "op": "concat", "operands": ["y", "y"], "attrs": {"dim": 0}})
        doc["reference"]["outputs"].append("cc")
        doc["plan"]["outputs"].append({"name": "cc", "value": "cc", "layout": {"dims": [None, None]}})
        part = rng.choice(["reference", "plan"])
        path = [part, "ops", len(doc[part]["ops"]) - 1, "attrs", "dim"]
        codes = {2}
    elif site == "constant_shape":
        for part in ("reference", "plan"):
            doc[part]["ops"].append({"result": "k", "op": "constant", "operands": [], "attrs": {"value": 1.0}, "shape": [2, 2]})
            doc[part]["ops"].append({"result": "yk", "op": "add", "operands": ["y", "k"]})
        doc["reference"]["outputs"].append("yk")
        doc["plan"]["outputs"].append({"name": "yk", "value": "yk", "layout": {"dims": [None, None]}})
        part = rng.choice(["reference", "plan"])
        path = [part, "ops", len(doc[part]["ops"]) - 2, "shape", rng.randrange(2)]
        codes = {2}
    else:  # transpose_perm
        for part in ("reference", "plan"):
            doc[part]["ops"].append({"result": "tr", "op": "transpose", "operands": ["y"], "attrs": {"perm": [1, 0]}})
        doc["reference"]["outputs"].append("tr")
        doc["plan"]["outputs"].append({"name": "tr", "value": "tr", "layout": {"dims": [None, None]}})
        part = rng.choice(["reference", "plan"])
        path = [part, "ops", len(doc[part]["ops"]) - 1, "attrs", "perm", rng.randrange(2)]
        codes = {2}
    json_set(doc, path, v)
    spec = write(c.p("spec.json"), jdump(doc, rng))
    out_of_range = v not in INT64
    ps = path_str(path)
    steps = [c.verify(spec, codes, loc="loc", path=ps if out_of_range else None),
             c.verify(spec, codes, fmt="json", loc="loc", path=ps if out_of_range else None)]
    if rng.random() < 0.5:
        steps.append(Step([c.pp, "import", spec], {2} if codes == {2} else {0, 2}, loc="loc"))
    return Case("int-boundary", "json-" + site, "tiny.json (%s) with %s = %d" % (
        "violated" if base else "verified", ps, v), steps)


def g_int_scale_wrap(rng, c):
    """Plan `scale` by a boundary integer whose 64-bit wrap (or rounding) is the
    reference's factor: never verified."""
    doc = tiny(violated=False)
    v, ref = rng.choice([(2**64 - 1, -1), (2**64 + 1, 1), (2**63, -2**63), (-2**63 - 1, 2**63 - 1),
                         (2**64 + 2, 2), (10**30, 5076944270305263616),
                         (2**63 - 1, "9223372036854775808.0"), (2**53 + 1, "9007199254740992.0"),
                         (2**53 + 1, 2**53), (2**63 - 1, 2**63 - 2), (-2**63 + 1, -2**63),
                         ("1.8446744073709552e19", -1)])
    doc["plan"]["ops"].insert(1, {"result": "y_s", "op": "scale", "operands": ["y_part"], "attrs": {"factor": 111111}})
    doc["plan"]["ops"][2]["operands"] = ["y_s"]
    doc["reference"]["ops"].append({"result": "y2", "op": "scale", "operands": ["y"], "attrs": {"factor": 222222}})
    doc["reference"]["outputs"] = ["y2"]
    doc["plan"]["outputs"][0]["value"] = "y2"
    text = jdump(doc, rng)
    # The numbers as literal text (floats given as strings keep their spelling).
    text = text.replace("111111", str(v)).replace("222222", str(ref))
    spec = write(c.p("spec.json"), text)
    out = isinstance(v, int) and v not in INT64
    codes = {2} if out else {1, 2}
    steps = [c.verify(spec, codes, loc="loc"), c.verify(spec, codes, fmt="json", loc="loc"),
             Step([c.pp, "replay", spec, "--time-limit", c.tl], {0, 1, 2} if not out else {2},
                  loc="loc", time_limit=c.tl)]
    return Case("int-boundary", "json-scale-wrap",
                "tiny.json: plan scales y_part by %s, reference scales y by %s (must never verify)" % (v, ref), steps)


def g_int_parametric(rng, c):
    doc = json.loads(read(PARAMETRIC))
    sym = rng.choice(sorted(doc["dims"]))
    v = rng.choice(BOUNDARY + [2**40, 2**31])
    doc["dims"][sym] = v
    spec = write(c.p("param.json"), jdump(doc, rng))
    steps = [c.verify(spec, {2}, loc="loc", path="dims.%s" % sym if v not in INT64 else None),
             c.verify(spec, {2}, loc="loc", fmt="json", extra=["--full-shapes"])]
    return Case("int-boundary", "json-dims", "mlp_tp8_parametric.json with dims.%s = %d" % (sym, v), steps)


def g_int_model(rng, c):
    doc = json.loads(read(MODEL))
    field = rng.choice(["layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"])
    v = rng.choice(BOUNDARY)
    doc[field] = v
    m = write(c.p("model.json"), jdump(doc, rng))
    par = rng.choice(["dp=2,tp=2,layers=1", "dp=2,layers=1", "tp=2,layers=1,size=full,seq=8", "dp=2,tp=2,pp=2,microbatches=2"])
    steps = [Step([c.pp, "plan", "--model", m, "--parallel", par, "-o", c.p("out.mlir")], {2},
                  loc="loc", loc_file=m, path=field if v not in INT64 else None)]
    return Case("int-boundary", "model-field", "llama3-8b.json with %s = %d; --parallel %s" % (field, v, par), steps)


def g_int_parallel(rng, c):
    """Boundary integers in --parallel (on the command line and in a recipe)."""
    key = rng.choice(["dp", "tp", "layers", "microbatches", "seq", "pp", "zero", "chunks", "cf", "ep", "cp"])
    v = rng.choice(BOUNDARY + [2**40, 0, -1, "1e30", "nan", "inf", "0x10", "+2", "2 "])
    par = "dp=2,tp=2,layers=1".split(",")
    par = [p for p in par if not p.startswith(key + "=")] + ["%s=%s" % (key, v)]
    if key in ("pp", "chunks"):
        par.append("microbatches=2")
    par = ",".join(par)
    steps = []
    if rng.random() < 0.5:
        steps.append(Step([c.pp, "plan", "--model", MODEL, "--parallel", par, "-o", c.p("out.mlir")], {2}, loc="error"))
        where = "--parallel %s" % par
    else:
        rec = {"description": "hostile", "model": MODEL, "parallel": par,
               "edits": [{"replace": "dist.all_reduce", "with": "dist.all_reduce"}]}
        r = write(c.p("r.plan"), jdump(rec, rng))
        steps.append(Step([c.pp, "plan", "--recipe", r, "-o", c.p("out.mlir")], {2}, loc="loc", loc_file=r))
        steps.append(Step([c.pp, "verify", r, "--time-limit", c.tl, "--format", "json"], {2}, loc="loc",
                          loc_file=r, fmt="json", time_limit=c.tl))
        where = "recipe with parallel %s" % par
    return Case("int-boundary", "parallel", where, steps)


def g_int_options(rng, c):
    """Boundary numbers in numeric options."""
    doc = tiny(violated=True)
    spec = write(c.p("spec.json"), jdump(doc))
    opt = rng.choice(["--threads", "--solver-budget", "--timeout-ms", "--time-limit", "--seed", "--tries"])
    v = rng.choice([str(x) for x in BOUNDARY] + ["-1", "nan", "inf", "-inf", "1e30", "0x10", "", "1e-300"])
    if opt == "--seed":
        argv = [c.pp, "replay", spec, "--seed", v]
    elif opt == "--tries":
        argv = [c.pp, "shrink", os.path.join(ROOT, "verify-specs", "scale", "llama3-405b_dp64_tp8_l97_attn_avg.plan"),
                "--tries", v, "-o", c.p("small.plan"), "--time-limit", c.tl]
    else:
        argv = [c.pp, "verify", spec, opt, v] + (["--time-limit", c.tl] if opt != "--time-limit" else [])
    try:
        n = float(v)
    except ValueError:
        n = None
    sane = n is not None and n == n and n > 0 and n != float("inf")
    if opt == "--time-limit" and sane and n >= 1:
        codes = {1, 2}    # a long limit is a limit; refusing one is fine too
    elif opt == "--time-limit" and v in ("inf",):
        codes = {1, 2}
    elif opt == "--seed" and v.lstrip("-").isdigit() and int(v) in range(0, 2**64):
        codes = {1, 2}
    elif opt in ("--solver-budget", "--timeout-ms") and v.isdigit() and int(v) in INT64:
        codes = {1, 2, 3}
    elif opt == "--tries":   # a count of tries: refused, or (in range) reproduced or not in time
        codes = {2} if not (v.isdigit() and int(v) in INT64 and int(v) > 0) else {1, 2, 3}
    else:
        codes = {2}
    tl = None if opt == "--time-limit" else c.tl
    timeout = None
    return Case("int-boundary", "option" + opt, "%s %s" % (opt, v),
                [Step(argv, codes, loc="error", time_limit=tl, timeout=timeout)])


def mlir_str(s):
    """An MLIR string literal's body for s (\\XX escapes for what is not printable ASCII)."""
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        ch = chr(b)
        if 32 <= b < 127 and ch not in '"\\':
            out.append(ch)
        else:
            out.append("\\%02X" % b)
    return "".join(out)


def g_int_mlir(rng, c):
    text = read(MLIR_BAD)
    v = rng.choice(BOUNDARY)
    site = rng.choice(["tensor_dim", "mesh_shape", "contract", "reduce_dims", "scale"])
    if site == "tensor_dim":
        text = text.replace("%x: tensor<2x4xf32> {ref.name", "%%x: tensor<%dx4xf32> {ref.name" % abs(v), 1)
        codes_v, codes_o = {2}, {1, 2}
    elif site == "mesh_shape":
        text = text.replace('axes = ["tp"] shape = [2]', 'axes = ["tp"] shape = [%d]' % v, 1)
        codes_v, codes_o = {2}, {0, 1, 2}
    elif site == "contract":
        text = text.replace("%h_pre = ref.matmul %x, %w1 contract(1, 0)", "%%h_pre = ref.matmul %%x, %%w1 contract(%d, 0)" % v, 1)
        codes_v, codes_o = {2}, {1, 2}
    elif site == "reduce_dims":
        text = text.replace("%db2 = ref.reduce_sum %dy dims [0]", "%%db2 = ref.reduce_sum %%dy dims [%d]" % v, 1)
        codes_v, codes_o = {2}, {1, 2}
    else:
        # The plan's loss scaled by a boundary integer, the reference's by what it wraps to.
        wrap = (v + 2**63) % 2**64 - 2**63
        text = text.replace("%loss = ref.mse_loss %y, %t : tensor<2x4xf32>\n    return",
                            "%%loss0 = ref.mse_loss %%y, %%t : tensor<2x4xf32>\n    %%loss = ref.scale %%loss0 by %d.0 : tensor<f32>\n    return" % wrap, 1)
        idx = text.index("func.func @plan")
        text = text[:idx] + text[idx:].replace("%loss = ref.mse_loss %y, %t : tensor<2x4xf32>",
                                               "%%loss0 = ref.mse_loss %%y, %%t : tensor<2x4xf32>\n    %%loss = ref.scale %%loss0 by %d : tensor<f32>" % v, 1)
        codes_v, codes_o = {1, 2}, {0, 1, 2}
    spec = write(c.p("spec.mlir"), text)
    steps = [c.verify(spec, codes_v, loc="loc", loc_file=spec),
             c.verify(spec, codes_v, fmt="json", loc="loc"),
             Step([c.opt, spec], codes_o, loc="loc", note="planproof-opt: MLIR parse errors exit 1 (mlir-opt)")]
    return Case("int-boundary", "mlir-" + site, "mlp_tp2_row_allreduce_avg.mlir with %s = %d" % (site, v), steps)


# --------------------------------------------------------------------------------------
# Class 2: XLA reduction computations.

COMP_RE = re.compile(r"^(%[\w.\-]+) \((.*)\) -> (.*) \{$")


def hlo_computations(text):
    """name -> (first line index, last line index) of each non-ENTRY computation."""
    lines = text.split("\n")
    comps, cur = {}, None
    for i, l in enumerate(lines):
        m = COMP_RE.match(l)
        if m:
            cur = (m.group(1), i)
        elif l == "}" and cur:
            comps[cur[0]] = (cur[1], i)
            cur = None
    return comps


def to_apply_users(text, kinds):
    users = []
    for i, l in enumerate(text.split("\n")):
        m = re.search(r" (all-reduce|reduce-scatter|reduce)\(.*to_apply=(%[\w.\-]+)", l)
        if m and m.group(1) in kinds:
            users.append((i, m.group(1), m.group(2)))
    return users


REWRITES = ["p0p0", "p1p1", "sub10", "sub01", "mul", "max", "extra_double", "extra_dead",
            "extra_const", "const_operand", "param_twice", "root_param", "copy_root", "swapped_sub",
            "root_first", "three_params"]


def rewrite_comp(text, comp, how, rng):
    lines = text.split("\n")
    start, end = hlo_computations(text)[comp]
    body = lines[start + 1:end]
    params = {}
    root = None
    for l in body:
        m = re.match(r"\s*(%[\w.\-]+) = (\S+) parameter\((\d)\)", l)
        if m:
            params[int(m.group(3))] = (m.group(1), m.group(2))
        m = re.match(r"\s*ROOT (%[\w.\-]+) = (\S+) ([\w\-]+)\(", l)
        if m:
            root = (m.group(1), m.group(2), m.group(3))
    (p0, t), (p1, _) = params[0], params[1]
    r, _, op = root
    other = {"add": "multiply", "multiply": "add", "maximum": "minimum", "minimum": "maximum",
             "and": "or", "or": "and"}.get(op, "add")
    P = ["  %s = %s parameter(0)" % (p0, t), "  %s = %s parameter(1)" % (p1, t)]
    one = "1" if not t.startswith("pred") else "true"
    new = {
        "p0p0": P + ["  ROOT %s = %s %s(%s, %s)" % (r, t, op, p0, p0)],
        "p1p1": P + ["  ROOT %s = %s %s(%s, %s)" % (r, t, op, p1, p1)],
        "sub10": P + ["  ROOT %s = %s subtract(%s, %s)" % (r, t, p1, p0)],
        "sub01": P + ["  ROOT %s = %s subtract(%s, %s)" % (r, t, p0, p1)],
        "mul": P + ["  ROOT %s = %s %s(%s, %s)" % (r, t, other, p0, p1)],
        "max": P + ["  ROOT %s = %s %s(%s, %s)" % (r, t, "maximum" if op != "maximum" else "minimum", p0, p1)],
        "extra_double": P + ["  %%hx.1 = %s %s(%s, %s)" % (t, op, p0, p1),
                             "  ROOT %s = %s %s(%%hx.1, %%hx.1)" % (r, t, op)],
        "extra_dead": P + ["  %%hx.1 = %s %s(%s, %s)" % (t, other, p0, p1),
                           "  ROOT %s = %s %s(%s, %s)" % (r, t, op, p0, p1)],
        "extra_const": P + ["  %%hx.c = %s constant(%s)" % (t, one),
                            "  %%hx.1 = %s %s(%s, %s)" % (t, op, p0, p1),
                            "  ROOT %s = %s %s(%%hx.1, %%hx.c)" % (r, t, op)],
        "const_operand": P + ["  %%hx.c = %s constant(%s)" % (t, rng.choice(["0.5", "2", "-1", "0"]) if not t.startswith("pred") else "false"),
                              "  ROOT %s = %s %s(%s, %%hx.c)" % (r, t, op, p0)],
        "param_twice": P + ["  %%hx.1 = %s %s(%s, %s)" % (t, other, p0, p0),
                            "  ROOT %s = %s %s(%%hx.1, %s)" % (r, t, op, p1)],
        "root_param": ["  ROOT %s = %s parameter(0)" % (p0, t), "  %s = %s parameter(1)" % (p1, t)],
        "copy_root": P + ["  ROOT %s = %s copy(%s)" % (r, t, p1)],
        "swapped_sub": ["  %s = %s parameter(1)" % (p0, t), "  %s = %s parameter(0)" % (p1, t),
                        "  ROOT %s = %s subtract(%s, %s)" % (r, t, p0, p1)],
        "root_first": ["  ROOT %s = %s %s(%s, %s)" % (r, t, op, p0, p0)] + P,
        "three_params": P + ["  %%hx.2 = %s parameter(2)" % t,
                             "  ROOT %s = %s %s(%s, %%hx.2)" % (r, t, op, p0)],
    }[how]
    lines[start + 1:end] = new
    return "\n".join(lines), "%s: %s" % (comp, " ; ".join(x.strip() for x in new))


def xla_pipeline(c, before, after, mutated, final_codes, import_codes=(0, 2, 3)):
    """import-xla, then (when it wrote a spec) verify in the four formats."""
    def then(res):
        if res.rc != 0:
            return []
        return c.verify_all(c.p("imported.json"), final_codes, loc="loc")
    return [c.import_xla(before, after, set(import_codes), loc="loc", loc_file=mutated, then=then)]


def rs_pair():
    before = """HloModule m, entry_computation_layout={(f32[2,4]{1,0}, f32[4,2]{1,0})->f32[2,2]{1,0}}, num_partitions=2

ENTRY %main (x: f32[2,4], w: f32[4,2]) -> f32[2,2] {
  %x = f32[2,4]{1,0} parameter(0), sharding={devices=[1,2]<=[2]}, metadata={op_name="x"}
  %w = f32[4,2]{1,0} parameter(1), sharding={devices=[2,1]<=[2]}, metadata={op_name="w"}
  ROOT %dot = f32[2,2]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[2,1]<=[2]}
}
"""
    after = """HloModule m, entry_computation_layout={(f32[2,2]{1,0}, f32[2,2]{1,0})->f32[1,2]{1,0}}, num_partitions=2

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main_spmd (x: f32[2,2], w: f32[2,2]) -> f32[1,2] {
  %x = f32[2,2]{1,0} parameter(0), sharding={devices=[1,2]<=[2]}, metadata={op_name="x"}
  %w = f32[2,2]{1,0} parameter(1), sharding={devices=[2,1]<=[2]}, metadata={op_name="w"}
  %dot = f32[2,2]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %rs = f32[1,2]{1,0} reduce-scatter(%dot), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, dimensions={0}, to_apply=%sum
}
"""
    return before, after


def g_xla_reduction(rng, c):
    kind = rng.choice(["all-reduce", "reduce", "reduce-scatter", "all-reduce", "reduce"])
    how = rng.choice(REWRITES)
    if kind == "reduce-scatter":
        before, after = rs_pair()
        base = "a reduce-scatter pair (x[2,4] x w[4,2], contracting dim split over 2)"
        which = "after"
    else:
        use_lm = rng.random() < 0.25
        before, after = read(LM_BEFORE if use_lm else MLP_BEFORE), read(LM_AFTER if use_lm else MLP_AFTER)
        base = "lm_accum_dp2_tp4" if use_lm else "mlp_dp2_tp4"
        which = "after" if kind == "all-reduce" else rng.choice(["before", "after"])
    text = after if which == "after" else before
    users = [u for u in to_apply_users(text, {kind})]
    if not users:
        which, text = "after", after
        users = to_apply_users(text, {kind})
    line, _, comp = rng.choice(users)
    new, what = rewrite_comp(text, comp, how, rng)
    b = write(c.p("before.hlo"), new if which == "before" else before)
    a = write(c.p("after.hlo"), new if which == "after" else after)
    mutated = b if which == "before" else a
    steps = xla_pipeline(c, b, a, mutated, {1, 2, 3})
    return Case("xla-reduction", kind + "-" + how,
                "%s: %s.hlo, the to_apply of the %s on line %d rewritten to %s (never verified)" % (
                    base, which, kind, line + 1, what), steps)


# --------------------------------------------------------------------------------------
# Class 3: malformed HLO.

def entry_lines(text):
    lines = text.split("\n")
    s = next(i for i, l in enumerate(lines) if l.startswith("ENTRY "))
    e = next(i for i in range(s, len(lines)) if lines[i] == "}")
    return lines, s, e


def g_hlo_malformed(rng, c):
    variant = rng.choice(["comment_slash", "comment_block", "comment_unterminated",
                          "num_partitions", "device_oob_groups", "device_dup_groups",
                          "device_oob_sharding", "flat_groups", "dims_oob", "zero_dims",
                          "wrong_result_shape", "negative_dim", "huge_dim", "duplicate_name",
                          "undefined_operand", "two_roots", "type_mismatch"])
    which = rng.choice(["before", "after"])
    before, after = read(MLP_BEFORE), read(MLP_AFTER)
    if variant == "dims_oob":
        if rng.random() < 0.5:
            before, after = rs_pair()
            which = "after"
            d = rng.choice(["{7}", "{2}", "{-1}", "{0,7}", "{99999999999999999999}"])
            after = after.replace("dimensions={0}, to_apply", "dimensions=%s, to_apply" % d)
            what = "reduce-scatter dimensions=%s on a rank-2 value" % d
            text = after
        else:
            text = before if which == "before" else after
            d = rng.choice(["{7}", "{0,7}", "{2}", "{-1}", "{0,0}"])
            text = re.sub(r"(reduce\(.*?)dimensions=\{0,1\}", r"\1dimensions=%s" % d, text, count=1)
            what = "reduce dimensions=%s on a rank-2 value" % d
    else:
        text = before if which == "before" else after
    lines, s, e = entry_lines(text)
    body = list(range(s + 1, e))
    if variant.startswith("comment"):
        i = rng.choice(body)
        payload = {"comment_slash": "  // %s" % rng.choice(["a comment", "ROOT %x = f32[] constant(1)", "%all-reduce.9 = f32[2,8] all-reduce(%dot.1)"]),
                   "comment_block": "  /* %s */" % rng.choice(["a comment", "replica_groups={{0,1}}", "}"]),
                   "comment_unterminated": "  /* never closed"}[variant]
        lines.insert(i, payload)
        text = "\n".join(lines)
        what = "line %d inserted: %s" % (i + 1, payload.strip())
    elif variant == "num_partitions":
        v = rng.choice(["abc", "0", "99999999999999999999", "-8", "18446744073709551616", "4", "9223372036854775807", "", "8.0", "0x8"])
        text = text.replace("num_partitions=8", "num_partitions=" + v, 1)
        what = "num_partitions=%s" % v
    elif variant in ("device_oob_groups", "device_dup_groups", "flat_groups"):
        which = "after"
        text = after
        g = {"device_oob_groups": rng.choice(["{{0,1,2,3},{4,5,6,99}}", "{{0,4},{1,5},{2,6},{3,8}}", "{{0,1,2,3},{4,5,6,-1}}", "{{0,1,2,3},{4,5,6,18446744073709551623}}"]),
             "device_dup_groups": rng.choice(["{{0,1,2,3},{4,5,6,6}}", "{{0,4},{1,5},{2,6},{2,7}}"]),
             "flat_groups": rng.choice(["{0,1,2,3,4,5,6,7}", "{0,1}", "{0,1,2,3},{4,5,6,7}"])}[variant]
        old = rng.choice(["replica_groups={{0,1,2,3},{4,5,6,7}}", "replica_groups={{0,4},{1,5},{2,6},{3,7}}"])
        text = text.replace(old, "replica_groups=" + g, 1)
        what = "%s replaced by replica_groups=%s" % (old, g)
    elif variant == "device_oob_sharding":
        sh = rng.choice(["devices=[2,1,4]<=[16] last_tile_dim_replicate", "devices=[2,1,4]0,1,2,3,4,5,6,9 last_tile_dim_replicate",
                         "devices=[2,1,4]0,1,2,3,4,5,6,-1 last_tile_dim_replicate", "devices=[2,1,4]0,1,2,3,4,5,6,6 last_tile_dim_replicate",
                         "devices=[2,1,4]<=[4] last_tile_dim_replicate", "devices=[9223372036854775807,1,4]<=[8] last_tile_dim_replicate"])
        text = text.replace("sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}", "sharding={%s}" % sh, 1)
        what = "the first sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate} replaced by {%s}" % sh
    elif variant == "dims_oob":
        pass
    elif variant in ("zero_dims", "negative_dim", "huge_dim", "wrong_result_shape", "type_mismatch"):
        cands = [i for i in body if re.search(r"= f32\[\d+,\d+\]\{1,0\} (dot|tanh|add|multiply|subtract|transpose|broadcast)\(", lines[i])]
        i = rng.choice(cands)
        m = re.search(r"= f32\[(\d+),(\d+)\]", lines[i])
        a0, a1 = int(m.group(1)), int(m.group(2))
        new = {"zero_dims": rng.choice(["f32[0,%d]" % a1, "f32[%d,0]" % a0]),
               "negative_dim": "f32[-%d,%d]" % (a0, a1),
               "huge_dim": rng.choice(["f32[9223372036854775807,%d]" % a1, "f32[99999999999999999999,%d]" % a1, "f32[%d,4294967296]" % a0]),
               "wrong_result_shape": rng.choice(["f32[%d,%d]" % (a0, a1 + 1), "f32[%d,%d]" % (a0 + 1, a1), "f32[%d,%d]" % (a1, a0) if a0 != a1 else "f32[%d,%d]" % (a0, a1 * 2), "f32[%d,%d,1]" % (a0, a1)]),
               "type_mismatch": "s32[%d,%d]" % (a0, a1)}[variant]
        if variant == "wrong_result_shape":
            new = new.replace("{1,0}", "")
        lines[i] = lines[i].replace("= f32[%d,%d]" % (a0, a1), "= " + new, 1)
        text = "\n".join(lines)
        what = "line %d: result shape f32[%d,%d] declared as %s: %s" % (i + 1, a0, a1, new, lines[i].strip()[:100])
    elif variant == "duplicate_name":
        i = rng.choice(body[1:])
        j = rng.choice([k for k in body if k != i])
        ni = re.match(r"\s*(?:ROOT )?(%[\w.\-]+) =", lines[i]).group(1)
        nj = re.match(r"\s*(?:ROOT )?(%[\w.\-]+) =", lines[j]).group(1)
        lines[j] = lines[j].replace(nj + " =", ni + " =", 1)
        text = "\n".join(lines)
        what = "line %d renamed to %s, the name of line %d" % (j + 1, ni, i + 1)
    elif variant == "undefined_operand":
        cands = [i for i in body if re.search(r"\((%[\w.\-]+)", lines[i]) and "parameter(" not in lines[i]]
        i = rng.choice(cands)
        op = re.search(r"\((%[\w.\-]+)", lines[i]).group(1)
        lines[i] = lines[i].replace("(" + op, "(%nowhere.404", 1)
        text = "\n".join(lines)
        what = "line %d: operand %s replaced by the undefined %%nowhere.404" % (i + 1, op)
    elif variant == "two_roots":
        cands = [i for i in body if "ROOT" not in lines[i] and "parameter(" not in lines[i]]
        i = rng.choice(cands)
        lines[i] = lines[i].replace("  %", "  ROOT %", 1)
        text = "\n".join(lines)
        what = "line %d marked ROOT as well" % (i + 1)
    b = write(c.p("before.hlo"), text if which == "before" else before)
    a = write(c.p("after.hlo"), text if which == "after" else after)
    mutated = b if which == "before" else a
    if variant == "num_partitions" and re.fullmatch(r"[1-9]\d{0,18}", v) and int(v) in INT64:
        mutated = None   # a well-formed count the two modules disagree on: either file may be named

    if variant in ("comment_slash", "comment_block"):
        # XLA's own lexer skips comments: the pair means what it meant without one, so
        # it imports and verifies as the unmodified pair does (verified) -- whatever the
        # comment says.
        def same(res):
            return [c.verify(c.p("imported.json"), {0})] if res.rc == 0 else []
        return Case("hlo-malformed", variant, "mlp_dp2_tp4: %s.hlo with %s" % (which, what),
                    [c.import_xla(b, a, {0}, loc=None, then=same)])

    def then(res):   # accepted anyway: what the spec it wrote verifies to (never 0 either)
        return [c.verify(c.p("imported.json"), {1, 2, 3}, loc="loc")] if res.rc == 0 else []
    # A zero-size dimension declared where a broadcast of a scalar makes it is valid HLO
    # at that instruction (an empty tensor planproof does not cover: exit 3); a malformed
    # consumer after it is not reached. Either answer is sound: never exit 0.
    codes = {2, 3} if variant == "zero_dims" else {2}
    steps = [c.import_xla(b, a, codes, loc="loc", loc_file=mutated, then=then),
             c.import_xla(b, a, codes, loc="loc", loc_file=mutated, extra=["--format", "json"], fmt="json")]
    base = "a reduce-scatter pair" if variant == "dims_oob" and "reduce-scatter" in what else "mlp_dp2_tp4"
    return Case("hlo-malformed", variant, "%s: %s.hlo with %s" % (base, which, what), steps)


# --------------------------------------------------------------------------------------
# Class 4: blowups -- exponential call DAGs, loops that never advance, huge counts,
# deep nesting.

def hlo_exp_dag(shape, sharding, depth, twice="add"):
    L = ["HloModule m, entry_computation_layout={(%s{1,0})->%s{1,0}}, num_partitions=2" % (shape, shape), ""]
    L += ["%%c%d (p.%d: %s) -> %s {" % (depth, depth, shape, shape),
          "  %%p.%d = %s{1,0} parameter(0)" % (depth, shape),
          "  ROOT %%n.%d = %s{1,0} negate(%%p.%d)" % (depth, shape, depth), "}", ""]
    for i in range(depth - 1, -1, -1):
        second = "%%p.%d" % i if twice == "add" else "%%a.%d" % i
        L += ["%%c%d (p.%d: %s) -> %s {" % (i, i, shape, shape),
              "  %%p.%d = %s{1,0} parameter(0)" % (i, shape),
              "  %%a.%d = %s{1,0} call(%%p.%d), to_apply=%%c%d" % (i, shape, i, i + 1),
              "  %%b.%d = %s{1,0} call(%s), to_apply=%%c%d" % (i, shape, second, i + 1),
              "  ROOT %%s.%d = %s{1,0} add(%%a.%d, %%b.%d)" % (i, shape, i, i), "}", ""]
    sh = ", sharding={devices=[2,1]<=[2]}" if sharding else ""
    L += ["ENTRY %%main (x: %s) -> %s {" % (shape, shape),
          "  %%x = %s{1,0} parameter(0)%s, metadata={op_name=\"x\"}" % (shape, sh),
          "  ROOT %%r = %s{1,0} call(%%x), to_apply=%%c0%s" % (shape, sh), "}", ""]
    return "\n".join(L)


def hlo_while(shape, sharding, how):
    step = {"zero_step": ("add", "0", "LT", "10"), "backwards": ("subtract", "1", "LT", "10"),
            "ge_forever": ("add", "1", "GE", "0"), "huge_trip": ("add", "1", "LT", "2147483647"),
            "ne_skip": ("add", "2", "NE", "7")}[how]
    sh = ", sharding={devices=[2,1]<=[2]}" if sharding else ""
    T = "(s32[], %s{1,0})" % shape
    return "\n".join([
        "HloModule m, entry_computation_layout={(%s{1,0})->%s{1,0}}, num_partitions=2" % (shape, shape), "",
        "%%body (bp: (s32[], %s)) -> (s32[], %s) {" % (shape, shape),
        "  %%bp = %s parameter(0)" % T,
        "  %i = s32[] get-tuple-element(%bp), index=0",
        "  %%v = %s{1,0} get-tuple-element(%%bp), index=1" % shape,
        "  %%v2 = %s{1,0} add(%%v, %%v)" % shape,
        "  %%step = s32[] constant(%s)" % step[1],
        "  %%i2 = s32[] %s(%%i, %%step)" % step[0],
        "  ROOT %%t = %s tuple(%%i2, %%v2)" % T, "}", "",
        "%%cond (cp: (s32[], %s)) -> pred[] {" % shape,
        "  %%cp = %s parameter(0)" % T,
        "  %ci = s32[] get-tuple-element(%cp), index=0",
        "  %%lim = s32[] constant(%s)" % step[3],
        "  ROOT %%lt = pred[] compare(%%ci, %%lim), direction=%s" % step[2], "}", "",
        "ENTRY %%main (x: %s) -> %s {" % (shape, shape),
        "  %%x = %s{1,0} parameter(0)%s, metadata={op_name=\"x\"}" % (shape, sh),
        "  %zero = s32[] constant(0)",
        "  %%init = %s tuple(%%zero, %%x)" % T,
        "  %%w = %s while(%%init), condition=%%cond, body=%%body" % T,
        "  ROOT %%r = %s{1,0} get-tuple-element(%%w), index=1%s" % (shape, sh), "}", ""])


def mlir_calls(n_chain=0, depth=0):
    """A spec whose reference and plan call a function n_chain times in a chain, or
    through depth levels of functions each calling the next twice (2^depth leaves)."""
    T = "tensor<2x4xf32>"
    L = ["module {"]

    def funcs(prefix, attrs):
        out = ["  func.func private @%s%d(%%x: %s) -> %s%s {" % (prefix, depth, T, T, attrs),
               "    %%y = ref.gelu %%x : %s" % T, "    return %%y : %s" % T, "  }"]
        for i in range(depth - 1, -1, -1):
            out += ["  func.func private @%s%d(%%x: %s) -> %s%s {" % (prefix, i, T, T, attrs),
                    "    %%a = func.call @%s%d(%%x) : (%s) -> %s" % (prefix, i + 1, T, T),
                    "    %%b = func.call @%s%d(%%a) : (%s) -> %s" % (prefix, i + 1, T, T),
                    "    return %%b : %s" % T, "  }"]
        return out

    def body(prefix):
        if depth:
            return ["    %%x1 = func.call @%s0(%%x0) : (%s) -> %s" % (prefix, T, T), "    return %%x1 : %s" % T]
        out = ["    %%x%d = func.call @%s(%%x%d) : (%s) -> %s" % (i + 1, prefix, i, T, T) for i in range(n_chain)]
        return out + ["    return %%x%d : %s" % (n_chain, T)]
    if depth:
        L += funcs("rf", "")
    else:
        L += ["  func.func private @rf(%%x: %s) -> %s {" % (T, T), "    %%y = ref.gelu %%x : %s" % T,
              "    return %%y : %s" % T, "  }"]
    L += ['  func.func @reference(%%x0: %s {ref.name = "x"}) -> (%s {ref.name = "y"}) attributes {ref.reference} {' % (T, T)]
    L += body("rf" if not depth else "rf") + ["  }", '  dist.mesh @mesh axes = ["tp"] shape = [2]']
    if depth:
        L += funcs("pf", " attributes {dist.mesh = @mesh}")
    else:
        L += ["  func.func private @pf(%%x: %s) -> %s attributes {dist.mesh = @mesh} {" % (T, T),
              "    %%y = ref.gelu %%x : %s" % T, "    return %%y : %s" % T, "  }"]
    L += ['  func.func @plan(%%x0: %s {dist.value = "x", dist.layout = #dist.layout<[_, _]>}) -> '
          '(%s {dist.value = "y", dist.layout = #dist.layout<[_, _]>}) attributes {dist.mesh = @mesh} {' % (T, T)]
    L += body("pf") + ["  }", "}", ""]
    return "\n".join(L)


def g_blowup_hlo_dag(rng, c):
    depth = rng.choice([20, 24, 24, 28, 32])
    twice = rng.choice(["add", "chain"])
    b = write(c.p("before.hlo"), hlo_exp_dag("f32[4,4]", True, depth, twice))
    a = write(c.p("after.hlo"), hlo_exp_dag("f32[2,4]", False, depth, twice))
    steps = [c.import_xla(b, a, {2, 3}, loc="loc")]
    return Case("blowup", "hlo-call-dag", "HLO modules (before and after) whose computations each call the next "
                "twice, %d levels deep (%s, %d bytes): import-xla --time-limit %s" % (
                    depth, "both calls on the parameter" if twice == "add" else "the second call on the first's result",
                    os.path.getsize(b), c.tl), steps)


def g_blowup_hlo_while(rng, c):
    how = rng.choice(["zero_step", "backwards", "ge_forever", "huge_trip", "ne_skip"])
    b = write(c.p("before.hlo"), hlo_while("f32[4,4]", True, how))
    a = write(c.p("after.hlo"), hlo_while("f32[2,4]", False, how))
    codes = {2, 3} if how != "huge_trip" else {0, 2, 3}

    def then(res):
        return [c.verify(c.p("imported.json"), {0, 1, 2, 3})] if res.rc == 0 else []
    steps = [c.import_xla(b, a, codes, loc="loc", then=then)]
    return Case("blowup", "hlo-while-" + how, "HLO while loops (before and after) whose counter %s" % {
        "zero_step": "is advanced by 0 (i < 10 never false)", "backwards": "counts down (i < 10 never false)",
        "ge_forever": "counts up under i >= 0 (never false)", "huge_trip": "counts to 2^31-1",
        "ne_skip": "counts 0, 2, 4, ... under i != 7 (never false)"}[how], steps)


def g_blowup_layers(rng, c):
    key = rng.choice(["layers", "layers", "microbatches", "seq", "chunks"])
    v = rng.choice([2**40, 2**31, 2**20, 10**12])
    model = rng.choice([MODEL, os.path.join(ROOT, "verify-specs", "models", "deepseek-moe-16b.json")])
    par = {"layers": "dp=2,layers=%d", "microbatches": "dp=2,pp=2,layers=2,microbatches=%d",
           "seq": "dp=2,layers=1,size=full,seq=%d", "chunks": "dp=2,pp=2,layers=4,microbatches=4,schedule=interleaved,chunks=%d"}[key] % v
    steps = [Step([c.pp, "plan", "--model", model, "--parallel", par, "-o", c.p("out.mlir")], {2}, loc="error", timeout=60)]
    if rng.random() < 0.5:
        rec = write(c.p("r.plan"), json.dumps({"model": model, "parallel": par, "edits": [
            {"replace": "dist.all_reduce", "with": "dist.all_reduce"}]}))
        steps.append(Step([c.pp, "verify", rec, "--time-limit", c.tl, "--engine", "layout"], {2}, loc="loc",
                          loc_file=rec, time_limit=c.tl))
    return Case("blowup", "plan-" + key, "planproof plan --model %s --parallel %s" % (os.path.basename(model), par), steps)


def g_blowup_mlir_calls(rng, c):
    if rng.random() < 0.5:
        n = rng.choice([20000, 30000, 40000])
        spec = write(c.p("chain.mlir"), mlir_calls(n_chain=n))
        what = "an MLIR spec of %d chained calls of a one-op function (reference and plan)" % n
        codes = {0, 2, 3}
    else:
        depth = rng.choice([16, 18, 18, 20, 24, 28])
        spec = write(c.p("dag.mlir"), mlir_calls(depth=depth))
        what = "an MLIR spec whose functions each call the next twice, %d levels deep" % depth
        codes = {0, 2, 3}
    mem = 2 * 10**9   # a file of a few KB (or MB) has no business needing more
    steps = [Step([c.pp, "export", spec, "--time-limit", c.tl], {0, 2, 3}, loc="loc", time_limit=c.tl, mem=mem),
             c.verify(spec, codes, loc="loc", mem=mem)]
    if rng.random() < 0.5:
        steps.append(c.verify(spec, codes, loc="loc", extra=["--engine", "layout"], mem=mem))
    return Case("blowup", "mlir-calls", what + " (%d bytes)" % os.path.getsize(spec), steps)


def g_blowup_nesting(rng, c):
    n = rng.choice([10**5, 2 * 10**5, 10**6])
    kind = rng.choice(["json", "json", "mlir", "hlo", "model", "recipe", "mlir_opt"])
    o, cl = rng.choice([("[", "]"), ("{\"a\":", "}"), ("[{\"a\":", "}]")])
    depth_text = o * n + "1" + cl * n if rng.random() < 0.5 else o * n
    if kind == "json":
        site = rng.choice(["description", "reference", "attrs"])
        doc = tiny()
        text = jdump(doc)
        if site == "description":
            text = text.replace('"planproof": 1,', '"planproof": 1, "description": %s,' % depth_text, 1)
        elif site == "reference":
            text = text.replace('"reference": {', '"reference": %s, "x": {' % depth_text, 1)
        else:
            text = text.replace('"kind": "avg"', '"kind": %s' % depth_text, 1)
        spec = write(c.p("deep.json"), text)
        steps = [c.verify(spec, {2}, loc="loc"), c.verify(spec, {2}, fmt="json", loc="loc"),
                 Step([c.pp, "import", spec], {2}, loc="loc"), Step([c.pp, "export", spec], {2}, loc="loc")]
        what = "tiny.json with %d nested %r in %s" % (n, o, site)
    elif kind in ("mlir", "mlir_opt"):
        text = read(MLIR_BAD)
        nest = "[" * n + "1" + "]" * n if rng.random() < 0.5 else "[" * n
        text = text.replace('module attributes {planproof.expect', 'module attributes {hostile.deep = %s, planproof.expect' % nest, 1)
        spec = write(c.p("deep.mlir"), text)
        steps = [c.verify(spec, {2}, loc="loc"), Step([c.opt, spec], {2}, loc="error")]
        what = "mlp_tp2_row_allreduce_avg.mlir with a module attribute of %d nested '['" % n
    elif kind == "hlo":
        before = read(MLP_BEFORE)
        nest = "(" * n + "f32[]" + ")" * n
        if rng.random() < 0.5:
            before = before.replace("ENTRY %main.0 (w1.0: f32[8,16]", "ENTRY %%main.0 (deep: %s, w1.0: f32[8,16]" % nest, 1)
            what = "mlp_dp2_tp4.before.hlo with an ENTRY signature parameter `deep` of %d nested tuple types (no parameter instruction)" % n
        else:
            before = before.replace("  %constant.5 = f32[] constant(0)\n", "  %%deep.1 = %s tuple()\n  %%constant.5 = f32[] constant(0)\n" % nest, 1)
            what = "mlp_dp2_tp4.before.hlo with an (unused) instruction `%%deep.1 = %s tuple()` in ENTRY (%d nested tuple types)" % (
                "((((...f32[]))))", n)
        b = write(c.p("before.hlo"), before)
        a = write(c.p("after.hlo"), read(MLP_AFTER))
        steps = [c.import_xla(b, a, {2}, loc="loc", loc_file=b)]
    elif kind == "model":
        text = read(MODEL).replace('"layers": 32', '"layers": 32, "deep": %s' % depth_text, 1)
        m = write(c.p("model.json"), text)
        steps = [Step([c.pp, "plan", "--model", m, "--parallel", "dp=2,layers=1", "-o", c.p("o.mlir")], {2}, loc="loc", loc_file=m)]
        what = "llama3-8b.json with a field of %d nested %r" % (n, o)
    else:
        text = json.dumps({"model": MODEL, "parallel": "dp=2,tp=2,layers=1", "edits": []})
        text = text.replace('"edits": []', '"edits": %s' % depth_text)
        r = write(c.p("r.plan"), text)
        steps = [Step([c.pp, "plan", "--recipe", r, "-o", c.p("o.mlir")], {2}, loc="loc", loc_file=r),
                 Step([c.pp, "shrink", r, "--time-limit", c.tl], {2}, loc="loc", loc_file=r, time_limit=c.tl)]
        what = "a recipe whose edits are %d nested %r" % (n, o)
    return Case("blowup", "nesting-" + kind, what, steps)


def g_blowup_mesh(rng, c):
    doc = tiny(violated=rng.random() < 0.5)
    base = 1 if doc["plan"]["ops"][1]["attrs"]["kind"] == "avg" else 0
    sizes = rng.choice([[2**20, 2**20], [2**20, 2**19], [2**10] * 4, [2] * 40, [2**20, 2**20, 2]])
    doc["plan"]["mesh"]["axes"] += [{"name": "r%d" % i, "size": s} for i, s in enumerate(sizes)]
    spec = write(c.p("mesh.json"), jdump(doc, rng))
    ranks = 2
    for s in sizes:
        ranks *= s
    codes = {base, 2, 3} if ranks <= 2**40 else {2}
    steps = [c.verify(spec, codes, loc="loc"), c.verify(spec, codes, loc="loc", extra=["--engine", "layout"]),
             Step([c.pp, "replay", spec, "--time-limit", c.tl], {0, 1, 2, 3} if ranks <= 2**40 else {2}, loc="loc",
                  time_limit=c.tl, mem=4 * 10**9)]
    return Case("blowup", "mesh-ranks", "tiny.json (%s) with extra replicated mesh axes of sizes %s (%s ranks)" % (
        "violated" if base else "verified", sizes, ranks), steps)


# --------------------------------------------------------------------------------------
# Class 5: files that are not files.

class FifoWriter:
    """A writer on a FIFO: 'endless' writes JSON-ish text forever, 'silent' opens it and
    never writes nor closes (until teardown)."""

    def __init__(self, path, mode):
        self.path, self.mode = path, mode
        self.stop = threading.Event()
        self.thread = None

    def _run(self):
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except OSError:
            return
        try:
            if self.mode == "endless":
                os.write(fd, b'{"planproof": 1, "description": "')
                chunk = b"a" * 65536
                while not self.stop.is_set():
                    os.write(fd, chunk)
            else:
                self.stop.wait()
        except OSError:
            pass
        finally:
            os.close(fd)

    def setup(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def teardown(self):
        self.stop.set()
        try:  # release a writer still blocked in open()
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        self.thread.join(5)
        self.stop = threading.Event()


NOTFILE_KINDS = ["fifo", "fifo_endless", "fifo_silent", "dev_zero", "dev_urandom", "dev_null", "directory",
                 "symlink_zero", "name_newline", "name_esc", "name_bidi", "missing_weird"]


def make_notfile(kind, c, ext, rng):
    """(path, setup, teardown, expected located?) for a path of the kind."""
    setup = teardown = None
    if kind.startswith("fifo"):
        path = c.p("in" + ext)
        os.mkfifo(path)
        if kind != "fifo":
            w = FifoWriter(path, "endless" if kind == "fifo_endless" else "silent")
            setup, teardown = w.setup, w.teardown
    elif kind == "dev_zero":
        path = "/dev/zero"
    elif kind == "dev_urandom":
        path = "/dev/urandom"
    elif kind == "dev_null":
        path = "/dev/null"
    elif kind == "directory":
        path = c.p("dir" + ext)
        os.makedirs(path)
    elif kind == "symlink_zero":
        path = c.p("link" + ext)
        os.symlink("/dev/zero", path)
    elif kind == "missing_weird":
        path = c.p("no\x1b[2Jsuch\n::error file=x::forged\u202e" + ext)
    else:
        mid = {"name_newline": "\n" + FORGED_LINE, "name_esc": "\x1b[31m\x1b]0;t\x07", "name_bidi": "\u202e\u2066"}[kind]
        path = c.p("in" + mid + ext)
        write(path, {".json": '{"planproof": 1, "reference": 5}\n', ".mlir": "module {\n  func.func @f( {\n}\n",
                     ".hlo": "HloModule m\n\nENTRY %main {\n", ".plan": '{"model": 5}\n', ".npy": "not npy"}[ext])
    return path, setup, teardown


NOTFILE_ENTRIES = ["verify", "verify_ref", "verify_plan", "import", "export", "check_specs", "import_xla_before",
                   "import_xla_after", "import_xla_reference", "plan_model", "plan_recipe", "shrink", "replay",
                   "opt", "out_dir", "out_full", "out_missing"]


def g_notfile(rng, c):
    entry = rng.choice(NOTFILE_ENTRIES)
    kind = rng.choice(NOTFILE_KINDS)
    ext = {"import_xla_before": ".hlo", "import_xla_after": ".hlo", "import_xla_reference": ".hlo",
           "plan_recipe": ".plan", "shrink": ".plan", "opt": ".mlir", "verify_ref": ".mlir",
           "verify_plan": ".mlir"}.get(entry, ".json")
    tl = ["--time-limit", c.tl]
    if entry.startswith("out_"):
        out = {"out_dir": c.p("outdir"), "out_full": "/dev/full", "out_missing": c.p("no", "such", "dir", "o.mlir")}[entry]
        if entry == "out_dir":
            os.makedirs(out)
        cmd = rng.choice(["plan", "import_xla", "shrink_o"])
        if cmd == "plan":
            argv = [c.pp, "plan", "--model", MODEL, "--parallel", "dp=2,layers=1", "-o", out] + tl
        elif cmd == "import_xla":
            argv = [c.pp, "import-xla", MLP_BEFORE, MLP_AFTER, "-o", out] + tl
        else:
            r = write(c.p("r.plan"), json.dumps({"model": MODEL, "parallel": "dp=2,tp=2,layers=1", "edits": [
                {"replace": '%l0_attn_ar = dist.all_reduce %l0_attn_3d over ["tp"] "sum"',
                 "with": '%l0_attn_ar = dist.all_reduce %l0_attn_3d over ["tp"] "avg"'}]}))
            argv = [c.pp, "shrink", r, "--tries", "1", "-o", out] + tl
        return Case("not-a-file", entry, "output path %s (%s)" % (out, cmd),
                    [Step(argv, {2}, loc="error", time_limit=c.tl)])
    path, setup, teardown = make_notfile(kind, c, ext, rng)
    loc = "loc" if kind.startswith("name_") else "error"
    argv = {
        "verify": [c.pp, "verify", path] + tl,
        "verify_ref": [c.pp, "verify", "--ref", path, "--plan", os.path.join(ROOT, "test", "CLI", "Inputs", "pair_plan.mlir")] + tl,
        "verify_plan": [c.pp, "verify", "--ref", os.path.join(ROOT, "test", "CLI", "Inputs", "pair_ref.mlir"), "--plan", path] + tl,
        "import": [c.pp, "import", path] + tl,
        "export": [c.pp, "export", path] + tl,
        "check_specs": [c.pp, "check-specs", path] + tl,
        "import_xla_before": [c.pp, "import-xla", path, MLP_AFTER, "-o", c.p("o.json")] + tl,
        "import_xla_after": [c.pp, "import-xla", MLP_BEFORE, path, "-o", c.p("o.json")] + tl,
        "import_xla_reference": [c.pp, "import-xla", os.path.join(XLA, "shard_map_mlp_tp4.before.hlo"),
                                 os.path.join(XLA, "shard_map_mlp_tp4.after.hlo"), "--reference", path, "-o", c.p("o.json")] + tl,
        "plan_model": [c.pp, "plan", "--model", path, "--parallel", "dp=2,layers=1", "-o", c.p("o.mlir")] + tl,
        "plan_recipe": [c.pp, "plan", "--recipe", path, "-o", c.p("o.mlir")] + tl,
        "shrink": [c.pp, "shrink", path] + tl,
        "replay": [c.pp, "replay", path] + tl,
        "opt": [c.opt, path],
    }[entry]
    codes = {2}
    if entry == "check_specs":
        codes = {1, 2}       # a spec that cannot be read is a failed check or bad input
    if entry == "check_specs" and kind == "directory":
        codes = {0, 1, 2}    # an (empty) directory is check-specs' own kind of input
    if entry == "opt" and kind.startswith("name_"):
        codes = {1, 2}       # planproof-opt: MLIR's parse errors exit 1 (mlir-opt's convention)
    if kind == "fifo_silent":
        codes = codes | {3}  # a pipe that never delivers: bad input, or inconclusive at the time limit
    has_tl = "--time-limit" in argv
    printable = all(32 < ord(ch) < 127 for ch in path)
    steps = [Step(argv, codes, loc=loc, loc_file=path if loc == "loc" and printable else None, time_limit=c.tl if has_tl else None,
                  timeout=None if has_tl else 75, setup=setup, teardown=teardown, mem=3 * 10**9)]
    if entry in ("verify", "replay", "import_xla_after") and rng.random() < 0.5:
        steps.append(Step(argv + ["--format", "json"], codes, loc=loc, fmt="json", time_limit=c.tl,
                          setup=setup, teardown=teardown, mem=3 * 10**9))
    return Case("not-a-file", entry + "-" + kind, "%s given %s" % (entry, show(path, 200)), steps)


# --------------------------------------------------------------------------------------
# Class 6: forged strings.

def hlo_str(s):
    """An HLO string literal's body for s (octal escapes for controls, quotes, backslashes)."""
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        ch = chr(b)
        if b >= 0x80 or (32 <= b < 127 and ch not in '"\\'):
            out.append(ch if b < 0x80 else None)
            if b >= 0x80:
                out[-1] = bytes([b])
        else:
            out.append("\\%03o" % b)
    data = b"".join(x if isinstance(x, bytes) else x.encode() for x in out)
    return data.decode("utf-8", "surrogateescape")


def file_safe(p):
    return p.replace("/", "\u2215").replace("\x00", "")


JSON_SITES = ["operand", "culprit", "refinput", "opname", "axis", "axis_syntax", "locfile", "assumption",
              "meshname", "expect", "description", "outname", "dims_symbol"]


def g_forged_json(rng, c):
    site = rng.choice(JSON_SITES)
    P = rng.choice(PAYLOADS)
    doc = tiny(violated=True)
    codes = {1, 2}
    ref, plan = doc["reference"], doc["plan"]
    if site == "operand":
        n = "y_part" + P
        plan["ops"][0]["result"] = n
        plan["ops"][1]["operands"] = [n]
    elif site == "culprit":
        n = "y" + P
        plan["ops"][1]["result"] = n
        plan["outputs"][0]["name"] = n
    elif site == "refinput":
        n = "x" + P
        ref["inputs"][0]["name"] = n
        ref["ops"][0]["operands"][0] = n
        plan["inputs"][0]["value"] = n
    elif site == "opname":
        plan["ops"][rng.randrange(2)]["op"] = rng.choice(["matmul", "all_reduce", "dist.all_reduce"]) + P
        codes = {2}
    elif site in ("axis", "axis_syntax"):
        name = "tp" + P if site == "axis" else rng.choice(
            ["tp in 2", "tp]", "tp,dp", "tp>", "_", "tp dp", "[tp]", 'tp"', "tp}", "#dist", "", "tp\x00", "tp zigzag",
             "tp:2", "1tp", "tp-1", "tp.0"])
        P = name
        plan["mesh"]["axes"][0]["name"] = name
        plan["inputs"][0]["layout"]["dims"][1] = name
        plan["inputs"][1]["layout"]["dims"][0] = name
        plan["ops"][1]["attrs"]["axes"] = [name]
        codes = {2}
    elif site == "locfile":
        plan["ops"][1]["loc"] = {"file": "src" + P + ".py", "line": 3, "col": 1}
    elif site == "assumption":
        doc["assumptions"] = ["labels" + P]
    elif site == "meshname":
        plan["mesh"]["name"] = "mesh" + P
    elif site == "expect":
        doc["expect"] = {"verdict": "violated", "kind": rng.choice(["reduction", "sharding"]) + P,
                         "at": rng.choice(["y", "y_part"]) + P}
    elif site == "description":
        doc["description"] = P
        codes = {1}
    elif site == "outname":
        ref["ops"][0]["result"] = "yy" + P
        ref["outputs"] = ["yy" + P]
        plan["outputs"][0]["value"] = "yy" + P
    elif site == "dims_symbol":
        doc["dims"] = {"B" + P: 2}
        ref["inputs"][0]["shape"] = ["B" + P, 4]
    spec = write(c.p("spec.json"), jdump(doc, rng))
    steps = c.verify_all(spec, codes, loc="loc")
    steps.append(Step([c.pp, "import", spec, "--time-limit", c.tl], {0, 2} if codes != {2} else {2}, loc="loc", time_limit=c.tl))
    if site == "expect" or rng.random() < 0.3:
        cs = {1, 2} if site == "expect" else {0, 1, 2}   # 0: the spec's own expectation met
        steps.append(Step([c.pp, "check-specs", spec, "--time-limit", c.tl], cs, loc="loc", time_limit=c.tl))
        steps.append(Step([c.pp, "check-specs", spec, "--time-limit", c.tl, "--format", "json"], cs, loc="loc",
                          fmt="jsondoc", time_limit=c.tl))
    return Case("forged-strings", "json-" + site, "tiny.json (violated: avg) with %s carrying %s" % (site, show(P, 80)), steps)


def g_forged_mlir(rng, c):
    site = rng.choice(["refname", "loc", "axis", "expect", "assumption", "loc_callsite"])
    P = rng.choice(PAYLOADS)
    text = read(MLIR_BAD)
    codes = {1, 2}
    culprit = '%y_pre = dist.all_reduce %y_part over ["tp"] "avg" : tensor<2x4xf32> -> tensor<2x4xf32>'
    if site == "refname":
        text = text.replace('{ref.name = "x"}', '{ref.name = "x%s"}' % mlir_str(P), 1)
        text = text.replace('{dist.value = "x",', '{dist.value = "x%s",' % mlir_str(P), 1)
    elif site == "loc":
        text = text.replace(culprit, culprit + ' loc("src%s.py":7:3)' % mlir_str(P), 1)
    elif site == "loc_callsite":
        text = text.replace(culprit, culprit + ' loc(callsite("f%s"("a%s.py":1:2) at "b.py":3:4))' % (mlir_str(P), mlir_str(P)), 1)
    elif site == "axis":
        text = text.replace('axes = ["tp"]', 'axes = ["tp%s"]' % mlir_str(P), 1).replace(
            'over ["tp"]', 'over ["tp%s"]' % mlir_str(P))
        codes = {2}
    elif site == "expect":
        text = text.replace('at = "%y_pre"', 'at = "%%y_pre%s"' % mlir_str(P), 1)
    else:
        text = text.replace("module attributes {planproof.expect",
                            'module attributes {planproof.assumptions = ["labels%s"], planproof.expect' % mlir_str(P), 1)
    spec = write(c.p("spec.mlir"), text)
    steps = c.verify_all(spec, codes, loc="loc")
    steps.append(Step([c.pp, "export", spec, "--time-limit", c.tl], {0, 2} if codes != {2} else {2}, loc="loc",
                      fmt="jsondoc", time_limit=c.tl))
    steps.append(Step([c.opt, spec], {0, 1, 2}, loc="loc"))
    if site == "expect":
        steps.append(Step([c.pp, "check-specs", spec, "--time-limit", c.tl], {1, 2}, loc="loc", time_limit=c.tl))
    return Case("forged-strings", "mlir-" + site, "mlp_tp2_row_allreduce_avg.mlir with %s carrying %s" % (site, show(P, 80)), steps)


def g_forged_hlo(rng, c):
    site = rng.choice(["op_name", "file_name", "output_names", "function_name"])
    P = rng.choice(PAYLOADS)
    before, after = read(MLP_BEFORE), read(MLP_AFTER)
    after = after.replace("%constant.3.clone = f32[] constant(0.1)", "%constant.3.clone = f32[] constant(0.2)", 1)
    extra = []
    if site == "op_name":
        before = before.replace('metadata={op_name="x"}', 'metadata={op_name="x%s"}' % hlo_str(P), 1)
        after = after.replace('metadata={op_name="x"}', 'metadata={op_name="x%s"}' % hlo_str(P), 1)
    elif site == "file_name":
        after = after.replace('3 "mlp_dp2_tp4.py"', '3 "src%s.py"' % hlo_str(file_safe(P)), 1)
    elif site == "function_name":
        after = after.replace('5 "step"', '5 "step%s"' % hlo_str(P), 1)
    else:
        P = rng.choice([p for p in PAYLOADS if "\x00" not in p])   # (an argument holds no NUL)
        extra = ["--output-names", "loss,w1%s,w2" % P]
    b = write(c.p("before.hlo"), before)
    a = write(c.p("after.hlo"), after)

    def then(res):
        if res.rc != 0:
            return []
        return c.verify_all(c.p("imported.json"), {1, 2, 3}, loc="loc")
    codes = {2} if site == "output_names" else {0, 2}
    steps = [c.import_xla(b, a, codes, loc="error" if site == "output_names" else "loc", extra=extra, then=then)]
    return Case("forged-strings", "hlo-" + site, "mlp_dp2_tp4 with the update's lr 0.1 -> 0.2 in after.hlo, and %s carrying %s" % (
        site, show(P, 80)), steps)


def g_forged_misc(rng, c):
    site = rng.choice(["filename", "recipe_edit", "recipe_model", "model_name", "parallel", "option", "format",
                       "engine", "missing_path", "filename_mlir"])
    P = rng.choice(PAYLOADS)
    tl = ["--time-limit", c.tl]
    if site in ("filename", "filename_mlir"):
        if site == "filename":
            spec = write(c.p("s" + file_safe(P) + ".json"), jdump(tiny(violated=True), rng))
        else:
            spec = write(c.p("s" + file_safe(P) + ".mlir"), read(MLIR_BAD))
        steps = c.verify_all(spec, {1, 2}, loc="loc")
    elif site == "recipe_edit":
        r = write(c.p("r.plan"), json.dumps({"model": MODEL, "parallel": "dp=2,tp=2,layers=1",
                                             "edits": [{"replace": "no such text" + P, "with": "x" + P}]}))
        steps = [Step([c.pp, "plan", "--recipe", r, "-o", c.p("o.mlir")] + tl, {2}, loc="loc", time_limit=c.tl),
                 Step([c.pp, "verify", r, "--format", "json"] + tl, {2}, loc="loc", fmt="json", time_limit=c.tl),
                 Step([c.pp, "verify", r, "--format", "sarif"] + tl, {2}, loc="loc", fmt="sarif", time_limit=c.tl)]
    elif site == "recipe_model":
        r = write(c.p("r.plan"), json.dumps({"model": "m" + P + ".json", "parallel": "dp=2,tp=2,layers=1", "edits": []}))
        steps = [Step([c.pp, "plan", "--recipe", r, "-o", c.p("o.mlir")] + tl, {2}, loc="loc", time_limit=c.tl),
                 Step([c.pp, "verify", r, "--format", "json"] + tl, {2}, loc="loc", fmt="json", time_limit=c.tl)]
    elif site == "model_name":
        doc = json.loads(read(MODEL))
        doc["name"] = "llama" + P
        m = write(c.p("model.json"), json.dumps(doc))
        steps = [Step([c.pp, "plan", "--model", m, "--parallel", "dp=2,tp=2,layers=1"] + tl, {0, 2}, loc="loc", time_limit=c.tl)]
    elif site == "parallel":
        steps = [Step([c.pp, "plan", "--model", MODEL, "--parallel", "dp=2," + P] + tl, {2}, loc="error", time_limit=c.tl)]
    elif site == "option":
        steps = [Step([c.pp, "verify", TINY, "--x" + P] + tl, {2}, loc="error", time_limit=c.tl),
                 Step([c.pp, "verify", TINY, "--x" + P, "--format", "json"] + tl, {2}, loc="error", fmt="json", time_limit=c.tl)]
    elif site == "format":
        steps = [Step([c.pp, "verify", TINY, "--format", "text" + P] + tl, {2}, loc="error", time_limit=c.tl)]
    elif site == "engine":
        steps = [Step([c.pp, "verify", TINY, "--engine", "layout" + P] + tl, {2}, loc="error", time_limit=c.tl),
                 Step([c.pp, "verify", TINY, "--engine", "layout" + P, "--format", "sarif"] + tl, {2}, loc="error",
                      fmt="sarif", time_limit=c.tl)]
    else:
        path = c.p("missing" + file_safe(P) + ".json")
        steps = [c.verify(path, {2}, loc="error"), c.verify(path, {2}, fmt="json", loc="error"),
                 c.verify(path, {2}, fmt="sarif", loc="error"),
                 Step([c.pp, "replay", path, "--format", "json"] + tl, {2}, loc="error", fmt="json", time_limit=c.tl)]
    return Case("forged-strings", site, "%s carrying %s" % (site, show(P, 80)), steps)


def g_forged_raw(rng, c):
    """Raw control and bidi characters in the input file itself, on the line a
    diagnostic quotes (its source excerpt must not copy them out raw)."""
    site = rng.choice(["json_raw_esc", "json_raw_bidi_name", "mlir_comment", "mlir_comment_bad", "hlo_metadata",
                       "json_raw_c1"])
    raw = rng.choice(["\x1b[31m\x1b[2J", "\u202e\u2066", "\x1b]0;pwned\x07", "\r" + FORGED_LINE, "\x85\x9b31m"])
    if site == "json_raw_esc":
        # JSON forbids a raw control character in a string: bad input, located, excerpt quoted
        text = jdump(tiny(True)).replace('"kind": "avg"', '"kind": "avg%s"' % raw.replace("\u202e", "\x1b"), 1)
        spec = write(c.p("spec.json"), text)
        steps = c.verify_all(spec, {2}, loc="loc", formats=("text", "json", "sarif"))
        what = "tiny.json with raw %s inside the all_reduce's kind string" % show(raw)
    elif site in ("json_raw_bidi_name", "json_raw_c1"):
        ch = "\u202e\u2067" if site == "json_raw_bidi_name" else "\x85\x9b"
        doc = tiny(True)
        doc["plan"]["ops"][0]["result"] = "y_part" + ch
        doc["plan"]["ops"][1]["operands"] = ["y_part" + ch]
        text = json.dumps(doc, indent=1, ensure_ascii=False)
        spec = write(c.p("spec.json"), text)
        steps = c.verify_all(spec, {1, 2}, loc="loc")
        what = "tiny.json (violated) whose operand name holds raw %s (UTF-8 in the file)" % show(ch)
    elif site in ("mlir_comment", "mlir_comment_bad"):
        text = read(MLIR_BAD)
        culprit = '%y_pre = dist.all_reduce %y_part over ["tp"] "avg" : tensor<2x4xf32> -> tensor<2x4xf32>'
        if site == "mlir_comment_bad":   # a parse error on that line
            text = text.replace(culprit, culprit.replace(" : tensor", " :: tensor") + " // " + raw, 1)
            codes = {2}
        else:
            text = text.replace(culprit, culprit + " // " + raw, 1)
            codes = {1}
        spec = write(c.p("spec.mlir"), text)
        steps = c.verify_all(spec, codes, loc="loc") + [Step([c.opt, spec], {0, 1, 2}, loc="loc")]
        what = "mlp_tp2_row_allreduce_avg.mlir with a trailing comment holding raw %s on the culprit's line%s" % (
            show(raw), " (made a parse error)" if site == "mlir_comment_bad" else "")
    else:
        after = read(MLP_AFTER)
        line = next(l for l in after.split("\n") if l.startswith("  %all-reduce = "))
        bad = line.replace("replica_groups={{0,1,2,3},{4,5,6,7}}", "replica_groups={{0,1,2,3},{4,5,6,99}}").replace(
            'op_name="jit(step)/jvp()/dot_general"', 'op_name="jit(step)%s"' % raw.replace("\r", "").replace("\n", ""))
        after = after.replace(line, bad, 1)
        b = write(c.p("before.hlo"), read(MLP_BEFORE))
        a = write(c.p("after.hlo"), after)
        steps = [c.import_xla(b, a, {2}, loc="loc", loc_file=a),
                 c.import_xla(b, a, {2}, loc="loc", loc_file=a, extra=["--format", "json"], fmt="json")]
        what = "mlp_dp2_tp4.after.hlo: the first all-reduce's replica_groups given device 99, its metadata holding raw %s" % show(raw)
    return Case("forged-strings", "raw-" + site, what, steps)


# --------------------------------------------------------------------------------------
# Class 7: op locations naming files outside the spec's folder.

def passwd_lines():
    try:
        return [l for l in read("/etc/passwd").split("\n") if len(l.strip()) > 8]
    except OSError:
        return []


def g_loc_leak(rng, c):
    site = rng.choice(["passwd", "passwd", "relative", "absolute", "symlink", "environ", "dev_zero", "fifo",
                       "mlir_passwd", "mlir_relative", "hlo_filenames", "proc_status"])
    marker = "HOSTILE-SECRET-%08x" % rng.getrandbits(32)
    os.makedirs(c.p("specdir"))
    write(c.p("outside", "secret.py"), "%s = 1\n%s_line2 = 2\n%s_line3 = 3\n" % (marker, marker, marker))
    forbid = [marker]
    env = None
    line = rng.choice([1, 1, 2, 3])
    if site.startswith("passwd") or site in ("mlir_passwd", "hlo_filenames"):
        forbid = passwd_lines() or [marker]
    file_for = {"passwd": "/etc/passwd", "relative": "../outside/secret.py", "absolute": c.p("outside", "secret.py"),
                "symlink": "link.py", "environ": "/proc/self/environ", "dev_zero": "/dev/zero", "fifo": "pipe.py",
                "mlir_passwd": "/etc/passwd", "mlir_relative": "../outside/secret.py", "hlo_filenames": "/etc/passwd",
                "proc_status": "/proc/self/status"}[site]
    if site == "symlink":
        os.symlink(c.p("outside", "secret.py"), c.p("specdir", "link.py"))
    if site == "fifo":
        os.mkfifo(c.p("specdir", "pipe.py"))
    if site == "environ":
        env = {"HOSTILE_SECRET_ENV": marker}
    if site == "proc_status":
        forbid = ["Umask:", "VmPeak:", "TracerPid:", "SigBlk:"]
    steps = []
    if site.startswith("mlir"):
        text = read(MLIR_BAD)
        culprit = '%y_pre = dist.all_reduce %y_part over ["tp"] "avg" : tensor<2x4xf32> -> tensor<2x4xf32>'
        text = text.replace(culprit, culprit + ' loc("%s":%d:1)' % (file_for, line), 1)
        spec = write(c.p("specdir", "spec.mlir"), text)
    elif site == "hlo_filenames":
        before, after = read(MLP_BEFORE), read(MLP_AFTER)
        after = after.replace("%constant.3.clone = f32[] constant(0.1)", "%constant.3.clone = f32[] constant(0.2)", 1)
        after = after.replace('3 "mlp_dp2_tp4.py"', '3 "/etc/passwd"', 1)
        b = write(c.p("specdir", "before.hlo"), before)
        a = write(c.p("specdir", "after.hlo"), after)
        spec = c.p("specdir", "imported.json")
        imp = Step([c.pp, "import-xla", b, a, "-o", spec, "--time-limit", c.tl], {0, 2}, loc="loc", time_limit=c.tl)
        steps.append(imp)
    else:
        doc = tiny(violated=True)
        doc["plan"]["ops"][1]["loc"] = {"file": file_for, "line": line, "col": 1}
        if rng.random() < 0.5:  # the operand's op too, so notes point there as well
            doc["plan"]["ops"][0]["loc"] = {"file": file_for, "line": 1, "col": 1}
        spec = write(c.p("specdir", "spec.json"), jdump(doc, rng))
    for fmt in ("text", "html", "json", "sarif"):
        s = c.verify(spec, {1, 2}, fmt=fmt, loc="loc", forbid=forbid, env=env, mem=3 * 10**9)
        steps.append(s)
    if rng.random() < 0.3:
        steps.append(Step([c.pp, "check-specs", spec, "--time-limit", c.tl], {0, 1, 2}, loc="loc", forbid=forbid, env=env,
                          time_limit=c.tl))
    return Case("loc-file-leak", site, "a violated spec in specdir/ whose culprit op's location is %s:%d%s" % (
        file_for, line, " (via an HLO dump's FileNames, imported)" if site == "hlo_filenames" else ""), steps)


# --------------------------------------------------------------------------------------
# Class 8: .npy inputs for replay.

def npy(header, data=b"", version=(1, 0), header_len=None, magic=b"\x93NUMPY", pad_to=None):
    h = header.encode("latin-1") if isinstance(header, str) else header
    lenbytes = 2 if version[0] == 1 else 4
    if pad_to is not None:
        h += b" " * max(0, pad_to - (6 + 2 + lenbytes + len(h) + 1)) + b"\n"
    elif not h.endswith(b"\n"):
        h += b" " * ((64 - (6 + 2 + lenbytes + len(h) + 1) % 64) % 64) + b"\n"
    n = len(h) if header_len is None else header_len
    ln = struct.pack("<H", n & 0xFFFF) if lenbytes == 2 else struct.pack("<I", n & 0xFFFFFFFF)
    return magic + bytes(version) + ln + h + data


def hdr(descr="'<f4'", shape="(2, 4)", fortran="False"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


NPY_VARIANTS = ["huge_shape", "wrap_shape", "negative_dim", "wrong_dtype", "truncated", "no_data", "len_too_big",
                "len_too_small", "len_zero", "v2_huge_len", "bad_version", "deep_parens", "many_dims", "header_escape",
                "filename_forged", "fifo", "directory", "dev_zero_link", "not_dict", "shape_not_tuple", "big_int_in_header"]


def g_npy(rng, c):
    variant = rng.choice(NPY_VARIANTS)
    d = c.p("inputs")
    os.makedirs(d)
    name = "x.npy"
    good = struct.pack("<8f", *[1.0] * 8)
    content = None
    what = variant
    if variant == "huge_shape":
        shape = rng.choice(["(1000000000, 1000000000)", "(4611686018427387904, 4611686018427387904)", "(2147483648, 2147483648)",
                            "(1000000000000,)", "(9223372036854775807, 1)"])
        content = npy(hdr(shape=shape), b"", pad_to=128)
        what = "a 128-byte header claiming shape %s, no data" % shape
    elif variant == "wrap_shape":
        shape = rng.choice(["(2305843009213693953, 8)", "(18446744073709551617, 8)", "(4294967296, 4294967296, 8)", "(2, 9223372036854775812)"])
        content = npy(hdr(shape=shape), good)
        what = "shape %s (its element count wraps in 64 bits to a small number) with 8 floats of data" % shape
    elif variant == "negative_dim":
        shape = rng.choice(["(-1, 4)", "(2, -4)", "(-2, -4)", "(-9223372036854775808, 4)"])
        content = npy(hdr(shape=shape), good)
        what = "shape %s" % shape
    elif variant == "wrong_dtype":
        descr = rng.choice(["'<c8'", "'|O'", "'<U8'", "'<M8[ns]'", "'|V32'", "'<f16'", "'x'", "''", "'<f4 '",
                            "[('a', '<f4')]", "'<f3'", "'<i9'", "'<f4\\x00'"])
        content = npy(hdr(descr=descr), good * 4)
        what = "dtype %s" % descr
    elif variant == "truncated":
        cut = rng.choice([1, 7, 16, 31])
        content = npy(hdr(), good[:cut])
        what = "shape (2, 4) '<f4' with %d bytes of its 32" % cut
    elif variant == "no_data":
        content = npy(hdr())
        what = "shape (2, 4) '<f4' without data"
    elif variant == "len_too_big":
        n = rng.choice([65535, 1000, 200])
        content = npy(hdr(), good, header_len=n)
        what = "HEADER_LEN %d, larger than the file" % n
    elif variant == "len_too_small":
        n = rng.choice([10, 30, 50])
        content = npy(hdr(), good, header_len=n)
        what = "HEADER_LEN %d, cutting the header's dict" % n
    elif variant == "len_zero":
        content = npy(hdr(), good, header_len=0)
        what = "HEADER_LEN 0"
    elif variant == "v2_huge_len":
        n = rng.choice([0xFFFFFFFF, 0x80000000, 0x7FFFFFFF])
        content = npy(hdr(), good, version=(rng.choice([2, 3]), 0), header_len=n)
        what = "format version 2/3 with a 4-byte HEADER_LEN 0x%X" % n
    elif variant == "bad_version":
        v = rng.choice([(0, 0), (9, 9), (255, 255), (1, 1)])
        content = npy(hdr(), good, version=v)
        what = "format version %d.%d" % v
    elif variant == "deep_parens":
        n = rng.choice([1000, 20000, 60000])
        content = npy(hdr(shape="(" * n + "2" + ")" * n), good, version=(2, 0))
        what = "shape of %d nested parentheses" % n
    elif variant == "many_dims":
        n = rng.choice([64, 1000, 20000])
        content = npy(hdr(shape="(" + "1, " * n + "2, 4)"), good, version=(2, 0))
        what = "shape of %d dims of 1 then 2, 4" % n
    elif variant == "header_escape":
        P = rng.choice(PAYLOADS[:6])
        content = npy(hdr(descr="'<f4%s'" % P).encode("utf-8"), good)
        what = "dtype text carrying %s" % show(P)
    elif variant == "filename_forged":
        P = rng.choice(PAYLOADS)
        name = "x" + file_safe(P) + ".npy"
        content = npy(hdr(), good)
        what = "a well-formed x.npy named %s" % show(name)
    elif variant == "not_dict":
        h = rng.choice(["[1, 2, 3]", "'just a string'", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), 'descr': '<c8'}",
                        "{'descr': '<f4', 'fortran_order': 2, 'shape': (2, 4), }", "\x1b[31m", "{"])
        content = npy(h, good)
        what = "header %s" % show(h)
    elif variant == "shape_not_tuple":
        s = rng.choice(["[2, 4]", "8", "'2,4'", "(2.0, 4.0)", "(True, 4)", "(2, 4, )", "(0x2, 4)"])
        content = npy(hdr(shape=s), good)
        what = "shape written as %s" % s
    elif variant == "big_int_in_header":
        s = rng.choice(["(18446744073709551616, 4)", "(99999999999999999999999999, 4)", "(2, " + "9" * 4000 + ")"])
        content = npy(hdr(shape=s), good)
        what = "shape %s" % show(s, 60)
    path = os.path.join(d, name)
    if variant == "fifo":
        os.mkfifo(path)
        what = "x.npy a FIFO with no writer"
    elif variant == "directory":
        os.makedirs(path)
        what = "x.npy a directory"
    elif variant == "dev_zero_link":
        os.symlink("/dev/zero", path)
        what = "x.npy a symlink to /dev/zero"
    else:
        write(path, content)
    codes = {2}
    if variant == "shape_not_tuple":
        codes = {0, 2}   # (2, 4, ) is the same tuple; others are refused
        if "(2, 4, )" not in what:
            codes = {2}
    steps = [Step([c.pp, "replay", MLIR_OK, "--inputs", d, "--time-limit", c.tl], codes, loc="error",
                  time_limit=c.tl, mem=2 * 10**9)]
    if rng.random() < 0.5:
        steps.append(Step([c.pp, "replay", MLIR_OK, "--inputs", d, "--time-limit", c.tl, "--format", "json"], codes,
                          loc="error", fmt="json", time_limit=c.tl, mem=2 * 10**9))
    if rng.random() < 0.3:
        steps.append(Step([c.pp, "replay", MLIR_OK, "--inputs", d, "--backend", "emulated", "--time-limit", c.tl], codes,
                          loc="error", time_limit=c.tl, mem=2 * 10**9))
    return Case("npy", variant, "replay mlp_tp2.mlir --inputs DIR with DIR/%s: %s" % (show(name, 80), what), steps)


# --------------------------------------------------------------------------------------
# Class 9: the Python binding.

PY_HEAD = r'''
import json, os, sys, threading
import planproof
from planproof import SpecError
MLIR_OK, MLIR_BAD, MODEL = %r, %r, %r
def ok():
    print("HOSTILE-OK"); sys.stdout.flush(); os._exit(0)
def fail(msg):
    print("HOSTILE-FAIL: " + msg); sys.stdout.flush(); os._exit(1)
def touch_result(r):
    for a in ("text", "html", "json", "verdict"):
        try:
            getattr(r, a)
        except UnicodeDecodeError as e:
            fail("Result.%%s raised UnicodeDecodeError: %%s" %% (a, e))
    json.loads(r.json)
    for v in list(r.violations) + list(r.warnings):
        for a in ("kind", "message", "hint", "op", "value", "notes", "ranks"):
            try:
                getattr(v, a)
            except UnicodeDecodeError as e:
                fail("Finding.%%s raised UnicodeDecodeError: %%s" %% (a, e))
        try:
            v.at.file; str(v.at)
            if v.counterexample is not None:
                v.counterexample.inputs; v.counterexample.rank_values; v.counterexample.element
        except UnicodeDecodeError as e:
            fail("Location/Counterexample raised UnicodeDecodeError: %%s" %% e)
    for at, why in r.inconclusive:
        str(at); why
''' % (MLIR_OK, MLIR_BAD, MODEL)


def g_py_edit_deep(rng, c):
    n = rng.choice([10**5, 2 * 10**5, 10**6])
    o, cl = rng.choice([("[", "]"), ("{", "}"), ("(", ")"), ("[{", "}]"), ("#dist.layout<[", "]>")])
    balanced = rng.random() < 0.5
    attr = rng.choice(["kind", "axes", "hostile"])
    code = PY_HEAD + r'''
s = planproof.Session()
spec = s.load(MLIR_BAD)
text = %r * %d + (%r + %r * %d if %r else "")
try:
    s.edit(spec, [("%%y_pre", %r, text)])
except Exception as e:
    r = s.verify(spec, time_limit=20)
    if r.verdict != "violated":
        fail("after the refused edit the spec is %%s" %% r.verdict)
    ok()
fail("the edit was accepted")
''' % (o, n, '"avg"', cl, n, balanced, attr)
    return Case("python-api", "edit-deep", "Session.edit(spec, [('%%y_pre', %r, %r * %d%s)]) on mlp_tp2_row_allreduce_avg.mlir" % (
        attr, o, n, " + balanced closers" if balanced else ""), [c.py(code)])


def g_py_load_deep(rng, c):
    n = rng.choice([10**5, 10**6])
    kind = rng.choice(["json", "mlir", "dict_path", "builder_dict"])
    code = PY_HEAD + r'''
n = %d
kind = %r
try:
    if kind == "json":
        planproof.load_text('{"planproof": 1, "description": ' + "[" * n + "]" * n + '}', name="deep.json")
    elif kind == "mlir":
        planproof.load_text('module attributes {a = ' + "[" * n + "]" * n + '} {}', name="deep.mlir")
    elif kind == "dict_path":
        planproof.verify({"planproof": 1, "reference": "x" * n}, time_limit=20)
    else:
        d = []
        cur = d
        for i in range(min(n, 50000)):
            nxt = []
            cur.append(nxt)
            cur = nxt
        planproof.verify({"planproof": 1, "description": d}, time_limit=20)
except RecursionError as e:
    ok()   # Python's own json.dumps refusing a deep dict is an exception, not a crash
except Exception as e:
    ok()
fail("accepted")
''' % (n, kind)
    return Case("python-api", "load-deep-" + kind, "planproof.load_text/verify of a %s with %d nested brackets" % (kind, n), [c.py(code)])


def g_py_utf8(rng, c):
    site = rng.choice(["mlir_refname", "mlir_loc", "json_raw_bytes", "json_lone_surrogate", "mlir_axis", "json_locfile_bytes",
                       "load_text_surrogate"])
    bad = rng.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80abc", b"\xe2\x80"])
    spec = None
    if site.startswith("mlir"):
        text = read(MLIR_BAD)
        esc = "".join("\\%02X" % b for b in bad)
        if site == "mlir_refname":
            text = text.replace('{ref.name = "x"}', '{ref.name = "x%s"}' % esc, 1).replace(
                '{dist.value = "x",', '{dist.value = "x%s",' % esc, 1)
        elif site == "mlir_axis":
            text = text.replace('axes = ["tp"]', 'axes = ["tp%s"]' % esc, 1)
        else:
            culprit = '%y_pre = dist.all_reduce %y_part over ["tp"] "avg" : tensor<2x4xf32> -> tensor<2x4xf32>'
            text = text.replace(culprit, culprit + ' loc("src%s.py":7:3)' % esc, 1)
        spec = write(c.p("spec.mlir"), text)
    elif site in ("json_raw_bytes", "json_locfile_bytes"):
        doc = tiny(violated=True)
        if site == "json_raw_bytes":
            doc["plan"]["ops"][0]["result"] = "y_partQQ"
            doc["plan"]["ops"][1]["operands"] = ["y_partQQ"]
        else:
            doc["plan"]["ops"][1]["loc"] = {"file": "srcQQ.py", "line": 1, "col": 1}
        spec = write(c.p("spec.json"), json.dumps(doc).encode().replace(b"QQ", bad))
    elif site == "json_lone_surrogate":
        doc = tiny(violated=True)
        doc["plan"]["ops"][0]["result"] = "y_partQQ"
        doc["plan"]["ops"][1]["operands"] = ["y_partQQ"]
        spec = write(c.p("spec.json"), json.dumps(doc).replace("QQ", rng.choice(["\\udcff", "\\ud800", "\\udfff\\ud800", "\\u0000"])))
    if site == "load_text_surrogate":
        code = PY_HEAD + r'''
try:
    s = planproof.load_text('{"planproof": 1, "description": "\udcff"}', name="x\udcff.json")
except UnicodeDecodeError as e:
    fail("UnicodeDecodeError: %s" % e)
except Exception:
    ok()
ok()
'''
        what = "planproof.load_text of a str holding a lone surrogate"
    else:
        code = PY_HEAD + r'''
try:
    r = planproof.verify(%r, time_limit=20)
except UnicodeDecodeError as e:
    fail("verify raised UnicodeDecodeError: %%s" %% e)
except SpecError as e:
    try:
        str(e)
    except UnicodeDecodeError as e2:
        fail("SpecError's text raised UnicodeDecodeError")
    ok()
touch_result(r)
if r.verdict == "verified":
    fail("a violated spec verified")
ok()
''' % spec
        what = "planproof.verify of %s with the bytes %r (not UTF-8) in %s; then Result.text/html/json and every Finding field" % (
            os.path.basename(spec), bad, site)
    return Case("python-api", "utf8-" + site, what, [c.py(code)])


def g_py_time_limit(rng, c):
    tlv = rng.choice(["float('inf')", "float('inf')", "1e308", "2**63", "sys.float_info.max", "float('nan')",
                      "-1.0", "0.0", "float('-inf')", "1e-300"])
    fn = rng.choice(["verify", "verify_layout", "replay"])
    strict = tlv in ("float('inf')", "1e308", "2**63", "sys.float_info.max")
    code = PY_HEAD + r'''
tl = %s
fn = %r
try:
    if fn == "replay":
        r = planproof.replay(MLIR_BAD, time_limit=tl, localize=False)
        verdict = "violated" if r.diverged else ("error" if not r.ran else "within")
    elif fn == "verify_layout":
        r = planproof.verify(MLIR_BAD, time_limit=tl, engine="auto")
        verdict = r.verdict
    else:
        r = planproof.verify(MLIR_BAD, time_limit=tl)
        verdict = r.verdict
except (ValueError, OverflowError, TypeError, SpecError) as e:
    if %r:
        fail("time_limit=%%r raised %%s: %%s" %% (tl, type(e).__name__, e))
    ok()
if %r and verdict != "violated":
    fail("time_limit=%%r: %%s, not violated" %% (tl, verdict))
if verdict in ("verified", "within"):
    fail("time_limit=%%r: a violated spec came out %%s" %% (tl, verdict))
ok()
''' % (tlv, fn, strict, strict)
    return Case("python-api", "time-limit", "planproof.%s(mlp_tp2_row_allreduce_avg.mlir, time_limit=%s): %s" % (
        fn, tlv, "must say violated" if strict else "an exception or not verified"), [c.py(code)])


def g_py_fork(rng, c):
    how = rng.choice(["fork", "fork_threads", "mp_fork", "fork_busy_thread", "fork_session"])
    threads = rng.choice([1, 2, 4])
    code = PY_HEAD + r'''
how, threads = %r, %d
r = planproof.verify(MLIR_OK, threads=2)
assert r.verdict == "verified", r.verdict
def child_work():
    r = planproof.verify(MLIR_BAD, threads=threads, time_limit=20)
    return r.verdict
if how == "mp_fork":
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        try:
            v = pool.apply_async(child_work).get(timeout=45)
        except multiprocessing.TimeoutError:
            fail("the forked pool worker did not finish planproof.verify in 45 s")
    if v != "violated":
        fail("forked worker: %%s" %% v)
    ok()
stop = threading.Event()
if how == "fork_busy_thread":
    def busy():
        while not stop.is_set():
            planproof.verify(MLIR_OK, threads=2)
    t = threading.Thread(target=busy, daemon=True)
    t.start()
    import time; time.sleep(0.3)
if how == "fork_session":
    s = planproof.Session()
    spec = s.load(MLIR_BAD)
pid = os.fork()
if pid == 0:
    try:
        if how == "fork_session":
            v = s.verify(spec, threads=threads, time_limit=20).verdict
        else:
            v = child_work()
        os._exit(0 if v == "violated" else 3)
    except BaseException as e:
        sys.stderr.write("child: %%r\n" %% e)
        os._exit(4)
import time
deadline = time.time() + 45
while True:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p:
        break
    if time.time() > deadline:
        os.kill(pid, 9)
        fail("the forked child did not finish planproof.verify in 45 s (%%s)" %% how)
    time.sleep(0.05)
stop.set()
if os.WIFSIGNALED(st):
    fail("the forked child died of signal %%d" %% os.WTERMSIG(st))
if os.WEXITSTATUS(st) != 0:
    fail("the forked child exited %%d" %% os.WEXITSTATUS(st))
ok()
''' % (how, threads)
    return Case("python-api", "fork-" + how, "planproof.verify used, then %s; the child verifies mlp_tp2_row_allreduce_avg.mlir "
                "with threads=%d" % (how, threads), [c.py(code, timeout=75)])


def g_py_plan(rng, c):
    par = rng.choice(["dp=2,layers=1099511627776", "dp=9223372036854775808", "dp=2,layers=1,seq=1099511627776,size=full",
                      "dp=2," + "x" * 10**6, "dp=2,\x1b[31m"])
    code = PY_HEAD + r'''
try:
    planproof.plan(MODEL, %r)
except SpecError:
    ok()
except Exception as e:
    fail("raised %%s, not SpecError: %%s" %% (type(e).__name__, str(e)[:200]))
fail("accepted")
''' % par
    return Case("python-api", "plan", "planproof.plan(llama3-8b.json, %s)" % show(par, 60), [c.py(code)])


# --------------------------------------------------------------------------------------
# The classes and the driver.

CLASSES = [
    ("int-boundary", [g_int_json_field, g_int_scale_wrap, g_int_parametric, g_int_model, g_int_parallel,
                      g_int_options, g_int_mlir, g_int_json_field, g_int_scale_wrap]),
    ("xla-reduction", [g_xla_reduction]),
    ("hlo-malformed", [g_hlo_malformed]),
    ("blowup", [g_blowup_hlo_dag, g_blowup_hlo_while, g_blowup_layers, g_blowup_mlir_calls, g_blowup_nesting,
                g_blowup_mesh]),
    ("not-a-file", [g_notfile]),
    ("forged-strings", [g_forged_json, g_forged_mlir, g_forged_hlo, g_forged_misc, g_forged_json, g_forged_raw]),
    ("loc-file-leak", [g_loc_leak]),
    ("npy", [g_npy]),
    ("python-api", [g_py_edit_deep, g_py_load_deep, g_py_utf8, g_py_time_limit, g_py_fork, g_py_plan]),
]
CLASS_NAMES = [n for n, _ in CLASSES]


def make_case(runner, seed, cls, k, root):
    gens = dict(CLASSES)[cls]
    off = random.Random("%s:%s" % (seed, cls)).randrange(len(gens))
    gen = gens[(k + off) % len(gens)]
    rng = random.Random("%s:%s:%d" % (seed, cls, k))
    d = os.path.join(root, "%s-%d" % (cls, k))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    c = Ctx(runner, d)
    case = gen(rng, c)
    case.name = "%s:%d" % (cls, k)
    case.dir = d
    return case


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planproof", default=os.environ.get("PLANPROOF", os.path.join(ROOT, "build", "bin", "planproof")))
    ap.add_argument("--planproof-opt", help="default: planproof-opt beside planproof")
    ap.add_argument("--build", help="the build folder (the extension module; default: above planproof's bin/)")
    ap.add_argument("--pytools", help="the Python for the binding's checks (default: BUILD/pytools/bin/python)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=45, help="inputs in all, spread over the classes in turn")
    ap.add_argument("--time-limit", type=int, default=20, help="the --time-limit passed to planproof (seconds)")
    ap.add_argument("--classes", help="comma list of classes to run (default: all): " + ",".join(CLASS_NAMES))
    ap.add_argument("--case", action="append", default=[], help="run only CLASS:INDEX (repeatable)")
    ap.add_argument("--out", help="write a markdown report (a table of counts per class, then the failures)")
    ap.add_argument("--keep", help="write the cases under this folder and keep those that fail (with --case: all)")
    ap.add_argument("--list", action="store_true", help="write the cases and print their commands, run nothing")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    args.planproof = os.path.abspath(args.planproof)
    bindir = os.path.dirname(args.planproof)
    args.planproof_opt = os.path.abspath(args.planproof_opt or os.path.join(bindir, "planproof-opt"))
    args.build = os.path.abspath(args.build or os.path.dirname(bindir))
    if not args.pytools:
        p = os.path.join(args.build, "pytools", "bin", "python")
        args.pytools = p if os.access(p, os.X_OK) else sys.executable
    runner = Runner(args)

    classes = CLASS_NAMES if not args.classes else [x for x in args.classes.split(",") if x]
    for x in classes:
        if x not in CLASS_NAMES:
            ap.error("unknown class %r" % x)
    if args.case:
        todo = []
        for cs in args.case:
            cls, _, k = cs.rpartition(":")
            if cls not in CLASS_NAMES or not k.isdigit():
                ap.error("--case takes CLASS:INDEX, e.g. npy:3")
            todo.append((cls, int(k)))
    else:
        todo = [(classes[i % len(classes)], i // len(classes)) for i in range(args.count)]

    keep_all = bool(args.case and args.keep)
    root = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="hostile-")
    os.makedirs(root, exist_ok=True)
    t0 = time.time()
    stats = {cls: [0, 0, 0, 0] for cls in CLASS_NAMES}   # inputs, passed, failed, runs
    failures = []
    try:
        for cls, k in todo:
            case = make_case(runner, args.seed, cls, k, root)
            if args.list:
                sys.stdout.write("%s [%s] %s\n" % (case.name, case.variant, show(case.desc, 300)))
                for step in case.steps:
                    sys.stdout.write("  $ %s\n" % show(step.command(), 300))
                if not keep_all:
                    shutil.rmtree(case.dir, ignore_errors=True)
                continue
            if args.verbose:
                sys.stdout.write("%s [%s] %s\n" % (case.name, case.variant, show(case.desc, 300)))
                sys.stdout.flush()
            fails, runs = runner.run_case(case)
            st = stats[cls]
            st[0] += 1
            st[3] += runs
            if fails:
                st[2] += 1
                failures.append((case, fails))
            else:
                st[1] += 1
            if not keep_all and not (fails and args.keep):
                shutil.rmtree(case.dir, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    elapsed = time.time() - t0

    def describe(case, fails):
        lines = ["FAIL %s [%s] %s" % (case.name, case.variant, show(case.desc, 400)),
                 "  reproduce: %s --seed %d --case %s --keep DIR -v" % (os.path.relpath(__file__, ROOT), args.seed, case.name)]
        seen = set()
        for step, res, msg in fails:
            cmd = step.command()
            if cmd not in seen:
                seen.add(cmd)
                lines.append("  $ " + show(cmd, 600))
                lines.append("    exit %s after %.1f s%s" % (res.rc, res.elapsed, "; " + step.note if step.note else ""))
                if res.err.strip():
                    lines.append("    stderr: " + show(res.err, 300))
                if res.out.strip() and (step.python or step.fmt != "html"):
                    lines.append("    stdout: " + show(res.out, 200))
            lines.append("    FAILED: " + msg)
        return lines

    out = []
    for case, fails in failures:
        out.extend(describe(case, fails))
    total = sum(s[0] for s in stats.values())
    nfail = sum(s[2] for s in stats.values())
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    if args.verbose or args.out:
        sys.stdout.write("per class (inputs/passed/failed): %s; %.0f s\n" % (
            ", ".join("%s %d/%d/%d" % (c, s[0], s[1], s[2]) for c, s in stats.items() if s[0]), elapsed))
    sys.stdout.write("hostile: %d inputs, %d failures\n" % (total, nfail))
    if args.out:
        md = ["# planproof hostile inputs", "",
              "seed %d, %d inputs, %d failing, %d runs of the CLI or the binding, %.0f s; planproof %s" % (
                  args.seed, total, nfail, sum(s[3] for s in stats.values()), elapsed, args.planproof), "",
              "| class | inputs | passed | failed | runs |", "|---|---:|---:|---:|---:|"]
        for cls in CLASS_NAMES:
            s = stats[cls]
            if s[0]:
                md.append("| %s | %d | %d | %d | %d |" % (cls, s[0], s[1], s[2], s[3]))
        md.append("| **all** | %d | %d | %d | %d |" % (total, total - nfail, nfail, sum(s[3] for s in stats.values())))
        if failures:
            md += ["", "## Failures", ""]
            by = {}
            for case, fails in failures:
                by.setdefault(case.cls, []).append((case, fails))
            for cls in CLASS_NAMES:
                if cls not in by:
                    continue
                md += ["### %s" % cls, ""]
                for case, fails in by[cls]:
                    md += ["```"] + describe(case, fails) + ["```", ""]
        write(args.out, "\n".join(md) + "\n")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
