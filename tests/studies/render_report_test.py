#!/usr/bin/env python3
"""The sweep's HTML report renders its plots in a real browser (issue 14).

    render_report_test.py --meshsim build/meshsim [--chromium chromium]

Runs a two-point sweep, writes its report, and opens it in headless Chromium (Debian's
`chromium`, installed by tools/bootstrap.sh --tests): the DOM must hold the five Vega views,
rendered as SVG with marks, and a screenshot must not be blank. A blank page is checked too, to
show the checks can fail. Standard library only (the PNG is decoded with zlib).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from pathlib import Path

ARGS = argparse.Namespace(meshsim="build/meshsim", chromium="chromium")

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--no-first-run", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=10000", "--window-size=1100,2400"]


def chromium(page: Path, tmp: Path, *what: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="profile-", dir=tmp)
    return subprocess.run([ARGS.chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *what,
                           page.as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)


def png_pixels(path: Path) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit non-interlaced RGB or RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = bpp = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colour_stats(path: Path) -> tuple[int, float]:
    """Distinct colours and the share of pixels that are not white, over the screenshot."""
    width, height, bpp, rows = png_pixels(path)
    colours, inked = set(), 0
    for row in rows:
        for x in range(0, width * bpp, bpp):
            px = row[x:x + 3]
            colours.add(px)
            inked += px != b"\xff\xff\xff"
    return len(colours), inked / (width * height)


def page_problems(page: Path, tmp: Path, views: int) -> list[str]:
    """What is wrong with the rendered page (empty when its plots are there)."""
    problems = []
    dom = chromium(page, tmp, "--dump-dom").stdout
    rendered = re.search(r'data-rendered="(\d+)"', dom)
    if not rendered or int(rendered.group(1)) != views:
        problems.append(f"{rendered.group(1) if rendered else 0} of {views} Vega views rendered")
    svgs = len(re.findall(r'<svg[^>]*class="marks"', dom))
    if svgs != views:
        problems.append(f"{svgs} Vega SVGs in the DOM, expected {views}")
    for mark in ("mark-rect", "mark-line", "mark-symbol"):
        if mark not in dom:
            problems.append(f"no {mark} element in the DOM")
    shot = tmp / f"{page.stem}.png"
    chromium(page, tmp, f"--screenshot={shot}")
    if not shot.exists():
        return problems + ["no screenshot"]
    colours, inked = colour_stats(shot)
    if colours < 16 or inked < 0.02:
        problems.append(f"the screenshot is blank ({colours} colours, {inked:.1%} not white)")
    return problems


class ReportRenders(unittest.TestCase):
    def setUp(self) -> None:
        self.assertIsNotNone(shutil.which(ARGS.chromium),
                             f"{ARGS.chromium} not found: install Debian's chromium "
                             "(tools/bootstrap.sh --tests)")
        self.tmp = Path(tempfile.mkdtemp(prefix="meshsim-report-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_the_report_shows_its_plots(self) -> None:
        spec = {"title": "render test", "plans": "given",
                "base": {"model": "llama3.2-1b", "cluster": "dgx-h100", "pp": 2, "tp": 2,
                         "sp": True, "mbs": 1, "gbs": 32, "seq": 2048},
                "axes": {"gpus": [8, 16]}}
        (self.tmp / "spec.json").write_text(json.dumps(spec))
        run = subprocess.run([ARGS.meshsim, "sweep", "spec.json", "--html", "report.html",
                              "--json", "sweep.json"], cwd=self.tmp, capture_output=True,
                             text=True, timeout=300, check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        sweep = json.loads((self.tmp / "sweep.json").read_text())
        self.assertEqual([p["rows"][0]["dp"] for p in sweep["points"]], [2, 4])
        html = (self.tmp / "report.html").read_text()
        self.assertNotIn("http://", html.split("<script>meshsimVegaName")[0])  # nothing fetched
        self.assertEqual(page_problems(self.tmp / "report.html", self.tmp, 5), [])

    def test_a_blank_page_fails_the_checks(self) -> None:
        blank = self.tmp / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        problems = page_problems(blank, self.tmp, 5)
        self.assertTrue(any("blank" in p for p in problems), problems)
        self.assertTrue(any("Vega views rendered" in p for p in problems), problems)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--meshsim", default=ARGS.meshsim)
    parser.add_argument("--chromium", default=ARGS.chromium)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
