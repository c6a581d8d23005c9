"""Reports of a conformance run: JUnit XML (one testcase per op), JSON (the
schema below) and a Markdown summary.

JSON schema (``SCHEMA``; ``validate(doc)`` checks a document against it):

    {
      "schema": "mmvref-conformance/3",
      "backend": str, "profile": str, "seed": int | null, "s": int, "policy": str,
      "tolerance": str,                    # the policy's float tolerance and its source
      "versions": {name: str},             # mmvref, python, numpy, numba, hypothesis, torch, backend
      "command": str,                      # the command line of the run
      "passed": bool,                      # every op that ran conforms
      "complete": bool,                    # false while the run is going on (written after each op)
      "seconds": float,
      "ops": [ {
          "op": str, "backend": str,       # op: a registry op, "stage:NAME", or "startup" (the one row of
                                           # a run whose backend failed while starting: conformance.session)
          "status": "pass" | "fail" | "skipped" | "crash" | "timeout",
          "examples": int, "failures": int, "seconds": float,
          "message": str,                  # "" on pass
          "counterexample": str,           # the minimal failing input, as Python
          "command": str,                  # reproduces the failure
          "replay_file": str,              # counterexample, .npz data (casefile.py; "" if none)
          "extra": object,                 # "strata": {stratum: cases checked}, "failed_stratum"
                                           # (conformance.strata), ...
          "rejected": int,                 # inputs the backend declined (not counted in examples)
          "shrink_calls": int,             # calls made while shrinking (not counted in examples)
          "worst_margin": float,           # largest error / tolerance over passing examples (0: exact)
          "by_dtype": {dtype: {"examples": int, "rejected": int, "shrink_calls": int,
                               "worst_margin": float, "max_n": int,    # max_n: longest input drawn
                               "small": int, "medium": int, "large": int}}  # examples per input tier
      }, ... ]
    }
"""
from __future__ import annotations

import json
import platform
import shlex
import sys
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

__all__ = ["SCHEMA", "validate", "write_all", "to_json", "to_junit", "to_markdown"]

SCHEMA_ID = "mmvref-conformance/3"
_OP_FIELDS = {"op": str, "backend": str, "status": str, "examples": int, "failures": int,
              "seconds": (int, float), "message": str, "counterexample": str, "command": str,
              "replay_file": str, "extra": dict, "rejected": int, "shrink_calls": int,
              "worst_margin": (int, float), "by_dtype": dict}
_TOP_FIELDS = {"schema": str, "backend": str, "profile": str, "seed": (int, type(None)), "s": int,
               "policy": str, "tolerance": str, "versions": dict, "command": str, "passed": bool,
               "complete": bool, "seconds": (int, float), "ops": list}
SCHEMA = {"top": _TOP_FIELDS, "op": _OP_FIELDS, "status": ("pass", "fail", "skipped", "crash", "timeout")}
#: statuses that are not conformance (a crash or a timeout of the backend is a failure too)
_FAILED = ("fail", "crash", "timeout")


def validate(doc) -> list[str]:
    """Problems of a JSON report against ``SCHEMA`` (empty list: valid)."""
    errs = []
    for k, t in _TOP_FIELDS.items():
        if k not in doc:
            errs.append(f"missing top-level field {k!r}")
        elif not isinstance(doc[k], t) or (t is int and isinstance(doc[k], bool)):
            errs.append(f"field {k!r} has type {type(doc[k]).__name__}")
    if doc.get("schema") != SCHEMA_ID:
        errs.append(f"schema must be {SCHEMA_ID!r}")
    for i, op in enumerate(doc.get("ops", [])):
        for k, t in _OP_FIELDS.items():
            if k not in op:
                errs.append(f"ops[{i}] misses {k!r}")
            elif not isinstance(op[k], t) or (t is int and isinstance(op[k], bool)):
                errs.append(f"ops[{i}].{k} has type {type(op[k]).__name__}")
        if op.get("status") not in SCHEMA["status"]:
            errs.append(f"ops[{i}].status is {op.get('status')!r}")
    extra = set(doc) - set(_TOP_FIELDS)
    if extra:
        errs.append(f"unknown top-level fields {sorted(extra)}")
    return errs


def versions(backend_obj=None) -> dict:
    """Versions a release record needs: python, mmvref, numpy, numba, hypothesis, torch (when
    installed) and the backend's own ``version`` / ``__version__`` string when it has one."""
    out = {"python": platform.python_version()}
    for pkg in ("mmvref", "numpy", "numba", "hypothesis", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    v = getattr(backend_obj, "version", None) or getattr(backend_obj, "__version__", None)
    if v is not None:
        out["backend"] = str(v() if callable(v) else v)
    return out


def command_line(argv=None) -> str:
    """The command that ran: ``python -m conformance`` and its arguments, shell-quoted."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join([Path(sys.executable).name, "-m", "conformance", *args])


def to_json(reports, *, backend, profile, seed, s, policy, seconds, versions=None, command="", complete=True):
    from .compare import TOLERANCES

    return {"schema": SCHEMA_ID, "backend": backend, "profile": profile, "seed": seed, "s": s,
            "policy": policy, "tolerance": TOLERANCES.get(policy, ""), "versions": dict(versions or {}),
            "command": command, "passed": all(r.status not in _FAILED for r in reports),
            "complete": bool(complete), "seconds": round(seconds, 3), "ops": [r.to_dict() for r in reports]}


def to_junit(reports, *, backend, seconds, properties=None):
    suite = ET.Element("testsuite", name=f"conformance[{backend}]", tests=str(len(reports)),
                       failures=str(sum(r.status == "fail" for r in reports)),
                       errors=str(sum(r.status in ("crash", "timeout") for r in reports)),
                       skipped=str(sum(r.status == "skipped" for r in reports)), time=f"{seconds:.3f}")
    if properties:
        props = ET.SubElement(suite, "properties")
        for k, v in properties.items():
            ET.SubElement(props, "property", name=str(k), value=str(v))
    for r in reports:
        case = ET.SubElement(suite, "testcase", classname=f"conformance.{backend}", name=r.op,
                             time=f"{r.seconds:.3f}")
        if r.status in _FAILED:  # a crash or timeout is a JUnit error: the check could not finish
            fail = ET.SubElement(case, "failure" if r.status == "fail" else "error",
                                 message=f"{r.status.upper()}: {r.message}"[:500])
            fail.text = f"{r.message}\n\nminimal counterexample: {r.counterexample}\nreproduce: {r.command}\n"
        elif r.status == "skipped":
            ET.SubElement(case, "skipped", message=r.message)
        ET.SubElement(case, "system-out").text = (
            f"{r.examples} examples, {r.rejected} rejected, {r.shrink_calls} shrink calls, worst margin "
            f"{r.worst_margin:.3g}\n" + "".join(f"  {d}: {t['examples']} examples, {t['rejected']} rejected, "
                                                f"{t['shrink_calls']} shrink calls, worst margin "
                                                f"{t['worst_margin']:.3g}, longest input {t['max_n']}, tiers "
                                                f"{t.get('small', 0)}/{t.get('medium', 0)}/{t.get('large', 0)}\n"
                                                for d, t in r.by_dtype.items()))
    suites = ET.Element("testsuites")
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode")


def to_markdown(reports, *, backend, profile, seconds, header=None, complete=True):
    ok = all(r.status not in _FAILED for r in reports)
    verdict = ('PASS' if ok else 'FAIL') if complete else "INCOMPLETE (the run is going on or was killed)"
    lines = [f"# Conformance: backend `{backend}` — {verdict}", "",
             f"profile `{profile}`, {seconds:.1f} s", ""]
    for k, v in (header or {}).items():
        lines.append(f"- {k}: {v}")
    lines += ["", "Examples count generated inputs checked; rejected inputs and shrink calls are counted apart. "
              "Worst margin: the largest error / tolerance over passing examples (0: bit-exact).", "",
              "| op | dtype | status | examples | rejected | shrink calls | worst margin | longest input "
              "| tiers s/m/l | seconds | minimal counterexample | reproduce |",
              "|---|---|---|---:|---:|---:|---:|---:|---|---:|---|---|"]
    for r in reports:
        ce = r.counterexample.replace("|", "\\|")[:300]
        tiers = "/".join(str(sum(t.get(k, 0) for t in r.by_dtype.values())) for k in ("small", "medium", "large"))
        lines.append(f"| {r.op} | all | {r.status} | {r.examples} | {r.rejected} | {r.shrink_calls} | "
                     f"{r.worst_margin:.3g} | {max((t['max_n'] for t in r.by_dtype.values()), default=0)} | "
                     f"{tiers} | {r.seconds:.2f} | {ce} | {('`' + r.command + '`') if r.command else ''} |")
        for d, t in r.by_dtype.items():
            lines.append(f"| {r.op} | {d} | | {t['examples']} | {t['rejected']} | {t['shrink_calls']} | "
                         f"{t['worst_margin']:.3g} | {t['max_n']} | "
                         f"{t.get('small', 0)}/{t.get('medium', 0)}/{t.get('large', 0)} | | | |")
    fails = [r for r in reports if r.status in _FAILED]
    if fails:
        lines += ["", "## Failures", ""]
        for r in fails:
            lines += [f"### {r.op} ({r.status})", "", r.message, "", f"Reproduce: `{r.command}`", ""]
    return "\n".join(lines) + "\n"


def write_all(directory, reports, *, backend, profile, seed, s, policy, seconds, versions=None, command="",
              complete=True):
    """Write report.xml (JUnit), report.json and report.md into ``directory``; each states the
    policy and its tolerance, the seed, the versions and the command line. The CLI writes them
    after every op with ``complete=False`` (so a killed run leaves the ops it finished), then
    once more at the end. Each file is replaced atomically (written aside, then renamed)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    doc = to_json(reports, backend=backend, profile=profile, seed=seed, s=s, policy=policy, seconds=seconds,
                  versions=versions, command=command, complete=complete)
    header = {"policy": f"`{policy}`: {doc['tolerance']}", "seed": seed, "s": s, "command": f"`{command}`",
              "versions": ", ".join(f"{k} {v}" for k, v in doc["versions"].items())}
    _replace(d / "report.json", json.dumps(doc, indent=2))
    _replace(d / "report.xml", to_junit(reports, backend=backend, seconds=seconds,
                                        properties={"policy": policy, "tolerance": doc["tolerance"],
                                                    "seed": seed, "s": s, "command": command,
                                                    "complete": doc["complete"],
                                                    **{f"version.{k}": v for k, v in doc["versions"].items()}}))
    _replace(d / "report.md", to_markdown(reports, backend=backend, profile=profile, seconds=seconds,
                                          header=header, complete=complete))
    return d


def _replace(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
