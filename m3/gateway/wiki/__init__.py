"""``m3 wiki generate``: the memories as an interlinked wiki (docs/dashboard.md, "The wiki")."""
