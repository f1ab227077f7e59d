"""Tool contracts: one module per domain, each declaring its tools' arguments, results and specs."""

from m3.protocols.base import ToolSpec
from m3.protocols.tools.admin import ADMIN_TOOLS
from m3.protocols.tools.agents import AGENT_TOOLS
from m3.protocols.tools.chat_reads import CHAT_READ_TOOLS
from m3.protocols.tools.chatlog import CHATLOG_TOOLS
from m3.protocols.tools.conflicts import CONFLICT_TOOLS
from m3.protocols.tools.consolidation import CONSOLIDATION_TOOLS
from m3.protocols.tools.conversations import CONVERSATION_TOOLS
from m3.protocols.tools.diagnostics import DIAGNOSTICS_TOOLS
from m3.protocols.tools.entities import ENTITY_TOOLS
from m3.protocols.tools.files import FILES_TOOLS
from m3.protocols.tools.governance import GOVERNANCE_TOOLS
from m3.protocols.tools.inbox import INBOX_TOOLS, NOTIFICATION_TOOLS
from m3.protocols.tools.links import LINK_TOOLS
from m3.protocols.tools.loop import LOOP_TOOLS
from m3.protocols.tools.memory import MEMORY_TOOLS
from m3.protocols.tools.memory_lists import MEMORY_LIST_TOOLS
from m3.protocols.tools.meta import META_TOOLS
from m3.protocols.tools.sharing import SHARING_TOOLS
from m3.protocols.tools.sync import SYNC_TOOLS
from m3.protocols.tools.tasks import TASK_TOOLS
from m3.protocols.tools.whoami import AGENT_WHOAMI

ALL_TOOLS: tuple[ToolSpec, ...] = (
    MEMORY_TOOLS + LINK_TOOLS + MEMORY_LIST_TOOLS + CONSOLIDATION_TOOLS
    + FILES_TOOLS + ENTITY_TOOLS
    + CHATLOG_TOOLS + CHAT_READ_TOOLS + CONVERSATION_TOOLS
    + META_TOOLS
    + INBOX_TOOLS + AGENT_TOOLS + (AGENT_WHOAMI,) + NOTIFICATION_TOOLS + TASK_TOOLS
    + CONFLICT_TOOLS + SHARING_TOOLS
    + LOOP_TOOLS + SYNC_TOOLS
    + GOVERNANCE_TOOLS + DIAGNOSTICS_TOOLS + ADMIN_TOOLS
)
