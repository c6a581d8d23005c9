"""Every fenced code block of README.md and docs/*.md runs, or is checked without running.

One test per block (ids such as ``README.md:block3``: the third fenced block of that file). A
block's test fails unless it made at least one real check, so no block passes by being skipped.

``python`` blocks run: those of one file in one fresh Python process, in file order, in one
namespace (a later block uses the names of earlier ones); the doc's own ``assert`` statements are
the checks, and a block without an ``assert`` fails (an example whose behaviour can change unnoticed
is not a checked example). A block that must not run (one that would compile every kernel for
minutes, say) is marked ``<!-- doctest: no-run: REASON -->`` on the line before its fence: it is
compiled, and every command it spells as a list (``[sys.executable, "-m", "mmvref", "precompile"]``)
is checked as a shell command is (below); a no-run block without such a command fails.

The module is marked ``native_only``: what it checks does not depend on the CPU the kernels are
compiled for, so CI's haswell stage skips it. Temporary files the examples write go with the test.

``bash`` / ``sh`` / ``shell`` blocks (``console``: the lines starting with ``$``; ``dockerfile``:
its ``RUN`` lines) are split into commands at ``&&``, ``||``, ``;`` and ``|``, leading
``NAME=value`` words being the command's environment, and every command is checked:

- cheap ones run for real, with a timeout, and must exit 0: ``python -m mmvref [--info] [--json]``,
  ``python -m conformance --list-ops`` / ``--list-faults`` / ``--coverage --check``, ``python -m
  npu`` and ``python -m npu --coverage --check``, any ``--help``, and ``python -c CODE``;
- ``python -m MODULE ARGS`` and ``python SCRIPT.py ARGS`` otherwise (a conformance run, the
  benchmarks, ``precompile``, ...): the arguments are parsed by the module's own argparse parser and
  nothing else runs (all such commands of all blocks are parsed up front, in one child process per
  distinct environment, and each block's test reports its own). The module is run as ``__main__``
  in a child process whose ``argparse.ArgumentParser.parse_args`` is wrapped: the real parser
  parses the real arguments (an unknown option, a bad choice or a missing value exits 2 exactly as
  on the command line), and the wrapper then stops the program before its first action. This needs
  no parser-builder function in the module and cannot drift from it; a module that never calls
  ``parse_args`` fails the check.
  After parsing, names that argparse takes as free strings are looked up too: conformance's
  ``--ops`` / ``--backend`` / ``--dtypes``, the benchmarks' ``--ops``, precompile's ``--ops`` /
  ``--dtypes``;
- ``pytest`` (or ``python -m pytest``) ARGS: parsed by pytest's own configuration
  (``_pytest.config._prepareconfig``: plugin options such as xdist's ``-n`` and the conformance
  plugin's, and the initial conftest, which loads ``HYPOTHESIS_PROFILE``), and the paths named must
  exist; no test runs;
- ``pip install``: every extra named in ``.[...]`` / ``mmvref[...]`` exists in pyproject.toml's
  optional-dependencies, and every other requirement is a package pyproject.toml names, its pinned
  version allowed by pyproject's specifier;
- ``bash FILE``: the file exists and ``bash -n`` parses it.

Commands that need Ascend hardware (CANN, torch_npu, building tcuscan) can be neither run nor
parsed here: their block is marked ``<!-- doctest: needs-ascend: REASON -->`` and listed in
``NEEDS_ASCEND`` below with the reason (``test_needs_ascend_blocks_are_listed``); the block's
``python -m`` commands are still parsed and its ``python -c`` code compiled, and the block must
hold at least one such check.
"""
from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

# Documentation does not depend on the compile target: CI's second stage (compiled for haswell) skips it.
pytestmark = pytest.mark.native_only

REPO = Path(__file__).resolve().parents[1]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: blocks marked needs-ascend, and why they cannot run here
NEEDS_ASCEND = {
    "docs/npu.md:block3": "the CANN toolkit, torch_npu and an Atlas A2/A3 NPU: installs and builds the tcuscan "
                          "kernels",
}

#: seconds for one file's python blocks (the first calls compile Numba kernels into an empty cache)
PYTHON_TIMEOUT = 900
#: seconds for one cheap command run for real, or one batch of parser checks
COMMAND_TIMEOUT = 300

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
_MARKER = re.compile(r"^<!--\s*doctest:\s*(?P<kind>[a-z-]+)\s*(?::\s*(?P<reason>.*?))?\s*-->$")
_KINDS = ("no-run", "needs-ascend")
_SHELL = ("bash", "sh", "shell", "console")
_LANGS = ("python", "dockerfile", *_SHELL)


@dataclass(frozen=True)
class Block:
    file: str        # relative to the repository
    index: int       # 1-based among the file's fenced blocks
    line: int        # line of the opening fence
    lang: str
    code: str
    marker: str | None
    reason: str | None

    @property
    def id(self):
        return f"{self.file}:block{self.index}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, with the doctest marker on the line before each."""
    lines = path.read_text().splitlines()
    rel = path.relative_to(REPO).as_posix()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m["fence"], i
        close = re.compile(re.escape(fence[0]) + "{%d,}\\s*" % len(fence))
        j = i + 1
        while j < len(lines) and not close.fullmatch(lines[j]):
            j += 1
        prev = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mk = _MARKER.match(prev)
        code = "\n".join(lines[start + 1:j]) + "\n"
        blocks.append(Block(rel, len(blocks) + 1, start + 1, m["info"].lower(), code,
                            mk["kind"] if mk else None, mk["reason"] if mk else None))
        i = j + 1
    return blocks


BLOCKS = [b for f in DOC_FILES for b in parse_blocks(f)]


def _env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra or {})
    return env


# ----------------------------------------------------------------------------- python blocks

_RUNNER = r"""
import contextlib, io, json, sys, traceback, types

def main(spec_file, out_file):
    with open(spec_file) as fh:
        spec = json.load(fh)
    # the blocks run as the __main__ module of a fresh process (a function they define can be
    # pickled by reference into a forked child, as in a script)
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    results, failed = {}, None
    for b in spec:
        if failed:
            results[b["id"]] = {"ok": False, "error": f"not run: {failed} failed before it"}
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(b["code"], b["id"], "exec"), module.__dict__)
            results[b["id"]] = {"ok": True, "stdout": out.getvalue()}
        except BaseException:
            results[b["id"]] = {"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc()}
            failed = b["id"]
    with open(out_file, "w") as fh:
        json.dump(results, fh)

main(sys.argv[1], sys.argv[2])
"""


@functools.lru_cache(maxsize=None)
def run_python_blocks(file: str) -> dict:
    """{block id: {"ok", "stdout", "error"}} for the runnable python blocks of ``file``, run in
    order in one fresh process and one namespace."""
    todo = [{"id": b.id, "code": b.code} for b in BLOCKS
            if b.file == file and b.lang == "python" and b.marker != "no-run"]
    with tempfile.TemporaryDirectory() as d:
        spec, out, tmp = Path(d) / "blocks.json", Path(d) / "results.json", Path(d) / "tmp"
        spec.write_text(json.dumps(todo))
        tmp.mkdir()  # what the examples write to their temporary directories goes when the test ends
        r = subprocess.run([sys.executable, "-c", _RUNNER, str(spec), str(out)], cwd=REPO,
                           env=_env({"TMPDIR": str(tmp)}), capture_output=True, text=True, timeout=PYTHON_TIMEOUT)
        if not out.exists():
            raise AssertionError(f"the python blocks of {file} did not finish (exit {r.returncode}):\n"
                                 f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return json.loads(out.read_text())


def _asserts(code: str) -> int:
    import ast

    return sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(code)))


def _list_commands(code: str) -> list[list[str]]:
    """Commands a python block spells as lists: [sys.executable (or "python"), "-m", MODULE, ARGS...]."""
    import ast

    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, (ast.List, ast.Tuple)) or len(node.elts) < 3:
            continue
        rest = node.elts[1:]
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in rest):
            continue
        if rest[0].value == "-m":
            found.append(["python", *(e.value for e in rest)])
    return found


# ----------------------------------------------------------------------------- shell commands

def shell_lines(block: Block) -> list[str]:
    """The command lines of a shell-like block (continuations joined)."""
    lines = block.code.splitlines()
    if block.lang == "console":
        lines = [ln[1:].strip() for ln in lines if ln.startswith("$")]
    elif block.lang == "dockerfile":
        lines = [ln.strip()[4:] for ln in lines if ln.strip().upper().startswith("RUN ")]
    joined, buf = [], ""
    for ln in lines:
        if ln.rstrip().endswith("\\"):
            buf += ln.rstrip()[:-1] + " "
            continue
        joined.append(buf + ln)
        buf = ""
    return [j for j in joined if j.strip() and not j.strip().startswith("#")]


def split_commands(line: str) -> list[tuple[dict, list[str]]]:
    """(environment, argv) of each command of a shell line."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    cmds, cur = [], []
    for tok in lex:
        if tok in (";", "&&", "||", "|", "&"):
            cmds.append(cur)
            cur = []
        else:
            cur.append(tok)
    cmds.append(cur)
    out = []
    for argv in filter(None, cmds):
        env = {}
        while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            k, _, v = argv.pop(0).partition("=")
            env[k] = v
        if argv:
            out.append((env, argv))
    return out


@dataclass
class Command:
    text: str
    env: dict
    kind: str        # run | parse | pytest | pip | script-file | pycode | hardware
    target: str = ""
    args: tuple = ()


def _cheap(module, args):
    a = set(args)
    if a & {"-h", "--help"}:
        return True
    if module == "mmvref":
        return a <= {"--info", "--json"}
    if module == "conformance":
        return bool(a & {"--list-ops", "--list-faults"}) or a == {"--coverage", "--check"}
    if module == "npu":  # what the stack lacks, or the coverage table's gaps (a few seconds)
        return not a or a == {"--coverage", "--check"}
    return False


def classify(env, argv, *, marker=None) -> Command:
    text = shlex.join([*(f"{k}={v}" for k, v in env.items()), *argv])
    hw = marker == "needs-ascend"
    prog = os.path.basename(argv[0])
    if prog in ("python", "python3"):
        if len(argv) >= 3 and argv[1] == "-m":
            module, args = argv[2], tuple(argv[3:])
            if module == "pip":
                return Command(text, env, "hardware" if hw else "pip", args=args)
            if module == "pytest":
                return Command(text, env, "pytest", args=args)
            if not hw and marker != "no-run" and _cheap(module, args):
                return Command(text, env, "run", module, args)
            return Command(text, env, "parse", module, args)
        if len(argv) >= 3 and argv[1] == "-c":
            return Command(text, env, "pycode", argv[2], args=("compile-only",) if hw else ())
        if len(argv) >= 2 and argv[1].endswith(".py"):
            return Command(text, env, "parse", argv[1], tuple(argv[2:]))
    if prog == "pytest":
        return Command(text, env, "pytest", args=tuple(argv[1:]))
    if prog == "pip" and not hw:
        return Command(text, env, "pip", args=tuple(argv[1:]))
    if prog == "bash" and len(argv) == 2 and not hw:
        return Command(text, env, "script-file", argv[1])
    return Command(text, env, "hardware" if hw else "unknown")


def block_commands(block: Block) -> list[Command]:
    if block.lang == "python":
        return [classify({}, argv, marker="no-run") for argv in _list_commands(block.code)]
    return [classify(env, argv, marker=block.marker) for line in shell_lines(block)
            for env, argv in split_commands(line)]


_PARSE_HARNESS = r"""
import argparse, contextlib, io, json, runpy, sys
import numpy as np

class _Parsed(BaseException):
    pass

_orig = argparse.ArgumentParser.parse_args

def _parse_args(self, args=None, namespace=None):
    ns = _orig(self, args, namespace)
    raise _Parsed(ns)

argparse.ArgumentParser.parse_args = _parse_args


def _names(v):
    if v is None:
        return []
    items = v if isinstance(v, (list, tuple)) else [v]
    return [p for item in items for p in str(item).split(",") if p]


def _backend_problems(name):
    import importlib
    import npu
    from conformance import faults
    if name.startswith("faulty:"):
        parts = name.split(":", 2)
        if len(parts) != 3 or parts[1] not in faults.FAULTS:
            return [f"--backend {name}: no such fault"]
        return _backend_problems(parts[2])
    if name in npu.BACKENDS:
        return []
    mod, _, attr = name.partition(":")
    try:
        getattr(importlib.import_module(mod), attr)
    except Exception as exc:
        return [f"--backend {name}: {type(exc).__name__}: {exc}"]
    return []


def validate(target, ns):
    bad = []
    if target == "conformance":
        from conformance.__main__ import all_op_names
        bad += [f"--ops: unknown op {o}" for o in (ns.ops or []) if o not in all_op_names()]
        bad += _backend_problems(ns.backend)
        for d in ns.dtypes or []:
            try:
                np.dtype(d)
            except TypeError:
                bad.append(f"--dtypes: {d} is not a dtype")
    elif target == "benchmarks":
        from benchmarks.run import GROUPS, OPS
        bad += [f"--ops: unknown op {o}" for o in (ns.ops or []) if o not in OPS and o not in GROUPS
                and o not in ("dask", "pyg")]  # run apart from the per-op benches
    elif target == "mmvref" and (hasattr(ns, "ops") or hasattr(ns, "dtypes")):  # precompile
        from mmvref._precompile import INTEGRATIONS, OPS  # the registry's fast ops, prepare; pyg
        bad += [f"--ops: unknown op {o}" for o in _names(getattr(ns, "ops", None)) if o not in OPS + INTEGRATIONS]
        for d in _names(getattr(ns, "dtypes", None)):
            try:
                np.dtype(d)
            except TypeError:
                bad.append(f"--dtypes: {d} is not a dtype")
    return bad


results = []
for target, args in json.loads(sys.argv[1]):
    sys.argv = [target, *args]
    err = io.StringIO()
    res = {"target": target, "args": args}
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if target.endswith(".py"):
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        res["error"] = "the program finished without calling ArgumentParser.parse_args"
    except _Parsed as p:
        res["problems"] = validate(target, p.args[0])
        res["parsed"] = {k: repr(v) for k, v in vars(p.args[0]).items()}
    except SystemExit as exc:
        res["error"] = f"exit {exc.code} while parsing: {err.getvalue().strip()[-1500:]}"
    except BaseException as exc:
        res["error"] = f"{type(exc).__name__}: {exc}\n{err.getvalue()[-1500:]}"
    results.append(res)
print("DOCTEST-RESULTS " + json.dumps(results))
"""

_PYTEST_HARNESS = r"""
import json, os, sys
from _pytest.config import _prepareconfig
args = sys.argv[1:]
try:
    cfg = _prepareconfig(args)
except BaseException as exc:
    print("DOCTEST-RESULT " + json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
missing = [] if cfg.getoption("pyargs") else [a for a in cfg.args if not os.path.exists(a.split("::")[0])]
cfg._ensure_unconfigure()
print("DOCTEST-RESULT " + json.dumps({"error": f"paths not found: {missing}" if missing else None,
                                      "args": cfg.args}))
"""


def _last_line(stdout, tag):
    for ln in reversed(stdout.splitlines()):
        if ln.startswith(tag + " "):
            return json.loads(ln[len(tag) + 1:])
    return None


_PARSED: dict = {}  # (environment, target, args) -> problem (None: accepted)


def _parse_key(c: Command):
    return tuple(sorted(c.env.items())), c.target, tuple(c.args)


def check_parse(cmds: list[Command]) -> list[str]:
    """Problems of parser checks. Commands not checked yet run in one child process per distinct
    environment (``prefetch_parse`` batches every block's commands that way); results are kept."""
    groups = {}
    for c in cmds:
        if _parse_key(c) not in _PARSED:
            groups.setdefault(_parse_key(c)[0], {})[_parse_key(c)] = c
    for env, group in groups.items():
        todo = list(group.values())
        batch = json.dumps([[c.target, list(c.args)] for c in todo])
        r = subprocess.run([sys.executable, "-c", _PARSE_HARNESS, batch],
                           cwd=REPO, env=_env(dict(env)), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        res = _last_line(r.stdout, "DOCTEST-RESULTS")
        for i, c in enumerate(todo):
            if res is None:
                _PARSED[_parse_key(c)] = f"the parser check crashed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
            else:
                one = res[i]
                _PARSED[_parse_key(c)] = (one.get("error") or one.get("problems")) or None
    return [f"{c.text}: {_PARSED[_parse_key(c)]}" for c in cmds if _PARSED[_parse_key(c)]]


@functools.lru_cache(maxsize=None)
def prefetch_parse():
    """Parse every block's commands that need a parser check, in as few processes as possible."""
    check_parse([c for b in BLOCKS if b.lang in _LANGS for c in block_commands(b) if c.kind == "parse"])
    return True


def check_pytest(c: Command) -> list[str]:
    r = subprocess.run([sys.executable, "-c", _PYTEST_HARNESS, *c.args], cwd=REPO, env=_env(c.env),
                       capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    res = _last_line(r.stdout, "DOCTEST-RESULT")
    if res is None:
        return [f"{c.text}: the pytest check crashed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}"]
    return [f"{c.text}: {res['error']}"] if res["error"] else []


def _pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def check_pip(c: Command) -> list[str]:
    from packaging.requirements import Requirement

    proj = _pyproject()
    extras = proj.get("optional-dependencies", {})
    declared = {}
    for spec in [*proj.get("dependencies", []), *(s for v in extras.values() for s in v)]:
        r = Requirement(spec)
        declared.setdefault(_norm(r.name), []).append(r.specifier)
    args = list(c.args)
    if not args or args[0] != "install":
        return [f"{c.text}: only 'pip install' is checked"]
    problems, reqs, i = [], [], 1
    with_value = {"--extra-index-url", "--index-url", "-i", "-c", "--constraint", "-r", "--requirement"}
    while i < len(args):
        a = args[i]
        if a in ("-e", "--editable"):
            reqs.append(args[i + 1])
            i += 2
        elif a in with_value:
            if a in ("-r", "--requirement"):
                problems.append(f"{c.text}: requirement files are not checked")
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            reqs.append(a)
            i += 1
    if not reqs:
        problems.append(f"{c.text}: installs nothing")
    for req in reqs:
        m = re.fullmatch(r"(?P<name>\.|mmvref)(?:\[(?P<extras>[^\]]*)\])?", req)
        if m:
            if m["name"] == "." and not (REPO / "pyproject.toml").exists():
                problems.append(f"{c.text}: no pyproject.toml at the repository root")
            for e in filter(None, (m["extras"] or "").split(",")):
                if e.strip() not in extras:
                    problems.append(f"{c.text}: extra [{e}] is not in pyproject.toml ({', '.join(extras)})")
            continue
        r = Requirement(req)
        specs = declared.get(_norm(r.name))
        if specs is None:
            problems.append(f"{c.text}: {r.name} is not a dependency named in pyproject.toml")
            continue
        for v in (s.version for s in r.specifier if s.operator == "=="):
            if not any(v in s for s in specs):
                problems.append(f"{c.text}: {r.name}=={v} is outside pyproject.toml's {[str(s) for s in specs]}")
    return problems


def check_run(c: Command) -> list[str]:
    argv = [sys.executable, "-m", c.target, *c.args]
    r = subprocess.run(argv, cwd=REPO, env=_env(c.env), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if r.returncode != 0:
        return [f"{c.text}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"]
    if not r.stdout.strip():
        return [f"{c.text}: printed nothing"]
    return []


def check_pycode(c: Command) -> list[str]:
    try:
        compile(c.target, c.text, "exec")
    except SyntaxError as exc:
        return [f"{c.text}: {exc}"]
    if c.args == ("compile-only",):
        return []
    r = subprocess.run([sys.executable, "-c", c.target], cwd=REPO, env=_env(c.env), capture_output=True, text=True,
                       timeout=COMMAND_TIMEOUT)
    return [f"{c.text}: exit {r.returncode}\n{r.stderr[-1500:]}"] if r.returncode else []


def check_script_file(c: Command) -> list[str]:
    path = REPO / c.target
    if not path.is_file():
        return [f"{c.text}: {c.target} does not exist"]
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    return [f"{c.text}: bash -n: {r.stderr}"] if r.returncode else []


def check_commands(cmds: list[Command]) -> tuple[int, list[str]]:
    """(number of checks made, problems)."""
    problems, checks = [], 0
    unknown = [c.text for c in cmds if c.kind == "unknown"]
    problems += [f"no check knows this command (mark its block needs-ascend if only hardware can run it): {u}"
                 for u in unknown]
    parse = [c for c in cmds if c.kind == "parse"]
    if parse:
        problems += check_parse(parse)
        checks += len(parse)
    for c in cmds:
        fn = {"pytest": check_pytest, "pip": check_pip, "run": check_run, "pycode": check_pycode,
              "script-file": check_script_file}.get(c.kind)
        if fn is not None:
            problems += fn(c)
            checks += 1
    return checks, problems


# ----------------------------------------------------------------------------- the tests

def test_blocks_found():
    files = {b.file for b in BLOCKS}
    assert "README.md" in files and len(BLOCKS) >= 10, f"only {len(BLOCKS)} blocks in {sorted(files)}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block(block):
    assert block.lang in _LANGS, (f"{block.id} (line {block.line}): fence language {block.lang!r}; every block "
                                  f"must be one of {_LANGS} so that it can be checked")
    assert block.marker in (None, *_KINDS), f"{block.id}: unknown doctest marker {block.marker!r}"
    if block.marker:
        assert block.reason, f"{block.id}: a doctest marker must give its reason: <!-- doctest: KIND: REASON -->"
    if block.lang == "python" and block.marker != "no-run":
        assert block.marker is None, f"{block.id}: a python block takes only the no-run marker"
        assert _asserts(block.code), f"{block.id} (line {block.line}): no assert: the example checks nothing"
        res = run_python_blocks(block.file)[block.id]
        assert res["ok"], f"{block.id} (line {block.line}) failed:\n{res.get('stdout', '')}\n{res['error']}"
        return
    if block.lang == "python":
        compile(block.code, block.id, "exec")
    prefetch_parse()
    cmds = block_commands(block)
    checks, problems = check_commands(cmds)
    assert not problems, f"{block.id} (line {block.line}):\n" + "\n".join(problems)
    assert checks >= 1, (f"{block.id} (line {block.line}): no command of this block could be checked "
                         f"({[c.text for c in cmds]})")


def test_needs_ascend_blocks_are_listed():
    marked = {b.id: b.reason for b in BLOCKS if b.marker == "needs-ascend"}
    assert set(marked) == set(NEEDS_ASCEND), (f"blocks marked needs-ascend {sorted(marked)} != those listed in "
                                              f"NEEDS_ASCEND {sorted(NEEDS_ASCEND)}")
    assert all(marked.values()) and all(NEEDS_ASCEND.values())
    for bid in marked:
        block = next(b for b in BLOCKS if b.id == bid)
        assert block.lang in _SHELL, f"{bid}: needs-ascend marks shell blocks"


def test_readme_front_door():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 150, f"README.md has {len(text.splitlines())} lines"
    # .ci/run and CI rely on these two commands, word for word
    assert ('python3 -m pip install torch==2.13.0 -e ".[test,bench,tbb,dask]" && python3 -m conformance '
            '--backend mmvref --profile ci --jobs auto && python3 -m benchmarks --quick') in text
    assert "HYPOTHESIS_PROFILE=ci python3 -m pytest -n auto --dist worksteal" in text
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{page.name}" in text, f"README.md does not link docs/{page.name}"


def test_doc_links_resolve():
    bad = []
    for f in DOC_FILES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read_text()):
            if "://" in target:
                continue
            if not (f.parent / target).exists():
                bad.append(f"{f.relative_to(REPO)}: {target}")
    assert not bad, "links to files that do not exist:\n" + "\n".join(bad)


@pytest.mark.parametrize("code, kinds", [
    ("python -m conformance --list-ops; python -m mmvref --info  # cheap", ["run", "run"]),
    ('X=1 python3 -m pip install torch==2.13.0 -e ".[test]" && python -m benchmarks --quick', ["pip", "parse"]),
    ("HYPOTHESIS_PROFILE=ci python3 -m pytest -n auto\nbash .ci/run", ["pytest", "script-file"]),
    ("make build", ["unknown"]),
])
def test_checker_classifies(code, kinds):
    b = Block("x.md", 1, 1, "bash", code, None, None)
    assert [c.kind for c in block_commands(b)] == kinds


def test_checker_rejects_bad_arguments():
    bad = ["python -m conformance --backend mmvref --no-such-option", "python -m conformance --profile nightly",
           "python -m conformance --ops no_such_op", "python -m conformance --backend faulty:no_such_fault:mmvref",
           "python -m benchmarks --ops no_such_bench", "python -m benchmarks --runs"]
    cmds = [classify(env, argv) for text in bad for env, argv in split_commands(text)]
    assert [c.kind for c in cmds] == ["parse"] * len(bad)
    problems = check_parse(cmds + [classify({}, ["python", "-m", "conformance", "--backend", "emulation"])])
    assert len(problems) == len(bad) and all(p.startswith(t + ":") for p, t in zip(problems, bad)), problems


def test_checker_rejects_bad_pip_and_pytest():
    assert check_pip(classify({}, ["pip", "install", "-e", ".[no_such_extra]"]))
    assert check_pip(classify({}, ["pip", "install", "torch==1.0"]))          # pyproject asks torch>=2.4
    assert check_pip(classify({}, ["pip", "install", "left-pad"]))
    assert not check_pip(classify({}, ["pip", "install", "-e", ".[test,dask]"]))
    assert check_pytest(classify({}, ["pytest", "--no-such-option"]))
    assert check_pytest(classify({}, ["pytest", "tests/no_such_test_file.py"]))


def test_checker_runs_python_in_order():
    b = [Block("t.md", 1, 1, "python", "a = 1\nassert a == 1\n", None, None),
         Block("t.md", 2, 5, "python", "assert a + 1 == 3\n", None, None)]
    assert _asserts(b[0].code) == 1 and _asserts("print(1)\n") == 0
    with tempfile.TemporaryDirectory() as d:
        spec, out = Path(d) / "s.json", Path(d) / "o.json"
        spec.write_text(json.dumps([{"id": x.id, "code": x.code} for x in b]))
        subprocess.run([sys.executable, "-c", _RUNNER, str(spec), str(out)], check=True, cwd=REPO, env=_env())
        res = json.loads(out.read_text())
    assert res["t.md:block1"]["ok"] and not res["t.md:block2"]["ok"]
    assert "AssertionError" in res["t.md:block2"]["error"]


def test_list_commands_in_python():
    code = textwrap.dedent("""
        import subprocess, sys
        subprocess.run([sys.executable, "-m", "mmvref", "precompile", "--jobs", "2"], check=True)
    """)
    assert _list_commands(code) == [["python", "-m", "mmvref", "precompile", "--jobs", "2"]]
