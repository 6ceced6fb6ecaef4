"""Request and response shapes of /webhooks."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.inputs import JsonIn
from config.api.query import PageQuery
from webhooks.services import WEBHOOK_EVENTS
from webhooks.targets import TargetRefused, check_url


def _validate_url(value: str) -> str:
    try:
        check_url(value)
    except TargetRefused as exc:
        raise serializers.ValidationError(str(exc)) from None
    return value


class _EndpointFieldsIn(JsonIn):
    url = serializers.URLField(max_length=2000, validators=[_validate_url])
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WEBHOOK_EVENTS),
        min_length=1,
        default=lambda: ["email.received"],
    )
    inbox_ids = serializers.ListField(
        child=serializers.CharField(max_length=320),
        max_length=500,
        default=list,
        help_text="Only events of these inboxes (ids or addresses); empty = all.",
    )
    label_keys = serializers.ListField(
        child=serializers.CharField(max_length=63),
        max_length=100,
        default=list,
        help_text="Only email.* events of emails carrying one of these labels (for "
        "email.labeled: one just applied); empty = all.",
    )
    enabled = serializers.BooleanField(default=True)

    def validate_events(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class EndpointCreateIn(_EndpointFieldsIn):
    pass


class EndpointUpdateIn(_EndpointFieldsIn):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
            field.default = serializers.empty


class EndpointOut(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    inbox_ids = serializers.ListField(child=serializers.CharField())
    label_keys = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class EndpointCreatedOut(EndpointOut):
    secret = serializers.CharField(help_text="The signing secret (whsec_…). Shown only here.")


class PageQueryOfDeliveries(PageQuery):
    default_limit = 50
    max_limit = 200


class AttemptOut(serializers.Serializer):
    at = serializers.DateTimeField()
    status_code = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField()
    error = serializers.CharField()
    response_excerpt = serializers.CharField(help_text="At most 1,000 bytes of the answer.")


class DeliveryOut(serializers.Serializer):
    id = serializers.CharField()
    endpoint_id = serializers.CharField()
    event = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "succeeded", "retrying", "failed"])
    attempts = AttemptOut(many=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    payload = serializers.SerializerMethodField()

    @extend_schema_field(serializers.DictField())
    def get_payload(self, delivery: Any) -> dict:
        return json.loads(delivery.body)
