from fastapi import APIRouter
from pydantic import BaseModel

from memvm import __version__

router = APIRouter(prefix="/v1/health", tags=["health"])


class Health(BaseModel):
    version: str
    status: str


@router.get("/", response_model=Health)
async def health() -> Health:
    """Liveness: the server answers."""
    return Health(version=__version__, status="ok")
