"""python batch.py LOGDIR NAME ARGS... [:: NAME ARGS...]...

Runs `python -m planproof.torch ARGS...` once per group (groups separated by a lone
`::`) in this one process, so that a test of many captures imports torch and its
compiler stack once (about 7 s) rather than once per capture. Everything a group writes
-- its own stdout and stderr and those of the `planproof` processes it starts -- goes
to LOGDIR/NAME.log, which ends with the line `exit=N` (N: the command's exit status).
The tests FileCheck those logs; this script exits 0 unless it could not run a group.

Each capture still traces every rank in a forked process of its own
(planproof.torch.capture), so one group cannot change what another traces.
"""
import os
import sys

from planproof.torch.__main__ import main


def groups(argv):
    group = []
    for a in argv:
        if a == "::":
            if group:
                yield group
            group = []
        else:
            group.append(a)
    if group:
        yield group


def run(log_path, args):
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            try:
                status = main(args)
            except SystemExit as e:  # argparse's usage errors
                status = e.code if isinstance(e.code, int) else 2
            sys.stdout.flush()
            sys.stderr.flush()
            print(f"exit={status}", flush=True)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


if __name__ == "__main__":
    log_dir = sys.argv[1]
    os.makedirs(log_dir, exist_ok=True)
    for name, *args in groups(sys.argv[2:]):
        run(os.path.join(log_dir, name + ".log"), args)
