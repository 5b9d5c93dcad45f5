"""Whether an agent has folders, identities and runs: what the queries whose callers then build the
agent's view read with it, so that the view reads only the relations the agent has (agents/views.py).
One definition for every such query: the listings and GET (agents/), the lock of a block's attach or
detach (prompts/)."""

from sqlalchemy import exists
from sqlalchemy.orm import with_expression

from memvm.orm.agent import Agent
from memvm.orm.folder import AgentFolder
from memvm.orm.identity import IdentityAgent
from memvm.orm.run import Run

HAS_FOLDERS = exists().where(AgentFolder.agent_id == Agent.id)
HAS_IDENTITIES = exists().where(IdentityAgent.agent_id == Agent.id)
HAS_RUNS = exists().where(Run.agent_id == Agent.id)
# The three on the agent's row (Agent.has_folders, …), for a query that loads agents. A flush of the
# agent resets them: a query that writes the agent afterwards selects them as columns instead.
WITH_LINKS = (
    with_expression(Agent.has_folders, HAS_FOLDERS),
    with_expression(Agent.has_identities, HAS_IDENTITIES),
    with_expression(Agent.has_runs, HAS_RUNS),
)
