"""Shared helpers of the benchmark scripts."""
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PLANPROOF = os.path.join(ROOT, "build", "bin", "planproof")


def peak_rss_mib(path):
    """Peak resident memory of one `planproof verify PATH`, from the kernel's accounting
    of the child process."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(PLANPROOF, [PLANPROOF, "verify", path])
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_maxrss / 1024.0


def verify_timed(spec, limit):
    """`planproof verify --format json SPEC` under /usr/bin/time, at most `limit` seconds.
    Returns (completed process, wall seconds, peak MiB), or None past the limit."""
    import subprocess
    import time
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", PLANPROOF, "verify", "--format", "json", spec],
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None
    return p, time.perf_counter() - t0, int(p.stderr.strip().splitlines()[-1]) / 1024


def summarize(results):
    """Medians over runs of (verdict, engine ms, wall s, peak MiB, ...) rows: engine
    seconds, wall seconds, and the largest peak."""
    import statistics
    return (statistics.median(r[1] for r in results) / 1000,
            statistics.median(r[2] for r in results),
            max(r[3] for r in results))


def write_results(path, command, text):
    """A results file: the command that reproduces it, the machine and date, the table."""
    import time
    with open(path, "w") as fh:
        fh.write(f"Command: {command}\n\nMachine: cpp-kernels (2 cores, 24 GiB), "
                 + time.strftime("%Y-%m-%d") + "\n\n" + text)


def repeat(run, runs):
    """Up to `runs` results of `run()`, stopping at the first None (past the limit)."""
    results = []
    for _ in range(runs):
        r = run()
        if r is None:
            break
        results.append(r)
    return results
