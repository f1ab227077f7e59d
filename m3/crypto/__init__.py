"""The one crypto layer of m3: every cryptographic operation goes through :mod:`m3.crypto.provider`.

Below ``config`` (which reads the encrypted secrets) and above ``errors`` only. ``provider`` is the only module
that imports ``cryptography``, ``hashlib`` for security purposes, ``hmac`` or ``secrets``; ``keys`` finds the
vault key (the OS keyring when a real backend exists, else an owner-only key file); ``vault`` is the encrypted
secrets file. What FIPS mode does and does not claim: docs/governance.md, "Secrets and FIPS mode".
"""
