"""Rounds of a host model driving `stark-mcp serve`, with the database carried between machines.

The kernel-quality table (docs/benchmarks/kernels.md) is made by a host's model playing the three
roles through MCP. Device time comes in short calls on a fresh machine, so the work goes in rounds:

    device  (GPU box)  apply the replies of this round with add_child (all runs concurrently), wait for
                       the late baselines, then ask every run for its next step (select_node, then
                       build_context for the role it names) and pack the state folder into $OUT
    prompts (here)     unpack that archive and write next/<problem>/prompt.md (the prompt text exactly
                       as the server gave it) with empty reply files beside it
    local   (here)     for plan steps whose plan.md is written: render the code role's prompt with that
                       plan (build_context only reads the database, so no GPU is needed)
    pack    (here)     gather the written replies into the JSONL file the next device call applies

Each command talks to a real `python3 -m stark_mcp serve` subprocess over stdio with the mcp client;
STARK_HOME is <state>/home, so the database lives in the state folder. Problem files are written
inside the state folder, which is the server's working directory (path arguments must lie there).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sqlite3
import sys
import tarfile
import time
import traceback
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

RUNS_FILE = "runs.json"
APPLIED_FILE = "applied.json"
ARCHIVE = "state.tgz"
LOCAL_ONLY = (".cache",)  # build and baseline caches: machine-specific and large, never carried
MIN_ATTEMPT_S = 150.0  # an add_child is not started with less than this left (nvcc + checks + timing)
PACK_RESERVE_S = 25.0  # kept for the server's shutdown, the checkpoint and the archive
PROMPTS_RESERVE_S = 60.0  # waiting on background work stops this long before the end: the prompts come first


class RoundsError(Exception):
    """Bad input to a rounds command; the message says what to fix."""


class ToolFailed(RoundsError):
    def __init__(self, tool: str, text: str) -> None:
        super().__init__(f"{tool}: {text}")
        self.tool = tool
        self.text = text


# ---- problems and the state folder ------------------------------------------------------------


@dataclass(frozen=True)
class ProblemKey:
    level: int
    problem_id: int

    @classmethod
    def parse(cls, text: str) -> ProblemKey:
        head, _, tail = text.strip().upper().partition("/")
        if not head.startswith("L") or not head[1:].isdigit() or not tail.isdigit():
            raise RoundsError(f"problem {text!r}: write it as L<level>/<id>, e.g. L1/59")
        return cls(int(head[1:]), int(tail))

    @property
    def label(self) -> str:
        return f"L{self.level}/{self.problem_id}"

    @property
    def slug(self) -> str:
        return f"L{self.level}_{self.problem_id}"


def load_problems(path: Path, keys: list[ProblemKey]) -> dict[ProblemKey, dict[str, Any]]:
    wanted = set(keys)
    found: dict[ProblemKey, dict[str, Any]] = {}
    with path.open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                key = ProblemKey(int(row["level"]), int(row["problem_id"]))
                if key in wanted:
                    found[key] = row
    missing = [key.label for key in keys if key not in found]
    if missing:
        raise RoundsError(f"not in {path}: {', '.join(missing)}")
    return found


def read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def write_json(path: Path, value: Any) -> None:
    """Written beside and renamed over, so a kill mid-write leaves the old file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    partial.replace(path)


def round_files(state: Path) -> list[Path]:
    return sorted(state.glob("round-*.json"), key=lambda p: int(p.stem.split("-")[1]))


def latest_round(state: Path) -> dict[str, Any]:
    files = round_files(state)
    if not files:
        raise RoundsError(f"{state} holds no round-N.json: run the device command first")
    return json.loads(files[-1].read_text())


def reply_id(record: dict[str, Any]) -> str:
    body = json.dumps([record["run_id"], record["parent_id"], record.get("action"), record.get("plan"),
                       record["source"]])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def checkpoint(db: Path) -> None:
    """Fold the write-ahead log into the database file, so the file alone is the whole state."""
    if db.exists():
        with sqlite3.connect(db) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def pack_state(state: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / ARCHIVE

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        return None if len(parts) > 1 and parts[1] in LOCAL_ONLY else info

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(state, arcname=state.name, filter=keep)
    return archive


def unpack_state(archive: Path, state: Path) -> None:
    """The device's archive replaces the state folder's database, runs and rounds (next/ is kept)."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        top = {Path(member.name).parts[0] for member in members}
        if len(top) != 1:
            raise RoundsError(f"{archive}: expected one top folder, found {sorted(top)}")
        root = top.pop()
        state.mkdir(parents=True, exist_ok=True)
        for member in members:
            relative = Path(member.name).relative_to(root)
            if member.isdir() or not relative.parts:
                continue
            if not member.isfile() or ".." in relative.parts or relative.is_absolute():
                raise RoundsError(f"{archive}: refusing member {member.name!r}")
            target = state / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
    carried = {Path(member.name).name for member in members}
    for stale in ("stark.db-wal", "stark.db-shm"):  # a local log must not replay over the new file
        if stale not in carried:
            (state / "home" / stale).unlink(missing_ok=True)


# ---- the server -------------------------------------------------------------------------------


def server_params(state: Path, eval_settings: str | None, memory: bool = False) -> StdioServerParameters:
    env = dict(os.environ)
    env["STARK_HOME"] = str(state / "home")
    env["STARK_CACHE_DIR"] = str(state / ".cache")
    # The table measures the host's model: by default no run reads what another run learned.
    env["STARK_MEMORY"] = "1" if memory else "0"
    args = ["-m", "stark_mcp", "serve"]
    if eval_settings:
        args += ["--eval-settings", eval_settings]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(state))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise ToolFailed(tool, text)
    assert result.structured_content is not None
    return result.structured_content


async def bounded(awaitable: Awaitable[Any], deadline: float) -> Any:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left in this round")
    return await asyncio.wait_for(awaitable, timeout=left)


# ---- device -----------------------------------------------------------------------------------


async def create_runs(
    client: Client, state: Path, problems: dict[ProblemKey, dict[str, Any]], runs: dict[str, Any],
    *, device: str, budget: int, language: str | None, deadline: float,
) -> dict[str, str]:
    """One run per problem not yet in runs.json; returns problem -> error for those that failed."""
    folder = state / "problems"
    folder.mkdir(parents=True, exist_ok=True)
    errors: dict[str, str] = {}

    async def create(key: ProblemKey, row: dict[str, Any]) -> None:
        # A one-row JSONL named with its selector, so that the run knows the problem's level and id.
        path = folder / f"{key.slug}.jsonl"
        path.write_text(json.dumps({k: row[k] for k in ("level", "problem_id", "name", "code")}) + "\n")
        arguments: dict[str, Any] = {
            "problem": f"{path}:{key.level}/{key.problem_id}", "device": device, "budget": budget,
            "name": f"{key.label} {row['name']}",
        }
        if language:
            arguments["language"] = language
        try:
            created = await bounded(call(client, "create_run", arguments), deadline)
        except Exception as exc:  # noqa: BLE001 - recorded per problem, the others go on
            errors[key.label] = f"{type(exc).__name__}: {exc}"
            return
        runs[key.label] = {
            "run_id": created["run_id"], "name": row["name"], "level": key.level,
            "problem_id": key.problem_id, "device": created["device"], "language": created["language"],
            "baselines_ms": created["baselines_ms"],
        }
        write_json(state / RUNS_FILE, runs)

    await asyncio.gather(*(create(k, row) for k, row in problems.items() if k.label not in runs))
    return errors


def read_replies(path: Path | None, runs: dict[str, Any]) -> list[dict[str, Any]]:
    if path is None:
        return []
    by_run = {entry["run_id"]: label for label, entry in runs.items()}
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        label = record.get("problem") or by_run.get(record.get("run_id", ""))
        if label not in runs:
            named = record.get("problem") or record.get("run_id")
            raise RoundsError(f"{path}:{number}: unknown problem/run {named}")
        record["problem"] = label
        record["run_id"] = runs[label]["run_id"]
        for field in ("parent_id", "source"):
            if not record.get(field):
                raise RoundsError(f"{path}:{number}: {field} is missing")
        record.setdefault("action", "plan" if record.get("plan") else "debug")
        record["reply_id"] = reply_id(record)
        records.append(record)
    return records


async def apply_reply(
    client: Client, record: dict[str, Any], deadline: float, min_attempt_s: float
) -> dict[str, Any]:
    outcome: dict[str, Any] = {
        "problem": record["problem"], "run_id": record["run_id"], "parent_id": record["parent_id"],
        "action": record["action"], "reply_id": record["reply_id"],
    }
    if deadline - time.monotonic() < min_attempt_s:
        return {**outcome, "applied": False, "error": "not started: too little time left in this round"}
    arguments = {
        "run_id": record["run_id"], "parent_id": record["parent_id"], "source": record["source"],
        "action": record["action"],
    }
    if record["action"] == "plan":
        arguments["plan"] = record.get("plan")
    try:
        child = await bounded(call(client, "add_child", arguments), deadline)
    except Exception as exc:  # noqa: BLE001 - one run's failure leaves the others going
        return {**outcome, "applied": False, "error": f"{type(exc).__name__}: {exc}"}
    outcome.update(
        applied=True, node_id=child["node_id"], status=child["status"], reason=child.get("reason"),
        message=child.get("message", ""), runtime_ms=child.get("runtime_ms"),
        speedups=child.get("speedups", {}), adherence=child.get("adherence"),
        attempts_left=child["attempts_left"],
    )
    try:
        which = {"run_id": record["run_id"], "node_id": child["node_id"]}
        node = await bounded(call(client, "get_node", which), deadline)
        evaluation = node.get("evaluation") or {}
        outcome["sol_fraction"] = evaluation.get("sol_fraction")
        outcome["speed_of_light"] = evaluation.get("speed_of_light")
    except Exception as exc:  # noqa: BLE001 - the verdict is recorded; the detail is optional
        outcome["detail_error"] = str(exc)
    return outcome


async def wait_background(
    client: Client, runs: dict[str, Any], deadline: float, profile_wait_s: float
) -> dict[str, list[str]]:
    """Poll each run's root until the torch.compile baselines timed in the background are in, and
    (GPU runs, for at most ``profile_wait_s``) its profile, which the plan prompt shows; returns what
    is still missing per problem."""
    profile_deadline = min(deadline, time.monotonic() + profile_wait_s)
    while True:
        missing: dict[str, list[str]] = {}
        for label, entry in runs.items():
            try:
                root = await bounded(call(client, "get_node", {"run_id": entry["run_id"], "node_id": "n0"}),
                                     deadline)
            except Exception:  # noqa: BLE001 - reported as still missing
                missing[label] = ["unknown"]
                continue
            waiting = list(root.get("pending_baselines", []))
            if entry.get("device", "").startswith("cuda") and root.get("profile") is None:
                if time.monotonic() < profile_deadline:
                    waiting.append("reference profile")
            if waiting:
                missing[label] = waiting
        if not missing or deadline - time.monotonic() < 5:
            return missing
        await asyncio.sleep(3)


async def next_step(client: Client, label: str, run_id: str, deadline: float) -> dict[str, Any]:
    step: dict[str, Any] = {"problem": label, "run_id": run_id}
    try:
        selection = await bounded(call(client, "select_node", {"run_id": run_id}), deadline)
    except ToolFailed as exc:
        return {**step, "done": True, "why": exc.text}
    except Exception as exc:  # noqa: BLE001
        return {**step, "error": f"{type(exc).__name__}: {exc}"}
    step.update(node_id=selection["node_id"], action=selection["action"], reason=selection["reason"],
                attempts_left=selection["attempts_left"])
    role = "plan" if selection["action"] == "plan" else "debug"
    try:
        prompt = await bounded(call(client, "build_context", {
            "run_id": run_id, "node_id": selection["node_id"], "role": role}), deadline)
    except Exception as exc:  # noqa: BLE001 - `local` can render it from the carried state
        return {**step, "role": role, "error": f"{type(exc).__name__}: {exc}"}
    return {**step, "role": role, "prompt": prompt["prompt"]}


async def board(client: Client, runs: dict[str, Any], deadline: float) -> dict[str, Any]:
    best: dict[str, Any] = {}
    for label, entry in runs.items():
        try:
            entries = (await bounded(call(client, "leaderboard", {"run_id": entry["run_id"], "k": 1}),
                                     deadline))["entries"]
        except Exception:  # noqa: BLE001
            continue
        best[label] = entries[0] if entries else None
    return best


def write_readable(state: Path, number: int, record: dict[str, Any]) -> None:
    folder = state / "rounds" / f"round-{number}"
    for outcome in record["applied"]:
        slug = ProblemKey.parse(outcome["problem"]).slug
        lines = [f"# {outcome['problem']} ({outcome['run_id']}) reply {outcome['reply_id']}", ""]
        for field in ("applied", "node_id", "parent_id", "action", "status", "reason", "runtime_ms",
                      "speedups", "sol_fraction", "speed_of_light", "adherence", "attempts_left", "error"):
            if outcome.get(field) is not None:
                lines.append(f"- {field}: {outcome[field]}")
        if outcome.get("message"):
            lines += ["", "```", outcome["message"], "```"]
        path = folder / slug / f"result-{outcome['reply_id']}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    for step in record["next"]:
        slug = ProblemKey.parse(step["problem"]).slug
        path = folder / slug / "next.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        head = {k: v for k, v in step.items() if k != "prompt"}
        path.write_text(json.dumps(head, indent=2) + "\n\n" + step.get("prompt", "") + "\n")


def summary_table(record: dict[str, Any]) -> str:
    rows = ["| problem | applied | verdict | speedups | sol | next |", "|---|---|---|---|---|---|"]
    applied: dict[str, list[dict[str, Any]]] = {}
    for outcome in record["applied"]:
        applied.setdefault(outcome["problem"], []).append(outcome)
    for step in record["next"]:
        label = step["problem"]
        done = applied.get(label, [])
        verdicts = ", ".join(o.get("status") or ("error" if o.get("error") else "-") for o in done) or "-"
        speed = ", ".join(
            "/".join(f"{k}={v:.2f}" for k, v in o["speedups"].items()) for o in done if o.get("speedups")
        ) or "-"
        sol = ", ".join(f"{o['sol_fraction']:.2f}" for o in done if o.get("sol_fraction")) or "-"
        nxt = "done" if step.get("done") else (
            f"{step.get('role')} @ {step.get('node_id')}" + (" (error)" if step.get("error") else ""))
        rows.append(f"| {label} | {len(done)} | {verdicts} | {speed} | {sol} | {nxt} |")
    return "\n".join(rows)


async def device_round(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.budget_s - PACK_RESERVE_S
    state: Path = args.state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = read_json(state / RUNS_FILE, {})
    applied_ids: list[str] = read_json(state / APPLIED_FILE, [])
    number = len(round_files(state))
    record: dict[str, Any] = {
        "round": number, "device": args.device, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "create_errors": {}, "applied": [], "skipped_replies": [], "waiting_for": {}, "next": [],
        "best": {}, "error": None,
    }
    failed = False
    try:
        keys = [ProblemKey.parse(text) for text in args.problems.split(",") if text.strip()]
        problems = load_problems(args.kernelbench, [k for k in keys if k.label not in runs]) if keys else {}
        replies = read_replies(args.replies, runs)
        async with Client(server_params(state, args.eval_settings, args.memory)) as client:
            record["create_errors"] = await create_runs(
                client, state, problems, runs, device=args.device, budget=args.budget,
                language=args.language, deadline=deadline,
            )
            fresh = [r for r in replies if r["reply_id"] not in applied_ids]
            record["skipped_replies"] = [r["reply_id"] for r in replies if r["reply_id"] in applied_ids]
            outcomes = await asyncio.gather(
                *(apply_reply(client, r, deadline, args.min_attempt_s) for r in fresh)
            )
            record["applied"] = list(outcomes)
            applied_ids += [o["reply_id"] for o in outcomes if o.get("applied")]
            write_json(state / APPLIED_FILE, applied_ids)
            record["waiting_for"] = await wait_background(
                client, runs, deadline - PROMPTS_RESERVE_S, args.profile_wait_s
            )
            record["next"] = list(await asyncio.gather(
                *(next_step(client, label, entry["run_id"], deadline) for label, entry in runs.items())
            ))
            record["best"] = await board(client, runs, deadline + PACK_RESERVE_S / 2)
    except Exception as exc:  # noqa: BLE001 - the state is still saved and packed below
        failed = True
        record["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        record["wall_s"] = round(time.monotonic() - started, 1)
        write_json(state / f"round-{number}.json", record)
        write_readable(state, number, record)
        checkpoint(state / "home" / "stark.db")
        if args.out:
            archive = pack_state(state, args.out)
            (args.out / f"round-{number}.json").write_text(json.dumps(record, indent=2) + "\n")
            print(f"packed {archive} ({archive.stat().st_size} bytes)")
    print(f"\nround {number}: {len(record['applied'])} replies applied, wall {record['wall_s']} s"
          + (f", ERROR {record['error']}" if record["error"] else ""))
    if record["create_errors"]:
        print(f"create_run failed: {record['create_errors']}")
    print(summary_table(record))
    return 1 if failed else 0


# ---- here: prompts, local, pack ---------------------------------------------------------------


def write_prompts(state: Path) -> list[dict[str, Any]]:
    record = latest_round(state)
    nxt = state / "next"
    written = []
    for step in record["next"]:
        folder = nxt / ProblemKey.parse(step["problem"]).slug
        folder.mkdir(parents=True, exist_ok=True)
        before = read_json(folder / "step.json", {})
        if (before.get("round"), before.get("node_id")) == (record["round"], step.get("node_id")):
            continue  # this round's folder is already out: replies written in it are kept
        for old in folder.iterdir():
            old.unlink()
        if step.get("done") or step.get("error"):
            write_json(folder / "step.json", {**step, "round": record["round"]})
            continue
        (folder / "prompt.md").write_text(step["prompt"])
        head = {k: v for k, v in step.items() if k != "prompt"}
        write_json(folder / "step.json", {**head, "round": record["round"]})
        # The reply templates: empty files the host's model fills (pack refuses empty ones).
        if step["action"] == "plan":
            (folder / "plan.md").write_text("")
        (folder / "source.py").write_text("")
        written.append(step)
    return written


async def render_code_prompts(state: Path, memory: bool = False) -> dict[str, str]:
    """build_context(role='code', plan) for every plan step whose plan.md is written."""
    todo = []
    for step_file in sorted((state / "next").glob("*/step.json")):
        step = json.loads(step_file.read_text())
        plan_file = step_file.parent / "plan.md"
        if step.get("action") == "plan" and plan_file.exists() and plan_file.read_text().strip():
            todo.append((step_file.parent, step, plan_file.read_text()))
    results: dict[str, str] = {}
    if not todo:
        return results
    async with Client(server_params(state, None, memory)) as client:
        for folder, step, plan in todo:
            error_file = folder / "code_prompt.error.txt"
            try:
                prompt = await call(client, "build_context", {
                    "run_id": step["run_id"], "node_id": step["node_id"], "role": "code", "plan": plan})
            except ToolFailed as exc:
                error_file.write_text(exc.text + "\n")
                results[step["problem"]] = f"error: {exc.text}"
                continue
            error_file.unlink(missing_ok=True)
            (folder / "code_prompt.md").write_text(prompt["prompt"])
            results[step["problem"]] = "code_prompt.md"
    checkpoint(state / "home" / "stark.db")
    return results


def pack_replies(state: Path, out: Path) -> tuple[int, list[str]]:
    records, missing = [], []
    for step_file in sorted((state / "next").glob("*/step.json")):
        step = json.loads(step_file.read_text())
        if step.get("done") or step.get("error"):
            continue
        folder = step_file.parent
        source = (folder / "source.py").read_text() if (folder / "source.py").exists() else ""
        plan_file = folder / "plan.md"
        plan = plan_file.read_text() if step["action"] == "plan" and plan_file.exists() else None
        if not source.strip() or (step["action"] == "plan" and not (plan or "").strip()):
            missing.append(step["problem"])
            continue
        record = {"problem": step["problem"], "run_id": step["run_id"], "parent_id": step["node_id"],
                  "action": step["action"], "plan": plan, "source": source}
        record["reply_id"] = reply_id(record)
        records.append(record)
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return len(records), missing


def attempts_table(state: Path) -> str:
    """Every attempt of the rounds' runs with its verdict, as a markdown table: read from the state's
    database (runs.json names the runs), so the kernel-quality table can show each verdict."""
    runs = json.loads((state / RUNS_FILE).read_text()) if (state / RUNS_FILE).exists() else {}
    if not runs:
        raise RoundsError(f"{state / RUNS_FILE}: no runs recorded yet (run a device round first)")
    db = sqlite3.connect(f"file:{state / 'home' / 'stark.db'}?mode=ro", uri=True)
    rows = [
        "| problem | run | node | parent | action | verdict | median ms | vs eager | vs compile_default "
        "| fraction of SOL | flags | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    try:
        for label in sorted(runs, key=lambda k: (ProblemKey.parse(k).level, ProblemKey.parse(k).problem_id)):
            run = runs[label]
            run_id = run["run_id"] if isinstance(run, dict) else run
            found = db.execute(
                "SELECT id, parent_id, action, evaluation_json FROM nodes"
                " WHERE run_id = ? AND action != 'root' ORDER BY seq",
                (run_id,),
            ).fetchall()
            for node_id, parent_id, action, evaluation_json in found:
                ev = json.loads(evaluation_json) if evaluation_json else {}
                verdict = ev.get("status", "not evaluated") + (f"/{ev['reason']}" if ev.get("reason") else "")
                median = (ev.get("runtime") or {}).get("median_ms")
                speedups = ev.get("speedups") or {}
                sol = (ev.get("sol") or {}).get("fraction")

                def cell(value: float | None, spec: str) -> str:
                    return "" if value is None else format(value, spec)

                rows.append(
                    f"| {label} | `{run_id}` | {node_id} | {parent_id} | {action} | {verdict} "
                    f"| {cell(median, '.4g')} | {cell(speedups.get('eager'), '.3g')} "
                    f"| {cell(speedups.get('compile_default'), '.3g')} | {cell(sol, '.0%')} "
                    f"| {', '.join(ev.get('flags') or [])} | {cell(ev.get('wall_seconds'), '.0f')} |"
                )
    finally:
        db.close()
    return "\n".join(rows) + "\n"


# ---- command line -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    device = sub.add_parser("device", help="on the GPU box: apply replies, next prompts, pack the state")
    device.add_argument("--state", type=Path, required=True)
    device.add_argument("--replies", type=Path, default=None, help="JSONL from `pack` (none in round 0)")
    device.add_argument("--problems", default="", help="comma-separated L<level>/<id>, e.g. L1/59,L2/51")
    device.add_argument("--kernelbench", type=Path, default=Path("problems.jsonl"))
    device.add_argument("--budget-s", type=float, default=480.0)
    device.add_argument("--budget", type=int, default=6, help="attempts per run")
    device.add_argument("--device", default="cuda")
    device.add_argument("--language", default=None)
    device.add_argument("--eval-settings", default=None, help="JSON passed to `serve --eval-settings`")
    device.add_argument("--min-attempt-s", type=float, default=MIN_ATTEMPT_S)
    device.add_argument("--profile-wait-s", type=float, default=60.0,
                        help="how long to wait for the references' profiles (GPU) before the prompts")
    device.add_argument("--memory", action="store_true", help="let runs read what other runs learned")
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    device.add_argument("--out", type=Path, default=out, help="where the archive goes (default: $OUT)")
    prompts = sub.add_parser("prompts", help="here: unpack the device's archive, write next/<problem>/")
    prompts.add_argument("--state", type=Path, required=True)
    prompts.add_argument("--from", dest="archive", type=Path, default=None, help="the device's state.tgz")
    local = sub.add_parser("local", help="here: render the code prompts for the plans written")
    local.add_argument("--state", type=Path, required=True)
    table = sub.add_parser("table", help="here: every attempt's verdict, a markdown table on stdout")
    table.add_argument("--state", type=Path, required=True)
    pack = sub.add_parser("pack", help="here: gather the written replies into a JSONL file")
    pack.add_argument("--state", type=Path, required=True)
    pack.add_argument("--out", type=Path, required=True)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "device":
            return asyncio.run(device_round(args))
        state = args.state.resolve()
        if args.command == "prompts":
            if args.archive:
                unpack_state(args.archive, state)
            for step in write_prompts(state):
                print(f"{step['problem']}: {step['role']} at {step['node_id']} -> next/"
                      f"{ProblemKey.parse(step['problem']).slug}/prompt.md")
            return 0
        if args.command == "local":
            for label, what in asyncio.run(render_code_prompts(state)).items():
                print(f"{label}: {what}")
            return 0
        if args.command == "table":
            print(attempts_table(state), end="")
            return 0
        count, missing = pack_replies(state, args.out)
        rest = f"; not written yet: {', '.join(missing)}" if missing else ""
        print(f"{count} replies -> {args.out}{rest}")
        return 0
    except RoundsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
