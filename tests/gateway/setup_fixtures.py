"""Each client's configuration file as a user has it, in the client's real format: other servers and
settings of the user's that ``m3 setup`` must leave as they are (relative paths are under the home
folder of a Linux machine)."""

from __future__ import annotations

CLAUDE_CODE = """{
  "numStartups": 41,
  "theme": "dark",
  "projects": {
    "/home/u/app": {
      "allowedTools": [],
      "mcpServers": {}
    }
  },
  "mcpServers": {
    "playwright": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "@playwright/mcp@latest"
      ],
      "env": {}
    }
  },
  "userID": "abc"
}
"""

CODEX = """# Codex settings
model = "gpt-5-codex"  # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-server-docs"]
env = { "API_KEY" = "value" }

[profiles.fast]
model = "o4-mini"
"""

CURSOR = """{
  "mcpServers": {
    "server-name": {
      "command": "npx",
      "args": ["-y", "mcp-server"],
      "env": {
        "API_KEY": "value"
      }
    }
  }
}
"""

CLINE = """{
  "mcpServers": {
    "local-server": {
      "command": "node",
      "args": ["/path/to/server.js"],
      "env": {"API_KEY": "your_api_key"},
      "alwaysAllow": ["tool1", "tool2"],
      "disabled": false
    }
  }
}"""

GEMINI = """{
  "general": {
    "vimMode": true,
    "preferredEditor": "code"
  },
  "ui": { "theme": "GitHub" },
  "mcpServers": {
    "byul": {
      "command": "npx",
      "args": ["-y", "@byul/mcp"],
      "env": { "BYUL_API_KEY": "byul_api_key" },
      "timeout": 30000
    }
  }
}
"""

OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "mcp": {
    "gh_grep": {
      "type": "remote",
      "url": "https://mcp.grep.app",
      "enabled": true
    },
  },
}
"""

CLAUDE_DESKTOP = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/Desktop"]
    }
  },
  "preferences": {
    "quickEntryShortcut": "off"
  }
}
"""

VSCODE = """// User-level MCP servers
{
    "inputs": [
        {
            "type": "promptString",
            "id": "perplexity-key",
            "description": "Perplexity API Key",
            "password": true
        }
    ],
    "servers": {
        /* Perplexity search */
        "perplexity": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "server-perplexity-ask"],
            "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}, // from the prompt above
        },
    },
}
"""

WINDSURF = """{
    "mcpServers": {
        "zapier": {
            "serverUrl": "https://actions.zapier.com/mcp/KEY/sse"
        }
    }
}"""

VSCODE_USER = ".config/Code/User"
#: client id -> (file under the home folder, its text, the servers it already holds).
EXISTING: dict[str, tuple[str, str, set[str]]] = {
    "claude-code": (".claude.json", CLAUDE_CODE, {"playwright"}),
    "codex": (".codex/config.toml", CODEX, {"docs"}),
    "cursor": (".cursor/mcp.json", CURSOR, {"server-name"}),
    "cline": (f"{VSCODE_USER}/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json", CLINE,
              {"local-server"}),
    "gemini-cli": (".gemini/settings.json", GEMINI, {"byul"}),
    "opencode": (".config/opencode/opencode.json", OPENCODE, {"gh_grep"}),
    "claude-desktop": (".config/Claude/claude_desktop_config.json", CLAUDE_DESKTOP, {"filesystem"}),
    "vscode": (f"{VSCODE_USER}/mcp.json", VSCODE, {"perplexity"}),
    "windsurf": (".codeium/windsurf/mcp_config.json", WINDSURF, {"zapier"}),
}
