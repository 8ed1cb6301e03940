"""What `myxtts export` refuses, each in one line naming the fix."""
import shutil

import pytest

from myxtts.cli import main


def one_line(capsys, argv) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("myxtts export: error: "), err
    return lines[0]


@pytest.fixture
def argv(voice_run, tmp_path):
    return ["export", "--checkpoint", str(voice_run[0]), "--format", "piper", "--out", str(tmp_path / "v.onnx")]


def test_a_run_without_a_vocoder(voice_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(voice_run[0] / "checkpoints", run / "checkpoints")
    out = tmp_path / "v.onnx"
    line = one_line(capsys, ["export", "--checkpoint", str(run), "--format", "piper", "--out", str(out)])
    assert "no trained vocoder" in line and "myxtts train --stage vocoder" in line
    assert not out.exists()


def test_an_unknown_voice_folder(argv, tmp_path, capsys):
    line = one_line(capsys, argv + ["--voice", f"anna={tmp_path / 'nowhere'}"])
    assert "anna=" in line and "no such folder" in line


def test_an_out_that_cannot_be_written(argv, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    line = one_line(capsys, argv[:-1] + [str(tmp_path / "file" / "v.onnx")])
    assert "--out" in line and "is a file, not a folder" in line
    line = one_line(capsys, argv[:-1] + [str(tmp_path / "v.wav")])
    assert "NAME.onnx" in line


@pytest.mark.parametrize("name", ["bad\udcffname", "tab\there", " "])
def test_a_voice_name_piper_cannot_carry(argv, clone_folder, capsys, name):
    """A name from bytes that are not UTF-8 (argv's lone surrogates), control characters, or
    nothing: named, before any work."""
    line = one_line(capsys, argv + ["--voice", f"{name}={clone_folder}"])
    assert "voice name" in line


def test_a_folder_without_clips(argv, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    line = one_line(capsys, argv + ["--voice", f"anna={tmp_path / 'empty'}"])
    assert "holds no sound files" in line
