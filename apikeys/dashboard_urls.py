"""Dashboard pages of the tenancy app: sign-in, password, switcher, members, keys, settings,
audit log."""

from __future__ import annotations

from django.urls import path

from apikeys import views

urlpatterns = [
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("password/", views.password_change, name="password_change"),
    path("password/done/", views.password_change_done, name="password_change_done"),
    path("workspace/switch/", views.workspace_switch, name="workspace_switch"),
    path("members/", views.members, name="members"),
    path("members/add/", views.member_add, name="member_add"),
    path(
        "members/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="invitation_revoke",
    ),
    path("invite/<str:token>/", views.invitation, name="invitation"),
    path("members/<int:membership_id>/role/", views.member_role, name="member_role"),
    path("members/<int:membership_id>/remove/", views.member_remove, name="member_remove"),
    path("keys/", views.keys, name="keys"),
    path("keys/new/", views.key_create, name="key_create"),
    path("keys/<str:key_id>/created/", views.key_created, name="key_created"),
    path("keys/<str:key_id>/approval/", views.key_approval, name="key_approval"),
    path("keys/<str:key_id>/revoke/", views.key_revoke, name="key_revoke"),
    path("settings/", views.workspace_settings, name="workspace_settings"),
    path("settings/save/", views.workspace_settings_update, name="workspace_settings_update"),
    path("settings/delete/", views.workspace_delete, name="workspace_delete"),
    path("audit/", views.audit_log, name="audit_log"),
]
