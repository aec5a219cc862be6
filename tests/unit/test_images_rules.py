"""The images doors' pure parts: the multipart form, each family's limits, the form an attempt sends, pricing."""

from __future__ import annotations

from decimal import Decimal

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.images_relay import generated
from switchyard.actors.ledger.counts import TokenCounts
from switchyard.actors.ledger.pricing import cost_of
from switchyard.actors.uploads import Upload, Uploads, encode_form
from switchyard.config.metadata import Pricing
from switchyard.protocol.doors.image_rules import EDIT_MODELS, check_allowed, check_request
from switchyard.protocol.http.multipart import parse_form

PNG = b"\x89PNG\r\n\x1a\n--not-a-boundary\r\n"


def form(fields: dict, *files: Upload) -> tuple[bytes, str]:
    uploads = Uploads.of(tuple(files))
    return encode_form(fields, uploads), uploads.content_type


def refusal(fn, *args, **kwargs) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as err:
        fn(*args, **kwargs)
    return err.value


def test_a_form_written_for_an_attempt_reads_back_as_its_fields_and_files():
    image = Upload("image", "a.png", "image/png", PNG)
    body, ctype = form({"model": "dall-e-2", "n": 2, "prompt": "ü"}, image)
    assert parse_form(body, ctype) == ({"model": "dall-e-2", "n": "2", "prompt": "ü"}, (image,))


def test_the_boundary_never_occurs_inside_a_file():
    uploads = Uploads.of((Upload("image", "a.png", "image/png", PNG),))
    assert uploads.boundary.encode() not in PNG


def test_a_body_that_is_not_multipart_is_refused_naming_the_content_type():
    err = refusal(parse_form, b"{}", "application/json")
    assert (err.param, err.code) == ("content-type", "invalid_content_type")


def test_a_form_cut_before_its_closing_boundary_is_refused():
    body, ctype = form({"model": "dall-e-2"})
    assert refusal(parse_form, body[:-8], ctype).code == "invalid_multipart"


def test_a_text_field_sent_twice_is_refused_naming_it():
    body, ctype = form({"model": "dall-e-2"})
    doubled = body.replace(b"--\r\n", b"\r\n").rstrip(b"\r\n") + body[body.index(b"\r\n") :]
    err = refusal(parse_form, doubled, ctype)
    assert (err.param, err.code) == ("model", "invalid_multipart")


def test_edits_and_variations_judge_the_name_the_client_sent():
    check_allowed("gpt-image-1", EDIT_MODELS, "/v1/images/edits")
    err = refusal(check_allowed, "my-alias", ("dall-e-2",), "/v1/images/variations")
    assert (err.param, err.code) == ("model", "unsupported_model")


@pytest.mark.parametrize(("model", "payload", "param"), [
    ("dall-e-3", {"prompt": "x", "n": 2}, "n"),
    ("dall-e-3", {"prompt": "x", "size": "512x512"}, "size"),
    ("dall-e-3", {"prompt": "x", "quality": "ultra"}, "quality"),
    ("dall-e-2", {"prompt": "x" * 1001}, "prompt"),
    ("gpt-image-1-mini", {"prompt": "x", "size": "1792x1024"}, "size"),
    ("local-sd", {"prompt": "x", "n": 11}, "n"),
    ("local-sd", {"prompt": "x", "response_format": "png"}, "response_format"),
    ("local-sd", {"prompt": "  "}, "prompt"),
    ("local-sd", {}, "prompt"),
    ("local-sd", {"prompt": "x", "stream": True}, "stream"),
])
def test_each_family_limit_is_a_400_naming_its_field(model, payload, param):
    assert refusal(check_request, payload, model, prompt=True, form=False).param == param


def test_a_form_field_n_is_read_as_decimal_text():
    check_request({"n": "3"}, "dall-e-2", prompt=False, form=True)
    assert refusal(check_request, {"n": "three"}, "dall-e-2", prompt=False, form=True).param == "n"


def test_the_ledger_counts_what_the_answer_made_at_its_own_size_and_quality_first():
    answer = {"data": [{"b64_json": "x"}, {"b64_json": "y"}], "size": "1536x1024", "quality": "high"}
    assert generated(answer, {"size": "1024x1024"}) == (("1536x1024", "high", 2),)
    assert generated({"data": [{"url": "u"}]}, {}) == (("1024x1024", "standard", 1),)
    assert generated({"data": []}, {}) == ()


def test_per_image_pricing_by_size_then_quality():
    pricing = Pricing(input_tokens=0, output_tokens=0, per_image={"1024x1024": {"standard": 0.04, "hd": 0.08}})
    counts = TokenCounts(images=(("1024x1024", "hd", 3),))
    assert cost_of(pricing, counts) == Decimal("0.24")
