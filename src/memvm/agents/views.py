"""The API views of agents (AgentRead). A view reads only the relations an agent has, when it is known
which those are: a create, GET /v1/agents/{id}, a block's attach or detach (agents/service.py) and the
listings (agents/repository.py) know it."""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents.schemas import AgentCreate, AgentRead
from memvm.files import service as files
from memvm.files import views
from memvm.identities import service as identities
from memvm.orm import Agent, Block, Tool
from memvm.prompts.service import blocks_in_prompt_order
from memvm.runs import service as runs
from memvm.tools import service as tools


class NewAgent(NamedTuple):
    """An agent just created, with the blocks (in prompt order) and tools it was created with."""

    agent: Agent
    blocks: list[Block]
    tools: list[Tool]


class Links(NamedTuple):
    """Whether an agent has folders, identities and runs (each one query of its view, or none)."""

    folders: bool = True
    identities: bool = True
    runs: bool = True


_UNKNOWN = Links()


class AgentWithBlocks(NamedTuple):
    """An agent with its blocks in prompt order as they are now, which relations it has (None: on
    its row) and, when already read, its tools: GET /v1/agents/{id}, a block's attach or detach
    (whose write reads the tools). Its view reads none of them again."""

    agent: Agent
    blocks: list[Block]
    links: Links | None = None
    tools: list[Tool] | None = None


async def describe_with_blocks(session: AsyncSession, read: AgentWithBlocks, *, include: set[str] | None) -> AgentRead:
    """The API view of an agent read with its blocks (`include` as `describe` takes it)."""
    agent_id = read.agent.id
    links = {} if read.links is None else {agent_id: read.links}
    known_tools = None if read.tools is None else {agent_id: read.tools}
    [view] = await describe(
        session, [read.agent], include=include, links=links, blocks={agent_id: read.blocks}, known_tools=known_tools
    )
    return view


def _links_of(agent: Agent, known: Mapping[str, Links]) -> Links:
    """What the caller knows of the agent's relations, else what its row was read with
    (orm/agent_links.py)."""
    if agent.id in known:
        return known[agent.id]
    if agent.has_folders is None or agent.has_identities is None or agent.has_runs is None:
        return _UNKNOWN  # read without them
    return Links(agent.has_folders, agent.has_identities, agent.has_runs)


async def describe_new(session: AsyncSession, new: NewAgent, data: AgentCreate) -> AgentRead:
    """The API view of an agent just created from `data`. Without folders or identities all of it is
    known already (no runs yet, nothing else attached): reading it back would cost four statements."""
    if data.chosen_folder_ids() or data.identity_ids:  # its file tools, views and identities: read them
        [view] = await describe(session, [new.agent], include=None, new=True)
        return view
    return AgentRead.of(new.agent, new.blocks, new.tools, folders=[], identities=[], show_tags=True, show_secrets=True)


async def describe(
    session: AsyncSession,
    agents: Sequence[Agent],
    *,
    include: set[str] | None,
    new: bool = False,
    links: Mapping[str, Links] | None = None,
    blocks: Mapping[str, list[Block]] | None = None,
    known_tools: Mapping[str, list[Tool]] | None = None,
) -> list[AgentRead]:
    """API views of `agents`. `include=None` means everything; otherwise only the named
    relations ('agent.blocks', 'agent.tags', …) are filled, as Letta does for v1 SDK clients.
    `new`: agents created in this transaction, which have no runs to look up. `links`: what is known
    of agents' relations (an agent neither in it nor read with them may have any). `blocks`: every
    agent's blocks in prompt order, when the caller has just read them; `known_tools` the same for
    their tools in attachment order."""
    known = {agent.id: _links_of(agent, links or {}) for agent in agents}
    ids = [agent.id for agent in agents]
    with_blocks = include is None or "agent.blocks" in include
    blocks_of = (blocks if blocks is not None else await blocks_in_prompt_order(session, ids)) if with_blocks else {}
    with_tools = include is None or "agent.tools" in include
    tools_of: Mapping[str, Sequence[Tool | Row[Any]]] = {}
    if with_tools:
        tools_of = known_tools if known_tools is not None else await tools.shown_tools_of_agents(session, ids)
    with_folders = include is None or "agent.sources" in include
    in_folders = [agent_id for agent_id in ids if known[agent_id].folders]
    folders_of = await files.folders_of_agents(session, in_folders) if with_folders and in_folders else {}
    # An agent has file views only of its folders' files: agents known to have no folder need no query.
    viewers = [agent for agent in agents if folders_of.get(agent.id)] if with_folders else agents
    file_blocks_of = await views.file_blocks(session, viewers) if with_blocks and viewers else {}
    with_identities = include is None or "agent.identities" in include
    of_identities = [agent_id for agent_id in ids if known[agent_id].identities]
    identities_of = await identities.identities_of_agents(session, of_identities) if with_identities and of_identities else {}
    # Letta loads an agent's tags with its blocks too: an SDK client that asks for agent.blocks sees them.
    show_tags = include is None or bool({"agent.tags", "agent.blocks"} & include)
    show_secrets = include is None or "agent.secrets" in include
    last_runs = {} if new else await runs.latest_runs(session, [i for i in ids if known[i].runs])
    return [
        AgentRead.of(
            agent,
            blocks_of.get(agent.id),
            tools_of.get(agent.id),
            folders=folders_of.get(agent.id),
            identities=identities_of.get(agent.id),
            file_blocks=file_blocks_of.get(agent.id),
            show_tags=show_tags,
            show_secrets=show_secrets,
            last_run=last_runs.get(agent.id),
        )
        for agent in agents
    ]
