"""Writing into (and reading from) a directory a jail can write: a link planted there is never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stark_mcp.evaluator.sandbox.jail_dirs import JailPathError, copy_file, read_bytes, write_bytes


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"  # the jail's build directory
    folder.mkdir()
    return folder


@pytest.fixture
def host(tmp_path: Path) -> Path:
    folder = tmp_path / "host"  # what a planted link points at: must stay as it was
    folder.mkdir()
    (folder / "precious").write_text("keep")
    return folder


def test_a_plain_write_makes_its_folders_and_mode(work: Path) -> None:
    write_bytes(work, "ext/abc/lib.so", b"ELF", mode=0o555)
    written = work / "ext" / "abc" / "lib.so"
    assert written.read_bytes() == b"ELF" and stat.S_IMODE(written.stat().st_mode) == 0o555


def test_a_link_at_the_file_name_is_replaced_not_followed(work: Path, host: Path) -> None:
    (work / "extensions.json").symlink_to(host / "precious")
    (work / "dangling.json").symlink_to(host / "created-by-us")
    write_bytes(work, "extensions.json", b"{}")
    write_bytes(work, "dangling.json", b"{}")
    assert (host / "precious").read_text() == "keep" and not (host / "created-by-us").exists()
    assert not (work / "extensions.json").is_symlink() and (work / "extensions.json").read_bytes() == b"{}"


def test_a_link_or_file_where_a_folder_goes_is_replaced(work: Path, host: Path, tmp_path: Path) -> None:
    (work / "ext").symlink_to(host)
    (work / "other").write_text("not a folder")
    source = tmp_path / "built.so"
    source.write_bytes(b"library")
    copy_file(source, work, "ext/key/lib.so", mode=0o555)
    write_bytes(work, "other/x", b"1")
    assert sorted(os.listdir(host)) == ["precious"]
    assert (work / "ext" / "key" / "lib.so").read_bytes() == b"library" and not (work / "ext").is_symlink()


def test_a_folder_at_the_file_name_or_a_path_out_is_refused(work: Path) -> None:
    (work / "extensions.json").mkdir()
    with pytest.raises(JailPathError):
        write_bytes(work, "extensions.json", b"{}")
    for bad in ("../escape", "/etc/passwd", "ext/../../x", ""):
        with pytest.raises(JailPathError):
            write_bytes(work, bad, b"x")


def test_a_read_takes_only_a_regular_file_of_bounded_size_through_no_link(work: Path, host: Path) -> None:
    # What a problem's reference jail leaves for the worker to copy to the runners (its init file).
    (work / "out").mkdir()
    (work / "out" / "init.pt").write_bytes(b"saved")
    assert read_bytes(work, "out/init.pt", 100) == b"saved"
    with pytest.raises(JailPathError):
        read_bytes(work, "out/init.pt", 4)  # larger than the limit
    (work / "out" / "init.pt").unlink()
    (work / "out" / "init.pt").symlink_to(host / "precious")  # a host file, through a link
    with pytest.raises(JailPathError):
        read_bytes(work, "out/init.pt", 100)
    (work / "out" / "init.pt").unlink()
    os.mkfifo(work / "out" / "init.pt")  # would block a plain open
    with pytest.raises(JailPathError):
        read_bytes(work, "out/init.pt", 100)
    (work / "elsewhere").symlink_to(host, target_is_directory=True)  # the folder itself a link
    with pytest.raises(JailPathError):
        read_bytes(work, "elsewhere/precious", 100)
    with pytest.raises(JailPathError):
        read_bytes(work, "../host/precious", 100)
