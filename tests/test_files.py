"""A file is replaced whole or not at all, with the permissions any new file gets."""
import os

import pytest

from myxtts.files import atomic_folder, atomic_write, current_umask, remove_stale_temporaries, temporary, write_json


def test_a_writer_that_fails_leaves_the_old_file_and_no_temp(tmp_path):
    path = write_json(tmp_path / "summary.json", {"steps": 3})
    with pytest.raises(RuntimeError), atomic_write(path) as tmp:
        tmp.write_text('{"ste')  # torn mid-write
        raise RuntimeError("killed")
    assert path.read_text() == '{\n "steps": 3\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_writer_that_ends_replaces_the_file_with_the_usual_permissions(tmp_path):
    path = tmp_path / "deep" / "voice.onnx"  # folders made
    with atomic_write(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)  # as safetensors creates its files
        os.write(fd, b"weights")
        os.close(fd)
    assert path.read_bytes() == b"weights" and [p.name for p in path.parent.iterdir()] == ["voice.onnx"]
    assert path.stat().st_mode & 0o777 == 0o666 & ~current_umask()


def test_a_folder_is_replaced_whole_or_left_as_it_was(tmp_path):
    final = tmp_path / "checkpoints" / "step-1"
    with atomic_folder(final) as tmp:
        (tmp / "model.safetensors").write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_folder(final) as tmp:
        (tmp / "model.safetensors").write_bytes(b"new, half")
        raise RuntimeError("killed")
    assert [p.name for p in final.parent.iterdir()] == ["step-1"]  # no temporary left beside it
    assert (final / "model.safetensors").read_bytes() == b"old"
    with atomic_folder(final) as tmp:
        (tmp / "state.pt").write_bytes(b"new")
    assert [p.name for p in final.iterdir()] == ["state.pt"]  # the old folder's files are gone


def test_what_a_killed_writer_left_is_removed_and_nothing_else(tmp_path):
    (tmp_path / "00001").mkdir()
    temporary(tmp_path / "00002").mkdir()
    temporary(tmp_path / "meta.json").write_text("{")
    remove_stale_temporaries(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["00001"]
