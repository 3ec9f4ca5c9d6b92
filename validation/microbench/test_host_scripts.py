"""The host microbenchmarks run and write what the docs say they write (host_dispatch.py, and
host_gpu.py on CPU tensors: the GPU machine's cases cannot run here). A smoke test of the scripts,
not of their figures: each figure is a host's, measured where the docs say."""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

from pathlib import Path

HERE = Path(__file__).resolve().parent

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def run(*args):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PYTHONUNBUFFERED="1"))


@unittest.skipUnless(HAVE_TORCH or os.environ.get("MESHSIM_REQUIRE_TORCH"), "no torch")
class HostScripts(unittest.TestCase):
    def test_host_dispatch_writes_every_case_and_its_scale(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "h.csv"
            r = run(HERE / "host_dispatch.py", "--ops", 200, "--repeats", 1, "--out", out,
                    "--scale-against", HERE / "host_dispatch.csv")
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, newline="") as f:
                here = {row["case"]: float(row["us_per_op"]) for row in csv.DictReader(f)}
            with open(HERE / "host_dispatch.csv", newline="") as f:
                reference = [row["case"] for row in csv.DictReader(f)]
            self.assertEqual(sorted(here), sorted(reference))
            self.assertTrue(all(v > 0 for v in here.values()), here)
            self.assertIn("--host-time-scale", r.stderr)
            self.assertEqual(r.stderr.count("--host-time-scale"), 2, r.stderr)

    def test_host_gpu_runs_its_cases_on_cpu_tensors(self):
        with tempfile.TemporaryDirectory() as d:
            r = run(HERE / "host_gpu.py", "--cpu", "--only", "layer-one_op", "--out", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            layer = json.loads((Path(d) / "host_gpu_layer-one_op.json").read_text())["layer"]
            self.assertGreater(layer["one_op"]["forward_host_us"], 0)
            self.assertGreater(layer["one_op"]["pass_wall_us"], 0)
            r = run(HERE / "host_gpu.py", "--cpu", "--only", "steps", "--out", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            steps = json.loads((Path(d) / "host_gpu_steps.json").read_text())["steps"]
            self.assertEqual(len(steps), 1)
            self.assertNotIn("error", steps[0])
            self.assertGreater(steps[0]["step_ms"], 0)
            self.assertGreater(steps[0]["loss"], 0)


if __name__ == "__main__":
    unittest.main()
