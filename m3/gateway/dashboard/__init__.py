"""``m3 dashboard``: a local control panel of server-rendered HTML over m3's tools (docs/dashboard.md)."""
