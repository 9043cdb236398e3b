#!/usr/bin/env python3
"""Checks a headless-Chromium screenshot of an HTML report by its pixels: the verdict's
badge colour must cover a badge-sized area, and, with --hatched, the hatching of a
partial value's layout picture must appear. A PNG decoder of its own (8-bit RGB/RGBA,
not interlaced: what Chromium writes), so that the test needs nothing from PyPI.

    check_screenshot.py SHOT.png --verdict violated [--hatched]
"""
import argparse
import struct
import sys
import zlib

COLOURS = {"verified": (0x1f, 0x88, 0x3d), "violated": (0xcf, 0x22, 0x2e),
           "inconclusive": (0x9a, 0x67, 0x00)}


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                sys.exit(f"{path}: unsupported PNG (depth {depth}, type {ctype})")
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("png")
    ap.add_argument("--verdict", required=True, choices=sorted(COLOURS))
    ap.add_argument("--hatched", action="store_true")
    a = ap.parse_args()
    width, height, bpp, rows = pixels(a.png)
    want = COLOURS[a.verdict]
    badge = sum(1 for row in rows for x in range(0, width * bpp, bpp)
                if tuple(row[x:x + 3]) == want)
    if badge < 500:
        sys.exit(f"{a.png}: the {a.verdict} badge's colour covers {badge} pixels, not a badge")
    if a.hatched:
        # The hatch is the violation colour at 35% over a light fill: reddish pixels that
        # are not the badge's pure colour.
        hatch = sum(1 for row in rows for x in range(0, width * bpp, bpp)
                    if row[x] > 180 and row[x] - row[x + 1] > 25 and tuple(row[x:x + 3]) != want)
        if hatch < 300:
            sys.exit(f"{a.png}: no hatched (partial) layout picture ({hatch} pixels)")
    print(f"{a.png}: {width}x{height}, {a.verdict} badge {badge} pixels"
          + (", hatched picture" if a.hatched else ""))


if __name__ == "__main__":
    main()
