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
