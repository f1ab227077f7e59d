"""Search and supersession logic the actors run: ranking, dense legs, vector index, candidate rows,
similarity supersession. No mailboxes here: functions and plain objects owned by one actor each."""
