"""busy.py N -- CMD...: runs CMD while N processes spin on the CPU (a loaded CI machine),
and exits with CMD's status, its stdout passed through. The spinners end with it."""
import subprocess
import sys

n = int(sys.argv[1])
cmd = sys.argv[sys.argv.index("--") + 1:]
spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
try:
    sys.exit(subprocess.run(cmd).returncode)
finally:
    for p in spin:
        p.kill()
        p.wait()
