"""Tests of the reference trainers, the driver and the trace tools (standard library unittest).

    /usr/bin/python3 -m unittest discover -s validation/reference_trainer -p 'test_*.py' -v

The PyTorch tests are skipped where torch is missing (Debian: apt-get install python3-torch) unless
MESHSIM_REQUIRE_TORCH is set (CTest sets it: there a missing torch is a failure); the tests that
run meshsim where no meshsim binary is built (or set MESHSIM_BIN). JAX is not needed: the JAX
trainer is only compiled here (it runs on the GPU machines).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import measure  # noqa: E402
import model_config  # noqa: E402
import runinfo  # noqa: E402
import trace_tools  # noqa: E402

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
    if os.environ.get("MESHSIM_REQUIRE_TORCH"):
        raise SystemExit("torch is required (MESHSIM_REQUIRE_TORCH is set): apt-get install python3-torch")

SMOKE_FIXTURE = REPO / "tests" / "traces" / "fixtures" / "torch_cpu_smoke.trace.json.gz"
LLAMA_PRESETS = ["llama3.2-1b", "llama3-8b", "llama3-70b", "llama3-405b"]


def model_files() -> list[Path]:
    return sorted((REPO / "validation" / "models").glob("*.json")) + \
        [REPO / "workloads" / "models" / f"{name}.json" for name in LLAMA_PRESETS]


def find_meshsim() -> str | None:
    candidates = [os.environ.get("MESHSIM_BIN", "")]
    for build in sorted(REPO.glob("build*")):
        candidates += [str(build / "meshsim"), str(build / "cli" / "meshsim")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


class ParameterCount(unittest.TestCase):
    def test_known_counts(self):
        # meshsim calc's totals (and, for Llama 3 8B, Meta's published 8.03B).
        expected = {"val-tiny": 524_928, "val-10m": 10_096_896, "val-30m": 31_990_272,
                    "val-100m": 100_682_496, "llama3.2-1b": 1_235_814_400,
                    "llama3-8b": 8_030_261_248}
        for path in model_files():
            cfg = model_config.load_model(path)
            if cfg.name in expected:
                self.assertEqual(model_config.parameter_count(cfg), expected[cfg.name], cfg.name)

    def test_counts_match_meshsim_calc(self):
        binary = find_meshsim()
        if binary is None:
            self.skipTest("no meshsim binary built (set MESHSIM_BIN)")
        for path in model_files():
            out = subprocess.run([binary, "calc", "--model", str(path)], check=True,
                                 capture_output=True, text=True).stdout
            match = re.search(r"^\s+total\s+([\d,]+)\s*$", out, re.MULTILINE)
            self.assertIsNotNone(match, out)
            meshsim_total = int(match.group(1).replace(",", ""))
            self.assertEqual(model_config.parameter_count(model_config.load_model(path)),
                             meshsim_total, path.name)

    def test_hf_config_reads_like_the_meshsim_schema(self):
        hf = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
              "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
              "tie_word_embeddings": True, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
              "torch_dtype": "bfloat16", "_name_or_path": "meta-llama/Llama-3.2-1B"}
        cfg = model_config.parse_model(hf, "config.json")
        ref = model_config.load_model(REPO / "workloads" / "models" / "llama3.2-1b.json")
        self.assertEqual(model_config.parameter_count(cfg), model_config.parameter_count(ref))
        self.assertEqual(cfg.rope_theta, 500000.0)
        self.assertEqual(cfg.name, "meta-llama/Llama-3.2-1B")

    def test_rejects_what_the_trainers_do_not_build(self):
        base = json.loads((REPO / "validation" / "models" / "val-tiny.json").read_text())
        bad = [({**base, "architecture": "gpt2"}, "/architecture"),
               ({**base, "colour": "red"}, "/colour"),
               ({**base, "dropout": True}, "/dropout"),
               ({**base, "num_kv_heads": 3}, "/num_kv_heads"),
               ({k: v for k, v in base.items() if k != "d_ff"}, "/d_ff"),
               ({"model_type": "gpt2", "n_embd": 768}, "/model_type")]
        for obj, field in bad:
            with self.assertRaises(model_config.ModelConfigError) as ctx:
                model_config.parse_model(obj, "m.json")
            self.assertIn(f"m.json: {field}:", str(ctx.exception))

    def test_manifest_model_round_trips_through_the_schema(self):
        cfg = model_config.load_model(REPO / "validation" / "models" / "val-30m.json")
        again = model_config.parse_model(cfg.to_meshsim_json(), "inline")
        self.assertEqual(model_config.parameter_count(again), model_config.parameter_count(cfg))


@unittest.skipUnless(HAVE_TORCH, "torch is not installed")
class TorchTwin(unittest.TestCase):
    def test_built_parameters_equal_meshsim_count(self):
        import train_torch
        for name in ["val-tiny", "val-10m"]:
            cfg = model_config.load_model(REPO / "validation" / "models" / f"{name}.json")
            model = train_torch.Llama(cfg)
            self.assertEqual(sum(p.numel() for p in model.parameters()),
                             model_config.parameter_count(cfg), name)
        tied = model_config.parse_model(
            {**model_config.load_model(REPO / "validation" / "models" / "val-tiny.json").to_meshsim_json(),
             "tied_embeddings": True, "attention_bias": True, "mlp_bias": True}, "tied")
        self.assertEqual(sum(p.numel() for p in train_torch.Llama(tied).parameters()),
                         model_config.parameter_count(tied))

    def test_end_to_end_run_writes_manifest_and_trace(self):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, str(HERE / "train_torch.py"),
                   "--model", str(REPO / "validation" / "models" / "val-tiny.json"),
                   "--seq", "16", "--batch", "2", "--steps", "2", "--warmup", "1",
                   "--profile-steps", "2", "--threads", "1", "--case", "unit", "--out", out]
            subprocess.run(cmd, check=True, capture_output=True)
            m = json.loads((Path(out) / "manifest.json").read_text())
            for key in ["schema", "case", "framework", "hardware", "model", "parameters", "batch",
                        "seq_len", "dtype", "mesh", "execution", "step_times_s",
                        "median_step_time_s", "trace", "command"]:
                self.assertIn(key, m)
            self.assertEqual(m["schema"], runinfo.MANIFEST_SCHEMA)
            self.assertEqual(len(m["step_times_s"]), 2)
            self.assertEqual(m["parameters"], 524_928)
            self.assertEqual(m["hardware"]["platform"], "cpu")
            self.assertEqual(m["execution"]["kernels"], "eager")
            self.assertEqual(m["execution"]["optimizer_kernels"], "per-tensor")
            self.assertTrue(m["hardware"]["cpu_model"])
            self.assertIn("--seq 16", m["command"])
            doc = trace_tools.load(Path(out) / m["trace"]["path"])
            events = trace_tools.events_of(doc)
            self.assertEqual(len(trace_tools.find_steps(events)), 2)
            if m["trace"]["format"] == "pytorch-legacy-chrome-json":
                self.assertIn("attached in recording order to 2 of 2", m["trace"]["shapes"])
                self.assertGreaterEqual(m["trace"]["profiler_overhead_per_event_s"], 0)
            gemms = [e for e in events if e["name"] in ("aten::mm", "aten::addmm", "aten::bmm")]
            self.assertTrue(gemms)
            self.assertTrue(all("Input Dims" in e["args"] for e in gemms))
            self.assertTrue(any("Sequence number" in e["args"] for e in events))
            self.check_meshsim_validates(Path(out) / "manifest.json")

    def check_meshsim_validates(self, manifest: Path):
        """meshsim reads what the twin wrote, and plans the same GEMMs: every GEMM shape occurs
        as often per step in the trace as in meshsim's plan of the step."""
        binary = find_meshsim()
        if binary is None:
            self.skipTest("no meshsim binary built (set MESHSIM_BIN)")
        profile = REPO / "validation" / "profiles" / "cpu-amd-epyc-2c.json"
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "v.json"
            run = subprocess.run([binary, "validate", str(manifest), "--hardware-profile",
                                  str(profile), "--json", str(result)],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            v = json.loads(result.read_text())
        self.assertGreater(v["simulated_step_s"], 0)
        self.assertTrue(v["gemms"])
        for g in v["gemms"]:
            self.assertEqual(g["measured_count"], g["simulated_count"], g)


class TraceTools(unittest.TestCase):
    def test_trim_keeps_the_first_steps(self):
        doc = trace_tools.load(SMOKE_FIXTURE)
        self.assertEqual(len(trace_tools.find_steps(trace_tools.events_of(doc))), 2)
        one = trace_tools.trim(doc, 1)
        events = trace_tools.events_of(one)
        self.assertEqual(len(trace_tools.find_steps(events)), 1)
        self.assertLess(len(events), len(trace_tools.events_of(doc)))
        top = trace_tools.trim(doc, 2, max_op_depth=1)
        depths = trace_tools._op_depths(trace_tools.events_of(top))
        self.assertEqual(set(depths.values()), {0})  # nothing left inside an operator
        self.assertLess(len(trace_tools.events_of(top)), len(trace_tools.events_of(doc)))

    def test_gzip_round_trip_is_deterministic(self):
        doc = trace_tools.load(SMOKE_FIXTURE)
        with tempfile.TemporaryDirectory() as tmp:
            a, b = Path(tmp) / "a.json.gz", Path(tmp) / "b.json.gz"
            trace_tools.save(doc, a)
            trace_tools.save(doc, b)
            self.assertEqual(a.read_bytes(), b.read_bytes())
            self.assertEqual(trace_tools.load(a), doc)

    def test_jax_steps_from_step_num(self):
        doc = trace_tools.load(REPO / "tests" / "traces" / "fixtures" / "jax_gpu_mini.trace.json")
        self.assertEqual(len(trace_tools.find_steps(trace_tools.events_of(doc))), 2)
        trimmed = trace_tools.trim(doc, 1)
        names = {e["name"] for e in trace_tools.events_of(trimmed) if e.get("ph") == "X"}
        self.assertIn("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", names)
        self.assertNotIn("input_reduce_fusion", names)  # step 1's


class Driver(unittest.TestCase):
    def test_hardware_names(self):
        self.assertEqual(measure.hardware_name({"hardware": {"platform": "cpu", "cpu_model": "AMD EPYC",
                                                             "cpu_cores": 2}}), "cpu-amd-epyc-2c")
        self.assertEqual(measure.hardware_name({"hardware": {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3",
                                                             "device_count": 8}}), "nvidia-h100-80gb-hbm3-x8")

    def test_case_sets_are_valid(self):
        cases_file = REPO / "validation" / "cases.json"
        sizes = set()
        for set_name in ["smoke", "cpu", "gpu"]:
            for case in measure.load_cases(cases_file, set_name, []):
                cfg = model_config.load_model(REPO / case["model"])
                self.assertLessEqual(case["seq"], cfg.max_position_embeddings, case["name"])
                self.assertLessEqual(case["keep_steps"], case["profile_steps"], case["name"])
                if set_name == "cpu":
                    sizes.add(model_config.parameter_count(cfg))
                    cmd = measure.trainer_command(case, "python3", Path("/scratch"))
                    self.assertNotIn(str(REPO), " ".join(cmd))  # manifests hold relative paths
        self.assertGreaterEqual(len(sizes), 3)  # at least three model sizes on the CPU

    def test_jax_trainer_compiles(self):
        source = (HERE / "train_jax.py").read_text()
        compile(source, "train_jax.py", "exec")


if __name__ == "__main__":
    unittest.main()
