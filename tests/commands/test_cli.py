"""One command-line grammar: settings anywhere, defaults in every help, close names for typos,
one-line errors for bad input."""
import subprocess

import pytest

from myxtts.cli import COMMANDS, build_parser, main


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        yield [name], p
        for a in p._actions:
            if getattr(a, "choices", None) and isinstance(a.choices, dict):
                for mode in a.choices:
                    yield [name, mode], a.choices[mode]


def test_every_help_text_renders_and_shows_defaults(capsys):
    seen = set()
    for argv, _ in _subcommands():
        seen.add(argv[0])
        with pytest.raises(SystemExit) as e:
            main([*argv, "--help"])
        assert e.value.code == 0
    assert seen == set(COMMANDS)
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 0/1)" in out and "(default: auto)" in out


def test_settings_stand_anywhere_on_the_line():
    parser = build_parser()
    from myxtts.cli import parse

    args = parse(parser, ["prepare", "DATA", "--out", "C", "audio.sample_rate=16000"])
    assert args.data == "DATA" and args.out == "C" and args.overrides == ["audio.sample_rate=16000"]
    args = parse(parser, ["train", "train.max_steps=5", "--data", "D", "--out", "R", "train.lr=0.1"])
    assert args.overrides == ["train.max_steps=5", "train.lr=0.1"]


def test_a_misspelt_preset_gets_the_closest_name(tmp_path, capsys):
    rc = main(["train", "--config", "tinyy", "--data", str(tmp_path), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "did you mean 'tiny'?" in err and len(err.strip().splitlines()) == 1


def test_settings_on_a_command_without_them_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        main(["cache", "verify", "C", "train.lr=1"])
    assert e.value.code == 2 and "takes no KEY=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("extra, expect", [
    (["--device", "tpu"], "--device tpu"),
    (["--texts", "LATIN1"], "is not UTF-8"),
    (["--out", "FILE/x.wav"], "cannot write the wav"),
])
def test_synthesis_input_errors_are_one_line(tmp_path, myxtts_cmd, extra, expect):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    (tmp_path / "file").write_text("not a folder")
    extra = [e.replace("LATIN1", str(latin)).replace("FILE", str(tmp_path / "file")) for e in extra]
    run = tmp_path / "no-run"
    r = subprocess.run([*myxtts_cmd, "synthesize", "--checkpoint", str(run), "--text", "Hi.", *extra],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
