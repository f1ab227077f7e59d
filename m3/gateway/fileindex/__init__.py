"""Reading folders of notes and code for the ``files`` tools: access rules, ignore rules, chunking, the scan.

Everything here runs in the gateway (in a worker thread, never on the trio loop) and only reads the disk;
what it finds goes to the Writer as :class:`~m3.protocols.messages.files.IndexFiles` requests. docs/files.md.
"""
