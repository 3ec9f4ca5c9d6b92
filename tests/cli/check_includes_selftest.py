#!/usr/bin/env python3
"""Self-test of tools/check_includes.py: runs it on small fixture trees built in a temp dir.

    check_includes_selftest.py PATH/TO/check_includes.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "check_includes.py"

# A tree that follows every rule, including a few things that look wrong and are not.
CLEAN_TREE = {
    "sim/include/meshsim/sim/units.h": "#pragma once\n#include <cstdint>\n",
    "sim/include/meshsim/sim/error.h": '#pragma once\n#include "units.h"\n#include <string>\n',
    "sim/src/program.cc": (
        '#include "meshsim/sim/units.h"\n'
        "#include <boost/graph/adjacency_list.hpp>  // private: allowed\n"
    ),
    "sim/CMakeLists.txt": "meshsim_module(sim SOURCES src/program.cc PRIVATE_DEPS Boost::boost)\n",
    "topology/include/meshsim/topology/chip.h": '#pragma once\n#include "meshsim/sim/units.h"\n',
    "topology/src/chip.cc": (
        '#include "meshsim/topology/chip.h"\n'
        '#include "embedded.h"\n'
        "// A comment that mentions clusters/*.json does not open a block comment.\n"
        '#include "meshsim/sim/error.h"\n'
    ),
    "topology/src/embedded.h": "#pragma once\n",
    "topology/CMakeLists.txt": (
        "meshsim_module(topology SOURCES src/chip.cc PUBLIC_DEPS meshsim::sim)\n"
        "meshsim_embed(meshsim_topology meshsim::topology::detail chips chips.json)\n"
    ),
    "workloads/src/model.cc": (
        '#include "meshsim/sim/error.h"\n'
        "/* Not a dependency:\n"
        '#include "meshsim/topology/chip.h"\n'
        "*/\n"
        "#if 0\n"
        "#endif\n"
    ),
    "collectives/include/meshsim/collectives/ring.h": (
        '#pragma once\n#include "meshsim/topology/chip.h"\n#include "meshsim/sim/units.h"\n'
    ),
    "collectives/src/simgrid_model.cc": "#include <simgrid/s4u.hpp>  // private: allowed\n",
    "traces/src/perfetto.cc": (
        '#include "meshsim/sim/units.h"\n#include <google/protobuf/message.h>\n'
    ),
    "validation/include/meshsim/validation/manifest.h": (
        '#pragma once\n#include "meshsim/workloads/model.h"\n#include "meshsim/topology/chip.h"\n'
    ),
    "scenario/src/step.cc": "".join(
        f'#include "meshsim/{m}/x.h"\n'
        for m in ("sim", "topology", "workloads", "collectives", "scenario")),
    "scenario/CMakeLists.txt": (
        "meshsim_module(scenario SOURCES src/step.cc\n"
        "  PUBLIC_DEPS meshsim::sim meshsim::topology meshsim::workloads meshsim::collectives)\n"
    ),
    "validation/src/calibrate.cc": "".join(
        f'#include "meshsim/{m}/x.h"\n'
        for m in ("sim", "topology", "workloads", "collectives", "traces", "scenario",
                  "validation")),
    "validation/microbench/rates.c": "#include <stdio.h>\n#include <omp.h>\n",
    "validation/CMakeLists.txt": (
        "meshsim_module(validation SOURCES src/calibrate.cc\n"
        "  PUBLIC_DEPS meshsim::sim meshsim::topology meshsim::workloads meshsim::traces\n"
        "  PRIVATE_DEPS meshsim::collectives PkgConfig::NLOPT)\n"
    ),
    "studies/src/plan_search.cc": "".join(
        f'#include "meshsim/{m}/x.h"\n'
        for m in ("sim", "topology", "workloads", "collectives", "traces", "scenario",
                  "studies")),
    "studies/CMakeLists.txt": (
        "meshsim_module(studies SOURCES src/plan_search.cc\n"
        "  PUBLIC_DEPS meshsim::sim meshsim::topology meshsim::workloads meshsim::collectives\n"
        "              meshsim::traces meshsim::scenario)\n"
    ),
    "cli/src/main.cc": "".join(
        f'#include "meshsim/{m}/x.h"\n'
        for m in ("sim", "topology", "workloads", "collectives", "traces", "scenario",
                  "validation", "studies")),
    "cli/CMakeLists.txt": (
        "meshsim_module(cli SOURCES src/main.cc\n"
        "  PUBLIC_DEPS meshsim::sim meshsim::topology meshsim::workloads meshsim::collectives\n"
        "              meshsim::traces meshsim::scenario meshsim::validation meshsim::studies)\n"
    ),
    # tests/ and bench/ may include anything.
    "tests/workloads/model_test.cc": (
        '#include "meshsim/topology/chip.h"\n#include "../../workloads/src/layer_ops.h"\n'
    ),
    "bench/bench.cc": '#include "meshsim/cli/anything.h"\n#include <simgrid/s4u.hpp>\n',
    "workloads/models/llama.json": '{"#include": "meshsim/topology/chip.h"}\n',
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


class CheckIncludesTest(unittest.TestCase):
    def run_on(self, files: dict[str, str]) -> tuple[int, str]:
        with tempfile.TemporaryDirectory(prefix="check_includes_") as tmp:
            root = Path(tmp)
            write_tree(root, files)
            p = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                               text=True, timeout=60, check=False)
            return p.returncode, p.stdout + p.stderr

    def assert_one_violation(self, files: dict[str, str], location: str, *words: str) -> str:
        code, out = self.run_on({**CLEAN_TREE, **files})
        self.assertEqual(code, 1, out)
        lines = [line for line in out.splitlines() if line.startswith(location)]
        self.assertEqual(len(lines), 1, out)
        for w in words:
            self.assertIn(w, lines[0], out)
        self.assertNotIn("Traceback", out)
        return lines[0]

    def test_clean_tree_passes(self) -> None:
        code, out = self.run_on(CLEAN_TREE)
        self.assertEqual(code, 0, out)
        self.assertRegex(out.strip(), r"^\d+ files checked, no violations$")
        self.assertNotIn("Traceback", out)

    def test_workloads_may_not_include_topology(self) -> None:
        line = self.assert_one_violation(
            {"workloads/src/x.cc": '#include <vector>\n\n#include "meshsim/topology/chip.h"\n'},
            "workloads/src/x.cc:3: ", "workloads", "topology", "meshsim/topology/chip.h",
            "allowed:")
        self.assertRegex(line, r"^workloads/src/x\.cc:3: workloads may not include "
                               r"meshsim/topology/chip\.h \(allowed: [a-z, ]+\)$")
        self.assertNotIn("topology", line.split("(allowed:")[1])

    def test_sim_may_include_no_other_module(self) -> None:
        self.assert_one_violation(
            {"sim/include/meshsim/sim/program.h": '#pragma once\n#include "meshsim/workloads/model.h"\n'},
            "sim/include/meshsim/sim/program.h:2: ", "sim may not include",
            "meshsim/workloads/model.h")

    def test_topology_may_not_include_collectives(self) -> None:
        self.assert_one_violation(
            {"topology/src/route.cc": '  #  include "meshsim/collectives/ring.h"\n'},
            "topology/src/route.cc:1: ", "topology may not include", "meshsim/collectives/ring.h")

    def test_only_cli_includes_validation(self) -> None:
        self.assert_one_violation(
            {"traces/src/import.cc": '#include "meshsim/validation/manifest.h"\n'},
            "traces/src/import.cc:1: ", "traces may not include", "meshsim/validation/manifest.h")
        self.assert_one_violation(
            {"workloads/include/meshsim/workloads/step.h":
                 '#pragma once\n#include "meshsim/validation/manifest.h"\n'},
            "workloads/include/meshsim/workloads/step.h:2: ", "workloads may not include",
            "meshsim/validation/manifest.h")

    def test_validation_may_not_include_cli(self) -> None:
        line = self.assert_one_violation(
            {"validation/src/validate.cc": '#include "meshsim/cli/report.h"\n'},
            "validation/src/validate.cc:1: ", "validation may not include", "meshsim/cli/report.h")
        self.assertIn("allowed: validation, sim, topology, workloads, collectives, traces, scenario)",
                      line)
        self.assert_one_violation(
            {"validation/CMakeLists.txt":
                 "meshsim_module(validation SOURCES src/calibrate.cc PUBLIC_DEPS meshsim::cli)\n"},
            "validation/CMakeLists.txt:1: ", "validation may not link meshsim::cli")

    def test_scenario_sits_below_validation_studies_and_cli(self) -> None:
        # One step's wiring: the modules that run steps use it, never the other way round.
        for above in ("validation", "studies", "cli", "traces"):
            line = self.assert_one_violation(
                {"scenario/src/step.cc": f'#include "meshsim/{above}/x.h"\n'},
                "scenario/src/step.cc:1: ", "scenario may not include", f"meshsim/{above}/x.h")
            self.assertIn("allowed: scenario, sim, topology, workloads, collectives)", line)
        self.assert_one_violation(
            {"scenario/CMakeLists.txt":
                 "meshsim_module(scenario SOURCES src/step.cc PUBLIC_DEPS meshsim::studies)\n"},
            "scenario/CMakeLists.txt:1: ", "scenario may not link meshsim::studies")
        self.assert_one_violation(
            {"collectives/src/ring.cc": '#include "meshsim/scenario/step.h"\n'},
            "collectives/src/ring.cc:1: ", "collectives may not include")

    def test_studies_sits_below_cli_and_beside_validation(self) -> None:
        line = self.assert_one_violation(
            {"studies/src/sweep.cc": '#include "meshsim/cli/report.h"\n'},
            "studies/src/sweep.cc:1: ", "studies may not include", "meshsim/cli/report.h")
        self.assertIn("allowed: studies, sim, topology, workloads, collectives, traces, scenario)",
                      line)
        self.assert_one_violation(
            {"studies/src/sweep.cc": '#include "meshsim/validation/manifest.h"\n'},
            "studies/src/sweep.cc:1: ", "studies may not include")
        self.assert_one_violation(
            {"workloads/src/model.cc": '#include "meshsim/scenario/step.h"\n'},
            "workloads/src/model.cc:1: ", "workloads may not include", "meshsim/scenario/step.h")
        self.assert_one_violation(
            {"studies/CMakeLists.txt":
                 "meshsim_module(studies SOURCES src/x.cc PUBLIC_DEPS meshsim::validation)\n"},
            "studies/CMakeLists.txt:1: ", "studies may not link meshsim::validation")

    def test_no_module_includes_a_module_outside_the_graph(self) -> None:
        self.assert_one_violation(
            {"cli/src/report.cc": '#include "meshsim/experimental/compare.h"\n'},
            "cli/src/report.cc:1: ", "cli may not include", "meshsim/experimental/compare.h")

    def test_relative_path_into_another_module(self) -> None:
        self.assert_one_violation(
            {"workloads/src/y.cc": '#include "../../topology/src/embedded.h"\n'},
            "workloads/src/y.cc:1: ", "workloads may not include", "embedded.h", "topology")

    def test_public_header_may_not_include_private_header(self) -> None:
        self.assert_one_violation(
            {"topology/include/meshsim/topology/cluster.h": '#pragma once\n#include "embedded.h"\n'},
            "topology/include/meshsim/topology/cluster.h:2: ", "private header", "embedded.h")
        self.assert_one_violation(
            {"traces/include/meshsim/traces/t.h": '#pragma once\n#include "src/writer.h"\n'},
            "traces/include/meshsim/traces/t.h:2: ", "private header", "src/writer.h")

    def test_public_header_may_not_include_heavy_dependencies(self) -> None:
        for header, name in (("simgrid/s4u/Link.hpp", "SimGrid"),
                             ("google/protobuf/message.h", "Protobuf"),
                             ("perfetto_trace.pb.h", "Protobuf"),
                             ("boost/graph/adjacency_list.hpp", "Boost.Graph")):
            with self.subTest(header=header):
                self.assert_one_violation(
                    {"collectives/include/meshsim/collectives/model.h":
                         f"#pragma once\n#include <vector>\n#include <{header}>\n"},
                    "collectives/include/meshsim/collectives/model.h:3: ", header, name)

    def test_public_header_outside_its_folder(self) -> None:
        self.assert_one_violation(
            {"topology/include/meshsim/sim/oops.h": "#pragma once\n"},
            "topology/include/meshsim/sim/oops.h:1: ", "topology/include/meshsim/topology/")

    def test_cmake_link_list_follows_the_graph(self) -> None:
        self.assert_one_violation(
            {"workloads/CMakeLists.txt":
                 "# workloads never uses meshsim::topology\n"
                 "meshsim_module(workloads SOURCES src/model.cc\n"
                 "  PUBLIC_DEPS meshsim::sim meshsim::topology)\n"},
            "workloads/CMakeLists.txt:3: ", "workloads may not link meshsim::topology")

    def test_every_violation_is_reported(self) -> None:
        code, out = self.run_on({**CLEAN_TREE,
                                 "workloads/src/a.cc": '#include "meshsim/topology/chip.h"\n',
                                 "traces/src/b.cc": '#include "meshsim/cli/report.h"\n'})
        self.assertEqual(code, 1, out)
        self.assertIn("workloads/src/a.cc:1: ", out)
        self.assertIn("traces/src/b.cc:1: ", out)

    def test_help(self) -> None:
        p = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                           timeout=60, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("REPO_ROOT", p.stdout)

    def test_not_a_repository(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([sys.executable, str(SCRIPT), tmp], capture_output=True, text=True,
                               timeout=60, check=False)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("no module directories", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        SCRIPT = Path(sys.argv.pop(1)).resolve()
    unittest.main(verbosity=2)
