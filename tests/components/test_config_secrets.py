"""The stack's config keys besides the site: secrets only encrypted, no key the program would silently ignore.

`config_key_problems` is the one check; `fabctl` runs it on the stack file, the program on what the Pulumi CLI (or the
mock run, which hands over the secret keys the same way) gives it."""

from __future__ import annotations

import jsonschema
import pytest
from helpers import render_config
from small_site import small_site

from components.config import SECRET_KEYS, config_key_problems, stack_file_schema
from fabctl.render import RenderError
from fabctl.stackfile import SITE_KEY

PLAINTEXT = ("{key}: a credential written in plain text (value not shown); delete it from Pulumi.<stack>.yaml, rotate it if the "
             "file was ever committed, and set it encrypted with: pulumi config set --secret {command_key} <value>")


def problems(*keys: str, secret: tuple[str, ...] = ()) -> list[str]:
    return config_key_problems(keys, set(secret).__contains__)


def test_encrypted_secrets_and_the_site_pass():
    assert problems(SITE_KEY, "fab-platform:aistorLicense", "fab-platform:aistorRootPassword",
                    secret=("fab-platform:aistorLicense", "fab-platform:aistorRootPassword")) == []


@pytest.mark.parametrize("name", SECRET_KEYS)
def test_fails_when_a_secret_is_in_plain_text(name):
    assert problems(f"fab-platform:{name}") == [PLAINTEXT.format(key=f"fab-platform:{name}", command_key=name)]


def test_fails_when_a_secret_is_misspelt():
    assert problems("fab-platform:aistorRootPasword", secret=("fab-platform:aistorRootPasword",)) == [
        "fab-platform:aistorRootPasword: unknown config key of fab-platform (did you mean fab-platform:aistorRootPassword?); "
        "known keys: fab-platform:aistorLicense, fab-platform:aistorRootPassword, fab-platform:alertWebhookUrl, fab-platform:metricsRemoteWritePassword, fab-platform:registryPullSecret, fab-platform:servingRepoToken, fab-platform:servingRepoWriteToken, fab-platform:site"
    ]


def test_fails_when_a_project_key_resembles_none_of_the_known_ones():
    assert problems("fab-platform:region") == [
        "fab-platform:region: unknown config key of fab-platform; known keys: fab-platform:aistorLicense, "
        "fab-platform:aistorRootPassword, fab-platform:alertWebhookUrl, fab-platform:metricsRemoteWritePassword, fab-platform:registryPullSecret, fab-platform:servingRepoToken, fab-platform:servingRepoWriteToken, fab-platform:site"
    ]


def test_fails_when_a_secret_is_under_another_namespace():
    assert problems("aistor:aistorLicense", secret=("aistor:aistorLicense",)) == [
        "aistor:aistorLicense: 'aistor' is not this project's namespace; write the key as fab-platform:aistorLicense"
    ]


def test_fails_when_a_namespace_is_a_misspelt_project_name():
    assert problems("fab-platfrom:sites") == ["fab-platfrom:sites: 'fab-platfrom' is not this project's namespace; write the key as fab-platform:sites"]


@pytest.mark.parametrize("key", ["minio:minioPassword", "keycloak:clientSecret", "minio:minio_secret_key", "github:token"])
def test_fails_when_a_provider_credential_is_in_plain_text(key):
    assert problems(key) == [PLAINTEXT.format(key=key, command_key=key)]


def test_provider_settings_are_no_credentials():
    assert problems("kubernetes:context", "kubernetes:enableServerSideApply", "minio:minioUser", "keycloak:clientId",
                    "keycloak:url", "pulumi:disable-default-providers") == []


def test_an_encrypted_provider_credential_passes():
    assert problems("keycloak:clientSecret", secret=("keycloak:clientSecret",)) == []


def test_fails_under_the_schema_when_a_secret_is_in_plain_text():
    doc = {"config": {SITE_KEY: small_site(), "fab-platform:aistorLicense": "eyJhbGciOiJFUzM4NCJ9"}}
    jsonschema.Draft202012Validator(stack_file_schema()).validate({"config": {SITE_KEY: small_site()}})
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'object'"):
        jsonschema.Draft202012Validator(stack_file_schema()).validate(doc)


def test_fails_when_the_program_is_given_a_plain_text_license():
    """The program's own check, as under `pulumi up`: the mock run passes the secret keys as the CLI's runner does."""
    config = {SITE_KEY: small_site(), "fab-platform:aistorLicense": "eyJhbGciOiJFUzM4NCJ9",
              "fab-platform:aistorRootPassword": {"secure": "v1:password"}}
    with pytest.raises(RenderError) as info:
        render_config("site-t", config)
    assert info.value.user
    assert str(info.value).splitlines() == [PLAINTEXT.format(key="fab-platform:aistorLicense", command_key="aistorLicense")]


def test_fails_when_the_program_is_given_a_key_it_would_ignore():
    with pytest.raises(RenderError) as info:
        render_config("site-t", {SITE_KEY: small_site(), "fab-platform:aistorLicence": {"secure": "v1:license"}})
    assert str(info.value).splitlines() == [
        "fab-platform:aistorLicence: unknown config key of fab-platform (did you mean fab-platform:aistorLicense?); "
        "known keys: fab-platform:aistorLicense, fab-platform:aistorRootPassword, fab-platform:alertWebhookUrl, fab-platform:metricsRemoteWritePassword, fab-platform:registryPullSecret, fab-platform:servingRepoToken, fab-platform:servingRepoWriteToken, fab-platform:site"
    ]
