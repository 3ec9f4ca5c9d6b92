#!/usr/bin/env python3
"""A sweep and a plan search split over `mpirun -n 2` write the same bytes as one process
(issue 14).

    mpi_sweep_test.py --meshsim build/meshsim --mpirun /usr/bin/mpirun

Registered with CTest only when the build has MPI, and then it always runs (no skip). As root
(CI), Open MPI needs --allow-run-as-root; --oversubscribe lets two ranks share fewer cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ARGS = argparse.Namespace(meshsim="build/meshsim", mpirun="mpirun")

SPEC = {
    "title": "mpi test",
    "base": {"model": "llama3.2-1b", "cluster": "dgx-h100", "seq": 2048, "gbs": 32},
    "axes": {"gpus": [8, 16, 32], "seq": [2048, 4096]},
    "search": {"top": 2, "max_simulations": 6},
}


class MpiSweep(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="meshsim-mpi-"))
        (self.tmp / "spec.json").write_text(json.dumps(SPEC))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sweep(self, prefix: list[str], name: str, *extra: str) -> str:
        run = subprocess.run([*prefix, ARGS.meshsim, "sweep", "spec.json", "--csv", f"{name}.csv",
                              "--json", f"{name}.json", "--html", f"{name}.html", "--jobs", "1",
                              *extra], cwd=self.tmp, capture_output=True, text=True, timeout=600,
                             check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return run.stdout

    def test_two_ranks_write_what_one_process_writes(self) -> None:
        mpirun = [ARGS.mpirun, "-n", "2", "--oversubscribe"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        split = self.sweep(mpirun, "mpi")
        self.assertIn("MPI, 2 processes", split)
        self.assertEqual(split.count("meshsim: sweep"), 1, split)  # only rank 0 reports
        single = self.sweep([], "one", "--no-mpi")
        self.assertIn("one process", single)
        for ext in ("csv", "json", "html"):
            self.assertEqual((self.tmp / f"mpi.{ext}").read_bytes(),
                             (self.tmp / f"one.{ext}").read_bytes(), ext)
        points = json.loads((self.tmp / "one.json").read_text())["points"]
        self.assertEqual(len(points), 6)
        self.assertTrue(all(p["rows"] for p in points), points)


class MpiPlanSearch(unittest.TestCase):
    def test_two_ranks_rank_what_one_process_ranks(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix="meshsim-mpi-plan-"))
        try:
            args = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                    "--seq", "4096", "--gbs", "16", "--top", "5", "--exact", "--jobs", "1"]
            mpirun = [ARGS.mpirun, "-n", "2", "--oversubscribe"]
            if os.geteuid() == 0:
                mpirun.append("--allow-run-as-root")
            split = subprocess.run([*mpirun, ARGS.meshsim, *args, "--json", "mpi.json", "--csv",
                                    "mpi.csv"], cwd=tmp, capture_output=True, text=True,
                                   timeout=600, check=False)
            self.assertEqual(split.returncode, 0, split.stdout + split.stderr)
            self.assertIn("MPI, 2 processes", split.stdout)
            self.assertEqual(split.stdout.count("meshsim: plan search"), 1, split.stdout)
            one = subprocess.run([ARGS.meshsim, *args, "--no-mpi", "--json", "one.json", "--csv",
                                  "one.csv"], cwd=tmp, capture_output=True, text=True,
                                 timeout=600, check=False)
            self.assertEqual(one.returncode, 0, one.stdout + one.stderr)
            for ext in ("csv", "json"):
                self.assertEqual((tmp / f"mpi.{ext}").read_bytes(),
                                 (tmp / f"one.{ext}").read_bytes(), ext)
            self.assertTrue(json.loads((tmp / "one.json").read_text())["search"]["exact"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--meshsim", default=ARGS.meshsim)
    parser.add_argument("--mpirun", default=ARGS.mpirun)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
