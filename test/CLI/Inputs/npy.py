#!/usr/bin/env python3
"""Writes a .npy file for the replay tests, without numpy:

    npy.py OUT DESCR SHAPE VALUE [--fortran] [--bad-magic] [--truncate] [--claim SHAPE2]

--claim writes SHAPE's data under a header claiming SHAPE2 (a lying header).

DESCR is a NumPy dtype string ('<f4', '<f8', '<i8', '>f4', ...), SHAPE a comma list
('2,4'; '' for a scalar), VALUE the value of every element, or 'ramp' for 0, 1, 2, ...
"""
import struct
import sys

out, descr, shape_s, value = sys.argv[1:5]
flags = sys.argv[5:]
shape = tuple(int(x) for x in shape_s.split(",") if x)
n = 1
for d in shape:
    n *= d
fmt = {"f4": "f", "f8": "d", "i8": "q", "i4": "i", "f2": "e", "u1": "B"}[descr[1:]]
endian = ">" if descr[0] == ">" else "<"
vals = [float(i) if value == "ramp" else float(value) for i in range(n)]
if fmt in "qiB":
    vals = [int(v) for v in vals]
data = struct.pack(endian + fmt * n, *vals)
if "--truncate" in flags:
    data = data[: len(data) // 2]
if "--claim" in flags:
    shape = tuple(int(x) for x in flags[flags.index("--claim") + 1].split(",") if x)
dims = "".join(f"{d}, " for d in shape).rstrip(" ") if len(shape) != 1 else f"{shape[0]},"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
    descr, "True" if "--fortran" in flags else "False", dims)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
magic = b"\x93NUMPX" if "--bad-magic" in flags else b"\x93NUMPY"
with open(out, "wb") as f:
    f.write(magic + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
