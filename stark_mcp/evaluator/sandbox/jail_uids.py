"""The sandbox uid a jail runs as (``JailUid``): one no other evaluator on this machine uses right
now, claimed machine-wide (``claims.py``) for as long as the jail lives, and the processes of that
uid which its claim proves are the jail's, killed by pidfd. Standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from stark_mcp.evaluator.sandbox.cgroups import CGroup, dead_owner
from stark_mcp.evaluator.sandbox.claims import Claim, ClaimError, Owner, processes_of
from stark_mcp.evaluator.sandbox.jail_spec import JailError

UID_COUNT = 512


class JailUid:
    """A uid no other evaluator on this machine uses right now: a machine-wide claim (``claims.py``)
    held for as long as the jail lives, whose record says what of that uid is this jail's."""

    def __init__(self, base: int) -> None:
        taken = _passwd_uids()
        for uid in range(base, base + UID_COUNT):
            if uid in taken:
                continue
            try:
                got = Claim.take("uids", str(uid))
            except (OSError, ClaimError) as exc:
                raise JailError(f"cannot claim a sandbox uid: {exc}") from None
            if got is None:
                continue  # another evaluator's, right now
            claim, previous = got
            if processes_of(uid) and previous is not None and not previous.owner_alive():
                # A SIGKILLed owner's leftovers: what its record proves was its jail, and only that.
                for path in previous.cgroup_dirs:
                    if dead_owner(os.path.basename(os.path.dirname(path))):
                        CGroup(path).remove(timeout=2.0)
                _kill_owned(uid, previous)
            if processes_of(uid):  # someone's we cannot prove are leftovers: never signalled, skipped
                claim.release(clean=False)
                continue
            claim.record()
            self.uid, self.claim = uid, claim
            return
        raise JailError(f"no free sandbox uid in {base}..{base + UID_COUNT - 1}")

    def note(self, **fields: Any) -> None:
        """Add what the jail is made of to the claim's record, as it becomes known."""
        for key, value in fields.items():
            setattr(self.claim.owner, key, value)
        self.claim.record()

    def owned(self, ancestors: tuple[int, ...]) -> list[int]:
        owner = self.claim.owner
        return [pid for pid in processes_of(self.uid) if owner.owns(pid, ancestors)]

    def kill_owned(self, ancestors: tuple[int, ...]) -> None:
        _kill_owned(self.uid, self.claim.owner, ancestors)

    def release(self, ancestors: tuple[int, ...]) -> None:
        self.kill_owned(ancestors)
        self.claim.release(clean=not processes_of(self.uid))


def _passwd_uids() -> set[int]:
    try:
        with open("/etc/passwd") as fh:
            return {int(line.split(":")[2]) for line in fh if line.count(":") >= 3}
    except (OSError, ValueError):
        return set()


def _kill_owned(uid: int, owner: Owner, ancestors: tuple[int, ...] = (), rounds: int = 50) -> None:
    """SIGKILL every process of ``uid`` that ``owner`` provably owns, until none is left (a fork bomb
    needs several rounds). Each is held by a pidfd while it is checked, so the signal reaches the
    process that was checked, never a later one given its pid."""
    for _ in range(rounds):
        found = False
        for pid in processes_of(uid):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if owner.owns(pid, ancestors):
                    found = True
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)
        if not found:
            return
        time.sleep(0.005)

