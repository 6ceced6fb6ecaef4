"""``JsonNegotiation`` answers as DRF's own negotiation does, for every ``Accept`` a client may
send, and a view's renderers other than the JSON one are negotiated by DRF as before."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from config.api.renderers import JsonNegotiation, JsonRenderer

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "application/json; indent=4",
    "application/*",
    "text/html",
    "text/html, application/json;q=0.9",
    "application/json;q=0",
    "",
    "*/*;q=0.1, text/plain",
    "application/problem+json",
]


def _select(negotiation: DefaultContentNegotiation, accept: str | None, renderers: list):  # type: ignore[no-untyped-def]
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get("/api/v1/me", **headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
    except NotAcceptable:
        return "406"
    return type(renderer), media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize(
    "renderers",
    [[JsonRenderer], [JSONRenderer], [JsonRenderer, BrowsableAPIRenderer]],
    ids=["ours", "drf-json", "two"],
)
def test_the_same_renderer_and_media_type_as_drf(accept: str | None, renderers: list) -> None:
    instances = [cls() for cls in renderers]
    assert _select(JsonNegotiation(), accept, instances) == _select(
        DefaultContentNegotiation(), accept, instances
    )


def test_the_api_uses_it() -> None:
    from rest_framework.settings import api_settings

    assert api_settings.DEFAULT_CONTENT_NEGOTIATION_CLASS is JsonNegotiation
