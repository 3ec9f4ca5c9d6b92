#!/usr/bin/env python3
"""Checks that #include lines (and CMake link lists) follow the module graph
(docs/style.md A.1, A.2).

    tools/check_includes.py [REPO_ROOT]

REPO_ROOT defaults to the parent of this script's directory. Each module <m> has public headers in
<m>/include/meshsim/<m>/ and private code in <m>/src/. The rules:

  * A module includes "meshsim/<d>/..." only for itself and the modules it may use:
        sim -> (nothing); topology -> sim; workloads -> sim; collectives -> sim, topology;
        traces -> sim; scenario -> sim, topology, workloads, collectives;
        validation -> sim, topology, workloads, collectives, traces, scenario;
        studies -> sim, topology, workloads, collectives, traces, scenario; cli -> all of them.
    Anything else under meshsim/ (a module not in the graph) no module may include.
  * A module never reaches into another module's directory by a relative path ("../../x/src/y.h").
  * Public headers never include private headers: "src/..." or a quoted include without the
    meshsim/ prefix that resolves to a file in some module's src/ directory.
  * Public headers never include SimGrid (simgrid/), Protobuf (google/protobuf, *.pb.h) or
    Boost.Graph (boost/graph) headers: those stay behind a pimpl or an interface.
  * Public headers live in <m>/include/meshsim/<m>/ and nowhere else under <m>/include/.
  * <m>/CMakeLists.txt links only the meshsim:: targets <m> may use.

tests/ and bench/ may include anything and are not scanned. Under validation/ every C/C++ file is
scanned (the library in include/ and src/, and the microbenchmarks beside the data).

Prints one line per violation, `path:line: <what>`, and exits 1 if there is any; otherwise prints
"N files checked, no violations" and exits 0. Standard library only.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# The module graph: each module and the modules it may use (besides itself). Keep in step with
# docs/style.md A.1 and the PUBLIC_DEPS / PRIVATE_DEPS of each <module>/CMakeLists.txt.
ALLOWED: dict[str, tuple[str, ...]] = {
    "sim": (),
    "topology": ("sim",),
    "workloads": ("sim",),
    "collectives": ("sim", "topology"),
    "traces": ("sim",),
    "scenario": ("sim", "topology", "workloads", "collectives"),
    "validation": ("sim", "topology", "workloads", "collectives", "traces", "scenario"),
    "studies": ("sim", "topology", "workloads", "collectives", "traces", "scenario"),
    "cli": ("sim", "topology", "workloads", "collectives", "traces", "scenario", "validation",
            "studies"),
}
MODULES = tuple(ALLOWED)

SOURCE_SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".inc", ".ipp", ".tpp", ".c", ".cc", ".cpp", ".cxx"}

# Third-party headers that public headers must not expose: (description, predicate on the name).
HEAVY_DEPENDENCIES = (
    ("SimGrid", lambda h: h.startswith("simgrid/") or h in ("simgrid.h", "simgrid.hpp")),
    ("Protobuf", lambda h: h.startswith("google/protobuf") or h.endswith(".pb.h")),
    ("Boost.Graph", lambda h: h.startswith("boost/graph")),
)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
MESHSIM_RE = re.compile(r"^meshsim/([A-Za-z0-9_]+)/")
CMAKE_TARGET_RE = re.compile(r"\bmeshsim(?:::|_)([A-Za-z0-9_]+)\b(?!::)")


@dataclass(frozen=True)
class SourceFile:
    path: Path  # absolute
    module: str
    public: bool  # under <module>/include/


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the root, with '/'
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def allowed_text(module: str) -> str:
    deps = ALLOWED[module]
    return f"allowed: {', '.join((module,) + deps)}" if deps else f"allowed: {module} only"


def rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def find_sources(root: Path) -> list[SourceFile]:
    files = []
    for module in MODULES:
        module_dir = root / module
        if not module_dir.is_dir():
            continue
        for path in sorted(module_dir.rglob("*")):
            if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
                continue
            public = path.relative_to(module_dir).parts[0] == "include"
            files.append(SourceFile(path, module, public))
    return files


def lines_outside_comments(lines: list[str]) -> list[bool]:
    """For each line, whether it starts outside a /* ... */ comment, so that a commented-out
    #include does not count. Knows // comments, string and character literals (a "/*" inside
    them, as in "models/*.json", opens nothing)."""
    out = []
    in_block = False
    for line in lines:
        out.append(not in_block)
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    break
                in_block = False
                i = end + 2
            elif line.startswith("//", i):
                break
            elif line.startswith("/*", i):
                in_block = True
                i += 2
            elif line[i] == '"' or (line[i] == "'" and (i == 0 or not line[i - 1].isalnum())):
                quote = line[i]
                i += 1
                while i < len(line) and line[i] != quote:
                    i += 2 if line[i] == "\\" else 1
                i += 1
            else:
                i += 1
    return out


def includes(path: Path) -> list[tuple[int, str, str]]:
    """(line number, '<' or '"', header) for each #include in the file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise SystemExit(f"check_includes: cannot read {path}: {e}")
    found = []
    lines = text.splitlines()
    for number, (line, live) in enumerate(zip(lines, lines_outside_comments(lines)), start=1):
        m = INCLUDE_RE.match(line) if live else None
        if m:
            found.append((number, m.group(1), m.group(2).strip()))
    return found


def module_of_path(root: Path, path: Path) -> tuple[str, bool] | None:
    """(module, is_private) for a path inside a module's directory, else None."""
    try:
        parts = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        return None
    if len(parts) >= 2 and parts[0] in ALLOWED:
        return parts[0], parts[1] != "include"
    return None


def resolves_to_private(root: Path, f: SourceFile, header: str) -> Path | None:
    """The private file a quoted, unprefixed include of a public header would pick up, if any:
    next to the header first, then in each module's src/ (the include paths private code uses)."""
    beside = f.path.parent / header
    if beside.is_file():
        where = module_of_path(root, beside)
        return beside if where and where[1] else None
    for module in MODULES:
        candidate = root / module / "src" / header
        if candidate.is_file():
            return candidate
    return None


def check_file(root: Path, f: SourceFile) -> list[Violation]:
    out = []
    path = rel(root, f.path)
    for line, delimiter, header in includes(f.path):
        m = MESHSIM_RE.match(header)
        if m:
            target = m.group(1)
            if target != f.module and target not in ALLOWED[f.module]:
                out.append(Violation(path, line, f"{f.module} may not include {header} "
                                                 f"({allowed_text(f.module)})"))
            continue
        if delimiter == '"':
            out.extend(check_quoted(root, f, path, line, header))
        if f.public:
            for name, matches in HEAVY_DEPENDENCIES:
                if matches(header):
                    out.append(Violation(
                        path, line, f"{f.module} public header may not include {header} "
                                    f"({name} stays private to src/, behind a pimpl or an "
                                    f"interface)"))
    return out


def check_quoted(root: Path, f: SourceFile, path: str, line: int, header: str) -> list[Violation]:
    # A relative path into another module's directory bypasses the graph.
    beside = f.path.parent / header
    where = module_of_path(root, beside) if beside.exists() else None
    if where and where[0] != f.module:
        target, private = where
        if private or (target not in ALLOWED[f.module]):
            what = "private header" if private else "header"
            return [Violation(path, line, f"{f.module} may not include {header} "
                                          f"({target} {what}; {allowed_text(f.module)}, "
                                          f"through \"meshsim/<module>/...\")")]
    if not f.public:
        return []
    private: str | None = None
    if header.startswith("src/") or "/src/" in header:
        private = header
    elif (found := resolves_to_private(root, f, header)) is not None:
        private = rel(root, found)
    if private:
        return [Violation(path, line, f"{f.module} public header may not include private header "
                                      f"{header} ({private} is under src/; public headers include "
                                      f"only \"meshsim/<module>/...\")")]
    return []


def check_layout(root: Path, f: SourceFile) -> list[Violation]:
    if not f.public:
        return []
    expected = root / f.module / "include" / "meshsim" / f.module
    if f.path.parent == expected:
        return []
    return [Violation(rel(root, f.path), 1,
                      f"{f.module} public header must be in {rel(root, expected)}/")]


def check_cmake(root: Path) -> tuple[int, list[Violation]]:
    checked = 0
    out = []
    for module in MODULES:
        cmake = root / module / "CMakeLists.txt"
        if not cmake.is_file():
            continue
        checked += 1
        text = cmake.read_text(encoding="utf-8", errors="replace")
        for number, raw in enumerate(text.splitlines(), start=1):
            code = raw.split("#", 1)[0]
            for m in CMAKE_TARGET_RE.finditer(code):
                target = m.group(1)
                if target not in ALLOWED or target == module or target in ALLOWED[module]:
                    continue
                out.append(Violation(rel(root, cmake), number,
                                     f"{module} may not link {m.group(0)} ({allowed_text(module)})"))
    return checked, out


def check_tree(root: Path) -> tuple[int, list[Violation]]:
    files = find_sources(root)
    violations = []
    for f in files:
        violations.extend(check_layout(root, f))
        violations.extend(check_file(root, f))
    cmake_count, cmake_violations = check_cmake(root)
    violations.extend(cmake_violations)
    return len(files) + cmake_count, violations


def main(argv: list[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    root = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parent.parent
    if not root.is_dir():
        print(f"check_includes: {root}: not a directory", file=sys.stderr)
        return 2
    if not any((root / m).is_dir() for m in MODULES):
        print(f"check_includes: {root}: no module directories ({', '.join(MODULES)})",
              file=sys.stderr)
        return 2
    checked, violations = check_tree(root)
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} violation(s) in {checked} files checked")
        return 1
    print(f"{checked} files checked, no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
