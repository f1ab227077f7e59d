"""What m3 derives from memories with no mailbox of its own: pure logic the background actors run (entity
extraction, the cognitive loop's passes). One layer above ``m3/retrieval``, whose anchor rules the Reflector
applies; retrieval never imports this package."""
