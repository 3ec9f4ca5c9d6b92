#!/usr/bin/env python3
"""Keeps the documentation true to the binary.

  check_docs.py examples --meshsim BIN [--root DIR] [--update] [FILE.md ...]
      Runs every command shown in README.md and docs/*.md and compares what it prints with the
      lines shown under it. A checked example is a fenced code block whose first line starts
      with "$ ": each "$ " line is a shell command (a trailing backslash continues it on the next
      line), and the lines up to the next "$ " line are what it prints (stdout and stderr
      together). A line that is exactly "..." (indentation allowed) stands for any number of
      lines, so a long output can be cut; "<...>" inside a line stands for any text there (for
      what changes from run to run, such as a wall time). A block right after the comment
      <!-- docs-check: skip (why) --> is not run; say why (it takes minutes, it needs MPI, ...).
      Commands run in a scratch directory that holds links to the repository's top-level
      entries, with build/meshsim linked to BIN, so repository paths work and files the commands
      write land in the scratch directory.
      --update rewrites the shown lines with what the commands print now. Where a block cuts its
      output with "...", each shown line is replaced by the printed line it corresponds to: the
      same line with other numbers (digits and column padding aside); a block whose lines no
      longer correspond is reported for editing by hand.

  check_docs.py cli --meshsim BIN [--root DIR] [--update]
      docs/cli.md must equal `meshsim help-markdown` (the CLI11 definitions, as Markdown).

  check_docs.py version --meshsim BIN [--root DIR]
      `meshsim --version` names a commit of the repository it was built from ("unknown" only
      when the source is not a git checkout).

  check_docs.py selftest
      The matcher and the updater on small cases.

Regenerate everything after a change that moves the documented figures:
  tools/check_docs.py examples --meshsim build/meshsim --update
  tools/check_docs.py cli --meshsim build/meshsim --update
then review `git diff README.md docs/`.
"""
import argparse
import concurrent.futures
import difflib
import os
import resource
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"^\s*<!--\s*docs-check:\s*skip\b.*-->\s*$")
ELISION = "..."
INLINE = "<...>"
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"
TIMEOUT_S = 300


# ---- parsing ---------------------------------------------------------------------------------

class Command:
    def __init__(self, text, first_line):
        self.text = text              # the shell command, continuations joined
        self.first_line = first_line  # 0-based line of its "$ " in the file
        self.expected = []            # the lines shown under it
        self.out_start = 0            # 0-based file line of the first expected line
        self.out_end = 0              # one past the last


class Block:
    def __init__(self, path, line):
        self.path = path
        self.line = line  # 0-based line of the opening fence
        self.commands = []

    def where(self):
        return f"{self.path}:{self.line + 1}"


def parse_blocks(path, text):
    """The checked blocks of a Markdown file."""
    lines = text.split("\n")
    blocks = []
    i = 0
    prev = ""
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+|~~~+)", lines[i])
        if not fence:
            if lines[i].strip():
                prev = lines[i]
            i += 1
            continue
        marker = fence.group(2)
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            j += 1
        body = list(range(start + 1, j))
        if body and lines[body[0]].startswith("$ ") and not SKIP.match(prev):
            blocks.append(parse_commands(path, start, lines, body))
        prev = ""
        i = j + 1
    return blocks


def parse_commands(path, start, lines, body):
    block = Block(path, start)
    k = 0
    while k < len(body):
        n = body[k]
        if lines[n].startswith("$ "):
            parts = [lines[n][2:]]
            first = n
            while parts[-1].endswith("\\") and k + 1 < len(body):
                k += 1
                parts.append(lines[body[k]])
            cmd = Command("\n".join(parts), first)
            cmd.out_start = body[k] + 1
            k += 1
            while k < len(body) and not lines[body[k]].startswith("$ "):
                cmd.expected.append(lines[body[k]])
                k += 1
            cmd.out_end = cmd.out_start + len(cmd.expected)
            block.commands.append(cmd)
        else:
            k += 1
    return block


# ---- matching --------------------------------------------------------------------------------

def is_elision(line):
    return line.strip() == ELISION


def shape(line):
    """A line with its numbers and column padding taken out."""
    return re.sub(r"\s+", " ", re.sub(NUMBER, "#", line)).strip()


def shape_pattern(text):
    """A regex for `text` with any numbers and any column padding."""
    out, i = [], 0
    for m in re.finditer(NUMBER + r"|\s+", text):
        out.append(re.escape(text[i:m.start()]))
        out.append(r"\s+" if m.group().isspace() else NUMBER)
        i = m.end()
    out.append(re.escape(text[i:]))
    return "".join(out)


def inline_regex(line, fuzzy):
    """A line with "<...>" as a regex: the literal parts in groups, each "<...>" any text."""
    parts = line.split(INLINE)
    literal = shape_pattern if fuzzy else re.escape
    return re.compile("(" + ")(.*?)(".join(literal(p) for p in parts) + ")")


def line_matches(expected, actual, fuzzy):
    if INLINE in expected:
        return inline_regex(expected, fuzzy).fullmatch(actual) is not None
    if fuzzy:
        return shape(expected) == shape(actual)
    return expected == actual


def refresh(expected, actual):
    """The shown line brought up to date from the printed one it corresponds to, keeping its
    "<...>" where they were."""
    if INLINE not in expected:
        return actual
    m = inline_regex(expected, True).fullmatch(actual)
    return INLINE.join(m.group(k) for k in range(1, m.lastindex + 1, 2))


def align(expected, actual, fuzzy):
    """Matches shown lines to printed lines: each shown line to one printed line in order, each
    "..." to any run of printed lines. Returns {shown index: printed index} of the best match
    (fewest lines matched only by shape; with fuzzy=False only exact lines match), or None."""
    n, m = len(expected), len(actual)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    cost[n][m] = 0
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            if is_elision(expected[i]):
                best = cost[i + 1][j]
                if j < m:
                    best = min(best, cost[i][j + 1])
                cost[i][j] = best
            elif j < m:
                if line_matches(expected[i], actual[j], False):
                    cost[i][j] = cost[i + 1][j + 1]
                elif fuzzy and line_matches(expected[i], actual[j], True):
                    cost[i][j] = 1 + cost[i + 1][j + 1]
    if cost[0][0] == inf:
        return None
    mapping = {}
    i, j = 0, 0
    while i < n:
        if is_elision(expected[i]):
            if cost[i][j] == cost[i + 1][j]:
                i += 1
            else:
                j += 1
        else:
            mapping[i] = j
            i += 1
            j += 1
    return mapping


# A progress line meshsim writes to a non-terminal stderr during a long search ("meshsim: no plan
# given: searching for one, simulated 12/40 (3 s)"): how many appear depends on the machine's
# speed, so examples are compared without them.
PROGRESS = re.compile(r"^meshsim: .*\(\d+ s\)$")


def clean(lines):
    out = [line.rstrip() for line in lines if not PROGRESS.match(line.rstrip())]
    while out and not out[-1]:
        out.pop()
    return out


# ---- running ---------------------------------------------------------------------------------

def scratch_dir(root, meshsim, parent):
    d = Path(tempfile.mkdtemp(prefix="docs-", dir=parent))
    for entry in sorted(root.iterdir()):
        if entry.name in (".git",) or entry.name.startswith("build"):
            continue
        (d / entry.name).symlink_to(entry)
    (d / "build").mkdir()
    (d / "build" / "meshsim").symlink_to(Path(meshsim).resolve())
    return d


def cpu_seconds():
    """CPU time of the children waited for so far (exact per command when blocks run one at a
    time, --jobs 1)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_block(block, root, meshsim, parent):
    d = scratch_dir(root, meshsim, parent)
    results = []
    for cmd in block.commands:
        start = time.monotonic()
        cpu = cpu_seconds()
        try:
            p = subprocess.run(["bash", "-c", cmd.text], cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S,
                               env={**os.environ, "LC_ALL": "C"})
            out = p.stdout
        except subprocess.TimeoutExpired:
            out = f"(timed out after {TIMEOUT_S} s)"
        results.append((clean(out.split("\n")), time.monotonic() - start, cpu_seconds() - cpu))
    return results


def examples(args):
    root = Path(args.root).resolve()
    files = [Path(f) for f in args.files] or (
        [root / "README.md"] + sorted(p for p in (root / "docs").glob("*.md") if p.name != "cli.md"))
    blocks = []
    texts = {}
    for f in files:
        texts[f] = f.read_text()
        blocks += parse_blocks(f, texts[f])
    failures = []
    updates = {}  # path -> [(start, end, new lines)]
    with tempfile.TemporaryDirectory(prefix="meshsim-docs-") as parent:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(lambda b: run_block(b, root, args.meshsim, parent), blocks))
    total, total_cpu = 0.0, 0.0
    for block, results in zip(blocks, runs):
        for cmd, (actual, seconds, cpu) in zip(block.commands, results):
            total += seconds
            total_cpu += cpu
            rel = os.path.relpath(block.path, root)
            label = f"{rel}:{cmd.first_line + 1}: $ {cmd.text.splitlines()[0]}"
            print(f"{seconds:6.2f} s wall {cpu:6.2f} s CPU  {label}")
            expected = clean(cmd.expected)
            if align(expected, actual, fuzzy=False) is not None:
                continue
            if args.update:
                new = regenerate(expected, actual)
                if new is None:
                    failures.append(f"{label}\n  the shown lines no longer correspond to the "
                                    f"output; edit them by hand. It prints:\n"
                                    + "\n".join("    " + line for line in actual))
                else:
                    updates.setdefault(block.path, []).append(
                        (cmd.out_start, cmd.out_start + len(expected), new))
                continue
            diff = "\n".join(difflib.unified_diff(expected, actual, "shown", "printed",
                                                  lineterm="", n=2))
            failures.append(f"{label}\n{diff}")
    for path, edits in updates.items():
        lines = texts[path].split("\n")
        for start, end, new in sorted(edits, reverse=True):
            lines[start:end] = new
        path.write_text("\n".join(lines))
        print(f"updated {os.path.relpath(path, root)} ({len(edits)} example(s))")
    print(f"{sum(len(b.commands) for b in blocks)} documented commands in {len(blocks)} blocks, "
          f"{total:.1f} s wall, {total_cpu:.1f} s CPU")
    for f in failures:
        print(f"\nFAIL {f}", file=sys.stderr)
    if failures and not args.update:
        print("\nThe documentation no longer shows what meshsim prints. If the change is intended, "
              "run tools/check_docs.py examples --meshsim build/meshsim --update and review the "
              "diff.", file=sys.stderr)
    return 1 if failures else 0


def regenerate(expected, actual):
    """The shown lines, brought up to date: the whole output where nothing was cut, else each
    shown line replaced by the line it corresponds to (None if they no longer correspond)."""
    if not any(is_elision(line) or INLINE in line for line in expected):
        return actual
    mapping = align(expected, actual, fuzzy=True)
    if mapping is None:
        return None
    return [line if is_elision(line) else refresh(line, actual[mapping[i]])
            for i, line in enumerate(expected)]


# ---- cli.md and --version --------------------------------------------------------------------

def cli(args):
    root = Path(args.root).resolve()
    target = root / "docs" / "cli.md"
    p = subprocess.run([args.meshsim, "help-markdown"], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"meshsim help-markdown exited {p.returncode}", file=sys.stderr)
        return 1
    if args.update:
        target.write_text(p.stdout)
        print(f"wrote {target}")
        return 0
    have = target.read_text() if target.exists() else ""
    if have == p.stdout:
        print("docs/cli.md is what meshsim help-markdown prints")
        return 0
    sys.stderr.writelines(difflib.unified_diff(have.splitlines(True), p.stdout.splitlines(True),
                                               "docs/cli.md", "meshsim help-markdown"))
    print("\ndocs/cli.md differs from the command line: run tools/check_docs.py cli --meshsim "
          "build/meshsim --update", file=sys.stderr)
    return 1


def version(args):
    root = Path(args.root).resolve()
    out = subprocess.run([args.meshsim, "--version"], stdout=subprocess.PIPE, text=True).stdout
    m = re.fullmatch(r"meshsim (\d+\.\d+\.\d+) \(commit ([^)]+)\)\n", out)
    if not m:
        print(f"meshsim --version printed {out!r}; expected 'meshsim X.Y.Z (commit C)'",
              file=sys.stderr)
        return 1
    commit = m.group(2)
    top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    in_git = top.returncode == 0 and Path(top.stdout.strip()).resolve() == root
    if not in_git:
        ok = commit == "unknown"
        print(f"not a git checkout; meshsim --version names commit {commit!r}")
        return 0 if ok else 1
    sha = commit.removesuffix("-dirty")
    known = subprocess.run(["git", "-C", str(root), "cat-file", "-e", sha + "^{commit}"],
                           capture_output=True).returncode == 0
    print(f"meshsim --version names commit {commit!r}: "
          f"{'a commit of this repository' if known else 'NOT a commit of this repository'}")
    return 0 if known else 1


# ---- self-test -------------------------------------------------------------------------------

def selftest(_args):
    checks = [
        (align(["a", "...", "d"], ["a", "b", "c", "d"], False) == {0: 0, 2: 3}, "elision in the middle"),
        (align(["a", "..."], ["a"], False) == {0: 0}, "elision of nothing"),
        (align(["...", "c"], ["a", "b"], False) is None, "a shown line missing"),
        (align(["a", "b"], ["a", "b", "c"], False) is None, "an extra printed line"),
        (align(["x 1.0 s"], ["x 2.5 s"], False) is None, "numbers differ"),
        (align(["x 1.0 s"], ["x 2.5 s"], True) == {0: 0}, "same shape"),
        (shape("  step time   2.272 s") == shape("  step time  12.301 s"), "shape ignores padding"),
        (regenerate(["a 1", "...", "z 9"], ["a 2", "b", "z 8"]) == ["a 2", "...", "z 8"],
         "update keeps the cut"),
        (regenerate(["a 1", "...", "q 9"], ["a 2", "b", "z 8"]) is None, "update refuses"),
        (regenerate(["a 1"], ["a 2", "b 3"]) == ["a 2", "b 3"], "update without a cut"),
        (align(["took <...> s, done"], ["took 0.13 s, done"], False) == {0: 0}, "inline cut"),
        (align(["took <...> s, done"], ["took 0.13 s, fail"], False) is None, "inline cut, rest"),
        (regenerate(["n 5 took <...> s"], ["n 7 took 0.2 s"]) == ["n 7 took <...> s"],
         "update keeps an inline cut"),
        (regenerate(["  n  5 (<...>)", "..."], ["  n 17 (x y)", "z"]) == ["  n 17 (<...>)", "..."],
         "update of an inline cut with new padding"),
        (clean(["a", "meshsim: no plan given: searching for one, simulated 3/40 (2 s)", "b"])
         == ["a", "b"], "progress lines dropped"),
        (clean(["meshsim: error: --tp: expected 8 (2 s)x"]) != [], "other lines kept"),
    ]
    text = "\n".join(["x", "<!-- docs-check: skip (slow) -->", "```", "$ skipped", "```",
                      "```", "$ one \\", "  --flag", "out 1", "...", "$ two", "```",
                      "```sh", "./not-checked", "```"])
    blocks = parse_blocks(Path("t.md"), text)
    checks += [
        (len(blocks) == 1, "one checked block"),
        (len(blocks) == 1 and [c.text for c in blocks[0].commands] == ["one \\\n  --flag", "two"],
         "commands and continuations"),
        (len(blocks) == 1 and blocks[0].commands[0].expected == ["out 1", "..."],
         "expected lines"),
        (len(blocks) == 1 and blocks[0].commands[0].out_start == 8, "line numbers"),
    ]
    bad = [name for ok, name in checks if not ok]
    for name in bad:
        print(f"FAIL {name}", file=sys.stderr)
    print(f"{len(checks) - len(bad)} of {len(checks)} checks pass")
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("examples", "cli", "version"):
        s = sub.add_parser(name)
        s.add_argument("--meshsim", required=True, help="the meshsim binary")
        s.add_argument("--root", default=str(REPO), help="the repository (default: this one)")
        if name != "version":
            s.add_argument("--update", action="store_true", help="rewrite the docs")
        if name == "examples":
            s.add_argument("--jobs", type=int, default=1, help="blocks run at once")
            s.add_argument("files", nargs="*", help="Markdown files (default: README, docs)")
    sub.add_parser("selftest")
    args = p.parse_args(argv)
    return {"examples": examples, "cli": cli, "version": version, "selftest": selftest}[
        args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
