"""factory_boy factories for the tenancy models (keys go through the real service)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from apikeys.models import Membership, Role, Workspace


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"Workspace {n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}@example.com")
    email = factory.SelfAttribute("username")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @classmethod
    def _after_postgeneration(cls, instance, create, results=None):  # type: ignore[no-untyped-def]
        if create:
            instance.save()


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    workspace = factory.SubFactory(WorkspaceFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.OWNER
