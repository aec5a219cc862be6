"""The usage ledger's query parameters (protocol/admin/usage_query.py): one test per rule."""

import pytest

from switchyard.actors.ledger import entries
from switchyard.actors.ledger.record import GROUPS, RECORD_ENDPOINTS, UsageQuery
from switchyard.actors.mcp import records as mcp_records
from switchyard.protocol.admin.usage_query import (
    LIMIT_DEFAULT,
    LIMIT_MAX,
    QUERY_PARAMS,
    QueryError,
    parse_limit,
    parse_query,
    query_pairs,
    single_values,
)

DEC_1 = 1796083200.0   # 2026-12-01T00:00:00Z


def refused(params, param):
    with pytest.raises(QueryError) as caught:
        parse_query(params)
    assert caught.value.param == param
    return str(caught.value)


def test_no_parameters_mean_every_client_record_in_one_total():
    assert parse_query({}) == UsageQuery(purpose="client")


def test_filters_are_taken_exactly_as_given():
    q = parse_query({"key": "team-a", "org": "acme", "model": "gpt-4o:nitro", "backend": "b 1"})
    assert (q.key, q.org, q.model, q.backend, q.endpoint) == ("team-a", "acme", "gpt-4o:nitro", "b 1", None)


def test_an_empty_filter_is_refused_rather_than_matching_everything():
    assert refused({"key": ""}, "key") == "key must not be empty (leave it out to match every value)"


def test_a_filter_is_at_most_1024_characters():
    assert parse_query({"model": "m" * 1024}).model == "m" * 1024
    assert refused({"model": "m" * 1025}, "model") == "model must be at most 1024 characters, got 1025"


@pytest.mark.parametrize("endpoint", RECORD_ENDPOINTS)
def test_endpoint_takes_each_endpoint_a_record_carries(endpoint):
    assert parse_query({"endpoint": endpoint}).endpoint == endpoint


def test_endpoint_must_be_one_a_record_carries_and_the_message_lists_them():
    assert refused({"endpoint": "chat_completions"}, "endpoint") == (
        "endpoint must be one of chat, completions, embeddings, responses, compact, images_generations, "
        "images_edits, images_variations, rerank, moderations, audio_transcriptions, audio_translations, "
        "audio_speech, messages, mcp, got 'chat_completions'")
    refused({"endpoint": ""}, "endpoint")
    refused({"endpoint": "realtime"}, "endpoint")   # a realtime session leaves no record to filter


def test_the_endpoints_the_filter_takes_are_exactly_those_records_are_made_with():
    """Every route's record endpoint, the classifier's (chat) and /mcp's: a new route can't go unfilterable."""
    assert set(RECORD_ENDPOINTS) == {*entries.ENDPOINTS.values(), mcp_records.ENDPOINT}
    assert len(RECORD_ENDPOINTS) == len(set(RECORD_ENDPOINTS))


def test_purpose_all_means_every_purpose():
    assert parse_query({"purpose": "all"}).purpose is None


def test_purpose_classifier_selects_the_gateways_own_tries():
    assert parse_query({"purpose": "classifier"}).purpose == "classifier"


@pytest.mark.parametrize("purpose", ["cache", "guardrail"])
def test_purpose_selects_the_gateways_own_internal_calls(purpose):
    # the semantic cache's embeddings calls and a moderation guardrail's calls are records of their own
    assert parse_query({"purpose": purpose}).purpose == purpose


def test_purpose_must_be_client_classifier_mcp_or_all():
    assert refused({"purpose": "gateway"}, "purpose") == \
        "purpose must be one of client, batch, classifier, web_search, mcp, cache, guardrail, all, got 'gateway'"


def test_purpose_batch_selects_the_lines_of_batches_the_gateway_runs():
    assert parse_query({"purpose": "batch"}).purpose == "batch"


def test_a_bare_date_is_midnight_utc():
    assert parse_query({"from": "2026-12-01"}).since == DEC_1


def test_a_time_in_utc_with_z():
    assert parse_query({"to": "2026-12-01T13:00:00Z"}).until == DEC_1 + 13 * 3600


def test_a_time_with_an_offset_is_converted_to_utc():
    assert parse_query({"from": "2026-12-01T13:00:00+02:00"}).since == DEC_1 + 11 * 3600


def test_unix_seconds_are_taken_as_they_are():
    q = parse_query({"from": "1796083200", "to": "1796083200.5"})
    assert (q.since, q.until) == (DEC_1, DEC_1 + 0.5)


def test_a_time_without_its_offset_is_refused():
    assert refused({"from": "2026-12-01T13:00:00"}, "from") == \
        "from needs its UTC offset (Z or +HH:MM), got '2026-12-01T13:00:00'"


def test_a_malformed_time_is_refused_naming_its_parameter():
    assert refused({"to": "yesterday"}, "to") == (
        "to must be Unix seconds or an RFC 3339 time: 2026-12-01, 2026-12-01T13:00:00Z or "
        "2026-12-01T13:00:00+02:00, got 'yesterday'")
    assert refused({"from": "-5"}, "from").startswith("from must be Unix seconds")


def test_from_must_be_earlier_than_to():
    message = refused({"from": "2026-12-02", "to": "2026-12-01"}, "from")
    assert message == ("from must be earlier than to (from is inclusive, to exclusive), "
                       "got from='2026-12-02' and to='2026-12-01'")
    refused({"from": "2026-12-01", "to": "2026-12-01T00:00:00Z"}, "from")   # equal: an empty span


@pytest.mark.parametrize("group", GROUPS)
def test_group_by_takes_each_group(group):
    assert parse_query({"group_by": group}).group_by == group


def test_group_by_must_be_one_of_the_groups():
    assert refused({"group_by": "week"}, "group_by") == \
        "group_by must be one of key, org, model, backend, endpoint, day, hour, got 'week'"


def test_an_unknown_parameter_is_refused():
    with pytest.raises(QueryError) as caught:
        single_values([("grop_by", "key")], QUERY_PARAMS)
    assert (caught.value.param, caught.value.code) == ("grop_by", "unknown_parameter")
    assert str(caught.value) == ("grop_by is not a known parameter; the parameters are key, org, model, backend, "
                                 "endpoint, purpose, from, to, group_by")


def test_a_repeated_parameter_is_refused():
    with pytest.raises(QueryError) as caught:
        single_values([("model", "a"), ("model", "b")], QUERY_PARAMS)
    assert (caught.value.param, caught.value.code) == ("model", "duplicate_parameter")
    assert str(caught.value) == "model is given more than once; give it once"


def test_the_query_string_is_percent_decoded_utf8_with_blanks_kept():
    assert query_pairs(b"model=caf%C3%A9+au+lait&key=&to=2026-12-01T13%3A00%3A00%2B02%3A00") == [
        ("model", "café au lait"), ("key", ""), ("to", "2026-12-01T13:00:00+02:00")]


def test_the_query_string_must_be_utf8():
    with pytest.raises(QueryError) as caught:
        query_pairs(b"model=%FF")
    assert str(caught.value) == "query string must be percent-encoded UTF-8"


def test_limit_defaults_to_100000():
    assert parse_limit(None) == LIMIT_DEFAULT == 100_000


@pytest.mark.parametrize("value", ["0", str(LIMIT_MAX + 1), "ten", "-1", "1.5", ""])
def test_limit_is_a_whole_number_from_1_to_1000000(value):
    with pytest.raises(QueryError) as caught:
        parse_limit(value)
    assert str(caught.value) == f"limit must be a whole number from 1 to 1000000, got {value!r}"
    assert parse_limit("1") == 1 and parse_limit(str(LIMIT_MAX)) == LIMIT_MAX
