"""Tool contracts: one module per domain, each declaring its tools' arguments, results and specs."""

from m3.protocols.base import ToolSpec
from m3.protocols.tools.admin import ADMIN_TOOLS
from m3.protocols.tools.agents import AGENT_TOOLS
from m3.protocols.tools.chatlog import CHATLOG_TOOLS
from m3.protocols.tools.conflicts import CONFLICT_TOOLS
from m3.protocols.tools.diagnostics import DIAGNOSTICS_TOOLS
from m3.protocols.tools.governance import GOVERNANCE_TOOLS
from m3.protocols.tools.inbox import INBOX_TOOLS, NOTIFICATION_TOOLS
from m3.protocols.tools.memory import MEMORY_TOOLS
from m3.protocols.tools.meta import META_TOOLS
from m3.protocols.tools.sharing import SHARING_TOOLS
from m3.protocols.tools.tasks import TASK_TOOLS

ALL_TOOLS: tuple[ToolSpec, ...] = (MEMORY_TOOLS + CHATLOG_TOOLS + META_TOOLS + INBOX_TOOLS + AGENT_TOOLS
                                   + NOTIFICATION_TOOLS + TASK_TOOLS + CONFLICT_TOOLS + SHARING_TOOLS
                                   + GOVERNANCE_TOOLS + DIAGNOSTICS_TOOLS + ADMIN_TOOLS)
