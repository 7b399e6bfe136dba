"""Build a sandbox from inside a forked process: what bubblewrap does between its clone and its exec.

The forked launcher (``zygote.py``) runs these steps in a child of a process that has already
imported torch, so a runner starts without importing it again. The child ends up where bubblewrap's
child would: new mount, PID, network, IPC, UTS and cgroup namespaces, the host read-only under the
same mount plan (``layout.py``), a private /dev and /proc, loopback up, a uid of the jail's own with
no capabilities, no new privileges, and only the descriptors it was given. Root only (the forked
launcher is used only where the jail runs as root, as bubblewrap then does without a user
namespace). Linux only; standard library and ctypes.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import platform
import signal
import socket
import struct

from stark_mcp.evaluator.sandbox.layout import MountStep

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
JAIL_NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_SILENT, MS_PRIVATE = 16384, 32768, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MNT_DETACH = 2
_OPTION_FLAGS = {
    "ro": MS_RDONLY,
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_CAPBSET_DROP = 1, 4, 15, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}
_CAPSET = {"x86_64": 126, "aarch64": 91, "ppc64le": 184}

BASE = "/tmp"  # a tmpfs over it holds the new root while it is built (this mount namespace only)
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")

_libc = ctypes.CDLL(None, use_errno=True)


class EnterError(OSError):
    """A step of building the sandbox failed; the message names the step."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise EnterError(errno, f"{what}: {os.strerror(errno)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def _mount(src: str | None, dest: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    result = _libc.mount(
        None if src is None else src.encode(),
        dest.encode(),
        None if fstype is None else fstype.encode(),
        ctypes.c_ulong(flags),
        None if data is None else data.encode(),
    )
    _check(result, f"mount {fstype or 'bind'} {src or ''} on {dest}")


def _umount(path: str) -> None:
    _check(_libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def _pivot_root(new: str, old: str) -> None:
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise EnterError(0, f"pivot_root: unknown syscall number on {platform.machine()}")
    _check(_libc.syscall(ctypes.c_long(number), new.encode(), old.encode()), f"pivot_root {new}")


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(arg3), 0, 0), f"prctl({option})")


def set_name(name: str) -> None:
    """The name ``ps`` and ``top`` show (15 bytes): a forked process keeps the zygote's command line."""
    _libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


# ---- the filesystem -------------------------------------------------------------------------------


def build_root(steps: list[MountStep], chdir: str) -> None:
    """Make ``steps`` this mount namespace's root, then ``chdir``. As bubblewrap does: a tmpfs holds
    ``newroot`` (built from the steps) and ``oldroot`` (the host's root, where binds are read from),
    the old root is detached, and ``newroot`` becomes ``/``."""
    _mount(None, "/", None, MS_SILENT | MS_REC | MS_PRIVATE)  # nothing propagates back to the host
    proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)  # mountinfo, once / moves
    _mount("tmpfs", BASE, "tmpfs", MS_NODEV | MS_NOSUID, "mode=0755")
    os.chdir(BASE)
    os.mkdir("newroot", 0o755)
    os.mkdir("oldroot", 0o755)
    _mount("newroot", "newroot", None, MS_SILENT | MS_BIND | MS_REC)
    _pivot_root(BASE, "oldroot")
    os.chdir("/")
    for step in steps:
        _perform(step, proc)
    os.close(proc)
    _umount("/oldroot")
    os.chdir("/newroot")
    _pivot_root(".", ".")
    _umount(".")
    os.chdir(chdir)


def _perform(step: MountStep, proc: int) -> None:
    dest = "/newroot" + step.dest.rstrip("/")
    if step.kind in ("ro-bind", "bind", "dev-bind"):
        src = "/oldroot" + str(step.src).rstrip("/")
        if not os.path.lexists(src):
            raise EnterError(2, f"cannot bind {step.src}: it does not exist")
        if os.path.isdir(src):
            os.makedirs(dest, exist_ok=True)
        else:
            _ensure_file(dest)
        _bind(src, dest, proc, read_only=step.kind == "ro-bind", devices=step.kind == "dev-bind")
    elif step.kind == "tmpfs":
        os.makedirs(dest, exist_ok=True)
        options = f"mode={step.perms if step.perms is not None else 0o755:o}"
        if step.size is not None:
            options += f",size={step.size}"
        _mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, options)
    elif step.kind == "dir":
        if not os.path.isdir(dest):
            os.makedirs(dest, exist_ok=True)
            os.chmod(dest, step.perms if step.perms is not None else 0o755)
    elif step.kind == "proc":
        os.makedirs(dest, exist_ok=True)
        _mount("proc", dest, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for name in PROC_READ_ONLY:  # the host's knobs stay out of reach, as under bubblewrap
            path = f"{dest}/{name}"
            if os.path.exists(path):
                _bind(path, path, proc, read_only=True, devices=False)
    elif step.kind == "dev":
        _make_dev(dest, proc)
    else:
        raise EnterError(0, f"unknown mount step {step.kind}")


def _ensure_file(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o444))


def _bind(src: str, dest: str, proc: int, read_only: bool, devices: bool) -> None:
    """Bind ``src`` (and every mount under it) on ``dest``, then remount each of them nosuid, nodev
    unless ``devices``, read-only if asked, keeping the flags each already had."""
    _mount(src, dest, None, MS_SILENT | MS_BIND | MS_REC)
    extra = MS_NOSUID | (0 if devices else MS_NODEV) | (MS_RDONLY if read_only else 0)
    for point, flags in _mounts_under(dest, proc):
        wanted = flags | extra
        if wanted == flags:
            continue
        try:
            _mount("none", point, None, MS_SILENT | MS_BIND | MS_REMOUNT | wanted)
        except EnterError as exc:
            if exc.errno != 13:  # EACCES: a mount we cannot even look at is out of reach anyway
                raise


def _mounts_under(path: str, proc: int) -> list[tuple[str, int]]:
    """(mount point, flags) of the mount just made on ``path`` and of every mount below it in its own
    tree, outermost first. By mount ids, not by path: an earlier mount under ``path`` that the new
    one covers is not part of it (and cannot be remounted through it)."""
    rows = []
    with open(os.open("self/mountinfo", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)) as fh:
        for line in fh:
            fields = line.split()
            flags = 0
            for option in fields[5].split(","):
                flags |= _OPTION_FLAGS.get(option, 0)
            rows.append((int(fields[0]), int(fields[1]), _unescape(fields[4]), flags))
    tops = [row for row in rows if row[2] == path]
    if not tops:
        return []
    tree, frontier = [tops[-1]], {tops[-1][0]}
    while frontier:
        children = [row for row in rows if row[1] in frontier and row[0] not in frontier]
        tree += children
        frontier = {row[0] for row in children}
    return [(point, flags) for _, _, point, flags in tree]


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 4 <= len(text) and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _make_dev(dest: str, proc: int) -> None:
    """A small /dev: the harmless nodes bound from the host, its own pseudo-terminals, the usual links."""
    os.makedirs(dest, exist_ok=True)
    _mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")  # the nodes are binds
    for node in DEV_NODES:
        host = f"/oldroot/dev/{node}"
        if os.path.exists(host):
            _ensure_file(f"{dest}/{node}")
            _bind(host, f"{dest}/{node}", proc, read_only=False, devices=True)
    for name, target in (
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("fd", "/proc/self/fd"),
        ("core", "/proc/kcore"),
    ):
        os.symlink(target, f"{dest}/{name}")
    os.mkdir(f"{dest}/shm", 0o755)
    os.mkdir(f"{dest}/pts", 0o755)
    _mount("devpts", f"{dest}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    os.symlink("pts/ptmx", f"{dest}/ptmx")


def loopback_up() -> None:
    """A new network namespace has only ``lo``, and it is down: bubblewrap brings it up."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, 0x8913, request))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags | 0x1 | 0x40))  # SIOCSIFFLAGS


# ---- the process ----------------------------------------------------------------------------------


def drop_privileges(uid: int | None) -> None:
    """Become ``uid`` (no groups) with no capability in any set, no way to gain one back, and death
    with the parent (bubblewrap's ``--die-with-parent``; a change of uid clears it, so it comes last).
    Without ``uid`` (a root jail's init) only the capabilities go."""
    last = _last_cap()
    for cap in range(last + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except EnterError as exc:
            if exc.errno != 22:  # EINVAL: a capability this kernel does not know
                raise
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _clear_capabilities()
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except EnterError:
        pass  # kernels before 4.3 have no ambient set
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    # A change of uid marks the process undumpable, which makes its own /proc entries root's; a
    # process started by exec (as under bubblewrap) is dumpable.
    prctl(PR_SET_DUMPABLE, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 40


def _clear_capabilities() -> None:
    number = _CAPSET.get(platform.machine())
    if number is None:
        raise EnterError(0, f"capset: unknown syscall number on {platform.machine()}")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for both 32-bit halves: none
    _check(_libc.syscall(ctypes.c_long(number), header, data), "capset")


def place_fds(targets: dict[int, int], stdin: int | None, stdout: int, stderr: int) -> None:
    """Put each descriptor ``fd`` at ``targets[fd]`` and stdio at 0-2, and close every other one."""
    wanted = {**targets, stdout: 1, stderr: 2}
    floor = max([*wanted.values(), *wanted.keys(), 3]) + 1
    pairs = [(stdout, 1), (stderr, 2), *targets.items()]
    # Every source moves above every number first: a source may sit where another one goes.
    moved = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd, _ in pairs}
    for fd, at in pairs:
        os.dup2(moved[fd], at, inheritable=True)
    # As bubblewrap's jails get it from subprocess.DEVNULL. The launcher closed 0 before, so the open
    # may land on 0 itself, close-on-exec: dup2 onto itself would leave that flag, and every program
    # the jail started had no stdin (nvcc then fails: "failed to preprocess host compiler properties").
    null = os.open("/dev/null", os.O_RDWR) if stdin is None else stdin
    if null != 0:
        os.dup2(null, 0, inheritable=True)
    os.set_inheritable(0, True)
    close_fds_except({0, 1, 2, *targets.values()})
    for fd in targets.values():
        os.set_inheritable(fd, True)


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd") if name.isdigit()]


# glibc reads these when a process starts; a forked one sets them itself (mallopt's parameter numbers).
_MALLOC_PARAMS = {
    "MALLOC_TRIM_THRESHOLD_": -1,
    "MALLOC_TOP_PAD_": -2,
    "MALLOC_MMAP_THRESHOLD_": -3,
    "MALLOC_MMAP_MAX_": -4,
    "MALLOC_ARENA_TEST": -7,
    "MALLOC_ARENA_MAX": -8,
}


def apply_malloc_settings(env: dict[str, str]) -> None:
    """What ``MALLOC_*`` in ``env`` would have set in a fresh process, set in this one."""
    for name, param in _MALLOC_PARAMS.items():
        if name in env:
            if _libc.mallopt(ctypes.c_int(param), ctypes.c_int(int(env[name]))) != 1:
                raise EnterError(0, f"mallopt {name}={env[name]} was refused")


def close_fds_except(keep: set[int]) -> None:
    for fd in _open_fds():
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
