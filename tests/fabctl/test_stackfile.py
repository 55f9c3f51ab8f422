"""Reading a stack file as the Pulumi CLI does: what it accepts, and every broken file refused with one line per problem.

Each test writes the smallest stack file that shows one behaviour; the site object inside is not validated here (the
program does that), so most files hold a stand-in site."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from small_site import small_site

from fabctl.stackfile import MAX_DEPTH, MAX_VALUES, SITE_KEY, NoStackFile, StackFileError, pulumi_config_env, read_stack_config

LICENSE_COMMAND = "pulumi config set --secret aistorLicense <value>"


def write(tmp_path: Path, text: str | bytes, stack: str = "t") -> Path:
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def refusal(tmp_path: Path, text: str | bytes) -> list[str]:
    """The lines a stack file is refused with (the test fails if it is read)."""
    with pytest.raises(StackFileError) as info:
        read_stack_config(write(tmp_path, text))
    assert not isinstance(info.value, NoStackFile)
    return str(info.value).splitlines()


# What is read, and how


def test_a_key_without_namespace_is_the_projects(tmp_path):
    assert read_stack_config(write(tmp_path, "config:\n  site: {name: site-t}\n")) == {"fab-platform:site": {"name": "site-t"}}


def test_the_old_config_module_spelling_is_the_same_key(tmp_path):
    config = read_stack_config(write(tmp_path, "config:\n  fab-platform:config:site: {name: site-t}\n"))
    assert config == {"fab-platform:site": {"name": "site-t"}}


def test_a_byte_order_mark_is_skipped(tmp_path):
    assert read_stack_config(write(tmp_path, b"\xef\xbb\xbfconfig:\n  site: 1\n")) == {"fab-platform:site": 1}


def test_yes_on_and_off_are_text_as_for_the_pulumi_cli(tmp_path):
    config = read_stack_config(write(tmp_path, "config:\n  site: {a: yes, b: on, c: off, d: true}\n"))
    assert config["fab-platform:site"] == {"a": "yes", "b": "on", "c": "off", "d": True}


def test_dates_and_times_are_text(tmp_path):
    config = read_stack_config(write(tmp_path, "config:\n  site: {day: 2024-01-01, at: 1:30}\n"))
    assert config["fab-platform:site"] == {"day": "2024-01-01", "at": "1:30"}


def test_numbers_with_an_exponent_are_numbers(tmp_path):
    assert read_stack_config(write(tmp_path, "config:\n  site: {a: 1e3, b: 1.5e3}\n"))["fab-platform:site"] == {"a": 1000.0, "b": 1500.0}


def test_a_merged_mapping_may_be_overridden(tmp_path):
    text = "config:\n  site:\n    base: &base {a: 1, b: 2}\n    copy:\n      <<: *base\n      b: 3\n"
    assert read_stack_config(write(tmp_path, text))["fab-platform:site"]["copy"] == {"a": 1, "b": 3}


def test_provider_settings_and_encrypted_secrets_are_kept(tmp_path):
    text = ("config:\n  kubernetes:enableServerSideApply: true\n  minio:minioUser: fab-admin\n"
            "  fab-platform:aistorLicense: {secure: v1:AAAB}\n  keycloak:clientSecret: {secure: v1:AAAC}\n")
    assert sorted(read_stack_config(write(tmp_path, text))) == [
        "fab-platform:aistorLicense", "keycloak:clientSecret", "kubernetes:enableServerSideApply", "minio:minioUser",
    ]


def test_an_empty_file_has_no_config(tmp_path):
    assert read_stack_config(write(tmp_path, "")) == {}


def test_fails_when_the_stack_file_does_not_exist_as_a_usage_mistake(tmp_path):
    write(tmp_path, "config: {}\n", stack="site-t")
    with pytest.raises(NoStackFile) as info:
        read_stack_config(tmp_path / "Pulumi.site-z.yaml")
    assert str(info.value) == f"no stack file Pulumi.site-z.yaml in {tmp_path}; stacks: site-t"


# Encoding and YAML


def test_fails_when_the_stack_file_is_not_utf8(tmp_path):
    text = "config:\n  site:\n    teams:\n      yield: {description: Ausbeute für die Fertigung}\n".encode("latin-1")
    assert refusal(tmp_path, text) == [f"Pulumi.t.yaml:4: not UTF-8 (byte 0xfc at offset {text.index(0xFC)}); save the file as UTF-8"]


def test_fails_when_the_stack_file_is_utf16(tmp_path):
    assert refusal(tmp_path, "config: {}\n".encode("utf-16")) == ["Pulumi.t.yaml:1: not UTF-8 (byte 0xff at offset 0); save the file as UTF-8"]


def test_fails_when_the_stack_file_holds_a_control_character(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {name: a\x1bb}\n") == [
        "Pulumi.t.yaml:2: not valid YAML (the control character U+001B is not allowed; remove it)"
    ]


def test_fails_when_the_stack_file_is_not_yaml(tmp_path):
    assert refusal(tmp_path, "config:\n  site: [unclosed\n") == [
        "Pulumi.t.yaml:3: not valid YAML (expected ',' or ']', but got '<stream end>')"
    ]


def test_fails_when_a_value_has_a_python_tag(tmp_path):
    assert refusal(tmp_path, "config:\n  site: !!python/object/apply:os.system [id]\n") == [
        "Pulumi.t.yaml:2: the tag !!python/object/apply:os.system is not allowed in a stack file; "
        "write the value as plain text, a number, a list or a mapping"
    ]


def test_fails_when_a_value_has_a_binary_tag(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {name: !!binary c2l0ZQ==}\n") == [
        "Pulumi.t.yaml:2: the tag !!binary is not allowed in a stack file; write the value as plain text, a number, a list or a mapping"
    ]


def test_fails_when_a_tagged_value_cannot_be_read(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {cluster_id: !!int 3.5}\n") == [
        "Pulumi.t.yaml:2: '3.5' is not a valid !!int value; fix the value or remove the tag"
    ]


def test_fails_when_a_tagged_value_is_empty(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {cluster_id: !!int }\n") == [
        "Pulumi.t.yaml:2: '' is not a valid !!int value; fix the value or remove the tag"
    ]


def test_fails_when_a_key_repeats(tmp_path):
    assert refusal(tmp_path, "config:\n  site:\n    name: a\n    name: b\n") == [
        "Pulumi.t.yaml:4: duplicate key 'name'; each key may appear once"
    ]


def test_fails_when_a_key_is_a_number(tmp_path):
    assert refusal(tmp_path, "config:\n  site:\n    teams:\n      1: {}\n") == [
        "Pulumi.t.yaml:4: the key 1 (a number) is not text; keys are names: quote it or rename it"
    ]


def test_fails_when_a_key_is_a_list(tmp_path):
    assert refusal(tmp_path, "config:\n  site:\n    ? [gpu, compute]\n    : 1\n") == [
        'Pulumi.t.yaml:3: the key ["gpu", "compute"] (a list) is not text; keys are names: quote it or rename it'
    ]


def test_fails_when_a_mapping_contains_itself(tmp_path):
    assert refusal(tmp_path, "config:\n  site:\n    teams: &teams\n      yield: *teams\n") == [
        "Pulumi.t.yaml:3: a value contains itself through a YAML alias; write the value out"
    ]


def test_fails_when_a_list_contains_itself(tmp_path):
    assert refusal(tmp_path, "config:\n  site:\n    flows: &flows [*flows]\n") == [
        "Pulumi.t.yaml: fab-platform:site.flows[0]: contains itself through a YAML alias; write the value out"
    ]


def test_fails_when_aliases_expand_past_the_limit(tmp_path):
    lines = ["config:", "  site:", "    a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 6)]
    assert 10**6 > MAX_VALUES
    assert refusal(tmp_path, "\n".join(lines) + "\n") == [
        f"Pulumi.t.yaml: fab-platform:site: YAML aliases expand it to more than {MAX_VALUES} values; write the values out"
    ]


def test_values_may_be_nested_up_to_the_limit(tmp_path):
    depth = MAX_DEPTH
    assert read_stack_config(write(tmp_path, f"config:\n  site: {'[' * depth}{']' * depth}\n"))


def test_fails_when_values_are_nested_past_the_limit(tmp_path):
    depth = MAX_DEPTH + 1
    assert refusal(tmp_path, f"config:\n  site: {'[' * depth}{']' * depth}\n") == [
        f"Pulumi.t.yaml: nested more than {MAX_DEPTH} levels deep; no stack file needs that"
    ]


def test_fails_when_values_are_nested_deeper_than_the_yaml_reader_goes(tmp_path):
    assert refusal(tmp_path, f"config:\n  site: {'[' * 5000}{']' * 5000}\n") == [
        f"Pulumi.t.yaml: nested more than {MAX_DEPTH} levels deep; no stack file needs that"
    ]


def test_fails_when_a_number_is_not_finite(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {ratio: -.inf}\n") == [
        "Pulumi.t.yaml: fab-platform:site.ratio: -.inf is not a finite number, and config reaches the program as JSON, "
        "which has none; write a number"
    ]


def test_fails_when_text_holds_a_lone_surrogate(tmp_path):
    assert refusal(tmp_path, 'config:\n  site: {description: "Yield \\ud83d"}\n') == [
        "Pulumi.t.yaml: fab-platform:site.description: holds an escape of half a UTF-16 pair (\\ud800 to \\udfff), which is "
        "no character; write the character itself"
    ]


# The shape of the file


def test_fails_when_the_file_is_a_list(tmp_path):
    assert refusal(tmp_path, "- config: {}\n") == [
        "Pulumi.t.yaml: the file holds a list, not a mapping; a stack file is a mapping that starts with config:"
    ]


def test_fails_when_config_is_not_a_mapping(tmp_path):
    assert refusal(tmp_path, "config: [site]\n") == ["Pulumi.t.yaml: config: must be a mapping of keys such as fab-platform:site (got a list)"]


def test_fails_when_the_site_is_at_the_top_level(tmp_path):
    assert refusal(tmp_path, "fab-platform:site: {name: site-t}\n") == [
        "Pulumi.t.yaml: fab-platform:site is at the top level; indent it under config:"
    ]


def test_fails_when_a_top_level_key_is_unknown(tmp_path):
    assert refusal(tmp_path, "configuration: {}\n") == [
        "Pulumi.t.yaml: unknown top-level key 'configuration'; a stack file has config, encryptedkey, encryptionsalt, "
        "environment, secretsprovider"
    ]


@pytest.mark.parametrize("namespace", ["fab", "fabplatform", "fab_platform", "Fab-Platform"])
def test_fails_when_the_site_is_under_another_prefix(tmp_path, namespace):
    assert refusal(tmp_path, f"config:\n  {namespace}:site: {{name: site-t}}\n") == [
        f"{namespace}:site: '{namespace}' is not this project's namespace; write the key as fab-platform:site"
    ]


def test_fails_when_a_key_without_namespace_repeats_the_full_key(tmp_path):
    assert refusal(tmp_path, "config:\n  site: {}\n  fab-platform:site: {}\n") == [
        "Pulumi.t.yaml: config: site and fab-platform:site are the same key (a key without a namespace is fab-platform's); "
        "keep one of them"
    ]


def test_fails_when_a_key_has_two_colons(tmp_path):
    assert refusal(tmp_path, "config:\n  fab-platform:site:name: site-t\n") == [
        "Pulumi.t.yaml: config: 'fab-platform:site:name' is not a config key; a key is <namespace>:<name>, such as fab-platform:site"
    ]


# Secrets and the project's keys


def test_fails_when_the_license_is_in_plain_text(tmp_path):
    assert refusal(tmp_path, "config:\n  fab-platform:aistorLicense: eyJhbGciOiJFUzM4NCJ9\n") == [
        "fab-platform:aistorLicense: a credential written in plain text (value not shown); delete it from "
        f"Pulumi.<stack>.yaml, rotate it if the file was ever committed, and set it encrypted with: {LICENSE_COMMAND}"
    ]


def test_fails_when_a_secret_without_namespace_is_in_plain_text(tmp_path):
    (line,) = refusal(tmp_path, "config:\n  aistorRootPassword: changeme\n")
    assert line.startswith("fab-platform:aistorRootPassword: a credential written in plain text (value not shown)")


def test_fails_when_a_secure_value_is_not_text(tmp_path):
    assert refusal(tmp_path, "config:\n  fab-platform:aistorLicense: {secure: 42}\n") == [
        "fab-platform:aistorLicense: secure: must be the encrypted text that pulumi config set --secret writes (got a number)"
    ]


def test_fails_when_a_project_key_is_misspelt(tmp_path):
    assert refusal(tmp_path, "config:\n  fab-platform:aistorLicence: {secure: v1:AAAB}\n") == [
        "fab-platform:aistorLicence: unknown config key of fab-platform (did you mean fab-platform:aistorLicense?); known keys: "
        "fab-platform:aistorLicense, fab-platform:aistorRootPassword, fab-platform:alertWebhookUrl, "
        "fab-platform:metricsRemoteWritePassword, fab-platform:registryPullSecret, "
        "fab-platform:servingRepoToken, "
        "fab-platform:servingRepoWriteToken, fab-platform:site"
    ]


def test_fails_when_a_provider_credential_is_in_plain_text(tmp_path):
    assert refusal(tmp_path, "config:\n  minio:minioPassword: hunter2hunter2\n") == [
        "minio:minioPassword: a credential written in plain text (value not shown); delete it from Pulumi.<stack>.yaml, "
        "rotate it if the file was ever committed, and set it encrypted with: pulumi config set --secret minio:minioPassword <value>"
    ]


def test_fails_with_one_line_per_wrong_key(tmp_path):
    lines = refusal(tmp_path, "config:\n  fab-platform:aistorLicense: plain\n  fab:site: {}\n")
    assert [line.split(":", 2)[:2] for line in lines] == [["fab-platform", "aistorLicense"], ["fab", "site"]]


# Any file: read, or refused with lines, never another exception

TOKENS = ["config:", "fab-platform:site:", "site:", "fab:site:", "\n", "\n  ", "\n    - ", ": ", "- ", "? ", "[", "]", "{", "}",
          ", ", "&a ", "*a", "<<: *a", "!!binary ", "!!int ", "!!python/name:os.system ", "!Ref ", "~", "yes", "1:", "1e3",
          ".nan", "2024-01-01", "0b_", "'", '"', '"\\ud800"', "\t", "\x07", "\ufeff", "#", "|", ">", "---", "%YAML 1.2",
          "{secure: v1:x}", "aistorLicense: x", "minio:minioPassword: x"]


@st.composite
def mutated_files(draw) -> str:
    text = yaml.safe_dump({"config": {SITE_KEY: small_site()}})
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        text = text[:at] + draw(st.sampled_from(TOKENS) | st.text(max_size=3)) + text[at + cut:]
    return text


def _read_or_refuse(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "Pulumi.t.yaml"
        path.write_bytes(data)
        try:
            pulumi_config_env(read_stack_config(path))  # what the render hands the program must be JSON
        except StackFileError as exc:
            assert str(exc).strip() and all(line.strip() for line in str(exc).splitlines())


@settings(max_examples=300, deadline=None)
@given(mutated_files())
def test_any_edit_of_a_stack_file_is_read_or_refused_with_lines(text):
    _read_or_refuse(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=4), max_size=30))
def test_any_text_is_read_or_refused_with_lines(pieces):
    _read_or_refuse("".join(pieces).encode("utf-8", "surrogatepass"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_any_bytes_are_read_or_refused_with_lines(data):
    _read_or_refuse(data)
