"""The settings validator is the one pydantic would build: the same core schema field by field (so
the same coercions and the same refusal messages), and the same errors for a mix of bad values."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from pydantic_core import ValidationError
from pydantic_core import core_schema as cs

from broker.runtime.settings import Settings


def pydantic_model() -> type[pydantic.BaseModel]:
    """`Settings` declared as a pydantic BaseModel, from its own fields, bounds and checks."""
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        default = (
            pydantic.Field(default_factory=info.default_factory, **info.bounds)
            if info.default_factory is not None
            else pydantic.Field(default=info.default, **info.bounds)
        )
        fields[name] = (info.annotation, default)
        for mode, checks in (("before", info.before), ("after", info.after)):
            for i, check in enumerate(checks):
                validators[f"{name}_{mode}_{i}"] = pydantic.field_validator(name, mode=mode)(
                    staticmethod(check)
                )
    return pydantic.create_model(  # type: ignore[call-overload, no-any-return]
        "Settings", __config__=pydantic.ConfigDict(extra="forbid"), __validators__=validators, **fields
    )


def shape(schema: Any) -> Any:
    """A schema without what does not validate (metadata, refs, pydantic's defaults spelt out)."""
    if isinstance(schema, dict):
        skipped = {"metadata", "ref", "default_factory_takes_data"}
        return {k: shape(v) for k, v in schema.items() if k not in skipped}
    if isinstance(schema, list):
        return [shape(v) for v in schema]
    return getattr(schema, "__func__", schema)


def described(exc: ValidationError) -> list[tuple[Any, ...]]:
    return [(e["type"], e["loc"], e["msg"], e["input"]) for e in exc.errors()]


def test_each_field_has_the_schema_pydantic_builds() -> None:
    reference = pydantic_model().__pydantic_core_schema__
    while reference["type"] != "model-fields":
        reference = reference["schema"]  # type: ignore[typeddict-item]
    ours = {name: cs.model_field(info.core_schema()) for name, info in Settings.model_fields.items()}
    assert list(reference["fields"]) == list(ours)
    for name, field in ours.items():
        assert shape(field) == shape(reference["fields"][name]), name


@pytest.mark.parametrize(
    "values",
    [
        {"port": "x", "heartbeat": -1},
        {"hots": "a"},
        {"log_level": "debug"},
        {"ssl_versions": "TLSv1.2,tlsv9"},
        {"memory_high_watermark": True},
        {"nodes": ""},
        {"plugins": "[rabbitmq_sharding,nope]."},
        {"ssl_fail_if_no_peer_cert": "maybe", "frame_max": 100},
    ],
)
def test_bad_values_are_refused_as_pydantic_refuses_them(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as ours:
        Settings(**values)
    with pytest.raises(ValidationError) as theirs:
        pydantic_model()(**values)
    assert described(ours.value) == described(theirs.value)


def test_the_rule_across_settings_and_the_defaults() -> None:
    with pytest.raises(ValidationError, match="tls_port needs ssl_certfile"):
        Settings(tls_port=5671)
    defaults = pydantic_model()()
    assert {name: getattr(Settings(), name) for name in Settings.model_fields} == defaults.model_dump()
