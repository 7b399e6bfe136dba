"""Machine-wide sandbox uid claims (sandbox/claims.py, jail_uids.JailUid): one place whatever TMPDIR, HOME
and STARK_HOME say, and a free claim with processes of its uid alive is cleaned only of what its dead
owner's record proves was that owner's: anything else of the uid is never signalled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from stark_mcp.evaluator.sandbox.cgroups import CGroup
from stark_mcp.evaluator.sandbox.claims import Claim, Owner, lock_dir, start_time
from stark_mcp.evaluator.sandbox.jail_uids import JailUid
from stark_mcp.evaluator.sandbox.levels import detect

BASE = 65000 + (os.getpid() % 64) * 8


def test_the_lock_directory_ignores_tmpdir_home_and_stark_home(tmp_path) -> None:
    code = "from stark_mcp.evaluator.sandbox.claims import lock_dir; print(lock_dir())"
    seen = set()
    for name in ("a", "b"):
        env = dict(os.environ, TMPDIR=str(tmp_path / name), HOME=str(tmp_path / name),
                   STARK_HOME=str(tmp_path / name / "stark"))
        (tmp_path / name).mkdir()
        seen.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout.strip())
    assert seen == {lock_dir()}
    assert not lock_dir().startswith(str(tmp_path))


def dead_owner() -> Owner:
    proc = subprocess.Popen(["sleep", "0"])
    started = start_time(proc.pid)
    proc.wait()
    return Owner(pid=proc.pid, started=started if started is not None else 1)


def run_as(uid: int) -> subprocess.Popen[bytes]:
    setpriv = shutil.which("setpriv")
    assert setpriv
    return subprocess.Popen([setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "60"])


def leave_record(uid: int, owner: Owner) -> None:
    got = Claim.take("uids", str(uid))
    assert got is not None
    claim, _ = got
    claim.owner = owner
    claim.record()
    claim.release(clean=False)


needs_root = pytest.mark.skipif(
    not (os.geteuid() == 0 and shutil.which("setpriv") and detect().cgroup),
    reason="claims of other uids need root, setpriv and a writable cgroup hierarchy",
)


@needs_root
def test_a_process_of_the_uid_the_dead_owner_cannot_be_proven_to_own_is_left_alone() -> None:
    stranger = run_as(BASE)
    try:
        time.sleep(0.2)
        leave_record(BASE, dead_owner())  # a crashed evaluator's claim, but not this process's owner
        taken = JailUid(BASE)
        try:
            assert taken.uid != BASE  # skipped, not signalled
            assert stranger.poll() is None
        finally:
            taken.release(())
    finally:
        stranger.kill()
        stranger.wait()


@needs_root
def test_what_the_dead_owner_recorded_is_cleaned_and_the_uid_reused() -> None:
    info = detect()
    group = CGroup.create(info.cgroup, f"claimtest-{time.monotonic_ns()}")
    assert group is not None
    leftover = subprocess.Popen(
        ["/bin/sh", "-c", 'echo $$ > "$0" && exec setpriv --reuid=$1 --regid=$1 --clear-groups sleep 60',
         group.procs_file, str(BASE + 4)]
    )
    try:
        time.sleep(0.3)
        owner = dead_owner()
        owner.cgroups = group.proc_paths()  # its jail's group, as the dead owner recorded it
        leave_record(BASE + 4, owner)
        taken = JailUid(BASE + 4)
        try:
            assert taken.uid == BASE + 4
            assert leftover.wait(5) is not None
        finally:
            taken.release(())
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()
        group.remove()


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


MAKE_GROUP = """
import subprocess, sys, time
from stark_mcp.evaluator.sandbox.cgroups import CGroup
from stark_mcp.evaluator.sandbox.levels import detect
group = CGroup.create(detect().cgroup, "sweeptest")
child = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec sleep 60', group.procs_file])
time.sleep(0.3)
print(group.path, child.pid, flush=True)
time.sleep(60)
"""


@needs_root
def test_the_sweep_takes_only_groups_whose_owner_is_gone() -> None:
    from stark_mcp.evaluator.sandbox.cgroups import sweep_stale

    owners = [subprocess.Popen([sys.executable, "-c", MAKE_GROUP], stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    try:
        made = [owner.stdout.readline().split() for owner in owners]  # type: ignore[union-attr]
        (live_group, live_child), (dead_group, dead_child) = [(p, int(c)) for p, c in made]
        owners[1].kill()  # its group and the process in it stay behind
        owners[1].wait()
        sweep_stale(detect().cgroup)
        assert os.path.isdir(live_group)
        assert os.path.exists(f"/proc/{live_child}")
        assert not os.path.exists(os.path.dirname(dead_group))
        deadline = time.monotonic() + 5
        while running(dead_child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(dead_child)
    finally:
        for owner in owners:
            owner.kill()
            owner.wait()
        sweep_stale(detect().cgroup)
