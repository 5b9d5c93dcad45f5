"""Shapes of the admin API."""

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field

from memvm.accounts.names import MAX_KEY_LABEL, MAX_ORGANIZATION_NAME, check_key_label, check_organization_name
from memvm.orm import ApiKey, Organization


class ApiKeyCreate(BaseModel):
    organization: Annotated[str, AfterValidator(check_organization_name)] = Field(
        min_length=1,
        max_length=MAX_ORGANIZATION_NAME,
        description="Organization name (letters, digits, '_', '.', '-', inner spaces); created on first use.",
    )
    name: Annotated[str, AfterValidator(check_key_label)] = Field(
        "", max_length=MAX_KEY_LABEL, description="A label to recognise the key by (printable)."
    )


class ApiKeyRead(BaseModel):
    id: str
    name: str
    organization: str
    prefix: str = Field(description="The first characters of the key, to tell keys apart.")
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey, organization: str) -> "ApiKeyRead":
        return cls(
            id=key.id,
            name=key.name,
            organization=organization,
            prefix=key.prefix,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
        )


class ApiKeyCreated(ApiKeyRead):
    key: str = Field(description="The secret. It is shown only in this response; store it now.")


class OrganizationRead(BaseModel):
    id: str
    name: str
    created_at: datetime

    @classmethod
    def of(cls, organization: Organization) -> "OrganizationRead":
        return cls(id=organization.id, name=organization.name, created_at=organization.created_at)
