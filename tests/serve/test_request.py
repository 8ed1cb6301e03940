"""The speech request is declared as data: its ranges are in its schema, and a bad field is the
API's error naming it (the live matrix is test_bad_input.py)."""
import json

import pytest

from myxtts.serve.request import BadRequest, SpeechRequest, parse


class _Voices:
    names = ["neutral"]

    def __contains__(self, name):
        return name in self.names

    def __getitem__(self, name):
        return name


LANGUAGES = ["en-us"]  # the model's, as Synthesizer.languages lists them


def test_the_schema_says_the_ranges():
    props = SpeechRequest.model_json_schema()["properties"]
    assert props["speed"]["minimum"] == 0.25 and props["speed"]["maximum"] == 4.0 and props["speed"]["default"] == 1.0
    assert props["input"]["maxLength"] == 4096
    assert set(props["stream_format"]["enum"]) == {"audio", "sse"}


@pytest.mark.parametrize("fields, param, code", [
    ({"speed": 4.01}, "speed", "invalid_value"),
    ({"speed": "1"}, "speed", "invalid_type"),
    ({"voice": {"id": 3}}, "voice", "invalid_type"),
    ({"seed": 1, "speed": 9}, "seed", "unknown_parameter"),  # an unknown field is named first
    ({"speed": 2.0}, "speed", "unsupported_value"),  # this model has no durations
    ({"language": "fa"}, "language", "unsupported_value"),  # a language the model does not speak
    ({"language": "xx-nowhere"}, "language", "unsupported_value"),
    ({"language": 7}, "language", "invalid_type"),
])
def test_a_bad_field_is_named_with_its_code(fields, param, code):
    body = json.dumps({"input": "Hi.", "voice": "neutral", **fields}).encode()
    with pytest.raises(BadRequest) as e:
        parse(body, _Voices(), LANGUAGES, decoder="autoregressive")
    assert e.value.param == param and e.value.code == code and e.value.status == 400


def test_a_good_request_gets_the_declared_defaults():
    req = parse(json.dumps({"input": "Hi.", "voice": {"id": "neutral"}, "speed": 2}).encode(), _Voices(), LANGUAGES)
    assert (req.voice, req.format, req.speed, req.sse, req.timed) == ("neutral", "mp3", 2.0, False, False)
    assert req.language == "en-us"  # the model's own, unasked
    sse = parse(json.dumps({"input": "Hi.", "voice": "neutral", "stream_format": "sse"}).encode(), _Voices(),
                LANGUAGES)
    assert sse.format == "pcm" and sse.sse
    named = parse(json.dumps({"input": "Hi.", "voice": "neutral", "language": "en-us"}).encode(), _Voices(), LANGUAGES)
    assert named.language == "en-us"


def test_a_language_the_model_lacks_names_the_ones_it_has():
    body = json.dumps({"input": "Hi.", "voice": "neutral", "language": "fa"}).encode()
    with pytest.raises(BadRequest) as e:
        parse(body, _Voices(), ["en-us", "de"])
    assert str(e.value) == "language 'fa': this model speaks en-us, de only" and e.value.param == "language"


def test_a_voice_speaks_its_own_language_unless_the_request_names_one():
    """A speaker of a model of English and Persian: Persian, the language its clips were read in,
    unasked; the model's own for a voice of no known language or of one the model lacks."""
    from myxtts.voice import Voice

    class Voices(_Voices):
        names = ["neutral", "fa-spk1", "de-spk1"]

        def __getitem__(self, name):
            return Voice(name, "training speaker", None, {"neutral": None, "fa-spk1": "fa", "de-spk1": "de"}[name])

    both = ["en-us", "fa"]
    for voice, spoken in (("fa-spk1", "fa"), ("neutral", "en-us"), ("de-spk1", "en-us")):
        assert parse(json.dumps({"input": "Hi.", "voice": voice}).encode(), Voices(), both).language == spoken
    asked = parse(json.dumps({"input": "Hi.", "voice": "fa-spk1", "language": "en-us"}).encode(), Voices(), both)
    assert asked.language == "en-us"
