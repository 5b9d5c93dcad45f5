"""Identity shapes of the Letta v1 API (letta-client's AgentState.identities, Letta's IdentityCreate,
IdentityUpsert, IdentityUpdate and IdentityProperty)."""

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memvm.ids import ids_check
from memvm.orm import Identity

IdentityType = Literal["org", "user", "other"]
PropertyType = Literal["string", "number", "boolean", "json"]
PropertyValue = str | int | float | bool | dict[str, Any]
# What each property type holds; bool is excluded from "number" (Python counts it as an int).
_HOLDS: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "boolean": (bool,), "json": (dict,)}


class IdentityProperty(BaseModel):
    """A property of an identity: its value must be of its type."""

    model_config = ConfigDict(extra="ignore")

    key: str = Field(min_length=1, max_length=200)
    value: PropertyValue
    type: PropertyType

    @model_validator(mode="after")
    def _value_of_its_type(self) -> Self:
        matches = isinstance(self.value, _HOLDS[self.type]) and not (self.type == "number" and isinstance(self.value, bool))
        if not matches:
            raise ValueError(f"property {self.key!r} is of type {self.type!r} but its value {self.value!r} is not")
        return self


def _unique_keys(properties: list[IdentityProperty] | None) -> list[IdentityProperty] | None:
    keys = [prop.key for prop in properties or ()]
    if duplicate := next((key for key in keys if keys.count(key) > 1), None):
        raise ValueError(f"property {duplicate!r} is listed more than once; list each key once")
    return properties


class IdentityFields(BaseModel):
    """What create, upsert and update share; `None` leaves a field as it is (on update)."""

    model_config = ConfigDict(extra="ignore")

    agent_ids: list[str] | None = Field(None, description="Ids of the agents that belong to the identity.")
    block_ids: list[str] | None = Field(None, description="Ids of the blocks that belong to the identity.")
    properties: list[IdentityProperty] | None = Field(None, description="Properties of the identity, unique by key.")

    _agent_ids = field_validator("agent_ids")(ids_check("agent", "agent"))
    _block_ids = field_validator("block_ids")(ids_check("block", "block"))
    _properties = field_validator("properties")(_unique_keys)


class IdentityCreate(IdentityFields):
    identifier_key: str = Field(min_length=1, max_length=500, description="The caller's key for it, unique in the organization.")
    name: str = Field(min_length=1, max_length=500)
    identity_type: IdentityType
    project_id: str | None = None


class IdentityUpdate(IdentityFields):
    identifier_key: str | None = Field(None, min_length=1, max_length=500)
    name: str | None = Field(None, min_length=1, max_length=500)
    identity_type: IdentityType | None = None


class IdentityRead(BaseModel):
    id: str
    identifier_key: str
    name: str
    identity_type: IdentityType
    project_id: str | None
    agent_ids: list[str]
    block_ids: list[str]
    organization_id: str
    properties: list[IdentityProperty]

    @classmethod
    def of(cls, identity: Identity, *, agent_ids: list[str], block_ids: list[str]) -> "IdentityRead":
        return cls(
            id=identity.id,
            identifier_key=identity.identifier_key,
            name=identity.name,
            identity_type=identity.identity_type,
            project_id=identity.project_id,
            agent_ids=agent_ids,
            block_ids=block_ids,
            organization_id=identity.organization_id,
            properties=[IdentityProperty.model_validate(prop) for prop in identity.properties],
        )
