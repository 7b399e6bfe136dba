#!/usr/bin/env python3
"""One command for a lent GPU box: environment, the GPU tests as a table, and the evaluator benchmark.

    python3 tools/gpu_check.py                 # everything, about 9 minutes at most
    python3 tools/gpu_check.py --skip-bench    # only the GPU tests
    python3 tools/gpu_check.py --dry-run       # no GPU needed: checks this script and its tools

Steps, each announced on its own line and bounded by a timeout (nothing here can hang):
  (a) environment: GPU, driver, torch, CUDA, nvcc, triton, pydantic versions;
  (b) ``pytest tests/gpu`` with a junit report, then a table: test, expected verdict, got, seconds;
  (c) ``tools/bench_evaluator.py`` (its own table and JSON);
  (d) when $OUT is set (or --out is given), the files gpu_check.log (written as it goes, so it
      survives a kill), gpu_check.md, gpu_tests.xml and bench_evaluator.json are written there.
Exit status: 0 when every step ran and passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
GRACE_S = 20.0  # after an interrupt, time for a run to kill its own children before SIGKILL


class Transcript:
    """Everything printed goes to stdout and, line by line, to a log file (kept even if we are killed)."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()
        self.log = open(log_path, "w", encoding="utf-8", buffering=1) if log_path is not None else None

    def say(self, text: str = "") -> None:
        with self.lock:
            for line in text.splitlines() or [""]:
                self.lines.append(line)
                print(line, flush=True)
                if self.log is not None:
                    self.log.write(line + "\n")

    def step(self, text: str) -> None:
        self.say(f"[gpu_check {time.strftime('%H:%M:%S')}] {text}")

    def text(self) -> str:
        with self.lock:
            return "\n".join(self.lines) + "\n"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _default_sigint() -> None:
    """In the child: the interrupt below must reach it, and a child of a shell's background job (this
    tool started with ``&``, or from such a job) would inherit SIGINT ignored, which Python keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_streamed(out: Transcript, argv: list[str], timeout_s: float, env: dict[str, str] | None = None,
                 prefix: str = "  | ") -> tuple[int | None, float]:
    """Run a command in its own process group, echo its output live, kill the group at the deadline."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                            start_new_session=True, preexec_fn=_default_sigint)

    def pump(stream: TextIO) -> None:
        for line in stream:
            out.say(prefix + line.rstrip("\n"))

    reader = threading.Thread(target=pump, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # SIGINT first: asyncio.run then cancels the evaluations, and the evaluator kills its own
        # children, which live in sessions of their own that a kill of this group would not reach.
        out.step(f"TIMEOUT after {timeout_s:.0f}s: interrupting {' '.join(argv[1:4])} ...")
        _signal_group(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            out.step(f"still running after {GRACE_S:.0f}s more: SIGKILL")
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        reader.join(timeout=5)
        return None, time.monotonic() - t0
    reader.join(timeout=10)
    return proc.returncode, time.monotonic() - t0


def capture(argv: list[str], timeout_s: float = 30.0) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({type(exc).__name__})"
    text = (proc.stdout or proc.stderr).strip()
    return text if text else f"no output (rc {proc.returncode})"


def environment(out: Transcript) -> dict[str, str]:
    env: dict[str, str] = {"python": sys.version.split()[0], "executable": sys.executable}
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch.version.cuda"] = str(torch.version.cuda)
        env["cuda available"] = str(torch.cuda.is_available())
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            l2_mib = getattr(props, "L2_cache_size", 0) / 2**20
            env["gpu"] = (f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs, "
                          f"{props.total_memory / 2**30:.0f} GiB, L2 {l2_mib:.0f} MiB)")
            env["gpu count"] = str(torch.cuda.device_count())
    except Exception as exc:
        env["torch"] = f"import failed: {exc}"
    for name in ("triton", "pydantic", "pytest", "anyio"):
        try:
            module = __import__(name)
            env[name] = str(getattr(module, "__version__", "present"))
        except Exception as exc:
            env[name] = f"missing ({type(exc).__name__})"
    nvcc = capture(["nvcc", "--version"]).splitlines()
    env["nvcc"] = nvcc[-2].strip() if len(nvcc) >= 2 else (nvcc[0] if nvcc else "unavailable")
    env["driver, sm clock, max sm clock, temperature"] = capture(
        ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,temperature.gpu",
         "--format=csv,noheader"])
    env["cores"] = str(os.cpu_count())
    for key, value in env.items():
        out.say(f"  {key:>18}: {value}")
    return env


def junit_rows(path: Path) -> list[dict[str, Any]]:
    """One row per test case: name, outcome, seconds and the expected/got properties it recorded."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        outcome = "passed"
        message = ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[tag]
                message = (node.get("message") or "").splitlines()[0][:160] if node.get("message") else ""
                break
        rows.append({"test": case.get("name", "?"), "outcome": outcome, "message": message,
                     "class": props.get("class", ""), "trust": props.get("trust", ""),
                     "expected": props.get("expected", ""), "got": props.get("got", ""),
                     "seconds": props.get("seconds", ""), "wall_s": props.get("wall_s", ""),
                     "median_ms": props.get("median_ms", ""),
                     "test_time_s": float(case.get("time", "0") or 0)})
    return rows


def test_table(rows: list[dict[str, Any]]) -> str:
    # phases s: the evaluation's own phases; wall s: the await, including queueing behind others.
    plain = [r for r in rows if not r["class"]]
    lines = ["| test | expected | got | result | phases s | wall s | median ms |",
             "|---|---|---|---|---|---|---|"]
    for r in plain:
        result = r["outcome"] + (f": {r['message']}" if r["message"] and r["outcome"] != "passed" else "")
        lines.append(f"| {r['test']} | {r['expected']} | {r['got']} | {result.replace('|', '/')} | "
                     f"{r['seconds']} | {r['wall_s']} | {r['median_ms']} |")
    adversarial = [r for r in rows if r["class"]]
    if adversarial:
        lines += ["", "| adversarial case | class | expected | got | result | wall s | trust |",
                  "|---|---|---|---|---|---|---|"]
        for r in adversarial:
            name = r["test"].removeprefix("test_gpu_case[").removesuffix("]")
            lines.append(f"| {name} | {r['class']} | {r['expected'].replace('|', '/')} | "
                         f"{r['got'].replace('|', '/')} | {r['outcome']} | {r['wall_s']} | {r['trust']} |")
    return "\n".join(lines)


def child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # The repository root must be importable even without an editable install.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU needed: environment, GPU tests (they skip), bench --dry-run")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--tests-timeout", type=float, default=300.0, help="seconds for pytest tests/gpu")
    parser.add_argument("--tests", nargs="+", default=["tests/gpu", "tests/adversarial/test_gpu_suite.py"],
                        help="test paths (default: tests/gpu and the GPU adversarial suite)")
    parser.add_argument("--bench-timeout", type=float, default=210.0, help="seconds for bench_evaluator.py")
    parser.add_argument("--out", type=Path, default=None, help="folder for the report files (default: $OUT)")
    args = parser.parse_args(argv)
    out_dir = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    work = out_dir if out_dir is not None else Path(os.environ.get("TMPDIR", "/tmp")) / "stark-gpu-check"
    work.mkdir(parents=True, exist_ok=True)

    out = Transcript(out_dir / "gpu_check.log" if out_dir is not None else None)
    ok = True
    sections: list[str] = []

    def write_report() -> None:  # after every step, so a killed run still leaves what it found
        if out_dir is not None:
            report = "# gpu_check\n\n" + "\n\n".join(sections) + "\n"
            (out_dir / "gpu_check.md").write_text(report, encoding="utf-8")
    out.step(f"(a) environment{' [dry run]' if args.dry_run else ''}")
    env = environment(out)
    sections.append("## Environment\n\n" + "\n".join(f"- {k}: {v}" for k, v in env.items()))
    write_report()
    if not args.dry_run and env.get("cuda available") != "True":
        out.step("no CUDA device visible: the GPU tests would only skip; use --dry-run to check the script")
        ok = False

    if not args.skip_tests:
        junit = work / "gpu_tests.xml"
        junit.unlink(missing_ok=True)
        argv_tests = [sys.executable, "-m", "pytest", *args.tests,
                      "-m", "gpu", "-s", "-q", "-n", "0",  # one at a time: they time one GPU
                      "-p", "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit1"]
        out.step(f"(b) GPU tests: {' '.join(argv_tests[1:])} (timeout {args.tests_timeout:.0f}s)")
        rc, seconds = run_streamed(out, argv_tests, args.tests_timeout, env=child_env())
        out.step(f"(b) pytest exit {rc if rc is not None else 'TIMEOUT'} after {seconds:.0f}s")
        if junit.exists():
            table = test_table(junit_rows(junit))
            out.say(table)
            sections.append(f"## GPU tests (pytest exit {rc}, {seconds:.0f} s)\n\n{table}")
        else:
            out.step("(b) no junit report was written")
            sections.append(f"## GPU tests\n\nno junit report (pytest exit {rc}, {seconds:.0f} s)")
        ok = ok and rc == 0
        write_report()

    if not args.skip_bench:
        bench_json = work / "bench_evaluator.json"
        bench_md = work / "bench_evaluator.md"
        argv_bench = [sys.executable, "tools/bench_evaluator.py", "--json", str(bench_json),
                      "--markdown", str(bench_md)] + (["--dry-run"] if args.dry_run else [])
        out.step(f"(c) benchmark: {' '.join(argv_bench[1:])} (timeout {args.bench_timeout:.0f}s)")
        rc, seconds = run_streamed(out, argv_bench, args.bench_timeout, env=child_env())
        out.step(f"(c) bench exit {rc if rc is not None else 'TIMEOUT'} after {seconds:.0f}s")
        if bench_md.exists():
            sections.append(f"## Evaluator benchmark (exit {rc}, {seconds:.0f} s)\n\n{bench_md.read_text()}")
            bench_md.unlink()  # its table is in gpu_check.md; keep $OUT to a few files
        ok = ok and rc == 0
        write_report()

    out.step(f"done: {'all steps passed' if ok else 'SOME STEPS FAILED'}")
    if out_dir is not None:
        written = sorted(p.name for p in out_dir.iterdir() if p.is_file())
        out.step(f"(d) wrote {', '.join(written)} to {out_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
