"""What m3 derives from memories with no mailbox of its own: pure logic the background actors run (entity
extraction today; the Observer and Reflector rules next). Same import layer as ``m3/retrieval``."""
